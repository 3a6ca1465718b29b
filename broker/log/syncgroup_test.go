package log

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/record"
)

// countingFS is OSFS that counts its batch syncs and the files in them;
// batch false hides SyncFiles (a plain FS: every log fsyncs alone).
type countingFS struct {
	OSFS
	batches, batchFiles atomic.Int64
	fail                error
}

func (c *countingFS) SyncFiles(files []File) error {
	c.batches.Add(1)
	c.batchFiles.Add(int64(len(files)))
	if c.fail != nil {
		return c.fail
	}
	return c.OSFS.SyncFiles(files)
}

// fsOnly hides OSFS's SyncFiles: logs on it fsync one by one.
type fsOnly struct{ FS }

func flushAll(t testing.TB, logs []*Log) []error {
	t.Helper()
	errs := make([]error, len(logs))
	var wg sync.WaitGroup
	for i, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.FlushTo(l.EndOffset())
		}()
	}
	wg.Wait()
	return errs
}

func openLogs(t testing.TB, n int, fs FS) []*Log {
	t.Helper()
	root := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 20 // no rolls: they fsync on their own
	logs := make([]*Log, n)
	for i := range logs {
		logs[i] = openLog(t, filepath.Join(root, fmt.Sprintf("t-%d", i)), cfg, WithFS(fs))
		t.Cleanup(func() { logs[i].Close() })
	}
	return logs
}

// The fsyncs of many logs asked for together become one syncfs; every log
// is durable to its end after it.
func TestSyncGroupBatches(t *testing.T) {
	if !batchSyncSupported {
		t.Skip("no syncfs on this system")
	}
	fs := &countingFS{}
	logs := openLogs(t, 32, fs)
	g := syncGroupFor(fs)
	if g == nil {
		t.Fatal("no sync group for an FS with SyncFiles")
	}
	for round := range 5 {
		for _, l := range logs {
			mustAppend(t, l, batch(t, 2, 100, int64(round)))
		}
		for i, err := range flushAll(t, logs) {
			if err != nil {
				t.Fatalf("round %d: log %d: %v", round, i, err)
			}
		}
		for i, l := range logs {
			if d, e := l.DurableEnd(), l.EndOffset(); d != e {
				t.Fatalf("round %d: log %d durable to %d, ends at %d", round, i, d, e)
			}
		}
	}
	// 160 fsyncs asked for: with batching, a few syncfs calls carry most.
	if fs.batches.Load() == 0 || fs.batchFiles.Load() < 80 {
		t.Fatalf("%d batch syncs of %d files for 160 fsyncs asked together (file syncs %d)",
			fs.batches.Load(), fs.batchFiles.Load(), g.fileSyncs.Load())
	}
	t.Logf("%d syncfs calls for %d files; %d files fsynced alone", fs.batches.Load(), fs.batchFiles.Load(), g.fileSyncs.Load())
}

// One log flushing alone fsyncs its file: a syncfs costs more than one
// fsync.
func TestSyncGroupAloneFsyncs(t *testing.T) {
	fs := &countingFS{}
	logs := openLogs(t, 1, fs)
	for round := range 5 {
		mustAppend(t, logs[0], batch(t, 2, 100, int64(round)))
		if err := logs[0].FlushTo(logs[0].EndOffset()); err != nil {
			t.Fatal(err)
		}
	}
	if n := fs.batches.Load(); n != 0 {
		t.Fatalf("%d batch syncs for one log flushing alone", n)
	}
}

// A batch whose bytes are few beside the group's other unsynced bytes (an
// acks=1 topic between its timed flushes) fsyncs file by file: a syncfs
// would write all of those too.
func TestSyncGroupSparesOtherDirtyBytes(t *testing.T) {
	fs := &countingFS{}
	logs := openLogs(t, 9, fs)
	big := logs[8]
	for range 40 { // ~2.4 MB unsynced in a log nobody flushes
		mustAppend(t, big, batch(t, 60, 1000, 1))
	}
	small := logs[:8]
	for _, l := range small {
		mustAppend(t, l, batch(t, 1, 100, 1))
	}
	for i, err := range flushAll(t, small) {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	if n := fs.batches.Load(); n != 0 {
		t.Fatalf("%d syncfs calls beside %d unsynced bytes of another log", n, syncGroupFor(fs).dirty.Load())
	}
	if err := big.Flush(); err != nil {
		t.Fatal(err)
	}
	if d := syncGroupFor(fs).dirty.Load(); d != 0 {
		t.Fatalf("group counts %d unsynced bytes after every log was flushed", d)
	}
}

// A failed batch sync fails every log in it: the kernel may have dropped
// the pages it could not write, so none of them may call its tail durable.
func TestSyncGroupFailureFailsEveryLog(t *testing.T) {
	if !batchSyncSupported {
		t.Skip("no syncfs on this system")
	}
	fs := &countingFS{fail: errors.New("injected EIO")}
	logs := openLogs(t, 16, fs)
	for _, l := range logs {
		mustAppend(t, l, batch(t, 2, 100, 1))
	}
	errs := flushAll(t, logs)
	if fs.batches.Load() == 0 {
		t.Skip("the flushes did not meet in a batch this time")
	}
	failed := 0
	for i, l := range logs {
		if errs[i] == nil {
			continue
		}
		failed++
		if d := l.DurableEnd(); d != 0 {
			t.Fatalf("log %d: durable to %d after its sync failed", i, d)
		}
		if _, err := l.AppendAsLeader([]record.Batch{batch(t, 1, 10, 2)}, 1); !errors.Is(err, ErrLogFailed) {
			t.Fatalf("log %d: append after a failed sync: %v, want ErrLogFailed", i, err)
		}
	}
	if int64(failed) != fs.batchFiles.Load() {
		t.Fatalf("%d logs failed, %d were in failed batches", failed, fs.batchFiles.Load())
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSyncGroup: one round of a follower's fetch (or a leader's
// acks=all request) that appended to n logs and makes them all durable,
// with the sync group (syncfs) and with an fsync per log; ratios in the
// same run are what it says.
func BenchmarkSyncGroup(b *testing.B) {
	for _, n := range []int{1, 4, 8, 16, 64} {
		for _, grouped := range []bool{false, true} {
			name := fmt.Sprintf("logs=%d/fsync", n)
			var fs FS = fsOnly{OSFS{}}
			if grouped {
				name = fmt.Sprintf("logs=%d/group", n)
				fs = &countingFS{}
			}
			b.Run(name, func(b *testing.B) {
				logs := openLogs(b, n, fs)
				bt := batch(b, 1, 1000, time.Now().UnixMilli())
				cpu0 := processCPU(b)
				b.ResetTimer()
				for range b.N {
					for _, l := range logs {
						if _, err := l.AppendAsLeader([]record.Batch{bt}, 1); err != nil {
							b.Fatal(err)
						}
					}
					for _, err := range flushAll(b, logs) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
