package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/time/rate"

	"github.com/strata-dev/strata/broker/record"
)

func compactConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	cfg.Compact, cfg.Delete = true, false
	return cfg
}

// kv is a keyed record; a nil value is a tombstone.
type kv struct {
	key   string
	value []byte
}

func keyedBatch(t testing.TB, spec record.BatchSpec, ts int64, kvs ...kv) record.Batch {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, r := range kvs {
		recs[i] = record.Record{TimestampDelta: int64(i), Key: []byte(r.key), Value: r.value}
	}
	spec.BaseTimestamp = ts
	b, err := record.Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stored is one record as read back with its offset.
type stored struct {
	offset int64
	key    string
	value  []byte
}

// readRecords reads every record of the log from the start, checking that
// offsets increase and that batch CRCs hold.
func readRecords(t testing.TB, l *Log) []stored {
	t.Helper()
	var out []stored
	next, end := l.StartOffset(), l.EndOffset()
	last := int64(-1)
	for next < end {
		res, err := l.Read(next, 1<<20, end)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("empty read at %d below end %d", next, end)
		}
		bs, err := splitStored(res.Records)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		for _, b := range bs {
			recs, err := record.Records(b, record.MaxDecompressedBytes)
			if err != nil {
				t.Fatalf("records of batch %d: %v", b.BaseOffset(), err)
			}
			for _, r := range recs {
				off := b.BaseOffset() + int64(r.OffsetDelta)
				if off <= last {
					t.Fatalf("offset %d after %d", off, last)
				}
				last = off
				out = append(out, stored{off, string(r.Key), r.Value})
			}
			next = b.LastOffset() + 1
		}
	}
	return out
}

func latestByKey(recs []stored) map[string]stored {
	m := map[string]stored{}
	for _, r := range recs {
		m[r.key] = r
	}
	return m
}

func mustClean(t testing.TB, l *Log) CleanStats {
	t.Helper()
	st, err := l.Clean(context.Background(), CleanOptions{Limit: math.MaxInt64, Force: true})
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	return st
}

// fillKeyed appends n single-key records over keys k0..k<keys-1> in batches
// of 5 (every other batch gzip-compressed), value "<key>=<i>".
func fillKeyed(t testing.TB, l *Log, from, n, keys int) {
	t.Helper()
	for i := from; i < from+n; i += 5 {
		var kvs []kv
		for j := i; j < min(i+5, from+n); j++ {
			k := fmt.Sprintf("k%d", j%keys)
			kvs = append(kvs, kv{k, []byte(fmt.Sprintf("%s=%d", k, j))})
		}
		spec := record.DefaultSpec()
		if i/5%2 == 1 {
			spec.Codec = record.Gzip
		}
		mustAppend(t, l, keyedBatch(t, spec, int64(1000+i), kvs...))
	}
}

func TestCleanKeepsLatestPerKey(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, compactConfig())
	fillKeyed(t, l, 0, 2000, 20)
	before := readRecords(t, l)
	want := latestByKey(before)
	activeBase := l.segs[len(l.segs)-1].base
	nsegs := len(l.segs)

	st := mustClean(t, l)
	if !st.Cleaned || st.BytesWritten >= st.BytesRead {
		t.Fatalf("stats %+v", st)
	}
	check := func(l *Log) {
		t.Helper()
		got := readRecords(t, l)
		seen := map[string]bool{}
		for _, r := range got {
			if r.offset >= activeBase {
				continue
			}
			if seen[r.key] {
				t.Fatalf("key %s twice below the active segment (offset %d)", r.key, r.offset)
			}
			seen[r.key] = true
		}
		if g := latestByKey(got); fmt.Sprint(g) != fmt.Sprint(want) {
			t.Fatalf("latest values changed:\n got %v\nwant %v", g, want)
		}
		if len(got) >= len(before)/4 {
			t.Fatalf("%d records after cleaning, %d before", len(got), len(before))
		}
		if l.EndOffset() < 2000 || l.StartOffset() != 0 {
			t.Fatalf("offsets [%d, %d)", l.StartOffset(), l.EndOffset())
		}
	}
	check(l)
	// Appends continue after the log end; a reopened log (indexes read
	// from the cleaned files) reads the same.
	if res := mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), 9000, kv{"k1", []byte("new")})); res.BaseOffset != 2000 {
		t.Fatalf("append after cleaning at %d", res.BaseOffset)
	}
	want["k1"] = stored{2000, "k1", []byte("new")}
	// As in Kafka, segments are grouped by their size before a clean: the
	// next clean merges the small cleaned ones up to segment.bytes.
	for i := 0; i < 30; i++ {
		mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), 9000, kv{"filler", []byte(strings.Repeat("f", 100))}))
	}
	want["filler"] = stored{2030, "filler", []byte(strings.Repeat("f", 100))}
	activeBase = l.segs[len(l.segs)-1].base
	mustClean(t, l)
	check(l)
	if len(l.segs) > nsegs/4 {
		t.Fatalf("%d segments after cleaning twice, %d before: small segments were not merged", len(l.segs), nsegs)
	}
	l.Close()
	l = openLog(t, dir, compactConfig())
	defer l.Close()
	check(l)
	// Reading from inside a removed range starts at the next kept batch.
	res, err := l.Read(1, 100, l.EndOffset())
	if err != nil || len(res.Records) == 0 || record.Batch(res.Records).LastOffset() < 1 {
		t.Fatalf("read from 1: %v %d bytes", err, len(res.Records))
	}
}

func TestCleanDirtyRatioAndLag(t *testing.T) {
	c := newClock()
	cfg := compactConfig()
	cfg.MinCompactionLag = time.Hour
	l := openLog(t, t.TempDir(), cfg, WithClock(c.now))
	defer l.Close()
	for i := 0; i < 400; i += 5 {
		mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), c.now().UnixMilli(), kv{"a", []byte("1")}, kv{"b", []byte("2")}, kv{"a", []byte("3")}, kv{"b", []byte("4")}, kv{"c", nil}))
	}
	if _, due := l.DirtyRatio(math.MaxInt64); due {
		t.Fatal("due before min.compaction.lag.ms")
	}
	if st := mustClean(t, l); st.Cleaned {
		t.Fatal("cleaned records younger than min.compaction.lag.ms")
	}
	c.advance(2 * time.Hour)
	if r, due := l.DirtyRatio(math.MaxInt64); !due || r != 1 {
		t.Fatalf("ratio %v due %v", r, due)
	}
	if _, due := l.DirtyRatio(5); due {
		t.Fatal("due below the first segment's end (the high watermark limit)")
	}
	mustClean(t, l)
	if r, due := l.DirtyRatio(math.MaxInt64); due || r != 0 {
		t.Fatalf("after cleaning: ratio %v due %v", r, due)
	}
}

func TestCleanTombstonesAfterDeleteRetention(t *testing.T) {
	c := newClock()
	cfg := compactConfig()
	cfg.DeleteRetention = time.Hour
	dir := t.TempDir()
	l := openLog(t, dir, cfg, WithClock(c.now))
	defer func() { l.Close() }()
	fillKeyed(t, l, 0, 200, 10)
	for i := 0; i < 5; i++ {
		mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), 5000, kv{fmt.Sprintf("k%d", i), nil}))
	}
	fillKeyed(t, l, 1000, 200, 3) // keys k0..k2 again: tombstones of k3, k4 stay latest
	filler := func(from int) {
		for i := 0; i < 60; i++ {
			mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), 6000, kv{fmt.Sprintf("f%d", from+i), []byte(strings.Repeat("x", 40))}))
		}
	}
	filler(0)
	tombstones := func() []string {
		var out []string
		for _, r := range readRecords(t, l) {
			if r.value == nil {
				out = append(out, r.key)
			}
		}
		return out
	}
	mustClean(t, l)
	if got := tombstones(); fmt.Sprint(got) != "[k3 k4]" {
		t.Fatalf("tombstones right after the first clean: %v", got)
	}
	// A reopened log remembers when the cleaner reached them.
	l.Close()
	l = openLog(t, dir, cfg, WithClock(c.now))
	c.advance(59 * time.Minute)
	filler(100)
	mustClean(t, l)
	if got := tombstones(); fmt.Sprint(got) != "[k3 k4]" {
		t.Fatalf("tombstones before delete.retention.ms: %v", got)
	}
	c.advance(2 * time.Minute)
	filler(200)
	mustClean(t, l)
	if got := tombstones(); len(got) != 0 {
		t.Fatalf("tombstones after delete.retention.ms: %v", got)
	}
	for _, r := range readRecords(t, l) {
		if r.key == "k3" || r.key == "k4" {
			t.Fatalf("deleted key %s still has %q at %d", r.key, r.value, r.offset)
		}
	}
}

func TestCleanKeepsProducerState(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, compactConfig())
	defer func() { l.Close() }()
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch = 7, 0
	for seq := int32(0); seq < 40; seq++ {
		spec.BaseSequence = seq
		mustAppend(t, l, keyedBatch(t, spec, 1000, kv{"same", []byte(strings.Repeat("v", 60))}))
	}
	// Another producer overwrites the key, so every batch of producer 7
	// loses its record; its last batch must stay (empty).
	mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), 2000, kv{"same", []byte("last")}))
	for i := 0; i < 40; i++ {
		mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), 2000, kv{fmt.Sprintf("x%d", i), []byte(strings.Repeat("y", 60))}))
	}
	mustClean(t, l)
	// Without snapshots the producer state comes from the log alone: the
	// producer's last (now empty) batch must still be there.
	l.Close()
	snaps, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
	for _, f := range snaps {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	l = openLog(t, dir, compactConfig())
	for _, r := range readRecords(t, l) {
		if r.key == "same" && string(r.value) != "last" {
			t.Fatalf("old value %q at %d", r.value, r.offset)
		}
	}
	spec.BaseSequence = 39
	res, err := l.AppendAsLeader([]record.Batch{keyedBatch(t, spec, 1000, kv{"same", []byte(strings.Repeat("v", 60))})}, 1)
	if !errors.Is(err, ErrDuplicateSequence) || res.BaseOffset != 39 {
		t.Fatalf("retry of the last cleaned batch: %v at %d", err, res.BaseOffset)
	}
	spec.BaseSequence = 40
	if _, err := l.AppendAsLeader([]record.Batch{keyedBatch(t, spec, 3000, kv{"same", []byte("again")})}, 1); err != nil {
		t.Fatalf("producer's next sequence after cleaning: %v", err)
	}
}

// A follower copying a cleaned leader log batch by batch (offset gaps
// between and inside batches) ends with the same records.
func TestFollowerAppendsCleanedRange(t *testing.T) {
	leader := openLog(t, t.TempDir(), compactConfig())
	defer leader.Close()
	fillKeyed(t, leader, 0, 1000, 7)
	mustClean(t, leader)
	want := readRecords(t, leader)

	fdir := t.TempDir()
	follower := openLog(t, fdir, compactConfig())
	// The follower had the first batch before the leader cleaned.
	next := int64(0)
	for next < leader.EndOffset() {
		res, err := leader.Read(next, 700, leader.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		bs, err := splitStored(res.Records)
		if err != nil {
			t.Fatal(err)
		}
		cp := make([]record.Batch, len(bs))
		for i, b := range bs {
			cp[i] = append(record.Batch(nil), b...)
		}
		if _, err := follower.AppendAsFollower(cp); err != nil {
			t.Fatalf("follower append at %d (log end %d): %v", bs[0].BaseOffset(), follower.EndOffset(), err)
		}
		next = follower.EndOffset()
	}
	if got := readRecords(t, follower); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("follower records differ:\n got %v\nwant %v", got, want)
	}
	follower.Close()
	follower = openLog(t, fdir, compactConfig())
	defer follower.Close()
	if got := readRecords(t, follower); fmt.Sprint(got) != fmt.Sprint(want) || follower.EndOffset() != leader.EndOffset() {
		t.Fatal("follower records differ after reopening")
	}
}

// A crash at each step of a clean leaves a log that opens and holds every
// latest value (either the old segments or the cleaned ones, never both or
// neither), and cleans again.
func TestCleanCrashRecovery(t *testing.T) {
	for _, step := range []string{"cleaned", "committed", "swap", "removed"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, compactConfig())
			fillKeyed(t, l, 0, 600, 10)
			before := readRecords(t, l)
			want := latestByKey(before)
			crash := errors.New("crash")
			l.testCleanHook = func(s string) error {
				if s == step {
					return crash
				}
				return nil
			}
			if _, err := l.Clean(context.Background(), CleanOptions{Limit: math.MaxInt64, Force: true}); !errors.Is(err, crash) {
				t.Fatalf("clean: %v", err)
			}
			l.shutdown(false) // no clean-shutdown marker: as after a crash
			l = openLog(t, dir, compactConfig())
			defer func() { l.Close() }()
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) || e.Name() == cleanerSwapFile {
					t.Fatalf("left over after recovery: %s", e.Name())
				}
			}
			got := readRecords(t, l)
			if g := latestByKey(got); fmt.Sprint(g) != fmt.Sprint(want) {
				t.Fatalf("latest values after recovery:\n got %v\nwant %v", g, want)
			}
			rolledBack := step == "cleaned"
			if rolledBack && len(got) != len(before) {
				t.Fatalf("rolled back clean: %d records, want %d", len(got), len(before))
			}
			if !rolledBack && len(got) >= len(before) {
				t.Fatalf("committed clean: %d records, %d before", len(got), len(before))
			}
			if l.EndOffset() != 600 {
				t.Fatalf("log end %d", l.EndOffset())
			}
			mustClean(t, l)
			if g := latestByKey(readRecords(t, l)); fmt.Sprint(g) != fmt.Sprint(want) {
				t.Fatal("latest values after cleaning again")
			}
		})
	}
}

func TestCompactOnlyLogIgnoresRetention(t *testing.T) {
	c := newClock()
	cfg := compactConfig()
	cfg.RetentionMs, cfg.RetentionBytes = time.Millisecond, 1
	l := openLog(t, t.TempDir(), cfg, WithClock(c.now))
	defer l.Close()
	fillKeyed(t, l, 0, 300, 10)
	c.advance(time.Hour)
	if n, err := l.ApplyRetention(); n != 0 || err != nil {
		t.Fatalf("compact-only retention deleted %d segments: %v", n, err)
	}
	cfg.Delete = true // compact,delete
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(); n == 0 || err != nil {
		t.Fatalf("compact,delete retention deleted %d segments: %v", n, err)
	}
}

// BenchmarkClean1MRecords1000Keys is issue 17's figure: 1,000,000 keyed
// records over 1,000 keys in small (64 KiB) segments, cleaned once; a
// reader from offset 0 then reads at most the 1,000 latest records plus
// the active segment. Run with -bench Clean1M -benchtime 1x.
func BenchmarkClean1MRecords1000Keys(b *testing.B) {
	for range b.N {
		b.StopTimer()
		cfg := compactConfig()
		cfg.SegmentBytes = 64 << 10
		l := openLog(b, b.TempDir(), cfg)
		const total, keys, perBatch = 1_000_000, 1000, 100
		for i := 0; i < total; i += perBatch {
			kvs := make([]kv, perBatch)
			for j := range kvs {
				k := fmt.Sprintf("key-%04d", (i+j)%keys)
				kvs[j] = kv{k, []byte(fmt.Sprintf("%s=%07d", k, i+j))}
			}
			mustAppend(b, l, keyedBatch(b, record.DefaultSpec(), int64(i), kvs...))
		}
		before, segs := l.Size(), len(l.segs)
		b.StartTimer()
		start := time.Now()
		st := mustClean(b, l)
		elapsed := time.Since(start)
		b.StopTimer()
		recs := readRecords(b, l)
		latest := latestByKey(recs)
		if len(latest) != keys || string(latest["key-0999"].value) != "key-0999=0999999" {
			b.Fatalf("latest values wrong after cleaning: %d keys", len(latest))
		}
		b.ReportMetric(float64(len(recs)), "records-after")
		b.ReportMetric(float64(st.BytesRead)/elapsed.Seconds()/1e6, "MB-read/s")
		b.Logf("1,000,000 records over 1,000 keys: %d bytes in %d segments -> %d bytes in %d segments; a reader from 0 gets %d records; clean took %v (read %d, wrote %d bytes)",
			before, segs, l.Size(), len(l.segs), len(recs), elapsed, st.BytesRead, st.BytesWritten)
		l.Close()
	}
}

// The IO throttle is consulted for the bytes a clean reads: with a
// limiter whose bucket is empty and a context that has ended, Clean stops
// before rewriting anything.
func TestCleanThrottled(t *testing.T) {
	l := openLog(t, t.TempDir(), compactConfig())
	defer l.Close()
	fillKeyed(t, l, 0, 600, 10)
	before := readRecords(t, l)
	lim := rate.NewLimiter(1, 1024)
	lim.AllowN(time.Now(), 1024) // empty the bucket
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := l.Clean(ctx, CleanOptions{Limit: math.MaxInt64, Force: true, Limiter: lim})
	if !errors.Is(err, context.Canceled) || st.Cleaned {
		t.Fatalf("throttled clean with an ended context: %+v %v", st, err)
	}
	if got := readRecords(t, l); len(got) != len(before) {
		t.Fatalf("%d records after a stopped clean, %d before", len(got), len(before))
	}
	st, err = l.Clean(context.Background(), CleanOptions{Limit: math.MaxInt64, Force: true, Limiter: rate.NewLimiter(rate.Inf, 1)})
	if err != nil || !st.Cleaned {
		t.Fatalf("unthrottled clean: %+v %v", st, err)
	}
}

// A small key map cleans the dirty segments over several rounds, each
// going on where the previous one stopped, to the same result.
func TestCleanSmallMapInRounds(t *testing.T) {
	l := openLog(t, t.TempDir(), compactConfig())
	defer l.Close()
	fillKeyed(t, l, 0, 3000, 200)
	want := latestByKey(readRecords(t, l))
	rounds := 0
	for {
		st, err := l.Clean(context.Background(), CleanOptions{Limit: math.MaxInt64, MaxMapEntries: 50})
		if err != nil {
			t.Fatal(err)
		}
		if !st.Cleaned {
			break
		}
		rounds++
		if rounds > 100 {
			t.Fatal("cleaning does not converge")
		}
	}
	if rounds < 2 {
		t.Fatalf("%d rounds with a 50-key map over 200 keys", rounds)
	}
	if g := latestByKey(readRecords(t, l)); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatal("latest values changed")
	}
}

// Offsets the cleaner reached that a truncation removed are dirty again
// when they are written anew: their records are deduplicated by the next
// clean.
func TestCleanAfterTruncation(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, compactConfig())
	defer func() { l.Close() }()
	fillKeyed(t, l, 0, 600, 10)
	mustClean(t, l)
	if err := l.TruncateTo(100); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, compactConfig())
	fillKeyed(t, l, 100, 600, 10)
	want := latestByKey(readRecords(t, l))
	activeBase := l.segs[len(l.segs)-1].base
	mustClean(t, l)
	seen := map[string]bool{}
	for _, r := range readRecords(t, l) {
		if r.offset < activeBase && seen[r.key] {
			t.Fatalf("key %s twice below the active segment after cleaning rewritten offsets (offset %d)", r.key, r.offset)
		}
		seen[r.key] = r.offset < activeBase
	}
	if g := latestByKey(readRecords(t, l)); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatal("latest values changed")
	}
}

// TestCleanHoldsNoBatchRecords: the cleaner walks a batch's keys, not its
// records (issue 26 item 1: it decoded every stored batch whole, so a
// zstd batch of a few KiB holding a million tiny records cost it a
// []record.Record of ~100 MiB per pass). A batch of 1,000,000 records of
// one key, all superseded by a later record, is dropped while the clean
// allocates a fraction of what the records would take.
func TestCleanHoldsNoBatchRecords(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	const n = 1_000_000
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("a"), Value: []byte{}}
	}
	spec := record.DefaultSpec()
	spec.Codec = record.Zstd
	big, err := record.Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	recs = nil
	mustAppend(t, l, big)
	for i := range 3 { // each in its own segment, the last one active
		mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), int64(i), kv{"a", bytes.Repeat([]byte{'v'}, 600<<10)}))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	st := mustClean(t, l)
	runtime.ReadMemStats(&after)
	if st.RecordsRead < n {
		t.Fatalf("the clean read %d records, want the batch's %d and more", st.RecordsRead, n)
	}
	const recordSize = int(unsafe.Sizeof(record.Record{}))
	if got, most := after.TotalAlloc-before.TotalAlloc, uint64(n*recordSize/2); got > most {
		t.Errorf("cleaning a batch of %d records allocated %d MiB, want at most %d MiB (the records alone take %d MiB)", n, got>>20, most>>20, n*recordSize>>20)
	}
	t.Logf("cleaning a batch of %d records allocated %d MiB", n, (after.TotalAlloc-before.TotalAlloc)>>20)
	got := readRecords(t, l)
	if len(got) == 0 || len(got) > 3 || got[0].offset < n {
		t.Errorf("after the clean: %d records from offset %d, want the big batch's dropped", len(got), got[0].offset)
	}
}

// A follower that receives a whole history in one append (a catch-up
// fetch, or one WAL object) rolls its segments at segment.bytes as the
// leader did, so the history is cleanable: with one roll check per append
// it went into one active segment of any size, which the cleaner never
// cleans (TestWALCompactedTopicReplicas' follower kept 3,000 uncleaned
// records that way).
func TestFollowerBulkAppendRollsSegments(t *testing.T) {
	leader := openLog(t, t.TempDir(), compactConfig())
	defer leader.Close()
	fillKeyed(t, leader, 0, 1000, 7)
	var cp []record.Batch // the whole log, for one append
	for next := int64(0); next < leader.EndOffset(); {
		res, err := leader.Read(next, 1<<20, leader.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		bs, err := splitStored(res.Records)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			cp = append(cp, append(record.Batch(nil), b...))
		}
		next = bs[len(bs)-1].LastOffset() + 1
	}

	follower := openLog(t, t.TempDir(), compactConfig())
	defer follower.Close()
	ar, err := follower.AppendAsFollower(cp)
	if err != nil {
		t.Fatal(err)
	}
	if ar.BaseOffset != 0 || ar.LastOffset != leader.EndOffset()-1 || follower.EndOffset() != leader.EndOffset() {
		t.Fatalf("append result %+v, log end %d, leader's %d", ar, follower.EndOffset(), leader.EndOffset())
	}
	if len(follower.segs) < len(leader.segs)-1 {
		t.Fatalf("follower has %d segments, the leader %d", len(follower.segs), len(leader.segs))
	}
	for _, s := range follower.segs {
		if s.size > compactConfig().SegmentBytes {
			t.Fatalf("segment %d holds %d bytes, segment.bytes is %d", s.base, s.size, compactConfig().SegmentBytes)
		}
	}
	if r, due := follower.DirtyRatio(math.MaxInt64); !due || r == 0 {
		t.Fatalf("follower dirty ratio %v, due %v: want a due log", r, due)
	}
	want := latestByKey(readRecords(t, leader))
	mustClean(t, follower)
	got := readRecords(t, follower)
	if len(got) >= 1000/2 || fmt.Sprint(latestByKey(got)) != fmt.Sprint(want) {
		t.Fatalf("follower kept %d records after cleaning; latest %v, want %v", len(got), latestByKey(got), want)
	}
}
