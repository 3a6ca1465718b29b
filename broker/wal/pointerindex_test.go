package wal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/strata-dev/strata/broker/wal"
)

func ptr(obj int, base, last int64) wal.Pointer {
	return wal.Pointer{
		Bucket: "b", Key: fmt.Sprintf("wal/c/z/1/1/%020d", obj), Offset: 100, Length: (last - base + 1) * 10,
		Topic: "t", Partition: 3, BaseOffset: base, LastOffset: last, LeaderEpoch: 2, CRC: uint32(obj),
	}
}

func openIndex(t *testing.T, dir string, max int) *wal.PointerIndex {
	t.Helper()
	x, err := wal.OpenPointerIndex(dir, max)
	if err != nil {
		t.Fatalf("OpenPointerIndex: %v", err)
	}
	return x
}

func bases(ps []wal.Pointer) []int64 {
	out := []int64{}
	for _, p := range ps {
		out = append(out, p.BaseOffset)
	}
	return out
}

func TestPointerIndexFrom(t *testing.T) {
	x := openIndex(t, t.TempDir(), 0)
	defer x.Close()
	// [0,9] [10,19] [20,29] gap [40,49] [50,59]
	for i, r := range [][2]int64{{0, 9}, {10, 19}, {20, 29}, {40, 49}, {50, 59}} {
		if err := x.Add(ptr(i, r[0], r[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		off, max int64
		want     []int64
	}{
		{"start of first", 0, 1 << 20, []int64{0, 10, 20}},
		{"inside a pointer", 15, 1 << 20, []int64{10, 20}},
		{"byte budget", 0, 150, []int64{0, 10}},
		{"at least one", 0, 1, []int64{0}},
		{"in the gap", 35, 1 << 20, []int64{}},
		{"after the gap", 41, 1 << 20, []int64{40, 50}},
		{"past the end", 60, 1 << 20, []int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bases(x.From(tc.off, tc.max)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("From(%d, %d) = %v, want %v", tc.off, tc.max, got, tc.want)
			}
		})
	}
}

func TestPointerIndexPersistence(t *testing.T) {
	dir := t.TempDir()
	x := openIndex(t, dir, 0)
	for i := 0; i < 10; i++ {
		if err := x.Add(ptr(i, int64(i*10), int64(i*10+9))); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func() error
		want []int64
	}{
		{"remove object 3", func() error { return x.RemoveObject("b", ptr(3, 0, 0).Key) }, []int64{0, 10, 20, 40, 50, 60, 70, 80, 90}},
		{"prune below 25", func() error { return x.PruneBelow(25) }, []int64{20, 40, 50, 60, 70, 80, 90}},
		{"truncate from 75", func() error { return x.TruncateFrom(75) }, []int64{20, 40, 50, 60}},
		{"re-append after truncation", func() error { return x.Add(ptr(20, 70, 71)) }, []int64{20, 40, 50, 60, 70}},
		{"overlapping add replaces", func() error { return x.Add(ptr(21, 65, 80)) }, []int64{20, 40, 50, 65}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := bases(x.All()); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: pointers at %v, want %v", s.name, got, s.want)
		}
	}
	want := x.All()
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x = openIndex(t, dir, 0)
	defer x.Close()
	if got := x.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
}

// TestPointerIndexTornTail: a partial or corrupt record at the end (or in
// the middle) keeps everything before it, and the file is usable again.
func TestPointerIndexTornTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string, size int64)
		want   []int64
	}{
		{"partial last record", func(path string, size int64) { os.Truncate(path, size-5) }, []int64{0, 10}},
		{"length only", func(path string, size int64) {
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte{0, 0, 0, 9})
			f.Close()
		}, []int64{0, 10, 20}},
		{"garbage appended", func(path string, size int64) {
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte("garbage garbage garbage"))
			f.Close()
		}, []int64{0, 10, 20}},
		{"bit flip in the second record", func(path string, size int64) {
			b, _ := os.ReadFile(path)
			rec := (len(b) - 8) / 3
			b[8+rec+20] ^= 1
			os.WriteFile(path, b, 0o644)
		}, []int64{0}},
		{"bad file header", func(path string, size int64) {
			b, _ := os.ReadFile(path)
			b[0] = 'X'
			os.WriteFile(path, b, 0o644)
		}, []int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			x := openIndex(t, dir, 0)
			for i := 0; i < 3; i++ {
				if err := x.Add(ptr(i, int64(i*10), int64(i*10+9))); err != nil {
					t.Fatal(err)
				}
			}
			x.Close()
			path := filepath.Join(dir, wal.PointerFileName)
			st, _ := os.Stat(path)
			tc.damage(path, st.Size())
			x = openIndex(t, dir, 0)
			if got := bases(x.All()); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("after damage: %v, want %v", got, tc.want)
			}
			// Still writable, and the repaired file reopens cleanly.
			next := int64(100)
			if err := x.Add(ptr(9, next, next+1)); err != nil {
				t.Fatal(err)
			}
			x.Close()
			x = openIndex(t, dir, 0)
			defer x.Close()
			if got := bases(x.All()); !reflect.DeepEqual(got, append(tc.want, next)) {
				t.Fatalf("after repair and reopen: %v, want %v", got, append(tc.want, next))
			}
		})
	}
}

func TestPointerIndexBounded(t *testing.T) {
	dir := t.TempDir()
	x := openIndex(t, dir, 5)
	for i := 0; i < 5000; i++ {
		if err := x.Add(ptr(i, int64(i*10), int64(i*10+9))); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if err := x.RemoveObject("b", ptr(i-1, 0, 0).Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := x.Len(); n > 5 {
		t.Fatalf("%d pointers, bound is 5", n)
	}
	want := x.All()
	x.Close()
	st, err := os.Stat(filepath.Join(dir, wal.PointerFileName))
	if err != nil {
		t.Fatal(err)
	}
	// 5000 adds and 2500 removals, but compaction keeps the file at a few
	// hundred records.
	if st.Size() > 64<<10 {
		t.Fatalf("pointer file has %d bytes after compaction", st.Size())
	}
	x = openIndex(t, dir, 5)
	defer x.Close()
	if got := x.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen: %v, want %v", bases(got), bases(want))
	}
}

// FuzzPointerIndexOpen: any file content opens (keeping a valid prefix),
// yields pointers in offset order, and stays writable.
func FuzzPointerIndexOpen(f *testing.F) {
	dir := f.TempDir()
	x, err := wal.OpenPointerIndex(dir, 0)
	if err != nil {
		f.Fatal(err)
	}
	x.Add(ptr(0, 0, 9))
	x.Add(ptr(1, 10, 19))
	x.RemoveObject("b", ptr(0, 0, 0).Key)
	x.TruncateFrom(15)
	x.Close()
	seed, _ := os.ReadFile(filepath.Join(dir, wal.PointerFileName))
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte("SWPI\x00\x01\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, wal.PointerFileName), content, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := wal.OpenPointerIndex(dir, 16)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer x.Close()
		ps := x.All()
		for i := 1; i < len(ps); i++ {
			if ps[i].BaseOffset <= ps[i-1].LastOffset {
				t.Fatalf("pointers overlap: %v then %v", ps[i-1], ps[i])
			}
		}
		if len(ps) > 16 {
			t.Fatalf("%d pointers, bound 16", len(ps))
		}
		next := int64(1 << 40)
		if err := x.Add(ptr(7, next, next)); err != nil {
			t.Fatal(err)
		}
		x.Close()
		y, err := wal.OpenPointerIndex(dir, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer y.Close()
		got := y.All()
		if len(got) == 0 || got[len(got)-1].BaseOffset != next {
			t.Fatalf("after reopen the new pointer is missing: %v", got)
		}
	})
}

// TestRemovePointerFile: a removed pointer file opens empty, and removing
// a file that is not there is no error.
func TestRemovePointerFile(t *testing.T) {
	dir := t.TempDir()
	if err := wal.RemovePointerFile(dir); err != nil {
		t.Fatalf("no file: %v", err)
	}
	x := openIndex(t, dir, 0)
	if err := x.Add(ptr(0, 0, 9)); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wal.RemovePointerFile(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, wal.PointerFileName)); !os.IsNotExist(err) {
		t.Fatalf("pointer file after RemovePointerFile: %v", err)
	}
	x = openIndex(t, dir, 0)
	defer x.Close()
	if n := x.Len(); n != 0 {
		t.Fatalf("reopened index holds %d pointers, want 0", n)
	}
}
