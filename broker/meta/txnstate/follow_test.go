package txnstate

import (
	"context"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/broker/txn"
)

// TestFollow: the feed reports the store's records, then every write and
// delete in order (ids with '/' and spaces decoded), and returns nil when
// its context ends.
func TestFollow(t *testing.T) {
	ctx := context.Background()
	ms, err := meta.New(metatest.Start(t), "c1")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ms)
	first := txn.Metadata{TransactionalID: "orders/app 1", ProducerID: 5, State: txn.Ongoing, Partitions: []txn.TopicPartition{{Topic: "a", Partition: 2}}}
	rev, err := s.Put(ctx, first, 0)
	if err != nil {
		t.Fatal(err)
	}

	snaps := make(chan []txn.Metadata, 1)
	changes := make(chan []txn.Change, 10)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(fctx, func(m []txn.Metadata) { snaps <- m }, func(c []txn.Change) { changes <- c })
	}()
	select {
	case snap := <-snaps:
		if len(snap) != 1 || snap[0].TransactionalID != first.TransactionalID || snap[0].State != txn.Ongoing || snap[0].Partitions[0] != first.Partitions[0] {
			t.Fatalf("snapshot %+v", snap)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot")
	}

	second := txn.Metadata{TransactionalID: "b", ProducerID: 6, State: txn.Empty}
	if _, err := s.Put(ctx, second, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, first.TransactionalID, rev); err != nil {
		t.Fatal(err)
	}
	var got []txn.Change
	for len(got) < 2 {
		select {
		case cs := <-changes:
			got = append(got, cs...)
		case <-time.After(10 * time.Second):
			t.Fatalf("changes so far %+v", got)
		}
	}
	if got[0].ID != "b" || got[0].Metadata == nil || got[0].Metadata.ProducerID != 6 || got[1].ID != first.TransactionalID || got[1].Metadata != nil {
		t.Fatalf("changes %+v, want the write of b then the delete of %q", got, first.TransactionalID)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Follow after cancel: %v", err)
	}
}
