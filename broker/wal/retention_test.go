package wal_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

func TestTracker(t *testing.T) {
	t0 := time.Unix(1_750_000_000, 0)
	// Object A: t-0 [0,9] for replicas 2,3; t-1 [0,4] for replicas 2,4.
	// Object B: t-0 [10,19] for replicas 2,3.
	setup := func() *wal.Tracker {
		tr := wal.NewTracker(time.Hour)
		tr.Add("b", "A", t0, []wal.ChunkNeed{{Topic: "t", Partition: 0, LastOffset: 9, Replicas: []int32{2, 3}}, {Topic: "t", Partition: 1, LastOffset: 4, Replicas: []int32{2, 4}}})
		tr.Add("b", "B", t0.Add(time.Second), []wal.ChunkNeed{{Topic: "t", Partition: 0, LastOffset: 19, Replicas: []int32{2, 3}}})
		return tr
	}
	for _, tc := range []struct {
		name string
		do   func(tr *wal.Tracker)
		now  time.Time
		want []wal.Deletion
	}{
		{"nobody fetched", func(tr *wal.Tracker) {}, t0.Add(time.Minute), nil},
		{"one replica short", func(tr *wal.Tracker) {
			tr.ReplicaProgress("t", 0, 2, 20)
			tr.ReplicaProgress("t", 0, 3, 20)
			tr.ReplicaProgress("t", 1, 2, 5)
			tr.ReplicaProgress("t", 1, 4, 4) // has offsets < 4 only
		}, t0.Add(time.Minute), []wal.Deletion{{Bucket: "b", Key: "B", Reason: wal.ReasonReplicated}}},
		{"everyone has everything", func(tr *wal.Tracker) {
			tr.ReplicaProgress("t", 0, 2, 20)
			tr.ReplicaProgress("t", 0, 3, 20)
			tr.ReplicaProgress("t", 1, 2, 5)
			tr.ReplicaProgress("t", 1, 4, 5)
		}, t0.Add(time.Minute), []wal.Deletion{{Bucket: "b", Key: "A", Reason: wal.ReasonReplicated}, {Bucket: "b", Key: "B", Reason: wal.ReasonReplicated}}},
		{"progress never goes back", func(tr *wal.Tracker) {
			tr.ReplicaProgress("t", 0, 2, 20)
			tr.ReplicaProgress("t", 0, 2, 3)
			tr.ReplicaProgress("t", 0, 3, 20)
		}, t0.Add(time.Minute), []wal.Deletion{{Bucket: "b", Key: "B", Reason: wal.ReasonReplicated}}},
		{"reset replica after truncation", func(tr *wal.Tracker) {
			tr.ReplicaProgress("t", 0, 2, 20)
			tr.ReplicaProgress("t", 0, 3, 20)
			tr.ResetReplica("t", 0, 3)
		}, t0.Add(time.Minute), nil},
		{"log start passed the chunks", func(tr *wal.Tracker) {
			tr.LogStart("t", 0, 20)
			tr.LogStart("t", 1, 5)
		}, t0.Add(time.Minute), []wal.Deletion{{Bucket: "b", Key: "A", Reason: wal.ReasonReplicated}, {Bucket: "b", Key: "B", Reason: wal.ReasonReplicated}}},
		{"log start inside a chunk", func(tr *wal.Tracker) { tr.LogStart("t", 0, 15) }, t0.Add(time.Minute), nil},
		{"leadership released", func(tr *wal.Tracker) { tr.Release("t", 0) }, t0.Add(time.Minute), []wal.Deletion{{Bucket: "b", Key: "B", Reason: wal.ReasonReplicated}}},
		{"retention cap", func(tr *wal.Tracker) {}, t0.Add(time.Hour), []wal.Deletion{{Bucket: "b", Key: "A", Reason: wal.ReasonRetention}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := setup()
			tc.do(tr)
			got := tr.Collect(tc.now)
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Collect = %v, want %v", got, tc.want)
			}
			if tr.Len() != 2-len(tc.want) {
				t.Fatalf("%d objects still tracked, want %d", tr.Len(), 2-len(tc.want))
			}
			if again := tr.Collect(tc.now); len(again) != 0 {
				t.Fatalf("second Collect = %v, want nothing", again)
			}
		})
	}
}

func TestNeedsFor(t *testing.T) {
	ptrs := []wal.Pointer{{Topic: "t", Partition: 0, LastOffset: 9}, {Topic: "u", Partition: 2, LastOffset: 4}}
	got := wal.NeedsFor(ptrs, func(topic string, p int32) []int32 { return []int32{p + 1, p + 2} })
	want := []wal.ChunkNeed{{Topic: "t", Partition: 0, LastOffset: 9, Replicas: []int32{1, 2}}, {Topic: "u", Partition: 2, LastOffset: 4, Replicas: []int32{3, 4}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("NeedsFor = %v, want %v", got, want)
	}
}

// noModTime hides the listing's modification times, so Sweep must read
// the objects' headers.
type noModTime struct{ objstore.Store }

func (s noModTime) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	objs, err := s.Store.List(ctx, prefix)
	for i := range objs {
		objs[i].LastModified = time.Time{}
	}
	return objs, err
}

func TestSweep(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	store := s3Store(t, srv)
	ctx := context.Background()
	chunks := []wal.ChunkInput{chunk(t, "t", 0, 1, 0, 1, 1)}
	put := func(key string, created time.Time) {
		h := testHeader
		h.CreatedAt = created
		obj, _, err := wal.Encode(h, chunks)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(ctx, key, obj); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	old := now.Add(-2 * time.Hour).Truncate(time.Millisecond)
	put(wal.ObjectKey("demo", "zone-a", 1, 1, 0), old)
	put(wal.ObjectKey("demo", "zone-a", 1, 1, 1), old)
	put(wal.ObjectKey("demo", "zone-a", 1, 2, 0), now)
	put(wal.ObjectKey("other", "zone-a", 1, 1, 0), old)
	if err := store.Put(ctx, "wal/demo/zone-a/notes.txt", []byte("not a WAL object")); err != nil {
		t.Fatal(err)
	}

	// By header created-at: the two old objects of cluster demo go.
	res, err := wal.Sweep(ctx, noModTime{store}, "wal/demo/", time.Hour, now)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	wantDeleted := []string{wal.ObjectKey("demo", "zone-a", 1, 1, 0), wal.ObjectKey("demo", "zone-a", 1, 1, 1)}
	if !reflect.DeepEqual(res.Deleted, wantDeleted) || res.Kept != 1 || !reflect.DeepEqual(res.Ignored, []string{"wal/demo/zone-a/notes.txt"}) {
		t.Fatalf("Sweep = %+v", res)
	}
	objs, _ := store.List(ctx, "wal/")
	if len(objs) != 3 {
		t.Fatalf("%d objects left, want 3: %v", len(objs), objs)
	}
	// By the store's modification time: an hour from now everything of
	// cluster demo is old enough.
	res, err = wal.Sweep(ctx, store, "wal/demo/", time.Hour, now.Add(3*time.Hour))
	if err != nil || len(res.Deleted) != 1 || res.Kept != 0 {
		t.Fatalf("Sweep = %+v, %v", res, err)
	}
	if _, err := store.Head(ctx, "wal/demo/zone-a/notes.txt"); err != nil {
		t.Fatalf("Sweep touched a non-WAL key: %v", err)
	}
	if _, err := store.Head(ctx, wal.ObjectKey("other", "zone-a", 1, 1, 0)); err != nil {
		t.Fatalf("Sweep went outside its prefix: %v", err)
	}

	h, tbl, err := wal.ReadTable(ctx, store, wal.ObjectKey("other", "zone-a", 1, 1, 0))
	if err != nil || !h.CreatedAt.Equal(old) || len(tbl) != 1 {
		t.Fatalf("ReadTable = %+v, %v, %v", h, tbl, err)
	}
}
