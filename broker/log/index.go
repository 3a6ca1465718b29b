package log

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
)

// Index entry layouts, identical to Kafka's:
//
//	.index      relativeOffset uint32 | position uint32          (8 bytes)
//	.timeindex  timestamp int64 | relativeOffset uint32         (12 bytes)
//
// relativeOffset is the last offset of the indexed batch minus the
// segment's base offset; position is the batch's byte position in .log.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

// index is a sparse index file. The active segment keeps its entries in
// memory (mem) and writes the ones not yet on disk when flushed or sealed;
// a sealed segment's index is read from the file with ReadAt.
type index struct {
	f       File
	name    string
	width   int
	n       int    // number of entries
	mem     []byte // all entries while the segment is active; nil when sealed
	written int    // entries already written to f
}

func (ix *index) entry(i int) ([]byte, error) {
	if ix.mem != nil {
		return ix.mem[i*ix.width : (i+1)*ix.width], nil
	}
	buf := make([]byte, ix.width)
	if _, err := ix.f.ReadAt(buf, int64(i*ix.width)); err != nil {
		return nil, fmt.Errorf("read %s entry %d: %w", ix.name, i, err)
	}
	return buf, nil
}

func (ix *index) append(e []byte) {
	ix.mem = append(ix.mem, e...)
	ix.n++
}

// load reads the whole file into memory (the segment becomes active).
func (ix *index) load() error {
	st, err := ix.f.Stat()
	if err != nil {
		return err
	}
	n := int(st.Size()) / ix.width
	buf := make([]byte, n*ix.width, n*ix.width+64*ix.width)
	if _, err := ix.f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return fmt.Errorf("read %s: %w", ix.name, err)
	}
	ix.mem, ix.n, ix.written = buf, n, n
	return nil
}

// persist writes the entries not yet in the file.
func (ix *index) persist() error {
	if ix.mem == nil || ix.written == ix.n {
		return nil
	}
	if _, err := ix.f.WriteAt(ix.mem[ix.written*ix.width:ix.n*ix.width], int64(ix.written*ix.width)); err != nil {
		return fmt.Errorf("write %s: %w", ix.name, err)
	}
	ix.written = ix.n
	return nil
}

// truncate keeps the first n entries, in memory and in the file.
func (ix *index) truncate(n int) error {
	if n >= ix.n {
		return nil
	}
	ix.n = n
	if ix.mem != nil {
		ix.mem = ix.mem[:n*ix.width]
	}
	if ix.written > n {
		ix.written = n
	}
	if err := ix.f.Truncate(int64(n * ix.width)); err != nil {
		return fmt.Errorf("truncate %s: %w", ix.name, err)
	}
	return nil
}

// reset empties the index (before a rebuild).
func (ix *index) reset() error {
	ix.mem, ix.n, ix.written = make([]byte, 0, 64*ix.width), 0, 0
	if err := ix.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate %s: %w", ix.name, err)
	}
	return nil
}

func offsetEntry(rel uint32, pos uint32) []byte {
	var e [offsetEntrySize]byte
	binary.BigEndian.PutUint32(e[0:], rel)
	binary.BigEndian.PutUint32(e[4:], pos)
	return e[:]
}

func timeEntry(ts int64, rel uint32) []byte {
	var e [timeEntrySize]byte
	binary.BigEndian.PutUint64(e[0:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], rel)
	return e[:]
}

func decodeOffsetEntry(e []byte) (rel uint32, pos uint32) {
	return binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])
}

func decodeTimeEntry(e []byte) (ts int64, rel uint32) {
	return int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
}

// search returns the largest i for which below(entry i) is true, or -1.
// below must be monotone (true then false).
func (ix *index) search(below func(e []byte) bool) (int, error) {
	var err error
	i := sort.Search(ix.n, func(i int) bool {
		if err != nil {
			return true
		}
		e, rerr := ix.entry(i)
		if rerr != nil {
			err = rerr
			return true
		}
		return !below(e)
	})
	return i - 1, err
}
