package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
)

func testBatch(t *testing.T) record.Batch {
	t.Helper()
	b, err := record.Build(record.DefaultSpec(), []record.Record{{Value: []byte("value")}, {Value: []byte("value")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testLogConfig() log.Config {
	cfg := log.DefaultConfig()
	cfg.FlushInterval = -1 // only FlushTo, rolls and Close fsync
	cfg.SegmentMs = 100 * 365 * 24 * time.Hour
	return cfg
}

// What a log made durable with FlushTo, in a partition directory it
// created, survives a power loss; what it did not is lost.
func TestLogPowerLoss(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "topic-0")
	f, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	l, err := log.Open(dir, testLogConfig(), log.WithFS(f))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.AppendAsLeader([]record.Batch{testBatch(t)}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if d := l.DurableEnd(); d != 0 {
		t.Fatalf("durable end %d before any fsync", d)
	}
	if err := l.FlushTo(l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	acked := l.EndOffset()
	if d := l.DurableEnd(); d != acked {
		t.Fatalf("durable end %d after FlushTo(%d)", d, acked)
	}
	for range 2 { // not flushed: a power loss takes them
		if _, err := l.AppendAsLeader([]record.Batch{testBatch(t)}, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Power loss: the process dies without writing anything more (its
	// Close fails on an I/O error), then the page cache is gone.
	if err := SetFault(root, IOError); err != nil {
		t.Fatal(err)
	}
	waitMode(t, f, IOError)
	_ = l.Close()
	f.Close()
	if err := SetFault(root, None); err != nil {
		t.Fatal(err)
	}
	if err := DropUnsynced(root); err != nil {
		t.Fatal(err)
	}
	l2, err := log.Open(dir, testLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.EndOffset() != acked {
		t.Fatalf("after the power loss the log ends at %d, want the flushed end %d", l2.EndOffset(), acked)
	}
}

// A disk that fills up fails appends with ENOSPC and leaves the log as it
// was; a failed fsync fails the log for good (until reopened) and tells
// WithOnFailure.
func TestLogDiskFaults(t *testing.T) {
	for _, tc := range []struct {
		mode  Mode
		errno syscall.Errno
	}{{NoSpace, syscall.ENOSPC}, {IOError, syscall.EIO}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			root := t.TempDir()
			f, err := New(root)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			failures := make(chan error, 16)
			l, err := log.Open(filepath.Join(root, "topic-0"), testLogConfig(), log.WithFS(f), log.WithOnFailure(func(err error) { failures <- err }))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if _, err := l.AppendAsLeader([]record.Batch{testBatch(t)}, 1); err != nil {
				t.Fatal(err)
			}
			if err := SetFault(root, tc.mode); err != nil {
				t.Fatal(err)
			}
			waitMode(t, f, tc.mode)
			end := l.EndOffset()
			if _, err := l.AppendAsLeader([]record.Batch{testBatch(t)}, 1); !errors.Is(err, tc.errno) {
				t.Fatalf("append on a faulty disk: %v, want %v", err, tc.errno)
			}
			if l.EndOffset() != end {
				t.Fatalf("a failed append moved the log end from %d to %d", end, l.EndOffset())
			}
			if tc.mode == NoSpace {
				// The failed write was undone (a full disk lets a file
				// shrink): the log is intact until an fsync fails.
				if err := l.Verify(); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.FlushTo(end); !errors.Is(err, tc.errno) {
				t.Fatalf("FlushTo on a faulty disk: %v, want %v", err, tc.errno)
			}
			if err := <-failures; !errors.Is(err, tc.errno) {
				t.Fatalf("failure reported: %v", err)
			}
			if err := SetFault(root, None); err != nil {
				t.Fatal(err)
			}
			waitMode(t, f, None)
			// The fsync failed: nothing is called durable again until the
			// log is reopened (fsyncgate: a retried fsync could succeed on
			// pages the kernel dropped).
			if err := l.FlushTo(end); !errors.Is(err, log.ErrLogFailed) {
				t.Fatalf("FlushTo after a failed fsync: %v, want ErrLogFailed", err)
			}
			if _, err := l.AppendAsLeader([]record.Batch{testBatch(t)}, 1); !errors.Is(err, log.ErrLogFailed) {
				t.Fatalf("append after a failed fsync: %v, want ErrLogFailed", err)
			}
			if _, err := os.Stat(filepath.Join(root, "topic-0")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
