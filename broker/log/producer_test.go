package log

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/record"
)

func pbatch(t testing.TB, pid int64, epoch int16, seq int32, n int) record.Batch {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v")}
	}
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
	spec.BaseTimestamp = 1
	b, err := record.Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type pstep struct {
	name       string
	pid        int64
	epoch      int16
	seq        int32
	n          int
	wantErr    error
	wantOffset int64 // base offset of the append, or of the original for a duplicate
}

func runSteps(t *testing.T, l *Log, steps []pstep) {
	t.Helper()
	for _, s := range steps {
		res, err := l.AppendAsLeader([]record.Batch{pbatch(t, s.pid, s.epoch, s.seq, s.n)}, 1)
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: err %v, want %v", s.name, err, s.wantErr)
		}
		if (err == nil || errors.Is(err, ErrDuplicateSequence)) && res.BaseOffset != s.wantOffset {
			t.Fatalf("%s: base offset %d, want %d", s.name, res.BaseOffset, s.wantOffset)
		}
		if errors.Is(err, ErrDuplicateSequence) && res.LastOffset != s.wantOffset+int64(s.n)-1 {
			t.Fatalf("%s: duplicate's last offset %d", s.name, res.LastOffset)
		}
	}
}

func TestIdempotentProducer(t *testing.T) {
	steps := []pstep{
		{"first batch", 1, 0, 0, 3, nil, 0},
		{"retry of it is a duplicate", 1, 0, 0, 3, ErrDuplicateSequence, 0},
		{"next in sequence", 1, 0, 3, 2, nil, 3},
		{"gap", 1, 0, 10, 1, ErrOutOfOrderSequence, 0},
		{"overlapping but not identical", 1, 0, 4, 2, ErrOutOfOrderSequence, 0},
		{"another producer is independent", 2, 5, 0, 1, nil, 5},
		{"unknown producer may start anywhere", 3, 0, 7, 1, nil, 6},
		{"seq 5..9", 1, 0, 5, 5, nil, 7},
		{"seq 10", 1, 0, 10, 1, nil, 12},
		{"seq 11", 1, 0, 11, 1, nil, 13},
		{"seq 12", 1, 0, 12, 1, nil, 14},
		{"seq 13", 1, 0, 13, 1, nil, 15},
		{"duplicate among the last five", 1, 0, 5, 5, ErrDuplicateSequence, 7},
		{"duplicate older than the last five is out of order", 1, 0, 3, 2, ErrOutOfOrderSequence, 0},
		{"new epoch must start at 0", 1, 1, 14, 1, ErrOutOfOrderSequence, 0},
		{"new epoch at 0", 1, 1, 0, 2, nil, 16},
		{"old epoch is fenced", 1, 0, 14, 1, ErrInvalidProducerEpoch, 0},
		{"retry of the old epoch's batch is fenced too", 1, 0, 13, 1, ErrInvalidProducerEpoch, 0},
		{"sequence wraps at MaxInt32", 4, 0, math.MaxInt32 - 1, 2, nil, 18},
		{"after the wrap", 4, 0, 0, 1, nil, 20},
	}
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	runSteps(t, l, steps)
	// Non-idempotent batches are never checked.
	mustAppend(t, l, batch(t, 1, 1, 1))
	mustAppend(t, l, batch(t, 1, 1, 1))

	after := []pstep{
		{"duplicate after reopen", 1, 1, 0, 2, ErrDuplicateSequence, 16},
		{"in sequence after reopen", 1, 1, 2, 1, nil, 23},
		{"gap after reopen", 4, 0, 5, 1, ErrOutOfOrderSequence, 0},
	}
	for _, reopen := range []struct {
		name   string
		before func(t *testing.T)
	}{
		{"clean", func(t *testing.T) {}},
		{"crash", func(t *testing.T) { os.Remove(filepath.Join(dir, cleanShutdownFile)) }},
		{"snapshots lost", func(t *testing.T) {
			offs, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
			for _, f := range offs {
				os.Remove(f)
			}
		}},
		{"snapshot corrupt", func(t *testing.T) {
			offs, _ := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
			for _, f := range offs {
				os.WriteFile(f, []byte(`{"id":1,"epoch":0,"batches":[]}`+"\ncrc 00000000\n"), 0o644)
			}
		}},
	} {
		t.Run(reopen.name, func(t *testing.T) {
			end := l.EndOffset()
			if err := l.TruncateTo(23); err != nil { // undo the previous subtest's append
				t.Fatal(err)
			}
			if end > 23 && l.EndOffset() != 23 {
				t.Fatalf("truncate: %d", l.EndOffset())
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			reopen.before(t)
			l = openLog(t, dir, testConfig())
			runSteps(t, l, after)
		})
	}
	defer l.Close()
	if e, seq, _, ok := l.ProducerState(1); !ok || e != 1 || seq != 2 {
		t.Fatalf("state of producer 1: epoch %d seq %d %v", e, seq, ok)
	}
}

func TestProducerStateTruncation(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	defer l.Close()
	runSteps(t, l, []pstep{
		{"a", 1, 0, 0, 2, nil, 0},
		{"b", 1, 0, 2, 2, nil, 2},
		{"c", 1, 0, 4, 2, nil, 4},
	})
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	// The truncated batch is no longer a duplicate: its retry is appended.
	runSteps(t, l, []pstep{
		{"retry of c after truncation", 1, 0, 4, 2, nil, 4},
		{"b is still a duplicate", 1, 0, 2, 2, ErrDuplicateSequence, 2},
	})
	// DeleteRecords past every batch of the producer forgets it.
	if err := l.DeleteRecordsBefore(6); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := l.ProducerState(1); ok {
		t.Fatal("producer below the log start is still known")
	}
	runSteps(t, l, []pstep{{"forgotten producer may continue anywhere", 1, 0, 40, 1, nil, 6}})
}

func TestProducerStateFollower(t *testing.T) {
	leader := openLog(t, t.TempDir(), testConfig())
	defer leader.Close()
	follower := openLog(t, t.TempDir(), testConfig())
	defer follower.Close()
	runSteps(t, leader, []pstep{{"a", 9, 2, 0, 3, nil, 0}, {"b", 9, 2, 3, 1, nil, 3}})
	res, err := leader.Read(0, 1<<20, leader.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	bs, err := splitStored(res.Records)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.AppendAsFollower(bs); err != nil {
		t.Fatal(err)
	}
	// The follower, promoted, recognises the producer's retry.
	runSteps(t, follower, []pstep{
		{"retry on the new leader", 9, 2, 3, 1, ErrDuplicateSequence, 3},
		{"next on the new leader", 9, 2, 4, 1, nil, 4},
	})
}

func TestProducerExpiration(t *testing.T) {
	c := newClock()
	cfg := testConfig()
	cfg.ProducerIDExpiration = time.Hour
	dir := t.TempDir()
	l := openLog(t, dir, cfg, WithClock(c.now))
	runSteps(t, l, []pstep{{"old producer", 1, 0, 0, 1, nil, 0}})
	c.advance(40 * time.Minute)
	runSteps(t, l, []pstep{{"young producer", 2, 0, 0, 1, nil, 1}})
	c.advance(30 * time.Minute)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := l.ProducerState(1); ok {
		t.Fatal("producer idle for 70 minutes survived a 1h expiration")
	}
	if _, _, _, ok := l.ProducerState(2); !ok {
		t.Fatal("producer idle for 30 minutes was expired")
	}
	// Expired producers may start over at any sequence.
	runSteps(t, l, []pstep{{"expired producer is new again", 1, 0, 9, 1, nil, 2}})
	// lastSeen survives a snapshot round trip.
	l.Close()
	l = openLog(t, dir, cfg, WithClock(c.now))
	defer l.Close()
	c.advance(50 * time.Minute)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := l.ProducerState(2); ok {
		t.Fatal("producer 2 (idle 80 minutes) survived the reopen and expiration")
	}
	if _, _, _, ok := l.ProducerState(1); !ok {
		t.Fatal("producer 1 (idle 50 minutes) was expired")
	}
}
