package log

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/record"
)

func TestAppendReadAcrossRolls(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	var want []int64
	for i := 0; i < 60; i++ {
		res := mustAppend(t, l, batch(t, 3, 100, int64(1000+i)))
		if res.BaseOffset != int64(3*i) || res.LastOffset != int64(3*i+2) || res.LogAppendTime != -1 {
			t.Fatalf("append %d: %+v", i, res)
		}
		want = append(want, res.BaseOffset)
	}
	if l.EndOffset() != 180 || l.StartOffset() != 0 {
		t.Fatalf("offsets %d..%d", l.StartOffset(), l.EndOffset())
	}
	if n := len(l.segs); n < 5 {
		t.Fatalf("only %d segments; rolls did not happen", n)
	}
	for _, s := range l.segs {
		if s.size > testConfig().SegmentBytes {
			t.Fatalf("segment %d has %d bytes", s.base, s.size)
		}
	}
	check := func(l *Log) {
		hs := readAll(t, l)
		if len(hs) != len(want) {
			t.Fatalf("read %d batches, want %d", len(hs), len(want))
		}
		for i, h := range hs {
			if h.BaseOffset != want[i] || h.PartitionLeaderEpoch != 1 || h.MaxTimestamp != int64(1000+i+2) {
				t.Fatalf("batch %d: %+v", i, h)
			}
		}
		// Every offset, including ones inside batches, starts the read at its batch.
		for off := int64(0); off < 180; off++ {
			res, err := l.Read(off, 1, 180)
			if err != nil {
				t.Fatal(err)
			}
			h := record.Batch(res.Records).Header()
			if h.BaseOffset != off/3*3 || len(res.Records) != h.Size() {
				t.Fatalf("read %d got batch at %d (%d bytes)", off, h.BaseOffset, len(res.Records))
			}
		}
	}
	check(l)
	size := l.Size()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, testConfig())
	defer l.Close()
	if l.EndOffset() != 180 || l.Size() != size {
		t.Fatalf("after reopen: end %d size %d, want 180 %d", l.EndOffset(), l.Size(), size)
	}
	check(l)
	// Appends continue after the reopen.
	if res := mustAppend(t, l, batch(t, 2, 10, 5000)); res.BaseOffset != 180 {
		t.Fatalf("append after reopen: %+v", res)
	}
}

func TestReadSemantics(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	defer l.Close()
	var sizes []int
	for i := 0; i < 5; i++ {
		b := batch(t, 2, 50, 100)
		sizes = append(sizes, len(b))
		mustAppend(t, l, b) // offsets 0-1, 2-3, 4-5, 6-7, 8-9 (one segment)
	}
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int
		maxOffset int64
		wantBase  []int64
		wantErr   error
	}{
		{"one batch fits", 0, sizes[0], 10, []int64{0}, nil},
		{"maxBytes below one batch still returns it", 0, 1, 10, []int64{0}, nil},
		{"zero maxBytes still returns one batch", 4, 0, 10, []int64{4}, nil},
		{"two and a half batches", 2, sizes[0]*2 + sizes[0]/2, 10, []int64{2, 4}, nil},
		{"all", 0, 1 << 20, 10, []int64{0, 2, 4, 6, 8}, nil},
		{"mid batch offset starts at its batch", 5, 1 << 20, 10, []int64{4, 6, 8}, nil},
		{"maxOffset excludes batches at or above it", 0, 1 << 20, 6, []int64{0, 2, 4}, nil},
		{"maxOffset inside a batch keeps it", 0, 1 << 20, 5, []int64{0, 2, 4}, nil},
		{"maxOffset at offset is empty", 4, 1 << 20, 4, nil, nil},
		{"log end is empty", 10, 1 << 20, 10, nil, nil},
		{"above log end", 11, 1 << 20, 11, nil, ErrOffsetOutOfRange},
		{"negative", -1, 1 << 20, 10, nil, ErrOffsetOutOfRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := l.Read(tc.offset, tc.maxBytes, tc.maxOffset)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			bs, err := splitStored(res.Records)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, b := range bs {
				got = append(got, b.Header().BaseOffset)
			}
			if len(got) != len(tc.wantBase) {
				t.Fatalf("got bases %v, want %v", got, tc.wantBase)
			}
			for i := range got {
				if got[i] != tc.wantBase[i] {
					t.Fatalf("got bases %v, want %v", got, tc.wantBase)
				}
			}
			wantHighest := int64(-1)
			if len(bs) > 0 {
				wantHighest = bs[len(bs)-1].LastOffset()
			}
			if res.HighestOffset != wantHighest {
				t.Fatalf("HighestOffset %d, want %d", res.HighestOffset, wantHighest)
			}
		})
	}
}

func TestReadBelowStartAfterDeleteRecords(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	for i := 0; i < 40; i++ {
		mustAppend(t, l, batch(t, 2, 100, 10))
	}
	segsBefore := len(l.segs)
	if err := l.DeleteRecordsBefore(41); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 41 {
		t.Fatalf("start %d", l.StartOffset())
	}
	if len(l.segs) >= segsBefore {
		t.Fatalf("no segment deleted: %d -> %d", segsBefore, len(l.segs))
	}
	if _, err := l.Read(40, 100, 80); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	res, err := l.Read(41, 100, 80)
	if err != nil || record.Batch(res.Records).Header().BaseOffset != 40 {
		t.Fatalf("read at start: %v", err)
	}
	if err := l.DeleteRecordsBefore(81); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond end: %v", err)
	}
	if err := l.DeleteRecordsBefore(10); err != nil || l.StartOffset() != 41 {
		t.Fatalf("moving back must be a no-op: %v %d", err, l.StartOffset())
	}
	l.Close()
	l = openLog(t, dir, testConfig())
	defer l.Close()
	if l.StartOffset() != 41 {
		t.Fatalf("start after reopen %d", l.StartOffset())
	}
}

func TestLogAppendTime(t *testing.T) {
	c := newClock()
	cfg := testConfig()
	cfg.MessageTimestampType = "LogAppendTime"
	l := openLog(t, t.TempDir(), cfg, WithClock(c.now))
	defer l.Close()
	res := mustAppend(t, l, batch(t, 3, 10, 5))
	if res.LogAppendTime != c.now().UnixMilli() {
		t.Fatalf("LogAppendTime %d", res.LogAppendTime)
	}
	r, err := l.Read(0, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.CheckFrame(r.Records); err != nil {
		t.Fatalf("stored batch must carry a fresh CRC: %v", err)
	}
	h := record.Batch(r.Records).Header()
	if h.TimestampType() != record.TimestampLogAppendTime || h.MaxTimestamp != res.LogAppendTime {
		t.Fatalf("%+v", h)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	// Batch i holds records with timestamps 1000+10i .. 1000+10i+2 at offsets 3i..3i+2.
	for i := 0; i < 50; i++ {
		mustAppend(t, l, batch(t, 3, 80, int64(1000+10*i)))
	}
	tests := []struct {
		ts      int64
		off, at int64
		ok      bool
	}{
		{0, 0, 1000, true},
		{1000, 0, 1000, true},
		{1001, 1, 1001, true},
		{1003, 3, 1010, true},
		{1252, 77, 1252, true},
		{1490, 147, 1490, true},
		{1492, 149, 1492, true},
		{1493, 0, 0, false},
	}
	check := func(l *Log) {
		for _, tc := range tests {
			off, at, ok := l.OffsetForTimestamp(tc.ts)
			if ok != tc.ok || (ok && (off != tc.off || at != tc.at)) {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", tc.ts, off, at, ok, tc.off, tc.at, tc.ok)
			}
		}
		if off, ts := l.MaxTimestampOffset(); off != 149 || ts != 1492 {
			t.Fatalf("MaxTimestampOffset = %d, %d", off, ts)
		}
	}
	check(l)
	l.Close()
	l = openLog(t, dir, testConfig())
	defer l.Close()
	check(l)
	// Below the log start, the start wins.
	if err := l.DeleteRecordsBefore(100); err != nil {
		t.Fatal(err)
	}
	if off, _, ok := l.OffsetForTimestamp(0); !ok || off != 100 {
		t.Fatalf("after DeleteRecords: %d %v", off, ok)
	}
}

func TestRetentionByTime(t *testing.T) {
	c := newClock()
	cfg := testConfig()
	cfg.RetentionMs = time.Hour
	dir := t.TempDir()
	l := openLog(t, dir, cfg, WithClock(c.now))
	defer l.Close()
	base := c.now().UnixMilli()
	for i := 0; i < 30; i++ { // old data
		mustAppend(t, l, batch(t, 2, 100, base))
	}
	oldEnd := l.EndOffset()
	c.advance(50 * time.Minute)
	for i := 0; i < 30; i++ { // newer data
		mustAppend(t, l, batch(t, 2, 100, c.now().UnixMilli()))
	}
	if n, err := l.ApplyRetention(); err != nil || n != 0 {
		t.Fatalf("nothing is an hour old yet: %d %v", n, err)
	}
	c.advance(20 * time.Minute)
	n, err := l.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	// Exactly the old segments went: the start is the base of the first
	// segment holding new data, at or below the first new offset.
	if s := l.StartOffset(); s > oldEnd || s < oldEnd-10 {
		t.Fatalf("start %d, old data ended at %d", s, oldEnd)
	}
	for _, s := range l.segs {
		if s.maxTs < base+50*60*1000 {
			t.Fatalf("segment %d with max ts %d survived", s.base, s.maxTs)
		}
	}
	// Everything expires: the active segment is rolled and removed too.
	c.advance(2 * time.Hour)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != l.EndOffset() || len(l.segs) != 1 || l.Size() != 0 {
		t.Fatalf("start %d end %d segs %d size %d", l.StartOffset(), l.EndOffset(), len(l.segs), l.Size())
	}
	if res := mustAppend(t, l, batch(t, 1, 1, c.now().UnixMilli())); res.BaseOffset != 60*2 {
		t.Fatalf("append after full expiry: %+v", res)
	}
}

func TestRollBySegmentMs(t *testing.T) {
	c := newClock()
	cfg := testConfig()
	cfg.SegmentMs = time.Minute
	l := openLog(t, t.TempDir(), cfg, WithClock(c.now))
	defer l.Close()
	now := func() int64 { return c.now().UnixMilli() }
	mustAppend(t, l, batch(t, 1, 10, now()))
	c.advance(30 * time.Second)
	mustAppend(t, l, batch(t, 1, 10, now()))
	if len(l.segs) != 1 {
		t.Fatalf("rolled too early: %d segments", len(l.segs))
	}
	c.advance(31 * time.Second) // the first batch is now a minute old
	mustAppend(t, l, batch(t, 1, 10, now()))
	if len(l.segs) != 2 || l.active().base != 2 {
		t.Fatalf("want a roll at offset 2: %d segments", len(l.segs))
	}
}

func TestRetentionBySize(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 10_000
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	defer l.Close()
	for i := 0; i < 100; i++ {
		mustAppend(t, l, batch(t, 2, 100, 1))
	}
	before := l.Size()
	n, err := l.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("%d %v", n, err)
	}
	// Kafka's rule: delete the oldest segment while the rest still holds
	// at least retention.bytes.
	if l.Size() < cfg.RetentionBytes || l.Size()-l.segs[0].size >= cfg.RetentionBytes {
		t.Fatalf("size %d -> %d, retention %d", before, l.Size(), cfg.RetentionBytes)
	}
	if l.StartOffset() != l.segs[0].base {
		t.Fatalf("start %d, first segment %d", l.StartOffset(), l.segs[0].base)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) != len(l.segs) {
		t.Fatalf("%d .log files for %d segments", len(files), len(l.segs))
	}
	readAll(t, l)
}

func TestTruncateTo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		to      int64
		wantLEO int64
	}{
		{"mid active segment at a batch boundary", 174, 174},
		{"inside a batch removes it whole", 175, 174},
		{"into a sealed segment", 31, 30},
		{"to a segment base", 0, 0},
		{"at end is a no-op", 180, 180},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, testConfig())
			for i := 0; i < 60; i++ {
				mustAppend(t, l, batch(t, 3, 100, int64(1000+i)))
			}
			if err := l.TruncateTo(tc.to); err != nil {
				t.Fatal(err)
			}
			check := func(l *Log) {
				if l.EndOffset() != tc.wantLEO {
					t.Fatalf("LEO %d, want %d", l.EndOffset(), tc.wantLEO)
				}
				hs := readAll(t, l)
				if n := int64(len(hs)) * 3; n != tc.wantLEO {
					t.Fatalf("%d records readable, want %d", n, tc.wantLEO)
				}
				if _, err := l.Read(tc.wantLEO+1, 100, 1000); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("read past new end: %v", err)
				}
				if off, ts := l.MaxTimestampOffset(); tc.wantLEO > 0 && (off != tc.wantLEO-1 || ts != 1000+tc.wantLEO/3-1+2) {
					t.Fatalf("max timestamp %d at %d", ts, off)
				}
			}
			check(l)
			res := mustAppend(t, l, batch(t, 3, 100, 9999))
			if res.BaseOffset != tc.wantLEO {
				t.Fatalf("append after truncate at %d", res.BaseOffset)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, testConfig())
			defer l.Close()
			if l.EndOffset() != tc.wantLEO+3 {
				t.Fatalf("reopen LEO %d", l.EndOffset())
			}
			readAll(t, l)
		})
	}
}

func TestEpochCache(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	appendEpoch := func(epoch int32, n int) {
		for i := 0; i < n; i++ {
			if _, err := l.AppendAsLeader([]record.Batch{batch(t, 2, 10, 1)}, epoch); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendEpoch(1, 5) // 0..9
	appendEpoch(3, 5) // 10..19
	appendEpoch(4, 2) // 20..23
	if _, err := l.AppendAsLeader([]record.Batch{batch(t, 1, 1, 1)}, 2); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("older epoch append: %v", err)
	}
	type q struct {
		req       int32
		wantEpoch int32
		wantEnd   int64
	}
	cases := []q{{4, 4, 24}, {3, 3, 20}, {2, 1, 10}, {1, 1, 10}, {0, 0, 0}, {5, -1, -1}, {-1, -1, -1}}
	check := func(l *Log, cases []q) {
		t.Helper()
		for _, c := range cases {
			e, off := l.EndOffsetForEpoch(c.req)
			if e != c.wantEpoch || off != c.wantEnd {
				t.Fatalf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", c.req, e, off, c.wantEpoch, c.wantEnd)
			}
		}
	}
	check(l, cases)
	if l.LatestEpoch() != 4 {
		t.Fatal(l.LatestEpoch())
	}
	l.Close()
	l = openLog(t, dir, testConfig())
	check(l, cases)
	// Truncation drops epoch 4 and part of 3.
	if err := l.TruncateTo(14); err != nil {
		t.Fatal(err)
	}
	check(l, []q{{3, 3, 14}, {4, -1, -1}, {2, 1, 10}})
	// Follower appends carry their epochs.
	res, err := l.Read(0, 100, 2) // any batch to copy
	if err != nil {
		t.Fatal(err)
	}
	b := append(record.Batch(nil), res.Records...)
	record.SetBaseOffset(b, 14)
	record.SetPartitionLeaderEpoch(b, 7)
	if _, err := l.AppendAsFollower([]record.Batch{b}); err != nil {
		t.Fatal(err)
	}
	check(l, []q{{7, 7, 16}, {3, 3, 14}, {5, 3, 14}})
	record.SetBaseOffset(b, 15)
	if _, err := l.AppendAsFollower([]record.Batch{b}); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("overlap: %v", err)
	}
	l.Close()
	data, err := os.ReadFile(filepath.Join(dir, epochCheckpointFile))
	if err != nil || string(data) != "0\n3\n1 0\n3 10\n7 14\n" {
		t.Fatalf("checkpoint %q %v", data, err)
	}
}

func TestConcurrentAppendRead(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 16 << 10
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	const writers, perWriter = 4, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readErr error
	var readers sync.WaitGroup
	for r := 0; r < 3; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				end := l.EndOffset()
				for off := l.StartOffset(); off < end; {
					res, err := l.Read(off, 4096, end)
					if err == nil && len(res.Records) == 0 {
						err = errors.New("empty read below end")
					}
					if err == nil {
						_, err = splitStored(res.Records)
					}
					if err != nil {
						readErr = err
						return
					}
					off = res.HighestOffset + 1
				}
			}
		}()
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, err := l.AppendAsLeader([]record.Batch{batch(t, 2, 64, 1)}, 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	if l.EndOffset() != writers*perWriter*2 {
		t.Fatalf("LEO %d", l.EndOffset())
	}
	hs := readAll(t, l)
	if len(hs) != writers*perWriter {
		t.Fatalf("%d batches", len(hs))
	}
}

func TestWaitWakesOnAppend(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	w := l.Wait()
	select {
	case <-w:
		t.Fatal("closed before any append")
	default:
	}
	mustAppend(t, l, batch(t, 1, 1, 1))
	select {
	case <-w:
	default:
		t.Fatal("append did not close the wait channel")
	}
	w = l.Wait()
	l.Close()
	select {
	case <-w:
	default:
		t.Fatal("Close did not close the wait channel")
	}
	if _, err := l.AppendAsLeader([]record.Batch{batch(t, 1, 1, 1)}, 0); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

func TestPeriodicFlush(t *testing.T) {
	cfg := testConfig()
	cfg.FlushInterval = time.Millisecond
	l := openLog(t, t.TempDir(), cfg)
	dirty := func() bool { l.mu.RLock(); defer l.mu.RUnlock(); return l.dirty }
	for round := 0; round < 3; round++ {
		mustAppend(t, l, batch(t, 2, 10, 1))
		deadline := time.Now().Add(10 * time.Second)
		for dirty() {
			if time.Now().After(deadline) {
				t.Fatal("the flusher did not fsync within 10s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Switching the policy off stops timer flushes.
	off := cfg
	off.FlushInterval = -1
	if err := l.SetConfig(off); err != nil {
		t.Fatal(err)
	}
	// Close while the flusher may be mid-tick must not deadlock.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTimedFlushNeedsNoGoroutine: the flush timer costs an idle or clean
// log nothing (no goroutine, no armed timer), is armed by the append that
// makes the log dirty and disarmed by an fsync that makes it clean, and a
// new interval re-arms a dirty log. Session 29 counted 3,600 goroutines of
// 4,004 in a three-broker process at 1,200 partitions, one flusher per
// log, each with its own ticker.
func TestTimedFlushNeedsNoGoroutine(t *testing.T) {
	cfg := testConfig()
	cfg.FlushInterval = time.Hour
	before := runtime.NumGoroutine()
	var logs []*Log
	for i := 0; i < 50; i++ {
		logs = append(logs, openLog(t, t.TempDir(), cfg))
	}
	if n := runtime.NumGoroutine() - before; n > 5 {
		t.Fatalf("50 open logs added %d goroutines", n)
	}
	l := logs[0]
	armed := func() bool { l.mu.RLock(); defer l.mu.RUnlock(); return l.flushTimer != nil }
	if armed() {
		t.Fatal("a clean log has its flush timer armed")
	}
	mustAppend(t, l, batch(t, 2, 10, 1))
	if !armed() {
		t.Fatal("a dirty log has no flush timer")
	}
	if err := l.FlushTo(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if armed() {
		t.Fatal("the flush timer is still armed after an fsync made the log clean")
	}
	// A shorter interval applies to a log that is dirty already.
	mustAppend(t, l, batch(t, 2, 10, 1))
	short := cfg
	short.FlushInterval = time.Millisecond
	if err := l.SetConfig(short); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.RLock()
		dirty := l.dirty
		l.mu.RUnlock()
		if !dirty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the re-armed timer did not fsync within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFlushOnEveryAppendAndMessages(t *testing.T) {
	for _, tc := range []struct {
		name       string
		interval   time.Duration
		messages   int64
		dirtyAfter []bool // after each append of 2 records
	}{
		{"every append", 0, 0, []bool{false, false, false}},
		{"every 4 messages", -1, 4, []bool{true, false, true}},
		{"never", -1, 0, []bool{true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.FlushInterval, cfg.FlushMessages = tc.interval, tc.messages
			l := openLog(t, t.TempDir(), cfg)
			defer l.Close()
			for i, want := range tc.dirtyAfter {
				mustAppend(t, l, batch(t, 2, 10, 1))
				l.mu.RLock()
				got := l.dirty
				l.mu.RUnlock()
				if got != want {
					t.Fatalf("after append %d dirty=%v, want %v", i, got, want)
				}
			}
		})
	}
}

func TestRetentionStopsAtLimit(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionBytes = 0 // everything but the active segment may go
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 60; i++ {
		mustAppend(t, l, batch(t, 3, 100, 1))
	}
	limit := l.segs[3].base + 1 // inside segment 3: segments 0..2 are entirely below
	n, err := l.ApplyRetentionUpTo(limit)
	if err != nil || n != 3 {
		t.Fatalf("deleted %d (%v), want 3", n, err)
	}
	if l.StartOffset() >= limit {
		t.Fatalf("start %d reached the limit %d", l.StartOffset(), limit)
	}
	if n, err := l.ApplyRetentionUpTo(l.EndOffset()); err != nil || len(l.segs) != 1 || n == 0 {
		t.Fatalf("deleted %d (%v), %d segments left", n, err, len(l.segs))
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	for i := 0; i < 30; i++ {
		mustAppend(t, l, batch(t, 2, 100, 1))
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 1000 || l.EndOffset() != 1000 || l.Size() != 0 || l.LatestEpoch() != -1 {
		t.Fatalf("start %d end %d size %d epoch %d", l.StartOffset(), l.EndOffset(), l.Size(), l.LatestEpoch())
	}
	if _, err := l.Read(999, 100, 2000); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	b := batch(t, 2, 10, 1)
	record.SetBaseOffset(b, 1000)
	record.SetPartitionLeaderEpoch(b, 4)
	if _, err := l.AppendAsFollower([]record.Batch{b}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, testConfig())
	defer l.Close()
	if l.StartOffset() != 1000 || l.EndOffset() != 1002 || len(readAll(t, l)) != 1 {
		t.Fatalf("after reopen: start %d end %d", l.StartOffset(), l.EndOffset())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) != 1 {
		t.Fatalf("old segments left: %v", files)
	}
}
