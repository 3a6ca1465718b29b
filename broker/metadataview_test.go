package broker

import (
	"context"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
)

// TestMetadataViewWhileApplying: a broker in the middle of applying a
// snapshot that creates a topic (ApplyClusterState has made b.topics
// follow it and is hosting the new partitions; the applied snapshot is
// still the one before) answers Metadata from the applied snapshot alone:
// the topic is not there yet, rather than there with partitions that have
// no leader and no replicas. This is the window in which the operator
// adopted a topic as "replication factor 0" on a loaded CI machine.
func TestMetadataViewWhileApplying(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := meta.New(metatest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := store.RegisterBroker(ctx, meta.BrokerInfo{ID: 1, Zone: "a",
		Listeners: []meta.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	before, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateTopic(ctx, meta.TopicSpec{Name: "legacy_Events", Partitions: 2, ReplicationFactor: 1, Config: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	after, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	b := openTest(t, t.TempDir(), func(c *Config) { c.NodeID, c.Clustered = 1, true })
	b.EnableCluster(store, nil)
	b.cluster.applied.Store(before)
	// ApplyClusterState(after), up to where it hosts the new partitions.
	b.syncTopics(after, false)

	v := b.MetadataView()
	if ti, ok := v.Topic("legacy_Events"); ok {
		var parts []PartitionView
		for i := range ti.Partitions {
			pv, _ := v.Partition("legacy_Events", i)
			parts = append(parts, pv)
		}
		t.Fatalf("mid-apply view shows the topic (%d partitions, states %+v) before the snapshot that has its partitions' states is applied", ti.Partitions, parts)
	}
	for _, ti := range v.Topics() {
		if ti.Name == "legacy_Events" {
			t.Fatal("mid-apply view lists the topic")
		}
	}
	if _, ok := v.TopicByID([16]byte(after.Topics["legacy_Events"].ID)); ok {
		t.Fatal("mid-apply view finds the topic by ID")
	}

	// Applied: the topic, whole.
	b.cluster.applied.Store(after)
	v = b.MetadataView()
	ti, ok := v.Topic("legacy_Events")
	if !ok || ti.Partitions != 2 || ti.ID != [16]byte(after.Topics["legacy_Events"].ID) {
		t.Fatalf("applied view: topic %+v (found %v), want 2 partitions and ID %s", ti, ok, after.Topics["legacy_Events"].ID)
	}
	for i := range ti.Partitions {
		pv, ok := v.Partition("legacy_Events", i)
		if !ok || len(pv.Replicas) != 1 || pv.Leader != 1 {
			t.Errorf("applied view: partition %d %+v (found %v), want leader 1 and one replica", i, pv, ok)
		}
	}
	if all := v.Topics(); len(all) != 1 || all[0] != ti {
		t.Errorf("applied view lists %+v, want just %+v", all, ti)
	}
	if byID, ok := v.TopicByID(ti.ID); !ok || byID != ti {
		t.Errorf("applied view by ID: %+v (found %v), want %+v", byID, ok, ti)
	}
}
