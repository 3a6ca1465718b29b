package wal_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// putObject encodes chunks as object seq and stores it, optionally damaged.
func putObject(t *testing.T, store objstore.Store, seq uint64, chunks []wal.ChunkInput, damage func([]byte) []byte) []wal.Pointer {
	t.Helper()
	h := testHeader
	h.Sequence = seq
	obj, table, err := wal.Encode(h, chunks)
	if err != nil {
		t.Fatal(err)
	}
	key := wal.ObjectKey(h.Cluster, h.Zone, h.BrokerID, h.Incarnation, seq)
	if damage != nil {
		obj = damage(bytes.Clone(obj))
	}
	if err := store.Put(context.Background(), key, obj); err != nil {
		t.Fatal(err)
	}
	ptrs := make([]wal.Pointer, len(table))
	for i, c := range table {
		ptrs[i] = wal.PointerTo(store.Bucket(), key, c)
	}
	return ptrs
}

func TestDownloader(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	faulty := objstore.NewFaulty(s3Store(t, srv))
	resolve := func(bucket string) (objstore.Store, error) {
		if bucket != testBucket {
			return nil, errors.New("unknown bucket " + bucket)
		}
		return faulty, nil
	}
	chunksA := []wal.ChunkInput{
		chunk(t, "t", 0, 1, 0, 2, 3), chunk(t, "t", 1, 1, 100, 1, 2), chunk(t, "t", 2, 1, 7, 1, 1), chunk(t, "u", 0, 1, 50, 3, 1),
	}
	chunksB := []wal.ChunkInput{chunk(t, "t", 0, 1, 6, 1, 4)}
	a := putObject(t, faulty, 1, chunksA, nil)
	b := putObject(t, faulty, 2, chunksB, nil)
	want := map[string][]byte{}
	for i, c := range chunksA {
		want[a[i].String()] = bytes.Join(c.Batches, nil)
	}
	want[b[0].String()] = bytes.Join(chunksB[0].Batches, nil)

	checkGood := func(t *testing.T, f wal.Fetched) {
		t.Helper()
		if f.Err != nil {
			t.Fatalf("%v: %v", f.Pointer, f.Err)
		}
		var got []byte
		for _, bt := range f.Batches {
			got = append(got, bt...)
		}
		if !bytes.Equal(got, want[f.Pointer.String()]) {
			t.Fatalf("%v: batches differ from the uploaded ones", f.Pointer)
		}
		if f.Batches[0].BaseOffset() != f.Pointer.BaseOffset || f.Batches[len(f.Batches)-1].LastOffset() != f.Pointer.LastOffset {
			t.Fatalf("%v: batches cover [%d,%d]", f.Pointer, f.Batches[0].BaseOffset(), f.Batches[len(f.Batches)-1].LastOffset())
		}
	}

	for _, tc := range []struct {
		name     string
		gap      int64
		ptrs     []wal.Pointer
		wantGets int
	}{
		{"adjacent chunks share a GET", 0, []wal.Pointer{a[3], b[0], a[0], a[1]}, 3},
		{"all adjacent", 0, []wal.Pointer{a[0], a[1], a[2], a[3]}, 1},
		{"gap within MaxMergeGap", 1 << 20, []wal.Pointer{a[0], a[3]}, 1},
		{"gap beyond MaxMergeGap", 0, []wal.Pointer{a[0], a[3]}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := wal.NewDownloader(wal.DownloaderConfig{Store: resolve, MaxMergeGap: tc.gap, HedgeAfter: -1}) // counts GETs: no twins
			before := faulty.Calls(objstore.OpGet)
			got := d.Fetch(context.Background(), tc.ptrs)
			if n := faulty.Calls(objstore.OpGet) - before; n != tc.wantGets {
				t.Fatalf("%d GETs, want %d", n, tc.wantGets)
			}
			if len(got) != len(tc.ptrs) {
				t.Fatalf("%d results for %d pointers", len(got), len(tc.ptrs))
			}
			for i, f := range got {
				checkGood(t, f)
				if i > 0 {
					prev := got[i-1].Pointer
					if prev.Topic > f.Pointer.Topic || (prev.Topic == f.Pointer.Topic && prev.Partition == f.Pointer.Partition && prev.BaseOffset > f.Pointer.BaseOffset) {
						t.Fatalf("results not in offset order: %v before %v", prev, f.Pointer)
					}
				}
			}
		})
	}

	d := wal.NewDownloader(wal.DownloaderConfig{Store: resolve, HedgeAfter: -1}) // counts GETs: no twins
	t.Run("corrupt chunk fails only its range", func(t *testing.T) {
		c := putObject(t, faulty, 3, chunksA, func(obj []byte) []byte {
			_, table, _ := wal.Encode(testHeader, chunksA)
			obj[table[1].Offset+table[1].Length/2] ^= 0x01
			return obj
		})
		got := d.Fetch(context.Background(), c)
		for _, f := range got {
			if f.Pointer == c[1] {
				var re *wal.RangeError
				if !errors.As(f.Err, &re) || re.Pointer != c[1] || !errors.Is(f.Err, wal.ErrChunkCRC) || f.Batches != nil {
					t.Fatalf("corrupt chunk: Err = %v, %d batches", f.Err, len(f.Batches))
				}
				continue
			}
			want[f.Pointer.String()] = bytes.Join(chunksA[indexOf(c, f.Pointer)].Batches, nil)
			checkGood(t, f)
		}
	})
	t.Run("corruption on the wire", func(t *testing.T) {
		faulty.SetCorruptOnRead(true)
		defer faulty.SetCorruptOnRead(false)
		got := d.Fetch(context.Background(), []wal.Pointer{a[2]})
		if !errors.Is(got[0].Err, wal.ErrChunkCRC) || got[0].Batches != nil {
			t.Fatalf("Err = %v, want ErrChunkCRC and no batches", got[0].Err)
		}
	})
	t.Run("missing object", func(t *testing.T) {
		c := putObject(t, faulty, 4, chunksB, nil)
		if err := faulty.Delete(context.Background(), c[0].Key); err != nil {
			t.Fatal(err)
		}
		got := d.Fetch(context.Background(), []wal.Pointer{c[0], a[0]})
		var missing, good int
		for _, f := range got {
			switch f.Pointer {
			case c[0]:
				if !errors.Is(f.Err, wal.ErrObjectMissing) || !errors.Is(f.Err, objstore.ErrNotFound) {
					t.Fatalf("missing object: Err = %v", f.Err)
				}
				missing++
			case a[0]:
				checkGood(t, f)
				good++
			}
		}
		if missing != 1 || good != 1 {
			t.Fatalf("results %v", got)
		}
	})
	t.Run("truncated object", func(t *testing.T) {
		c := putObject(t, faulty, 5, chunksA, func(obj []byte) []byte { return obj[:len(obj)-10] })
		got := d.Fetch(context.Background(), []wal.Pointer{c[3], c[0]})
		for _, f := range got {
			if f.Pointer == c[3] {
				if !errors.Is(f.Err, wal.ErrTruncated) {
					t.Fatalf("truncated range: Err = %v", f.Err)
				}
			} else if f.Err != nil {
				t.Fatalf("intact range: %v", f.Err)
			}
		}
	})
	t.Run("pointer disagrees with the batches", func(t *testing.T) {
		p := a[1]
		p.LeaderEpoch = 9
		got := d.Fetch(context.Background(), []wal.Pointer{p})
		if !errors.Is(got[0].Err, wal.ErrChunkContent) {
			t.Fatalf("Err = %v, want ErrChunkContent", got[0].Err)
		}
	})
	t.Run("store failing", func(t *testing.T) {
		faulty.SetFailAll(true)
		defer faulty.SetFailAll(false)
		got := d.Fetch(context.Background(), []wal.Pointer{a[0], a[1]})
		for _, f := range got {
			var re *wal.RangeError
			if !errors.As(f.Err, &re) || !errors.Is(f.Err, objstore.ErrInjected) || errors.Is(f.Err, wal.ErrObjectMissing) {
				t.Fatalf("Err = %v, want the store's error as a RangeError", f.Err)
			}
		}
	})
	t.Run("invalid pointers", func(t *testing.T) {
		neg, zero, offs, nokey := a[0], a[0], a[0], a[0]
		neg.Length = -1
		zero.Length = 0
		offs.LastOffset = offs.BaseOffset - 1
		nokey.Key = ""
		got := d.Fetch(context.Background(), []wal.Pointer{neg, a[1], zero, offs, nokey})
		good := 0
		for _, f := range got {
			if f.Pointer == a[1] {
				checkGood(t, f)
				good++
				continue
			}
			if !errors.Is(f.Err, wal.ErrBadPointer) || f.Batches != nil {
				t.Fatalf("%v: Err = %v, want ErrBadPointer", f.Pointer, f.Err)
			}
		}
		if good != 1 || len(got) != 5 {
			t.Fatalf("results = %v", got)
		}
	})
	t.Run("unknown bucket", func(t *testing.T) {
		p := a[0]
		p.Bucket = "elsewhere"
		if got := d.Fetch(context.Background(), []wal.Pointer{p}); got[0].Err == nil {
			t.Fatal("fetch from an unknown bucket succeeded")
		}
	})
}

func indexOf(ps []wal.Pointer, p wal.Pointer) int {
	for i, q := range ps {
		if q == p {
			return i
		}
	}
	return -1
}

// TestDownloaderTimeout (issue #10 item 5): a GET that hangs is abandoned
// at the download budget: its ranges fail with ErrDownloadTimeout (the
// follower fetches them inline) and are counted, the other object's
// ranges arrive, and Fetch returns instead of waiting for the store.
func TestDownloaderTimeout(t *testing.T) {
	hanging := objstore.NewFaulty(objstore.NewMem("slow"))
	fine := objstore.NewMem("fine")
	d := wal.NewDownloader(wal.DownloaderConfig{Timeout: time.Second, Store: func(bucket string) (objstore.Store, error) {
		if bucket == "slow" {
			return hanging, nil
		}
		return fine, nil
	}})
	slow := putObject(t, hanging, 1, []wal.ChunkInput{chunk(t, "t", 0, 1, 0, 1, 1)}, nil)
	ok := putObject(t, fine, 2, []wal.ChunkInput{chunk(t, "t", 1, 1, 0, 1, 1)}, nil)
	hanging.SetGetLatency(time.Hour) // until the GET's context ends

	got := d.Fetch(context.Background(), append(slow, ok...))
	if len(got) != 2 {
		t.Fatalf("Fetch = %d results, want 2", len(got))
	}
	if !errors.Is(got[0].Err, wal.ErrDownloadTimeout) || got[0].Batches != nil {
		t.Fatalf("hanging GET: %+v, want ErrDownloadTimeout and no batches", got[0])
	}
	var re *wal.RangeError
	if !errors.As(got[0].Err, &re) || re.Pointer != slow[0] {
		t.Fatalf("hanging GET: error %v does not name its pointer", got[0].Err)
	}
	if got[1].Err != nil || len(got[1].Batches) != 1 {
		t.Fatalf("healthy object: %+v, want its batch", got[1])
	}
	// The hanging GET got a twin after the hedge delay (which hung too).
	if s := d.Stats(); s.TimedOut != 1 || s.Gets != 3 || s.Hedged != 1 {
		t.Fatalf("Stats = %+v, want 3 GETs (one a hedge), 1 timed out", s)
	}

	// The caller's own cancellation is not a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got = d.Fetch(ctx, slow)
	if got[0].Err == nil || errors.Is(got[0].Err, wal.ErrDownloadTimeout) {
		t.Fatalf("cancelled Fetch: %v, want a failure that is not a timeout", got[0].Err)
	}
	if s := d.Stats(); s.TimedOut != 1 {
		t.Fatalf("a cancelled Fetch counted as a timeout: %+v", s)
	}
}

// TestDownloaderDataIsTheRange: Fetched.Data is the verified range, its
// batches back to back, sliced from the GET's buffer without a copy
// (followers append it as is) and capped at the range's end, so that
// appending to one range's Data never writes over the next range that
// shares the buffer.
func TestDownloaderDataIsTheRange(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	st := s3Store(t, srv)
	c0, c1 := chunk(t, "t", 0, 1, 0, 2, 3), chunk(t, "t", 1, 1, 10, 3, 2)
	ptrs := putObject(t, st, 1, []wal.ChunkInput{c0, c1}, nil)
	d := wal.NewDownloader(wal.DownloaderConfig{Store: func(string) (objstore.Store, error) { return st, nil }})
	got := d.Fetch(context.Background(), ptrs)
	if len(got) != 2 || got[0].Err != nil || got[1].Err != nil {
		t.Fatalf("fetch: %+v", got)
	}
	if s := d.Stats(); s.Gets != 1 {
		t.Fatalf("%d GETs, want one for the two adjacent ranges", s.Gets)
	}
	for i, c := range []wal.ChunkInput{c0, c1} {
		want := bytes.Join(c.Batches, nil)
		if !bytes.Equal(got[i].Data, want) || !bytes.Equal(bytes.Join(toBytes(got[i].Batches), nil), want) {
			t.Fatalf("range %d: Data or Batches differ from the uploaded batches", i)
		}
		if cap(got[i].Data) != len(got[i].Data) {
			t.Fatalf("range %d: Data has capacity %d past its %d bytes", i, cap(got[i].Data), len(got[i].Data))
		}
	}
	_ = append(got[0].Data, bytes.Repeat([]byte{0xff}, len(got[1].Data))...)
	if !bytes.Equal(got[1].Data, bytes.Join(c1.Batches, nil)) {
		t.Fatal("appending to the first range's Data changed the second range")
	}
}

// meetingStore holds every GET until `meet` GETs are running at once (or
// the GET's context ends), and records the peak.
type meetingStore struct {
	objstore.Store
	meet         int32
	mu           sync.Mutex
	active, peak int32
	met          chan struct{}
}

func (s *meetingStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	s.mu.Lock()
	s.active++
	s.peak = max(s.peak, s.active)
	if s.active == s.meet {
		close(s.met)
	}
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.active--; s.mu.Unlock() }()
	select {
	case <-s.met:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Get(ctx, key, offset, length)
}

// TestDownloaderParallelGets: the GETs of a round with several objects
// run at once (the last one on the caller's goroutine), at most
// MaxConcurrency of them: three objects, three GETs that each wait for
// the other two, all answered.
func TestDownloaderParallelGets(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	st := &meetingStore{Store: s3Store(t, srv), meet: 3, met: make(chan struct{})}
	var ptrs []wal.Pointer
	for i := range 3 {
		ptrs = append(ptrs, putObject(t, st.Store, uint64(i+1), []wal.ChunkInput{chunk(t, "t", 0, 1, int64(10*i), 1, 2)}, nil)...)
	}
	d := wal.NewDownloader(wal.DownloaderConfig{Store: func(string) (objstore.Store, error) { return st, nil }, MaxConcurrency: 3, Timeout: 20 * time.Second})
	got := d.Fetch(context.Background(), ptrs)
	for _, f := range got {
		if f.Err != nil {
			t.Fatalf("%v: %v (the GETs did not run at once)", f.Pointer, f.Err)
		}
	}
	if len(got) != 3 || st.peak != 3 {
		t.Fatalf("%d results, peak %d concurrent GETs; want 3 and 3", len(got), st.peak)
	}
}

// TestDownloaderBacksOffAfterTimeout (issue 25, window 4): a bucket whose
// GETs hang costs the download budget once per back-off, not on every
// round: after a timeout its ranges fail at once with ErrBucketBackoff
// (no GET; the follower fetches inline) until the back-off ends, which
// doubles while the bucket keeps timing out; a probe that answers ends it.
// Other buckets are not affected.
func TestDownloaderBacksOffAfterTimeout(t *testing.T) {
	hanging := objstore.NewFaulty(objstore.NewMem("slow"))
	fine := objstore.NewMem("fine")
	now := time.Unix(1_000, 0)
	d := wal.NewDownloader(wal.DownloaderConfig{
		Timeout: 50 * time.Millisecond, HedgeAfter: -1, TimeoutBackoff: time.Second, MaxTimeoutBackoff: 3 * time.Second,
		Clock: func() time.Time { return now },
		Store: func(bucket string) (objstore.Store, error) {
			if bucket == "slow" {
				return hanging, nil
			}
			return fine, nil
		},
	})
	slow := putObject(t, hanging, 1, []wal.ChunkInput{chunk(t, "t", 0, 1, 0, 1, 1)}, nil)
	ok := putObject(t, fine, 2, []wal.ChunkInput{chunk(t, "t", 1, 1, 0, 1, 1)}, nil)
	hanging.SetGetLatency(time.Hour) // until the GET's context ends
	ctx := context.Background()

	round := func(wantSlow error, wantGets int64) {
		t.Helper()
		got := d.Fetch(ctx, append(append([]wal.Pointer(nil), slow...), ok...))
		if !errors.Is(got[0].Err, wantSlow) || got[0].Batches != nil {
			t.Fatalf("slow bucket: %v, want %v", got[0].Err, wantSlow)
		}
		if got[1].Err != nil || len(got[1].Batches) != 1 {
			t.Fatalf("healthy bucket: %+v, want its batch", got[1])
		}
		if s := d.Stats(); s.Gets != wantGets {
			t.Fatalf("GETs so far %d, want %d", s.Gets, wantGets)
		}
	}
	round(wal.ErrDownloadTimeout, 2)
	if !d.Backoff("slow") || d.Backoff("fine") {
		t.Fatalf("backing off: slow %v, fine %v; want only slow", d.Backoff("slow"), d.Backoff("fine"))
	}
	round(wal.ErrBucketBackoff, 3) // no GET to the slow bucket
	now = now.Add(time.Second)     // the back-off ends: a probe
	round(wal.ErrDownloadTimeout, 5)
	now = now.Add(time.Second) // doubled: still backing off
	round(wal.ErrBucketBackoff, 6)
	now = now.Add(time.Second)
	hanging.SetGetLatency(0)
	got := d.Fetch(ctx, slow)
	if got[0].Err != nil || len(got[0].Batches) != 1 {
		t.Fatalf("probe of the recovered bucket: %+v", got[0])
	}
	if d.Backoff("slow") {
		t.Fatal("still backing off after a good probe")
	}
}
