package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-dev/strata/broker/record"
)

// fixture is a closed log of several segments with known batch positions.
type fixture struct {
	dir     string
	batches []batchPos // every batch in offset order
	segs    []int64    // segment bases
}

type batchPos struct {
	seg       int64 // segment base
	pos, size int64
	base      int64
	last      int64
}

func (f fixture) logFile(base int64) string { return segmentName(f.dir, base, logSuffix) }
func (f fixture) tail() int64               { return f.segs[len(f.segs)-1] }

// batchesIn returns the batches of one segment.
func (f fixture) batchesIn(base int64) []batchPos {
	var out []batchPos
	for _, b := range f.batches {
		if b.seg == base {
			out = append(out, b)
		}
	}
	return out
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	for i := 0; i < 60; i++ {
		mustAppend(t, l, batch(t, 3, 100, int64(1000+10*i)))
	}
	f := fixture{dir: dir}
	for _, s := range l.segs {
		f.segs = append(f.segs, s.base)
	}
	if len(f.segs) < 4 {
		t.Fatalf("fixture needs several segments, has %d", len(f.segs))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, base := range f.segs {
		data, err := os.ReadFile(f.logFile(base))
		if err != nil {
			t.Fatal(err)
		}
		for pos := 0; pos < len(data); {
			n, err := record.CheckFrame(data[pos:])
			if err != nil {
				t.Fatal(err)
			}
			h := record.Batch(data[pos:]).Header()
			f.batches = append(f.batches, batchPos{seg: base, pos: int64(pos), size: int64(n), base: h.BaseOffset, last: h.LastOffset()})
			pos += n
		}
	}
	if tb := f.batchesIn(f.tail()); len(tb) < 4 {
		t.Fatalf("tail segment has only %d batches", len(tb))
	}
	return f
}

func flipBit(t *testing.T, name string, at int64) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[at] ^= 0x10
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, name string, b []byte) {
	t.Helper()
	fh, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write(b); err != nil {
		t.Fatal(err)
	}
	fh.Close()
}

func truncateFile(t *testing.T, name string, size int64) {
	t.Helper()
	if err := os.Truncate(name, size); err != nil {
		t.Fatal(err)
	}
}

func crashed(t *testing.T, f fixture) {
	t.Helper()
	if err := os.Remove(filepath.Join(f.dir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryTable damages a closed log and checks the documented outcome
// of Open (docs/storage.md, "Recovery outcomes").
func TestRecoveryTable(t *testing.T) {
	type outcome struct {
		// wantEnd is the log end offset after Open; wantErrFile, when
		// set, means Open fails with a *CorruptionError on that file at
		// wantErrOffset.
		wantEnd       int64
		wantErrFile   string
		wantErrOffset int64
		// verifyErr: Open succeeds but Verify reports this file and offset.
		verifyFile   string
		verifyOffset int64
	}
	last := func(f fixture) int64 { return f.batches[len(f.batches)-1].last + 1 }
	midTail := func(f fixture) batchPos { tb := f.batchesIn(f.tail()); return tb[len(tb)/2] }
	sealed := func(f fixture) int64 { return f.segs[1] }
	tests := []struct {
		name   string
		damage func(t *testing.T, f fixture)
		want   func(f fixture) outcome
	}{
		{
			name:   "clean shutdown, no damage",
			damage: func(t *testing.T, f fixture) {},
			want:   func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name:   "crash, no damage",
			damage: func(t *testing.T, f fixture) { crashed(t, f) },
			want:   func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "bit flip in a tail segment batch after a crash: truncated at that batch",
			damage: func(t *testing.T, f fixture) {
				crashed(t, f)
				b := midTail(f)
				flipBit(t, f.logFile(b.seg), b.pos+b.size-5)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: midTail(f).base} },
		},
		{
			name: "bit flip in a tail segment batch header length after a crash: truncated at that batch",
			damage: func(t *testing.T, f fixture) {
				crashed(t, f)
				b := midTail(f)
				flipBit(t, f.logFile(b.seg), b.pos+9)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: midTail(f).base} },
		},
		{
			name: "bit flip in a sealed segment: Open trusts it, Verify reports file and offset",
			damage: func(t *testing.T, f fixture) {
				crashed(t, f)
				b := f.batchesIn(sealed(f))[2]
				flipBit(t, f.logFile(b.seg), b.pos+b.size-5)
			},
			want: func(f fixture) outcome {
				b := f.batchesIn(sealed(f))[2]
				return outcome{wantEnd: last(f), verifyFile: f.logFile(b.seg), verifyOffset: b.pos}
			},
		},
		{
			name: "bit flip in a sealed segment whose index is missing: CorruptionError, nothing deleted",
			damage: func(t *testing.T, f fixture) {
				b := f.batchesIn(sealed(f))[2]
				flipBit(t, f.logFile(b.seg), b.pos+b.size-5)
				os.Remove(segmentName(f.dir, b.seg, indexSuffix))
			},
			want: func(f fixture) outcome {
				b := f.batchesIn(sealed(f))[2]
				return outcome{wantErrFile: f.logFile(b.seg), wantErrOffset: b.pos}
			},
		},
		{
			name: "sealed segment index truncated mid-entry: rebuilt",
			damage: func(t *testing.T, f fixture) {
				name := segmentName(f.dir, sealed(f), indexSuffix)
				st, _ := os.Stat(name)
				truncateFile(t, name, st.Size()-3)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "sealed segment index cut to its first entry: still correct (sparser)",
			damage: func(t *testing.T, f fixture) {
				truncateFile(t, segmentName(f.dir, sealed(f), indexSuffix), offsetEntrySize)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name:   "sealed segment index missing: rebuilt",
			damage: func(t *testing.T, f fixture) { os.Remove(segmentName(f.dir, sealed(f), indexSuffix)) },
			want:   func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name:   "sealed segment time index missing: rebuilt",
			damage: func(t *testing.T, f fixture) { os.Remove(segmentName(f.dir, sealed(f), timeIndexSuffix)) },
			want:   func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "sealed segment index with garbage entries: rebuilt",
			damage: func(t *testing.T, f fixture) {
				name := segmentName(f.dir, sealed(f), indexSuffix)
				st, _ := os.Stat(name)
				os.WriteFile(name, bytes.Repeat([]byte{0xff}, int(st.Size())), 0o644)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name:   "tail segment index missing after clean shutdown: rebuilt",
			damage: func(t *testing.T, f fixture) { os.Remove(segmentName(f.dir, f.tail(), indexSuffix)) },
			want:   func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "tail segment time index missing after crash: rebuilt",
			damage: func(t *testing.T, f fixture) {
				crashed(t, f)
				os.Remove(segmentName(f.dir, f.tail(), timeIndexSuffix))
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "garbage appended to the tail after a crash: truncated",
			damage: func(t *testing.T, f fixture) {
				crashed(t, f)
				appendBytes(t, f.logFile(f.tail()), []byte("this is not a record batch, it is a torn write of junk bytes........"))
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "garbage appended to the tail despite a clean marker: truncated",
			damage: func(t *testing.T, f fixture) {
				appendBytes(t, f.logFile(f.tail()), bytes.Repeat([]byte{0xab}, 100))
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "zero-filled tail (preallocated or torn page) after a crash: truncated",
			damage: func(t *testing.T, f fixture) {
				crashed(t, f)
				appendBytes(t, f.logFile(f.tail()), make([]byte, 4096))
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "last batch torn mid-write after a crash: truncated to the batch before",
			damage: func(t *testing.T, f fixture) {
				crashed(t, f)
				b := f.batches[len(f.batches)-1]
				truncateFile(t, f.logFile(b.seg), b.pos+b.size/2)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: f.batches[len(f.batches)-1].base} },
		},
		{
			name: "tail data shorter than its index says (index ahead of data): rebuilt, truncated",
			damage: func(t *testing.T, f fixture) {
				tb := f.batchesIn(f.tail())
				truncateFile(t, f.logFile(f.tail()), tb[1].pos)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: f.batchesIn(f.tail())[1].base} },
		},
		{
			name: "whole tail segment empty after a crash right after a roll",
			damage: func(t *testing.T, f fixture) {
				crashed(t, f)
				truncateFile(t, f.logFile(f.tail()), 0)
				truncateFile(t, segmentName(f.dir, f.tail(), indexSuffix), 0)
				truncateFile(t, segmentName(f.dir, f.tail(), timeIndexSuffix), 0)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: f.tail()} },
		},
		{
			name: "orphan index files of a deleted segment: removed",
			damage: func(t *testing.T, f fixture) {
				os.WriteFile(segmentName(f.dir, 99999, indexSuffix), []byte("x"), 0o644)
				os.WriteFile(segmentName(f.dir, 99999, timeIndexSuffix), nil, 0o644)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
		{
			name: "corrupt leader-epoch-checkpoint: CorruptionError",
			damage: func(t *testing.T, f fixture) {
				os.WriteFile(filepath.Join(f.dir, epochCheckpointFile), []byte("0\n2\n1 0\n"), 0o644)
			},
			want: func(f fixture) outcome {
				return outcome{wantErrFile: filepath.Join(f.dir, epochCheckpointFile), wantErrOffset: -1}
			},
		},
		{
			name: "corrupt log-start-offset-checkpoint: CorruptionError",
			damage: func(t *testing.T, f fixture) {
				os.WriteFile(filepath.Join(f.dir, startOffsetFile), []byte("0\nxyz\n"), 0o644)
			},
			want: func(f fixture) outcome {
				return outcome{wantErrFile: filepath.Join(f.dir, startOffsetFile), wantErrOffset: -1}
			},
		},
		{
			name: "leftover checkpoint temp file: removed",
			damage: func(t *testing.T, f fixture) {
				os.WriteFile(filepath.Join(f.dir, startOffsetFile+checkpointTmpSuffix), []byte("0\n5"), 0o644)
			},
			want: func(f fixture) outcome { return outcome{wantEnd: last(f)} },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.damage(t, f)
			want := tc.want(f)
			l, err := Open(f.dir, testConfig())
			if want.wantErrFile != "" {
				var ce *CorruptionError
				if !errors.As(err, &ce) {
					t.Fatalf("Open = %v, want a CorruptionError", err)
				}
				if ce.File != want.wantErrFile || ce.Offset != want.wantErrOffset {
					t.Fatalf("CorruptionError at %s:%d, want %s:%d", ce.File, ce.Offset, want.wantErrFile, want.wantErrOffset)
				}
				for _, base := range f.segs {
					if _, err := os.Stat(f.logFile(base)); err != nil {
						t.Fatalf("a failed Open must not delete data: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			if l.EndOffset() != want.wantEnd {
				t.Fatalf("log end %d, want %d", l.EndOffset(), want.wantEnd)
			}
			// A torn tail is cut from the file, not just ignored.
			if st, err := os.Stat(l.active().name); err != nil || st.Size() != l.active().size {
				t.Fatalf("tail file has %d bytes, log holds %d (%v)", st.Size(), l.active().size, err)
			}
			if want.verifyFile != "" {
				var ce *CorruptionError
				if err := l.Verify(); !errors.As(err, &ce) || ce.File != want.verifyFile || ce.Offset != want.verifyOffset {
					t.Fatalf("Verify = %v, want corruption at %s:%d", err, want.verifyFile, want.verifyOffset)
				}
				return
			}
			if err := l.Verify(); err != nil {
				t.Fatalf("Verify after recovery: %v", err)
			}
			// Everything below the end reads back, every offset maps to its batch.
			hs := readAll(t, l)
			if got := hs[len(hs)-1].LastOffset() + 1; got != want.wantEnd {
				t.Fatalf("read up to %d, want %d", got, want.wantEnd)
			}
			for _, b := range f.batches {
				if b.base >= want.wantEnd {
					break
				}
				res, err := l.Read(b.last, 1, want.wantEnd)
				if err != nil || record.Batch(res.Records).Header().BaseOffset != b.base {
					t.Fatalf("read %d: %v", b.last, err)
				}
			}
			// Time lookups survive rebuilt time indexes.
			for _, b := range f.batches {
				if b.base >= want.wantEnd {
					break
				}
				ts := int64(1000 + 10*(b.base/3))
				if off, at, ok := l.OffsetForTimestamp(ts); !ok || off != b.base || at != ts {
					t.Fatalf("OffsetForTimestamp(%d) = %d %d %v, want %d", ts, off, at, ok, b.base)
				}
			}
			// The log keeps working: append, close, reopen cleanly.
			res := mustAppend(t, l, batch(t, 3, 100, 1))
			if res.BaseOffset != want.wantEnd {
				t.Fatalf("append after recovery at %d", res.BaseOffset)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2 := openLog(t, f.dir, testConfig())
			defer l2.Close()
			if l2.EndOffset() != want.wantEnd+3 {
				t.Fatalf("second reopen end %d", l2.EndOffset())
			}
			entries, _ := os.ReadDir(f.dir)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), checkpointTmpSuffix) || strings.HasPrefix(e.Name(), "00000000000000099999") {
					t.Fatalf("leftover %s", e.Name())
				}
			}
		})
	}
}
