package log

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/strata-dev/strata/broker/record"
)

// faultFS wraps the OS file system and injects failures into writes,
// fsyncs and truncations of files whose name has the given suffix.
type faultFS struct {
	OSFS
	mu sync.Mutex
	// shortWrite: when >= 0, the next matching WriteAt writes only this
	// many bytes and fails with ENOSPC.
	suffix     string
	shortWrite int
	failSync   bool
	failTrunc  bool
}

func newFaultFS() *faultFS { return &faultFS{shortWrite: -1} }

func (f *faultFS) set(fn func(f *faultFS)) { f.mu.Lock(); fn(f); f.mu.Unlock() }

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

type faultFile struct {
	File
	fs   *faultFS
	name string
}

func (f *faultFile) match() bool { return f.fs.suffix != "" && strings.HasSuffix(f.name, f.fs.suffix) }

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	n := -1
	if f.match() && f.fs.shortWrite >= 0 {
		n, f.fs.shortWrite = f.fs.shortWrite, -1
	}
	f.fs.mu.Unlock()
	if n < 0 {
		return f.File.WriteAt(p, off)
	}
	w, err := f.File.WriteAt(p[:min(n, len(p))], off)
	if err != nil {
		return w, err
	}
	return w, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	fail := f.match() && f.fs.failSync
	f.fs.mu.Unlock()
	if fail {
		return &os.PathError{Op: "fsync", Path: f.name, Err: syscall.EIO}
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	fail := f.match() && f.fs.failTrunc
	f.fs.mu.Unlock()
	if fail {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EIO}
	}
	return f.File.Truncate(size)
}

func TestFaultInjection(t *testing.T) {
	tests := []struct {
		name   string
		cfg    func(*Config)
		inject func(*faultFS)
		// failedAfter: appends after the fault (with the fault cleared)
		// fail with ErrLogFailed until the log is reopened.
		failedAfter bool
		// keepsBatch: the failed append's batch is found after reopening
		// (it was written but its fsync failed).
		keepsBatch bool
	}{
		{name: "write fails outright", inject: func(f *faultFS) { f.suffix, f.shortWrite = logSuffix, 0 }},
		{name: "short write", inject: func(f *faultFS) { f.suffix, f.shortWrite = logSuffix, 100 }},
		{name: "short write and the undo truncate fails", inject: func(f *faultFS) {
			f.suffix, f.shortWrite, f.failTrunc = logSuffix, 100, true
		}, failedAfter: true},
		// A failed fsync fails the log: a retry could succeed on pages the
		// kernel dropped (fsyncgate).
		{name: "fsync fails with flush on every append", cfg: func(c *Config) { c.FlushInterval = 0 },
			inject: func(f *faultFS) { f.suffix, f.failSync = logSuffix, true }, keepsBatch: true, failedAfter: true},
		{name: "index write fails while rolling", cfg: func(c *Config) { c.SegmentBytes = 2000 },
			inject: func(f *faultFS) { f.suffix, f.shortWrite = indexSuffix, 3 }, failedAfter: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			ffs := newFaultFS()
			l := openLog(t, dir, cfg, WithFS(ffs))
			for i := 0; i < 10; i++ {
				mustAppend(t, l, batch(t, 2, 100, 1))
			}
			before := l.EndOffset()
			ffs.set(tc.inject)
			var err error
			for i := 0; i < 20 && err == nil; i++ { // until the fault fires (a roll may take several appends)
				before = l.EndOffset()
				_, err = l.AppendAsLeader([]record.Batch{batch(t, 2, 100, 1)}, 1)
			}
			if err == nil {
				t.Fatal("the injected fault did not make an append fail")
			}
			ffs.set(func(f *faultFS) { f.suffix, f.shortWrite, f.failSync, f.failTrunc = "", -1, false, false })
			if tc.keepsBatch {
				if l.EndOffset() != before+2 {
					t.Fatalf("LEO %d, want %d", l.EndOffset(), before+2)
				}
			} else if l.EndOffset() != before {
				t.Fatalf("a failed append moved LEO from %d to %d", before, l.EndOffset())
			}
			// Reads are unaffected.
			if got := len(readAll(t, l)); int64(got*2) != l.EndOffset() {
				t.Fatalf("%d batches readable, LEO %d", got, l.EndOffset())
			}
			_, err = l.AppendAsLeader([]record.Batch{batch(t, 2, 100, 1)}, 1)
			if tc.failedAfter {
				if !errors.Is(err, ErrLogFailed) {
					t.Fatalf("append after an unrecoverable fault: %v, want ErrLogFailed", err)
				}
			} else if err != nil {
				t.Fatalf("append after the fault cleared: %v", err)
			}
			end := l.EndOffset()
			// Simulate a crash (no clean shutdown marker), then recover.
			if err := l.shutdown(false); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, cfg)
			defer l.Close()
			if l.EndOffset() != end {
				t.Fatalf("recovered LEO %d, want %d", l.EndOffset(), end)
			}
			if err := l.Verify(); err != nil {
				t.Fatal(err)
			}
			if got := len(readAll(t, l)); int64(got*2) != end {
				t.Fatalf("%d batches after recovery, LEO %d", got, end)
			}
			mustAppend(t, l, batch(t, 2, 100, 1))
		})
	}
}

func TestCheckpointWriteFailureKeepsStart(t *testing.T) {
	dir := t.TempDir()
	ffs := newFaultFS()
	l := openLog(t, dir, testConfig(), WithFS(ffs))
	defer l.Close()
	for i := 0; i < 40; i++ {
		mustAppend(t, l, batch(t, 2, 100, 1))
	}
	segs := len(l.segs)
	ffs.set(func(f *faultFS) { f.suffix, f.shortWrite = startOffsetFile+checkpointTmpSuffix, 1 })
	if err := l.DeleteRecordsBefore(50); err == nil {
		t.Fatal("DeleteRecordsBefore succeeded without persisting")
	}
	if l.StartOffset() != 0 || len(l.segs) != segs {
		t.Fatalf("start %d, %d segments: a failed DeleteRecords changed the log", l.StartOffset(), len(l.segs))
	}
	if _, err := os.Stat(filepath.Join(dir, startOffsetFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint exists: %v", err)
	}
	if err := l.DeleteRecordsBefore(50); err != nil || l.StartOffset() != 50 {
		t.Fatalf("retry: %v, start %d", err, l.StartOffset())
	}
}

func TestEpochCheckpointWriteFailure(t *testing.T) {
	dir := t.TempDir()
	ffs := newFaultFS()
	l := openLog(t, dir, testConfig(), WithFS(ffs))
	mustAppend(t, l, batch(t, 2, 10, 1)) // epoch 1 at 0
	ffs.set(func(f *faultFS) { f.suffix, f.shortWrite = epochCheckpointFile+checkpointTmpSuffix, 2 })
	if _, err := l.AppendAsLeader([]record.Batch{batch(t, 2, 10, 1)}, 2); err == nil {
		t.Fatal("append of a new epoch succeeded without persisting it")
	}
	if l.EndOffset() != 2 || l.LatestEpoch() != 1 {
		t.Fatalf("failed append changed the log: end %d, epoch %d", l.EndOffset(), l.LatestEpoch())
	}
	if _, err := l.AppendAsLeader([]record.Batch{batch(t, 2, 10, 1)}, 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if e, end := l.EndOffsetForEpoch(1); e != 1 || end != 2 {
		t.Fatalf("epoch 1 ends at %d (%d)", end, e)
	}
	l.Close()
	l = openLog(t, dir, testConfig())
	defer l.Close()
	if got := l.Epochs(); len(got) != 2 || got[1] != (EpochEntry{Epoch: 2, StartOffset: 2}) {
		t.Fatalf("epochs after reopen %v", got)
	}
}
