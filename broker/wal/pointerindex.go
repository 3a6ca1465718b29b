package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// PointerFileName is the pointer file's name in a partition directory.
const PointerFileName = "wal-pointers"

// DefaultMaxPointers bounds a partition's pointer index.
const DefaultMaxPointers = 8192

var pointerFileMagic = [4]byte{'S', 'W', 'P', 'I'}

const pointerFileVersion uint16 = 1

// Record types of the pointer file.
const (
	recAdd        byte = 1
	recRemoveKey  byte = 2
	recTruncate   byte = 3
	recPruneBelow byte = 4
	// recAddRebase adds a foreign pointer (Pointer.Rebase). A broker of
	// an older version stops reading the file at the first such record
	// (an unknown type reads as a torn tail): it serves the offsets of
	// the lost pointers inline.
	recAddRebase   byte = 5
	maxRecordBytes      = 1 << 20
)

// PointerIndex holds the pointers of one partition a broker leads, in
// memory and in an append-only file beside the partition's log, so that a
// restarted leader can still point lagging followers at WAL objects.
//
// The file is "SWPI" | version u16 | 0 u16, then records of
// length u32 | crc u32 (CRC-32C of the payload) | payload, where the
// payload is a type byte and its fields: add (a pointer), remove object
// (bucket, key), truncate from (offset) and prune below (offset). Open
// replays the records; a torn or corrupt tail is cut off (a lost pointer
// only means the leader serves those offsets inline). Adds are not
// fsynced; truncations are, because a pointer to truncated data must not
// come back. The file is rewritten (temp file, rename) when it holds many
// more records than live pointers, without fsync: callers hold the
// partition lock, and an fsync there stalled produce requests for
// milliseconds. That is safe because the rewrite holds only live
// pointers (a crash leaves the old file, whose truncations were synced,
// or a prefix of the new one); the next truncation syncs the new file and
// its directory entry before it returns.
//
// Pointers are kept in offset order without overlap; at most MaxPointers
// are kept, the oldest are dropped first. Safe for concurrent use.
//
// The index knows nothing of the log beside it: the broker checks the
// pointers against the log's epoch cache when a leadership opens the
// index, and removes the file (RemovePointerFile) when the replica
// becomes follower (broker/replica, docs/wal.md).
type PointerIndex struct {
	mu      sync.Mutex
	dir     string
	f       *os.File
	w       *bufio.Writer
	ptrs    []Pointer
	records int // records in the file
	max     int
	// dirDirty: a rewrite was renamed into place and the directory not
	// synced since.
	dirDirty bool
}

// OpenPointerIndex opens (or creates) the pointer file in dir. maxPointers
// <= 0 means DefaultMaxPointers.
func OpenPointerIndex(dir string, maxPointers int) (*PointerIndex, error) {
	if maxPointers <= 0 {
		maxPointers = DefaultMaxPointers
	}
	x := &PointerIndex{dir: dir, max: maxPointers}
	path := filepath.Join(dir, PointerFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: open pointer file: %w", err)
	}
	good, err := x.replay(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if good == 0 {
		// New, or a header this version cannot read: start over.
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fmt.Errorf("wal: reset pointer file: %w", err)
		}
		var hdr [8]byte
		copy(hdr[:], pointerFileMagic[:])
		binary.BigEndian.PutUint16(hdr[4:], pointerFileVersion)
		if _, err := f.WriteAt(hdr[:], 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("wal: write pointer file header: %w", err)
		}
		good = 8
		x.ptrs, x.records = nil, 0
	} else if err := f.Truncate(good); err != nil { // cut a torn tail
		f.Close()
		return nil, fmt.Errorf("wal: truncate pointer file: %w", err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: pointer file: %w", err)
	}
	x.f, x.w = f, bufio.NewWriter(f)
	return x, nil
}

// replay applies the file's records and returns the end of the last good
// one (0 when the header is missing or unknown).
func (x *PointerIndex) replay(f *os.File) (int64, error) {
	r := bufio.NewReader(f)
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil
	}
	if [4]byte(hdr[0:4]) != pointerFileMagic || binary.BigEndian.Uint16(hdr[4:]) != pointerFileVersion {
		return 0, nil
	}
	good := int64(8)
	var lenCRC [8]byte
	for {
		if _, err := io.ReadFull(r, lenCRC[:]); err != nil {
			return good, nil
		}
		n := binary.BigEndian.Uint32(lenCRC[:])
		if n == 0 || n > maxRecordBytes {
			return good, nil
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return good, nil
		}
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(lenCRC[4:]) {
			return good, nil
		}
		if err := x.apply(payload); err != nil {
			return good, nil
		}
		x.records++
		good += 8 + int64(n)
	}
}

func (x *PointerIndex) apply(payload []byte) error {
	d := decoder{b: payload[1:]}
	switch payload[0] {
	case recAdd, recAddRebase:
		p := d.pointer()
		if d.err != nil {
			return d.err
		}
		p.Rebase = payload[0] == recAddRebase
		x.addMem(p)
	case recRemoveKey:
		bucket, key := d.str(), d.str()
		if d.err != nil {
			return d.err
		}
		x.removeMem(bucket, key)
	case recTruncate:
		off := d.i64()
		if d.err != nil {
			return d.err
		}
		x.truncateMem(off)
	case recPruneBelow:
		off := d.i64()
		if d.err != nil {
			return d.err
		}
		x.pruneMem(off)
	default:
		return fmt.Errorf("unknown record type %d", payload[0])
	}
	return nil
}

func (x *PointerIndex) addMem(p Pointer) {
	x.truncateMem(p.BaseOffset)
	x.ptrs = append(x.ptrs, p)
	if len(x.ptrs) > x.max {
		x.ptrs = append(x.ptrs[:0:0], x.ptrs[len(x.ptrs)-x.max:]...)
	}
}

func (x *PointerIndex) removeMem(bucket, key string) {
	kept := x.ptrs[:0]
	for _, p := range x.ptrs {
		if p.Bucket != bucket || p.Key != key {
			kept = append(kept, p)
		}
	}
	x.ptrs = kept
}

func (x *PointerIndex) truncateMem(off int64) {
	i := sort.Search(len(x.ptrs), func(i int) bool { return x.ptrs[i].LastOffset >= off })
	x.ptrs = x.ptrs[:i]
}

func (x *PointerIndex) pruneMem(off int64) {
	i := sort.Search(len(x.ptrs), func(i int) bool { return x.ptrs[i].LastOffset >= off })
	x.ptrs = append(x.ptrs[:0:0], x.ptrs[i:]...)
}

func (x *PointerIndex) write(payload []byte, sync bool) error {
	var lenCRC [8]byte
	binary.BigEndian.PutUint32(lenCRC[:], uint32(len(payload)))
	binary.BigEndian.PutUint32(lenCRC[4:], crc32.Checksum(payload, castagnoli))
	if _, err := x.w.Write(lenCRC[:]); err != nil {
		return fmt.Errorf("wal: write pointer file: %w", err)
	}
	if _, err := x.w.Write(payload); err != nil {
		return fmt.Errorf("wal: write pointer file: %w", err)
	}
	if err := x.w.Flush(); err != nil {
		return fmt.Errorf("wal: write pointer file: %w", err)
	}
	if sync {
		if err := x.f.Sync(); err != nil {
			return fmt.Errorf("wal: sync pointer file: %w", err)
		}
		if x.dirDirty {
			if err := syncDir(x.dir); err != nil {
				return fmt.Errorf("wal: sync pointer file directory: %w", err)
			}
			x.dirDirty = false
		}
	}
	x.records++
	return x.maybeCompact()
}

// Add records an uploaded chunk's pointer. Pointers must come in offset
// order; a pointer starting at or below the last one's end replaces the
// pointers from its base offset on (the leader re-appended after a
// truncation).
func (x *PointerIndex) Add(p Pointer) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return ErrClosed
	}
	if p.LastOffset < p.BaseOffset {
		return fmt.Errorf("wal: pointer %v: last offset below base", p)
	}
	x.addMem(p)
	e := encoder{b: []byte{addRecord(p)}}
	e.pointer(p)
	return x.write(e.b, false)
}

// RemoveObject drops the pointers into an object (it was deleted).
func (x *PointerIndex) RemoveObject(bucket, key string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return ErrClosed
	}
	n := len(x.ptrs)
	x.removeMem(bucket, key)
	if len(x.ptrs) == n {
		return nil
	}
	e := encoder{b: []byte{recRemoveKey}}
	e.str(bucket)
	e.str(key)
	return x.write(e.b, false)
}

// TruncateFrom drops the pointers that cover offset off or later (the log
// was truncated to end before off). It is fsynced.
func (x *PointerIndex) TruncateFrom(off int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return ErrClosed
	}
	x.truncateMem(off)
	e := encoder{b: []byte{recTruncate}}
	e.i64(off)
	return x.write(e.b, true)
}

// PruneBelow drops the pointers that end below off (the log start moved
// past them, or every replica has them).
func (x *PointerIndex) PruneBelow(off int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return ErrClosed
	}
	n := len(x.ptrs)
	x.pruneMem(off)
	if len(x.ptrs) == n {
		return nil
	}
	e := encoder{b: []byte{recPruneBelow}}
	e.i64(off)
	return x.write(e.b, false)
}

// From returns the pointers that cover offset off and the ones following
// it without a gap, up to about maxBytes of object data (at least one
// pointer). It returns nil when no pointer covers off: the leader then
// serves off inline.
func (x *PointerIndex) From(off, maxBytes int64) []Pointer {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.ptrs), func(i int) bool { return x.ptrs[i].LastOffset >= off })
	if i == len(x.ptrs) || x.ptrs[i].BaseOffset > off {
		return nil
	}
	out := []Pointer{x.ptrs[i]}
	size := x.ptrs[i].Length
	for j := i + 1; j < len(x.ptrs) && size < maxBytes; j++ {
		if x.ptrs[j].BaseOffset != x.ptrs[j-1].LastOffset+1 {
			break
		}
		out = append(out, x.ptrs[j])
		size += x.ptrs[j].Length
	}
	return out
}

// All returns every pointer in offset order.
func (x *PointerIndex) All() []Pointer {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]Pointer(nil), x.ptrs...)
}

// Len is the number of pointers.
func (x *PointerIndex) Len() int { x.mu.Lock(); defer x.mu.Unlock(); return len(x.ptrs) }

// maybeCompact rewrites the file with only the live pointers when it has
// grown well past them.
func (x *PointerIndex) maybeCompact() error {
	if x.records <= 2*len(x.ptrs)+256 {
		return nil
	}
	return x.compactLocked()
}

func (x *PointerIndex) compactLocked() error {
	tmp := filepath.Join(x.dir, PointerFileName+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: compact pointer file: %w", err)
	}
	w := bufio.NewWriter(f)
	var hdr [8]byte
	copy(hdr[:], pointerFileMagic[:])
	binary.BigEndian.PutUint16(hdr[4:], pointerFileVersion)
	_, _ = w.Write(hdr[:])
	for _, p := range x.ptrs {
		e := encoder{b: []byte{addRecord(p)}}
		e.pointer(p)
		var lenCRC [8]byte
		binary.BigEndian.PutUint32(lenCRC[:], uint32(len(e.b)))
		binary.BigEndian.PutUint32(lenCRC[4:], crc32.Checksum(e.b, castagnoli))
		_, _ = w.Write(lenCRC[:])
		_, _ = w.Write(e.b)
	}
	err = w.Flush()
	if err == nil {
		err = os.Rename(tmp, filepath.Join(x.dir, PointerFileName))
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("wal: compact pointer file: %w", err)
	}
	x.f.Close()
	x.f, x.w = f, bufio.NewWriter(f)
	x.records = len(x.ptrs)
	x.dirDirty = true
	_, err = f.Seek(0, io.SeekEnd)
	return err
}

// RemovePointerFile deletes the pointer file in dir, if there is one, and
// syncs the directory, so that none of its pointers comes back after a
// crash. A replica that becomes follower calls it: its log may be
// truncated and rewritten under a later leader epoch, and a pointer file
// left by an earlier run (not open yet after a restart) would otherwise
// outlive that.
func RemovePointerFile(dir string) error {
	err := os.Remove(filepath.Join(dir, PointerFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: remove pointer file: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("wal: remove pointer file: sync directory: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Close syncs and closes the file.
func (x *PointerIndex) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	err := errors.Join(x.w.Flush(), x.f.Sync(), x.f.Close())
	if x.dirDirty {
		err = errors.Join(err, syncDir(x.dir))
	}
	x.f = nil
	return err
}

// addRecord is the record type that adds p.
func addRecord(p Pointer) byte {
	if p.Rebase {
		return recAddRebase
	}
	return recAdd
}

type encoder struct{ b []byte }

func (e *encoder) str(s string) {
	e.b = binary.BigEndian.AppendUint16(e.b, uint16(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) i64(v int64)  { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) i32(v int32)  { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }

func (e *encoder) pointer(p Pointer) {
	e.str(p.Bucket)
	e.str(p.Key)
	e.i64(p.Offset)
	e.i64(p.Length)
	e.str(p.Topic)
	e.i32(p.Partition)
	e.i64(p.BaseOffset)
	e.i64(p.LastOffset)
	e.i32(p.LeaderEpoch)
	e.u32(p.CRC)
}

type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("short record")

func (d *decoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	l := d.take(2)
	if l == nil {
		return ""
	}
	return string(d.take(int(binary.BigEndian.Uint16(l))))
}

func (d *decoder) i64() int64 {
	if v := d.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) pointer() Pointer {
	var p Pointer
	p.Bucket = d.str()
	p.Key = d.str()
	p.Offset = d.i64()
	p.Length = d.i64()
	p.Topic = d.str()
	p.Partition = int32(d.u32())
	p.BaseOffset = d.i64()
	p.LastOffset = d.i64()
	p.LeaderEpoch = int32(d.u32())
	p.CRC = d.u32()
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	return p
}
