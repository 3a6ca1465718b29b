package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestDeletedTopicOffsetsCluster checks that a group whose coordinator is
// not the broker that handled DeleteTopics does not resume a re-created
// topic of the same name from the deleted topic's committed offsets (as
// Kafka: a deleted topic's offsets go with it). The coordinator never
// hears of the deletion from the request; the committed offsets name the
// topic's ID, and the re-created topic has another.
func TestDeletedTopicOffsetsCluster(t *testing.T) {
	const topic = "offsets-deleted"
	c := brokertest.StartCluster(t, []string{"a", "b", "c"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := func() {
		t.Helper()
		for {
			resp, err := adm.CreateTopics(ctx, 3, 3, nil, topic)
			if err == nil && resp[topic].Err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("create topic: %v %v", err, resp[topic].Err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	create()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A group coordinated by another broker than the one DeleteTopics
	// goes to (the controller, for franz-go).
	var group string
	for i := 0; group == ""; i++ {
		g := fmt.Sprintf("deleted-offsets-%d", i)
		co := adm.FindGroupCoordinators(ctx, g)
		if r := co[g]; r.Err == nil && r.NodeID != md.Controller {
			group = g
		}
		if i > 50 {
			t.Fatalf("no group coordinated away from the controller (broker %d)", md.Controller)
		}
	}
	commit := kadm.Offsets{}
	// Offsets within the log: produce first.
	for p := range int32(3) {
		for range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p := range int32(3) {
		commit.Add(kadm.Offset{Topic: topic, Partition: p, At: 4, LeaderEpoch: -1})
	}
	waitCommit := func() {
		t.Helper()
		for {
			resp, err := adm.CommitOffsets(ctx, group, commit)
			if err == nil && resp.Error() == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("commit: %v %v", err, resp.Error())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitCommit()
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil || fetched.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, fetched.Error())
	}
	if o, ok := fetched.Lookup(topic, 0); !ok || o.At != 4 {
		t.Fatalf("committed offset of partition 0: %+v %v, want 4", o, ok)
	}

	if resp, err := adm.DeleteTopics(ctx, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("delete topic: %v %v", err, resp[topic].Err)
	}
	create()
	// The re-created topic has no committed offsets for the group, on
	// every broker's answer (the coordinator's).
	fetched, err = adm.FetchOffsets(ctx, group)
	if err != nil || fetched.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, fetched.Error())
	}
	for p := range int32(3) {
		if o, ok := fetched.Lookup(topic, p); ok && o.At >= 0 {
			t.Errorf("partition %d of the re-created topic: committed offset %d from the deleted topic", p, o.At)
		}
	}
	// A commit to the new topic is kept.
	commit = kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: topic, Partition: 1, At: 0, LeaderEpoch: -1})
	waitCommit()
	fetched, err = adm.FetchOffsets(ctx, group)
	if err != nil || fetched.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, fetched.Error())
	}
	if o, ok := fetched.Lookup(topic, 1); !ok || o.At != 0 {
		t.Fatalf("commit to the re-created topic: %+v %v, want offset 0", o, ok)
	}
}
