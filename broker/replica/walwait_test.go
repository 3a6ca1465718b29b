package replica

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/wal"
)

// TestWALFetchWaitsForUploads: a caught-up follower that accepts pointers
// parks on the partition's upload channel only (appends the uploader took
// do not wake it: it could not be answered before their upload), and an
// append the uploader refuses wakes it, to be served inline.
func TestWALFetchWaitsForUploads(t *testing.T) {
	store := objstore.NewFaulty(objstore.NewMem("wal-a"))
	m := &Manager{cfg: Config{NodeID: 1, Log: logr.Discard()}}
	up, err := wal.NewUploader(wal.UploaderConfig{Store: store, Cluster: "c", Zone: "a", BrokerID: 1, Incarnation: 1,
		UploadInterval: time.Hour, FailureThreshold: 1, RetryAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close(context.Background())
	m.wal = &walRep{m: m, up: up, cfg: WALConfig{InlineAfter: time.Hour, Clock: wal.RealClock{}}}
	p := NewPartition(tp, openLog(t), 1, nil)
	idx, err := wal.OpenPointerIndex(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	p.walIndex, p.role = idx, RoleLeader

	appendBatch := func(base int64) {
		t.Helper()
		b := epochBatch(t, base, 0, "v")
		p.mu.Lock()
		defer p.mu.Unlock()
		if _, err := p.Log.AppendAsLeader([]record.Batch{b}, 0); err != nil {
			t.Fatal(err)
		}
		p.walAppendLocked(m.wal, []record.Batch{b}, 0, nil)
	}
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}

	plan := m.PlanWALFetch(p, 0, 1<<20)
	if plan.Reason != "" || plan.InlineUpTo != 0 {
		t.Fatalf("caught-up follower: plan %+v, want to wait for uploads only", plan)
	}
	appendBatch(0) // accepted, pending upload
	if closed(plan.Wait) {
		t.Fatal("an append the uploader accepted woke the parked fetch")
	}
	if plan := m.PlanWALFetch(p, 0, 1<<20); plan.Reason != "" || plan.InlineUpTo != 0 {
		t.Fatalf("range being uploaded: plan %+v, want to wait", plan)
	}

	// The bucket fails: the upload fails, the breaker opens, the next
	// append is refused and must wake the parked fetch.
	store.SetFailAll(true)
	up.Flush()
	waitFor(t, up.Degraded)
	plan = m.PlanWALFetch(p, 1, 1<<20)
	appendBatch(1)
	if !closed(plan.Wait) {
		t.Fatal("an append the uploader refused did not wake the parked fetch")
	}
	if plan := m.PlanWALFetch(p, 1, 1<<20); plan.Reason != InlineDegraded || plan.InlineUpTo != 2 {
		t.Fatalf("after the refused append: plan %+v, want inline up to 2 (degraded)", plan)
	}
}

// TestWALDeletionRetried: objects whose deletion fails (the bucket is
// down) are deleted once it is back, not forgotten.
func TestWALDeletionRetried(t *testing.T) {
	mem := objstore.NewMem("wal-a")
	store := objstore.NewFaulty(mem)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &Manager{cfg: Config{NodeID: 1, Log: logr.Discard()}, parts: map[meta.TopicPartition]*Partition{}}
	w := &walRep{m: m, cfg: WALConfig{Store: store, Clock: wal.RealClock{}}, tracker: wal.NewTracker(time.Hour), objects: map[string][]meta.TopicPartition{}}
	if err := mem.Put(ctx, "wal/c/a/1/1/00000000000000000000", []byte("x")); err != nil {
		t.Fatal(err)
	}
	store.SetFailAll(true)
	// No follower needs it: deletable at the first round.
	w.tracker.Add("wal-a", "wal/c/a/1/1/00000000000000000000", time.Now(), nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.deleteLoop(ctx)
	}()
	waitFor(t, func() bool { return store.Calls(objstore.OpDeleteMany) >= 2 }) // failed, and retried
	store.SetFailAll(false)
	waitFor(t, func() bool {
		objs, _ := mem.List(ctx, "wal/")
		return len(objs) == 0
	})
	cancel()
	<-done
}
