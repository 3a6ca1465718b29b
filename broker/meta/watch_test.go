package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// When the watch starts behind (a slow consumer, a reconnect), etcd sends
// several revisions per response; follow must still publish one snapshot
// per revision.
func TestFollowSplitsBatchedRevisions(t *testing.T) {
	c := newTestCluster(t)
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 1, Zone: "a"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(c.ctx)
	c.createTopic(TopicSpec{Name: "w", Partitions: 1, ReplicationFactor: 1})
	b, err := c.store.load(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := b.version
	tp := TopicPartition{"w", 0}
	const changes = 30
	for range changes {
		cur, err := c.store.PartitionState(c.ctx, tp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.store.AlterPartition(c.ctx, tp, cur, cur); err != nil {
			t.Fatal(err)
		}
	}
	out := make(chan *ClusterState)
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan error, 1)
	go func() { done <- c.store.follow(ctx, logr.Discard(), b, out); close(out) }()
	for i := int64(1); i <= changes; i++ {
		st := <-out
		if st.Version != start+i || part(st, tp).PartitionEpoch != int32(i) {
			t.Fatalf("snapshot %d: version %d partition epoch %d, want %d and %d", i, st.Version, part(st, tp).PartitionEpoch, start+i, i)
		}
	}
	cancel()
	<-done
	for range out {
	}
}

// A watch from a compacted revision breaks with ErrCompacted, which makes
// Watch resync from a fresh snapshot.
func TestFollowReportsCompaction(t *testing.T) {
	c := newTestCluster(t)
	b, err := c.store.load(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 1, Zone: "a"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(c.ctx)
	resp, err := c.client.Put(c.ctx, "/unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.Compact(c.ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	out := make(chan *ClusterState, 10)
	err = c.store.follow(c.ctx, logr.Discard(), b, out)
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("follow from compacted revision: %v, want ErrCompacted", err)
	}
	if len(out) != 0 {
		t.Fatalf("follow published %d snapshots from a compacted revision", len(out))
	}
	// watch, started from the same stale state, publishes it, then a fresh
	// snapshot that has the registration, then follows again.
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	wch := make(chan *ClusterState)
	go c.store.watch(ctx, b, wch)
	if st := <-wch; st.Revision != b.revision || st.Live(1) {
		t.Fatalf("first snapshot rev %d live(1)=%v, want the stale one at %d", st.Revision, st.Live(1), b.revision)
	}
	if st := <-wch; st.Revision < resp.Header.Revision || !st.Live(1) {
		t.Fatalf("after resync: rev %d live(1)=%v, want >= %d and broker 1", st.Revision, st.Live(1), resp.Header.Revision)
	}
	if err := reg.Close(c.ctx); err != nil {
		t.Fatal(err)
	}
	if st := <-wch; st.Live(1) {
		t.Fatalf("watch after resync missed the deregistration")
	}
	cancel()
	for range wch {
	}
}
