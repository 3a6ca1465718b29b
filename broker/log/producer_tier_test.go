package log

import (
	"testing"
)

// TestTieredLocalRetentionKeepsProducers: local retention on a tiered log
// moves only the local log start; a producer whose batches are now only in
// the slow tier is still within the log, so its retry is a duplicate (at
// its original offset) and a gap in its sequence is out of order, before
// and after a restart. Only the tier's start (EvictProducersBelow) evicts
// it.
func TestTieredLocalRetentionKeepsProducers(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 200 // about two small batches per segment
	cfg.RemoteStorage = true
	cfg.LocalRetentionBytes = 0 // keep only the active segment locally
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	defer func() { l.Close() }()

	runSteps(t, l, []pstep{
		{"producer 1, seq 0..1", 1, 0, 0, 2, nil, 0},
		{"producer 1, seq 2..3", 1, 0, 2, 2, nil, 2},
	})
	for i := int32(0); i < 8; i++ {
		runSteps(t, l, []pstep{{"producer 2", 2, 0, i, 1, nil, 4 + int64(i)}})
	}
	if n := len(l.Segments()); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}
	// The slow tier holds everything sealed (the limit the broker passes).
	if n, err := l.ApplyLocalRetentionUpTo(l.EndOffset()); err != nil || n == 0 {
		t.Fatalf("local retention deleted %d segments: %v", n, err)
	}
	if start := l.StartOffset(); start <= 4 {
		t.Fatalf("local log start %d, want producer 1's batches (0..3) below it", start)
	}
	check := func(when string) {
		t.Helper()
		if _, seq, last, ok := l.ProducerState(1); !ok || seq != 3 || last != 3 {
			t.Fatalf("%s: producer 1 state seq %d last offset %d known %v, want seq 3 at offset 3", when, seq, last, ok)
		}
		runSteps(t, l, []pstep{
			{when + ": retry of producer 1's last batch", 1, 0, 2, 2, ErrDuplicateSequence, 2},
			{when + ": gap in producer 1's sequence", 1, 0, 9, 1, ErrOutOfOrderSequence, 0},
		})
	}
	check("after local retention")

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	check("after a restart")

	// The tier's retention moved the start past producer 1's last batch.
	l.EvictProducersBelow(4)
	if _, _, _, ok := l.ProducerState(1); ok {
		t.Fatal("producer 1 still known after the tier's start passed its last batch")
	}
	if _, _, _, ok := l.ProducerState(2); !ok {
		t.Fatal("producer 2 evicted though its batches are above the start")
	}
	end := l.EndOffset()
	runSteps(t, l, []pstep{{"evicted producer 1 may start anywhere", 1, 0, 9, 1, nil, end}})
}

// TestLocalRetentionWritesProducerSnapshot: when local retention leaves no
// producer snapshot at or above the local log start (lost in a crash), one
// is written, so a restart after a crash still knows the producers only
// the tier holds.
func TestLocalRetentionWritesProducerSnapshot(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 200
	cfg.RemoteStorage = true
	cfg.LocalRetentionBytes = 0
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	defer func() { l.Close() }()
	runSteps(t, l, []pstep{
		{"producer 1, seq 0..1", 1, 0, 0, 2, nil, 0},
		{"producer 1, seq 2..3", 1, 0, 2, 2, nil, 2},
	})
	for i := int32(0); i < 8; i++ {
		runSteps(t, l, []pstep{{"producer 2", 2, 0, i, 1, nil, 4 + int64(i)}})
	}
	if err := l.removeSnapshots(func(int64) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyLocalRetentionUpTo(l.EndOffset()); err != nil || n == 0 {
		t.Fatalf("local retention deleted %d segments: %v", n, err)
	}
	// A crash: no snapshot at shutdown either.
	if err := l.shutdown(false); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	runSteps(t, l, []pstep{
		{"retry of producer 1's last batch", 1, 0, 2, 2, ErrDuplicateSequence, 2},
		{"gap in producer 1's sequence", 1, 0, 9, 1, ErrOutOfOrderSequence, 0},
	})
}
