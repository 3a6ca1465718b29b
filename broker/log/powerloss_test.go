package log

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/strata-dev/strata/broker/record"
)

// lossyFS remembers, per file, how many bytes were durable at its last
// fsync. powerCut then rewinds every file to that size plus a random torn
// part of what was written after it (kept, dropped or zero-filled), as a
// power loss with a volatile page cache would. Directory operations count
// as durable (the log fsyncs the directory after each of them).
type lossyFS struct {
	OSFS
	mu      sync.Mutex
	durable map[string]int64
}

func (f *lossyFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if _, ok := f.durable[name]; !ok || flag&os.O_TRUNC != 0 {
		if st, err := file.Stat(); err == nil {
			f.durable[name] = st.Size()
		}
	}
	f.mu.Unlock()
	return &lossyFile{File: file, fs: f, name: name}, nil
}

func (f *lossyFS) Rename(oldpath, newpath string) error {
	f.mu.Lock()
	f.durable[newpath] = f.durable[oldpath]
	delete(f.durable, oldpath)
	f.mu.Unlock()
	return f.OSFS.Rename(oldpath, newpath)
}

func (f *lossyFS) Remove(name string) error {
	f.mu.Lock()
	delete(f.durable, name)
	f.mu.Unlock()
	return f.OSFS.Remove(name)
}

type lossyFile struct {
	File
	fs   *lossyFS
	name string
}

func (f *lossyFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.durable[f.name] = st.Size()
	f.fs.mu.Unlock()
	return nil
}

func (f *lossyFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	if d, ok := f.fs.durable[f.name]; ok && d > size {
		f.fs.durable[f.name] = size
	}
	f.fs.mu.Unlock()
	return f.File.Truncate(size)
}

func (f *lossyFS) powerCut(t *testing.T, rng *rand.Rand) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, d := range f.durable {
		st, err := os.Stat(name)
		if err != nil || st.IsDir() || st.Size() <= d {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		keep := d + rng.Int64N(st.Size()-d+1) // some unsynced bytes made it
		out := data[:keep]
		if rng.IntN(3) == 0 { // ... and a torn page of zeros after them
			out = append(out, make([]byte, rng.IntN(512))...)
		}
		if err := os.WriteFile(name, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPowerLoss appends with periodic Flush calls, cuts the power at a
// random point, and checks that recovery keeps at least everything
// flushed, exactly as appended, and nothing inconsistent.
func TestPowerLoss(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			cfg := testConfig()
			cfg.SegmentBytes = int64(1500 + rng.IntN(3000))
			dir := t.TempDir()
			fs := &lossyFS{durable: map[string]int64{}}
			l := openLog(t, dir, cfg, WithFS(fs))
			type mbatch struct{ base, last, ts int64 }
			var appended []mbatch
			flushed := int64(0)
			steps := 20 + rng.IntN(150)
			for i := 0; i < steps; i++ {
				n := 1 + rng.IntN(4)
				ts := int64(1_000_000 + i*10)
				res, err := l.AppendAsLeader([]record.Batch{batch(t, n, rng.IntN(200), ts)}, int32(i/40))
				if err != nil {
					t.Fatal(err)
				}
				appended = append(appended, mbatch{res.BaseOffset, res.LastOffset, ts + int64(n-1)})
				if rng.IntN(8) == 0 {
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
					flushed = l.EndOffset()
				}
			}
			if err := l.shutdown(false); err != nil {
				t.Fatal(err)
			}
			fs.powerCut(t, rng)

			l = openLog(t, dir, cfg)
			defer l.Close()
			t.Logf("appended up to %d, flushed %d, recovered %d", appended[len(appended)-1].last+1, flushed, l.EndOffset())
			if l.EndOffset() < flushed {
				t.Fatalf("recovered end %d is below the flushed end %d", l.EndOffset(), flushed)
			}
			if err := l.Verify(); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, l)
			for i, h := range got {
				w := appended[i]
				if h.BaseOffset != w.base || h.LastOffset() != w.last || h.MaxTimestamp != w.ts {
					t.Fatalf("batch %d recovered as %d..%d ts %d, appended %+v", i, h.BaseOffset, h.LastOffset(), h.MaxTimestamp, w)
				}
			}
			if e, end := l.EndOffsetForEpoch(l.LatestEpoch()); l.EndOffset() > 0 && (e < 0 || end != l.EndOffset()) {
				t.Fatalf("epoch cache: latest %d ends at %d, log end %d", e, end, l.EndOffset())
			}
			// And the recovered log takes appends at its end.
			end := l.EndOffset()
			if res, err := l.AppendAsLeader([]record.Batch{batch(t, 1, 1, 5)}, max(l.LatestEpoch(), 0)); err != nil || res.BaseOffset != end {
				t.Fatalf("append after recovery: %v at %d, want %d", err, res.BaseOffset, end)
			}
		})
	}
}
