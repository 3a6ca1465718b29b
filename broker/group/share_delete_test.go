package group

import (
	"context"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeleteShareGroup: DeleteGroups deletes a share group without members
// with its share-partition state (memory and store); a group of that id
// created afterwards starts from nothing.
func TestDeleteShareGroup(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) ShareStateStore
	}{
		{"memory", func(*testing.T) ShareStateStore { return NewMemoryStore() }},
		{"file", func(t *testing.T) ShareStateStore {
			fs, err := OpenFileStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fs.Close() })
			return fs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := tc.store(t)
			h, _, s := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, func(c *Config) { c.Store = store.(OffsetStore) })
			del := func(id string) int16 {
				return h.c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{id}}).Groups[0].ErrorCode
			}
			l := newFakeShareLog(10)
			wantCode(t, "join", shareHB(s, "sg", "a", 0, "t").ErrorCode, nil)
			if _, err := s.Acquire(ctx, "sg", "a", "t", 0, -1, l, 4, 1<<20); err != nil {
				t.Fatal(err)
			}
			if err := s.Acknowledge(ctx, "sg", "a", "t", 0, -1, acks(0, 3, ShareAckAccept), false); err != nil {
				t.Fatal(err)
			}
			// Another group's state stays.
			if _, err := s.Acquire(ctx, "other", "x", "t", 0, -1, l, 2, 1<<20); err != nil {
				t.Fatal(err)
			}
			wantCode(t, "delete with a member", del("sg"), kerr.NonEmptyGroup)
			wantCode(t, "delete unknown", del("nope"), kerr.GroupIDNotFound)
			wantCode(t, "leave", shareHB(s, "sg", "a", -1).ErrorCode, nil)
			wantCode(t, "delete empty", del("sg"), nil)
			if s.IsShareGroup("sg") {
				t.Error("share group still known")
			}
			if _, ok, err := store.LoadShareState(ctx, "sg", "t", 0); ok || err != nil {
				t.Errorf("share state still stored (%v)", err)
			}
			if _, ok, _ := store.LoadShareState(ctx, "other", "t", 0); !ok {
				t.Error("the state of another group was deleted")
			}
			if start, _, err := s.ShareOffsets(ctx, "sg", "t", 0, -1); start != -1 || err != nil {
				t.Errorf("start offset after delete %d (%v), want -1", start, err)
			}
			wantCode(t, "delete again", del("sg"), kerr.GroupIDNotFound)
			wantCode(t, "join again", shareHB(s, "sg", "b", 0, "t").ErrorCode, nil)
			res, err := s.Acquire(ctx, "sg", "b", "t", 0, -1, l, 100, 1<<20)
			if want := []AcquiredRange{{0, 9, 1}}; err != nil || !reflect.DeepEqual(res.Acquired, want) {
				t.Errorf("new group acquired %+v (%v), want %+v", res.Acquired, err, want)
			}
		})
	}
}

// TestDeleteShareGroupAfterRestart: membership is not persisted, so after a
// restart an empty share group is known by its stored state; DeleteGroups
// finds it there and the deletion survives the next restart.
func TestDeleteShareGroupAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := newFakeShareLog(10)
	open := func() (*harness, *FileStore, *ShareCoordinator) {
		fs, err := OpenFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		h, _, s := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, func(c *Config) { c.Store = fs })
		return h, fs, s
	}
	_, fs, s := open()
	for _, g := range []string{"sg", "kept"} {
		if _, err := s.Acquire(ctx, g, "a", "t", 1, -1, l, 3, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	fs.Close()

	h, fs, s := open()
	if s.IsShareGroup("sg") {
		t.Fatal("membership was persisted: the test needs another way to forget the group")
	}
	resp := h.c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"sg"}})
	wantCode(t, "delete after restart", resp.Groups[0].ErrorCode, nil)
	fs.Close()

	_, fs, _ = open()
	if tps, err := fs.ListShareState(ctx, "sg"); len(tps) != 0 || err != nil {
		t.Errorf("deleted group's state after restart: %v %v", tps, err)
	}
	if tps, _ := fs.ListShareState(ctx, "kept"); len(tps) != 1 {
		t.Errorf("other group's state after restart: %v", tps)
	}
}
