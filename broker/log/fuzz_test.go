package log

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-dev/strata/broker/record"
)

// FuzzRecoverTail writes arbitrary bytes as the tail segment (and
// arbitrary index files) after two good segments and opens the log, with
// and without the clean shutdown marker. Open must either recover a log
// that reads back and verifies, or fail with a *CorruptionError; never
// panic, never lose the good segments.
func FuzzRecoverTail(f *testing.F) {
	good := func() []byte {
		dir := f.TempDir()
		l, err := Open(dir, testConfig())
		if err != nil {
			f.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			if _, err := l.AppendAsLeader([]record.Batch{batch(f, 2, 30, 1000)}, 1); err != nil {
				f.Fatal(err)
			}
		}
		l.Close()
		data, err := os.ReadFile(segmentName(dir, 0, logSuffix))
		if err != nil {
			f.Fatal(err)
		}
		return data
	}()
	f.Add(good, []byte{}, false)
	f.Add(good, []byte{0, 0, 0, 0, 0, 0, 0, 0}, true)
	f.Add(good[:len(good)-7], []byte{0, 0, 0, 1, 0, 0, 0, 0}, false)
	f.Add(append(append([]byte{}, good...), make([]byte, 100)...), []byte{}, true)
	f.Add([]byte("garbage"), []byte("idx"), false)
	f.Fuzz(func(t *testing.T, tail, idx []byte, clean bool) {
		dir := t.TempDir()
		cfg := testConfig()
		cfg.SegmentBytes = 1000
		l := openLog(t, dir, cfg, WithFS(noSyncFS{}))
		for i := 0; i < 12; i++ {
			mustAppend(t, l, batch(t, 2, 100, 2000))
		}
		if len(l.segs) < 3 {
			t.Fatalf("%d segments", len(l.segs))
		}
		tailBase := l.active().base
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Offsets in the fuzzed tail are relative to offset 0; rebase the
		// first batch so that valid seeds stay valid.
		data := append([]byte(nil), tail...)
		if len(data) >= 8 {
			for i := 0; i < 8; i++ {
				data[i] = byte(uint64(tailBase) >> (56 - 8*i))
			}
		}
		os.WriteFile(segmentName(dir, tailBase, logSuffix), data, 0o644)
		os.WriteFile(segmentName(dir, tailBase, indexSuffix), idx, 0o644)
		if !clean {
			os.Remove(filepath.Join(dir, cleanShutdownFile))
		}
		l, err := Open(dir, cfg, WithFS(noSyncFS{}))
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("Open: %v (not a CorruptionError)", err)
			}
			return
		}
		defer l.Close()
		if l.EndOffset() < tailBase {
			t.Fatalf("recovery lost good segments: end %d < %d", l.EndOffset(), tailBase)
		}
		if err := l.Verify(); err != nil {
			t.Fatalf("Verify after recovery: %v", err)
		}
		readAll(t, l)
		mustAppend(t, l, batch(t, 1, 1, 3000))
	})
}

// noSyncFS skips fsync: the fuzzer cares about file contents, not
// durability, and runs far more inputs without it.
type noSyncFS struct{ OSFS }

func (f noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

type noSyncFile struct{ File }

func (noSyncFile) Sync() error { return nil }
