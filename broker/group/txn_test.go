package group

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func txnCommitReq(v int16, group string, pid int64, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = v, "tx", group, pid, 0
	r.Generation = -1
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset = p, o
		t.Partitions = append(t.Partitions, tp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// stableFetch is OffsetFetch v7 with RequireStable.
func (h *harness) stableFetch(group, topic string, partitions ...int32) map[int32]kmsg.OffsetFetchResponseTopicPartition {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group, r.RequireStable = 7, group, true
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: partitions}}
	resp := h.c.OffsetFetch(context.Background(), r)
	out := map[int32]kmsg.OffsetFetchResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

func TestTxnOffsetCommit(t *testing.T) {
	store := NewMemoryStore()
	h := newHarness(t, func(c *Config) { c.Store = store })
	ctx := context.Background()
	if code := h.commit(8, "g", "", "", -1, "t", 0, 5); code != 0 {
		t.Fatalf("plain commit: %s", errName(code))
	}
	resp := h.c.TxnOffsetCommit(ctx, txnCommitReq(3, "g", 7, "t", map[int32]int64{0: 10, 1: 20}))
	for _, p := range resp.Topics[0].Partitions {
		wantCode(t, "txn commit", p.ErrorCode, nil)
	}
	// Pending: invisible to a plain fetch, unstable to a stable one.
	_, got := h.fetch("g", "t", 0, 1)
	if got[0].offset != 5 || got[1].offset != -1 {
		t.Fatalf("fetch while pending: %+v", got)
	}
	st := h.stableFetch("g", "t", 0, 1, 2)
	wantCode(t, "stable fetch p0", st[0].ErrorCode, kerr.UnstableOffsetCommit)
	wantCode(t, "stable fetch p1", st[1].ErrorCode, kerr.UnstableOffsetCommit)
	wantCode(t, "stable fetch p2", st[2].ErrorCode, nil)

	// Another producer's abort does not touch them; this producer's
	// commit makes them the group's offsets.
	if err := h.c.CompleteTxn(ctx, 8, false); err != nil {
		t.Fatal(err)
	}
	if err := h.c.CompleteTxn(ctx, 7, true); err != nil {
		t.Fatal(err)
	}
	_, got = h.fetch("g", "t", 0, 1)
	if got[0].offset != 10 || got[1].offset != 20 {
		t.Fatalf("fetch after commit: %+v", got)
	}
	if st := h.stableFetch("g", "t", 0); st[0].ErrorCode != 0 || st[0].Offset != 10 {
		t.Fatalf("stable fetch after commit: %+v", st[0])
	}
	if cs, _ := store.Load(ctx); len(cs["g"]) != 2 || cs["g"][0].Offset != 10 {
		t.Fatalf("store after commit: %+v", cs)
	}

	// An aborted transaction's offsets are dropped.
	h.c.TxnOffsetCommit(ctx, txnCommitReq(3, "g", 7, "t", map[int32]int64{0: 99}))
	if err := h.c.CompleteTxn(ctx, 7, false); err != nil {
		t.Fatal(err)
	}
	if _, got = h.fetch("g", "t", 0); got[0].offset != 10 {
		t.Fatalf("fetch after abort: %+v", got)
	}
	if p, _ := store.LoadPending(ctx); len(p) != 0 {
		t.Fatalf("pending left in the store: %+v", p)
	}
	// Completing again (a marker written twice) changes nothing.
	if err := h.c.CompleteTxn(ctx, 7, true); err != nil {
		t.Fatal(err)
	}
	if _, got = h.fetch("g", "t", 0); got[0].offset != 10 {
		t.Fatalf("fetch after a repeated marker: %+v", got)
	}
}

func TestTxnOffsetCommitChecksGeneration(t *testing.T) {
	h := newHarness(t)
	members := h.stableGroup("g", 1, false)
	r := txnCommitReq(3, "g", 7, "t", map[int32]int64{0: 1})
	r.MemberID, r.Generation = members[0].id, members[0].gen+1
	wantCode(t, "wrong generation", h.c.TxnOffsetCommit(context.Background(), r).Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)
	r.Generation = members[0].gen
	wantCode(t, "member's generation", h.c.TxnOffsetCommit(context.Background(), r).Topics[0].Partitions[0].ErrorCode, nil)
}

// Pending offsets survive a restart of a standalone broker (FileStore)
// without becoming visible, and the outcome applied after the restart is
// kept through the next one.
func TestTxnOffsetsFileStoreRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func() (*harness, *FileStore) {
		fs, err := OpenFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		return newHarness(t, func(c *Config) { c.Store = fs }), fs
	}
	h, fs := open()
	h.c.TxnOffsetCommit(ctx, txnCommitReq(3, "g", 7, "t", map[int32]int64{0: 10}))
	h.c.TxnOffsetCommit(ctx, txnCommitReq(3, "g", 8, "t", map[int32]int64{1: 30}))
	h.c.Close()
	fs.Close()

	h, fs = open()
	if _, got := h.fetch("g", "t", 0, 1); got[0].offset != -1 || got[1].offset != -1 {
		t.Fatalf("pending offsets visible after a restart: %+v", got)
	}
	if st := h.stableFetch("g", "t", 0, 1); st[0].ErrorCode != kerr.UnstableOffsetCommit.Code || st[1].ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pending offsets lost in a restart: %+v", st)
	}
	if err := h.c.CompleteTxn(ctx, 7, true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.CompleteTxn(ctx, 8, false); err != nil {
		t.Fatal(err)
	}
	h.c.Close()
	fs.Close()

	h, _ = open()
	if _, got := h.fetch("g", "t", 0, 1); got[0].offset != 10 || got[1].offset != -1 {
		t.Fatalf("after commit of 7, abort of 8 and a restart: %+v", got)
	}
	if st := h.stableFetch("g", "t", 0, 1); st[0].ErrorCode != 0 || st[1].ErrorCode != 0 {
		t.Fatalf("still unstable after the transactions ended: %+v", st)
	}
}
