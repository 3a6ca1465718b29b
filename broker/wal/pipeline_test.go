package wal_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// TestPipeline composes the pieces as the broker will: a leader's uploader
// publishes pointers into per-partition pointer indexes and the deletion
// tracker; a follower asks the index for pointers from its fetch offset,
// downloads them and "appends" the batches; its progress lets the leader
// delete the objects, after which the bucket and the indexes are empty.
func TestPipeline(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	store := s3Store(t, srv)
	const partitions = 6
	const follower = int32(2)

	indexes := make([]*wal.PointerIndex, partitions)
	for p := range indexes {
		x, err := wal.OpenPointerIndex(filepath.Join(t.TempDir()), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		indexes[p] = x
	}
	tracker := wal.NewTracker(time.Hour)
	for p := range int32(partitions) {
		tracker.Lead("t", p, 1)
	}
	var mu sync.Mutex
	var uploadErr error
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: store, Cluster: "demo", Zone: "zone-a", BrokerID: 1, Incarnation: 1,
		MaxObjectBytes: 4 << 10, UploadInterval: time.Millisecond,
		OnUpload: func(r wal.UploadResult) {
			if r.Err != nil {
				mu.Lock()
				uploadErr = r.Err
				mu.Unlock()
				return
			}
			for _, p := range r.Pointers {
				if err := indexes[p.Partition].Add(p); err != nil {
					t.Error(err)
				}
			}
			tracker.Add(r.Bucket, r.Key, time.Now(), wal.NeedsFor(r.Pointers, func(string, int32) []int32 { return []int32{follower} }))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	leader := make([][]byte, partitions)
	next := make([]int64, partitions)
	for i := 0; i < 300; i++ {
		p := i % partitions
		b := batch(t, next[p], 2, 1, 50)
		if err := u.Append("t", int32(p), 1, next[p], next[p]+1, b); err != nil {
			t.Fatal(err)
		}
		leader[p] = append(leader[p], b...)
		next[p] += 2
	}
	if err := u.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if uploadErr != nil {
		t.Fatal(uploadErr)
	}

	// The follower catches up through the bucket only.
	d := wal.NewDownloader(wal.DownloaderConfig{Store: func(string) (objstore.Store, error) { return store, nil }})
	got := make([][]byte, partitions)
	leo := make([]int64, partitions)
	for round := 0; ; round++ {
		if round > 1000 {
			t.Fatal("follower does not converge")
		}
		var ptrs []wal.Pointer
		for p := range indexes {
			ptrs = append(ptrs, indexes[p].From(leo[p], 8<<10)...)
		}
		if len(ptrs) == 0 {
			break
		}
		for _, f := range d.Fetch(context.Background(), ptrs) {
			if f.Err != nil {
				t.Fatal(f.Err)
			}
			p := f.Pointer.Partition
			for _, b := range f.Batches {
				if b.BaseOffset() != leo[p] {
					t.Fatalf("partition %d: batch at %d, follower at %d", p, b.BaseOffset(), leo[p])
				}
				got[p] = append(got[p], b...)
				leo[p] = b.LastOffset() + 1
			}
		}
		for p := range leo {
			tracker.ReplicaProgress("t", int32(p), follower, leo[p])
		}
		for _, del := range tracker.Collect(time.Now()) {
			if err := store.Delete(context.Background(), del.Key); err != nil {
				t.Fatal(err)
			}
			for _, x := range indexes {
				if err := x.RemoveObject(del.Bucket, del.Key); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for p := range leader {
		if leo[p] != next[p] || !bytes.Equal(got[p], leader[p]) {
			t.Fatalf("partition %d: follower at %d with %d bytes, leader at %d with %d bytes", p, leo[p], len(got[p]), next[p], len(leader[p]))
		}
		if n := indexes[p].Len(); n != 0 {
			t.Fatalf("partition %d: %d pointers left after every object was deleted", p, n)
		}
	}
	if objs, err := store.List(context.Background(), "wal/"); err != nil || len(objs) != 0 {
		t.Fatalf("objects left: %v, %v", objs, err)
	}
	if tracker.Len() != 0 {
		t.Fatalf("tracker still holds %d objects", tracker.Len())
	}
}
