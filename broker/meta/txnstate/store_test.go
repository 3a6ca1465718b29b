package txnstate

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/broker/txn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The etcd store keeps records and their compare-and-swap exactly as the
// coordinator needs: a write with a stale revision is refused.
func TestStoreRoundTripAndCAS(t *testing.T) {
	ctx := context.Background()
	client := metatest.Start(t)
	ms, err := meta.New(client, "c1")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ms)
	other, _ := meta.New(client, "c2")
	neighbour := New(other)

	md := txn.Metadata{TransactionalID: "orders/app 1", ProducerID: 5, ProducerEpoch: 2, LastProducerEpoch: 1, TimeoutMillis: 60000,
		State: txn.PrepareAbort, Partitions: []txn.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 3}},
		Groups: []string{"g"}, StartMillis: 10, UpdateMillis: 11}
	rev, err := s.Put(ctx, md, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, md, 0); !errors.Is(err, txn.ErrConflict) {
		t.Fatalf("create over an existing record: %v, want ErrConflict", err)
	}
	got, err := s.Get(ctx, md.TransactionalID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != rev || got.Metadata.State != txn.PrepareAbort || !slices.Equal(got.Metadata.Partitions, md.Partitions) || got.Metadata.LastProducerEpoch != 1 {
		t.Fatalf("get: %+v (rev %d)", got, rev)
	}
	md.State = txn.CompleteAbort
	rev2, err := s.Put(ctx, md, rev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, md, rev); !errors.Is(err, txn.ErrConflict) {
		t.Fatalf("put with a stale revision: %v", err)
	}
	if err := s.Delete(ctx, md.TransactionalID, rev); !errors.Is(err, txn.ErrConflict) {
		t.Fatalf("delete with a stale revision: %v", err)
	}
	if all, err := neighbour.List(ctx); err != nil || len(all) != 0 {
		t.Fatalf("another cluster sees %v (%v)", all, err)
	}
	all, err := s.List(ctx)
	if err != nil || len(all) != 1 || all[0].Revision != rev2 {
		t.Fatalf("list: %+v %v", all, err)
	}
	if err := s.Delete(ctx, md.TransactionalID, rev2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, md.TransactionalID); got.Revision != 0 {
		t.Fatalf("after delete: %+v", got)
	}
}
