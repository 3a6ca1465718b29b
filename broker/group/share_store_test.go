package group

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func testShareState(start int64) ShareState {
	return ShareState{StartOffset: start, Batches: []ShareStateBatch{
		{First: start + 1, Last: start + 3, State: ShareStateAvailable, DeliveryCount: 2},
		{First: start + 4, Last: start + 4, State: ShareStateArchived, DeliveryCount: 5},
	}}
}

// TestShareStateStores: MemoryStore and FileStore keep the last state of
// each share partition; FileStore keeps it across reopening.
func TestShareStateStores(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]ShareStateStore{"memory": NewMemoryStore(), "file": fs}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			if _, ok, err := s.LoadShareState(ctx, "g", "t", 0); ok || err != nil {
				t.Fatalf("empty store: ok %v err %v", ok, err)
			}
			for i := range int64(3) {
				if err := s.SaveShareState(ctx, "g", "t", 0, testShareState(10*i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.SaveShareState(ctx, "g", "t", 1, testShareState(7)); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveShareState(ctx, "g2", "t", 0, testShareState(1)); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				group string
				p     int32
				want  ShareState
			}{{"g", 0, testShareState(20)}, {"g", 1, testShareState(7)}, {"g2", 0, testShareState(1)}} {
				got, ok, err := s.LoadShareState(ctx, c.group, "t", c.p)
				if err != nil || !ok || !reflect.DeepEqual(got, c.want) {
					t.Fatalf("%s/t/%d: %+v %v %v, want %+v", c.group, c.p, got, ok, err, c.want)
				}
			}
		})
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.SaveShareState(ctx, "g", "t", 0, testShareState(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("save after close: %v, want ErrClosed", err)
	}
	fs, err = OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	got, ok, err := fs.LoadShareState(ctx, "g", "t", 0)
	if err != nil || !ok || !reflect.DeepEqual(got, testShareState(20)) {
		t.Fatalf("after reopening: %+v %v %v", got, ok, err)
	}
}

// TestShareStateFileTornTailAndCompaction: a torn last record is dropped on
// open; compaction keeps only the live state.
func TestShareStateFileTornTailAndCompaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs.CompactMinBytes, fs.CompactRatio = 2048, 2
	for i := range int64(200) {
		if err := fs.SaveShareState(ctx, "g", "t", int32(i%3), testShareState(i)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, shareLogName)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() > 8*2048 {
		t.Fatalf("share-state log is %d bytes after 200 saves of 3 partitions: not compacted", info.Size())
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	// A record cut short by a crash.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 1, 0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fs, err = OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	for p, want := range map[int32]int64{0: 198, 1: 199, 2: 197} {
		got, ok, err := fs.LoadShareState(ctx, "g", "t", p)
		if err != nil || !ok || !reflect.DeepEqual(got, testShareState(want)) {
			t.Fatalf("partition %d: %+v %v %v, want start %d", p, got, ok, err, want)
		}
	}
	if err := fs.SaveShareState(ctx, "g", "t", 0, testShareState(500)); err != nil {
		t.Fatalf("save after truncating the torn tail: %v", err)
	}
}
