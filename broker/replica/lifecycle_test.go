package replica

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
)

// Issue #10 item 6: what a manager starts for a partition goes away when
// the partition does.

// TestFetcherRetires: a fetcher whose leader this broker no longer
// follows (it became leader, or the partition was removed) stops, and a
// new one starts when the broker follows that leader again.
func TestFetcherRetires(t *testing.T) {
	m := NewManager(Config{NodeID: 1, Log: logr.Discard(), Backoff: time.Millisecond})
	defer m.Close()
	p := NewPartition(tp, openLog(t), 1, nil)
	base := goleak.IgnoreCurrent() // the manager's and the log's own loops
	fetchers := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.fetchers)
	}
	follow := func(epoch int32) {
		m.Apply(p, meta.BecomeFollower, meta.PartitionState{Leader: 2, LeaderEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
		if fetchers() != 1 {
			t.Fatalf("following broker 2: %d fetchers, want 1", fetchers())
		}
	}
	gone := func(how string) {
		t.Helper()
		// Leader 2 is not registered: the fetcher is retrying with backoff.
		// Polled with a deadline: a loaded machine may take its time.
		deadline := time.Now().Add(10 * time.Second)
		for fetchers() != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := goleak.Find(base); err != nil {
			t.Fatalf("%s: the fetcher of broker 2 is still running: %v", how, err)
		}
		if fetchers() != 0 {
			t.Fatalf("%s: %d fetchers left, want 0", how, fetchers())
		}
	}
	follow(1)
	m.Apply(p, meta.BecomeLeader, meta.PartitionState{Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	gone("after becoming leader")
	follow(3)
	m.Remove(tp)
	gone("after Remove")
}

// blockingStore holds every PUT until release is closed.
type blockingStore struct {
	objstore.Store
	puts    atomic.Int32
	release chan struct{}
}

func (s *blockingStore) Put(ctx context.Context, key string, data []byte) error {
	s.puts.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Put(ctx, key, data)
}

func walManager(t *testing.T, store objstore.Store) *Manager {
	t.Helper()
	m := NewManager(Config{NodeID: 1, Log: logr.Discard()})
	if err := m.EnableWAL(WALConfig{Store: store, Cluster: "c", Zone: "a", Incarnation: 1, UploadInterval: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestRemoveReleasesTracker: removing a led partition releases its
// deletion bookkeeping: its objects are deleted (the follower that
// never fetched them will not, from us) instead of waiting for
// wal.retention.ms, and no state is left in the tracker.
func TestRemoveReleasesTracker(t *testing.T) {
	mem := objstore.NewMem("wal-a")
	m := walManager(t, mem)
	p := NewPartition(tp, openLog(t), 1, nil)
	m.Apply(p, meta.BecomeLeader, meta.PartitionState{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if _, _, err := p.AppendAsLeader(batch(t, "a")); err != nil {
		t.Fatal(err)
	}
	tr := m.wal.tracker
	waitFor(t, func() bool { return tr.Len() == 1 }) // uploaded, waiting for broker 2
	m.Remove(tp)
	waitFor(t, func() bool {
		objs, _ := mem.List(context.Background(), "wal/")
		return tr.Len() == 0 && tr.Partitions() == 0 && len(objs) == 0
	})
}

// TestLateUploadAfterRelease: an upload that finishes after the broker
// stopped leading the partition tracks nothing: the object is deleted at
// once and the tracker keeps no state for the partition.
func TestLateUploadAfterRelease(t *testing.T) {
	mem := objstore.NewMem("wal-a")
	store := &blockingStore{Store: mem, release: make(chan struct{})}
	m := walManager(t, store)
	p := NewPartition(tp, openLog(t), 1, nil)
	m.Apply(p, meta.BecomeLeader, meta.PartitionState{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if _, _, err := p.AppendAsLeader(batch(t, "a")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return store.puts.Load() == 1 }) // the PUT is in flight
	m.Apply(p, meta.BecomeFollower, meta.PartitionState{Leader: 2, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	close(store.release)
	waitFor(t, func() bool { return m.wal.up.Stats().Objects == 1 })
	tr := m.wal.tracker
	waitFor(t, func() bool {
		objs, _ := mem.List(context.Background(), "wal/")
		return tr.Len() == 0 && tr.Partitions() == 0 && len(objs) == 0
	})
}

// TestWALUnregisteredReplicaNotWaited (issue #10 item 3): a follower whose
// broker is no longer registered (killed: its lease expired, the ISR not
// shrunk yet) does not hold the leader's objects back; once the other
// in-sync follower has them they are deleted.
func TestWALUnregisteredReplicaNotWaited(t *testing.T) {
	mem := objstore.NewMem("wal-a")
	m := walManager(t, mem)
	p := NewPartition(tp, openLog(t), 1, nil)
	st := meta.PartitionState{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	m.Apply(p, meta.BecomeLeader, st)
	m.SetBrokers(map[int32]meta.BrokerInfo{1: {}, 2: {}}) // broker 3 is gone
	if _, _, err := p.AppendAsLeader(batch(t, "a")); err != nil {
		t.Fatal(err)
	}
	tr := m.wal.tracker
	waitFor(t, func() bool { return tr.Len() == 1 })
	if _, err := m.ServeReplicaFetch(p, 2, -1, p.Log.EndOffset(), p.Log.LatestEpoch(), 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		objs, _ := mem.List(context.Background(), "wal/")
		return tr.Len() == 0 && len(objs) == 0
	})
}
