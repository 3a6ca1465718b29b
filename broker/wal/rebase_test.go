package wal_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/wal"
)

// producerSet is what a producer sends: batches at base offset 0 and
// leader epoch -1, sizes recs records each.
func producerSet(t *testing.T, recs ...int) []byte {
	t.Helper()
	var out []byte
	for _, n := range recs {
		b := batch(t, 0, n, -1, 32)
		out = append(out, b...)
	}
	return out
}

// leaderStamp stamps set as a leader's append does: offsets from base,
// leader epoch epoch (a copy).
func leaderStamp(t *testing.T, set []byte, base int64, epoch int32) []byte {
	t.Helper()
	out := bytes.Clone(set)
	for pos := 0; pos < len(out); {
		n, err := record.CheckFrame(out[pos:])
		if err != nil {
			t.Fatal(err)
		}
		b := record.Batch(out[pos : pos+n])
		h, _ := record.ParseHeader(b)
		record.SetBaseOffset(b, base)
		record.SetPartitionLeaderEpoch(b, epoch)
		base += int64(h.LastOffsetDelta) + 1
		pos += n
	}
	return out
}

func TestForwardedUnchanged(t *testing.T) {
	set := producerSet(t, 3, 1, 5)
	first, _ := record.CheckFrame(set)
	tests := []struct {
		name     string
		appended func() []byte
		want     bool
	}{
		{"offsets and epoch stamped", func() []byte { return leaderStamp(t, set, 1000, 7) }, true},
		{"as forwarded", func() []byte { return bytes.Clone(set) }, true},
		{"LogAppendTime stamped", func() []byte {
			b := leaderStamp(t, set, 1000, 7)
			record.SetLogAppendTime(record.Batch(b[:first]), 1_800_000_000_000)
			return b
		}, false},
		{"a byte of the batch length", func() []byte { b := leaderStamp(t, set, 0, 7); b[8] ^= 1; return b }, false},
		{"a record byte of the last batch", func() []byte { b := leaderStamp(t, set, 0, 7); b[len(b)-1] ^= 1; return b }, false},
		{"the second batch dropped", func() []byte {
			b := leaderStamp(t, set, 0, 7)
			n, _ := record.CheckFrame(b[first:])
			return append(b[:first:first], b[first+n:]...)
		}, false},
		{"the batches reordered", func() []byte {
			b := leaderStamp(t, set, 0, 7)
			return append(bytes.Clone(b[first:]), b[:first]...)
		}, false},
		{"a longer append", func() []byte { return append(leaderStamp(t, set, 0, 7), 0) }, false},
		{"nothing", func() []byte { return nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wal.ForwardedUnchanged(set, tt.appended()); got != tt.want {
				t.Fatalf("ForwardedUnchanged = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRebaseBatches(t *testing.T) {
	set := producerSet(t, 3, 1, 5)
	want := leaderStamp(t, set, 1000, 7)
	got := bytes.Clone(set)
	if err := wal.RebaseBatches(got, 1000, 1008, 7); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("rebased bytes differ from the leader's")
	}
	// The batch CRCs still hold, and the chunk checks pass.
	c := wal.ChunkInfo{Topic: "t", Partition: 0, LeaderEpoch: 7, BaseOffset: 1000, LastOffset: 1008, Length: int64(len(got))}
	if _, err := wal.SplitBatches(c, got); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		data []byte
		last int64
	}{
		{"last offset too high", bytes.Clone(set), 1009},
		{"last offset too low", bytes.Clone(set), 1007},
		{"a torn batch", bytes.Clone(set[:len(set)-1]), 1008},
		{"empty", nil, 999},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := wal.RebaseBatches(tt.data, 1000, tt.last, 7); !errors.Is(err, wal.ErrRebase) {
				t.Fatalf("err = %v, want ErrRebase", err)
			}
		})
	}
}

// TestDownloaderRebase: a foreign pointer's range is checked against the
// CRC of the bytes as forwarded, then rebased; a pointer without the
// flag to the same range fails the batch checks, and a damaged range or
// a missing object fails with a RangeError (the follower fetches inline).
func TestDownloaderRebase(t *testing.T) {
	store := objstore.NewMem("zl")
	set := producerSet(t, 2, 4)
	obj := append([]byte("other records"), set...)
	ctx := context.Background()
	if err := store.Put(ctx, "wal/c/a/1/zl-9/00000000000000000001", obj); err != nil {
		t.Fatal(err)
	}
	d := wal.NewDownloader(wal.DownloaderConfig{Store: func(string) (objstore.Store, error) { return store, nil }})
	ptr := wal.Pointer{
		Bucket: "zl", Key: "wal/c/a/1/zl-9/00000000000000000001", Offset: 13, Length: int64(len(set)),
		Topic: "t", Partition: 3, BaseOffset: 40, LastOffset: 45, LeaderEpoch: 2,
		CRC: crc32.Checksum(set, crc32.MakeTable(crc32.Castagnoli)), Rebase: true,
	}
	got := d.Fetch(ctx, []wal.Pointer{ptr})
	if got[0].Err != nil {
		t.Fatal(got[0].Err)
	}
	if want := leaderStamp(t, set, 40, 2); !bytes.Equal(got[0].Data, want) {
		t.Fatal("downloaded bytes differ from the leader's append")
	}
	if len(got[0].Batches) != 2 || got[0].Batches[1].BaseOffset() != 42 {
		t.Fatalf("batches %d, second at %d", len(got[0].Batches), got[0].Batches[1].BaseOffset())
	}

	plain := ptr
	plain.Rebase = false
	if got := d.Fetch(ctx, []wal.Pointer{plain}); !errors.Is(got[0].Err, wal.ErrChunkContent) {
		t.Fatalf("without the flag: err = %v, want ErrChunkContent", got[0].Err)
	}
	bad := ptr
	bad.CRC ^= 1
	if got := d.Fetch(ctx, []wal.Pointer{bad}); !errors.Is(got[0].Err, wal.ErrChunkCRC) {
		t.Fatalf("bad CRC: err = %v, want ErrChunkCRC", got[0].Err)
	}
	if err := store.Delete(ctx, ptr.Key); err != nil {
		t.Fatal(err)
	}
	if got := d.Fetch(ctx, []wal.Pointer{ptr}); !errors.Is(got[0].Err, wal.ErrObjectMissing) {
		t.Fatalf("object gone: err = %v, want ErrObjectMissing", got[0].Err)
	}
}

// TestPointerIndexKeepsRebase: the flag survives a reopen (and the
// file's compaction).
func TestPointerIndexKeepsRebase(t *testing.T) {
	dir := t.TempDir()
	x, err := wal.OpenPointerIndex(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	own := wal.Pointer{Bucket: "b", Key: "k1", Offset: 0, Length: 10, Topic: "t", BaseOffset: 0, LastOffset: 4, LeaderEpoch: 1, CRC: 1}
	foreign := wal.Pointer{Bucket: "zl", Key: "k2", Offset: 5, Length: 10, Topic: "t", BaseOffset: 5, LastOffset: 9, LeaderEpoch: 1, CRC: 2, Rebase: true}
	for _, p := range []wal.Pointer{own, foreign} {
		if err := x.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	y, err := wal.OpenPointerIndex(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	all := y.All()
	if len(all) != 2 || all[0] != own || all[1] != foreign {
		t.Fatalf("reopened: %v", all)
	}
	if _, err := foreign.MarshalBinary(); err == nil {
		t.Fatal("a foreign pointer has a binary form an older follower would misread")
	}
}
