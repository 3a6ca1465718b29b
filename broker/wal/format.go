package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"time"
	"unicode/utf8"
)

// Magic opens every WAL object.
var Magic = [4]byte{'S', 'W', 'A', 'L'}

// Version is the format version this package writes and reads.
const Version uint16 = 1

// fixedHeaderSize is the size of the header before its strings.
const fixedHeaderSize = 48

// MinHeaderRead is how many bytes of an object's start are enough to learn
// the full size of its header and chunk table (see HeaderTableSize).
const MinHeaderRead = fixedHeaderSize

// chunkEntryFixed is a table entry's size without its topic bytes.
const chunkEntryFixed = 2 + 4 + 4 + 8 + 8 + 8 + 4 + 4

// Limits the decoder enforces so that a corrupt length never makes it
// allocate much.
const (
	maxStringLen = math.MaxUint16
	maxChunks    = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors; every decoding error is a *CorruptError wrapping one of
// them and ErrCorrupt.
var (
	ErrCorrupt            = errors.New("corrupt WAL object")
	ErrBadMagic           = errors.New("bad magic")
	ErrUnsupportedVersion = errors.New("unsupported format version")
	ErrTruncated          = errors.New("truncated")
	ErrHeaderCRC          = errors.New("header CRC mismatch")
	ErrTableCRC           = errors.New("chunk table CRC mismatch")
	ErrBadTable           = errors.New("invalid chunk table")
	ErrChunkCRC           = errors.New("chunk CRC mismatch")
	ErrChunkContent       = errors.New("chunk content does not match its table entry")
)

// CorruptError says what is wrong with an object and where.
type CorruptError struct {
	// Kind is one of the sentinel errors above.
	Kind error
	// Offset is the byte offset in the object where the problem is.
	Offset int64
	// Chunk is the index of the chunk in the table, -1 for header and table.
	Chunk  int
	Detail string
}

func (e *CorruptError) Error() string {
	where := fmt.Sprintf("at byte %d", e.Offset)
	if e.Chunk >= 0 {
		where = fmt.Sprintf("in chunk %d %s", e.Chunk, where)
	}
	if e.Detail == "" {
		return fmt.Sprintf("wal: %v %s", e.Kind, where)
	}
	return fmt.Sprintf("wal: %v %s: %s", e.Kind, where, e.Detail)
}

// Unwrap lets errors.Is match both the kind and ErrCorrupt.
func (e *CorruptError) Unwrap() []error { return []error{e.Kind, ErrCorrupt} }

func corrupt(kind error, off int64, chunk int, format string, args ...any) *CorruptError {
	return &CorruptError{Kind: kind, Offset: off, Chunk: chunk, Detail: fmt.Sprintf(format, args...)}
}

// Header identifies who wrote an object and when.
type Header struct {
	Version     uint16
	Cluster     string
	Zone        string
	BrokerID    int32
	Incarnation uint64
	Sequence    uint64
	// CreatedAt has millisecond precision.
	CreatedAt time.Time
}

// ChunkInfo is one entry of the chunk table: a run of record batches of one
// partition, one leader epoch, with contiguous offsets.
type ChunkInfo struct {
	Topic       string
	Partition   int32
	LeaderEpoch int32
	BaseOffset  int64
	LastOffset  int64
	// Offset and Length locate the chunk's bytes in the object.
	Offset int64
	Length int64
	// CRC is the CRC-32C of the chunk's bytes.
	CRC uint32
}

// End is the offset of the byte after the chunk.
func (c ChunkInfo) End() int64 { return c.Offset + c.Length }

// Verify checks data (the chunk's bytes) against the entry's length and CRC.
func (c ChunkInfo) Verify(data []byte) error {
	if int64(len(data)) != c.Length {
		return corrupt(ErrTruncated, c.Offset, -1, "chunk %s-%d [%d,%d] has %d bytes, table says %d", c.Topic, c.Partition, c.BaseOffset, c.LastOffset, len(data), c.Length)
	}
	if got := crc32.Checksum(data, castagnoli); got != c.CRC {
		return corrupt(ErrChunkCRC, c.Offset, -1, "chunk %s-%d [%d,%d]: table says %08x, data has %08x", c.Topic, c.Partition, c.BaseOffset, c.LastOffset, c.CRC, got)
	}
	return nil
}

// ChunkInput is one chunk to encode: batches of one partition and epoch
// with contiguous offsets, given as their raw bytes.
type ChunkInput struct {
	Topic       string
	Partition   int32
	LeaderEpoch int32
	BaseOffset  int64
	LastOffset  int64
	Batches     [][]byte
}

func (c ChunkInput) size() int64 {
	var n int64
	for _, b := range c.Batches {
		n += int64(len(b))
	}
	return n
}

// SortChunks orders chunks so that a follower's chunks are contiguous: by
// replica-set key (e.g. the sorted follower IDs of the partition, "" when
// unknown), then topic, partition and base offset. A follower that follows
// several partitions with the same replica set reads them with one GET.
func SortChunks(chunks []ChunkInput, replicaSetKey func(topic string, partition int32) string) {
	keys := make(map[tp]string)
	key := func(c ChunkInput) string {
		if replicaSetKey == nil {
			return ""
		}
		k := tp{c.Topic, c.Partition}
		s, ok := keys[k]
		if !ok {
			s = replicaSetKey(c.Topic, c.Partition)
			keys[k] = s
		}
		return s
	}
	sort.SliceStable(chunks, func(i, j int) bool {
		a, b := chunks[i], chunks[j]
		if ka, kb := key(a), key(b); ka != kb {
			return ka < kb
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.BaseOffset < b.BaseOffset
	})
}

type tp struct {
	topic     string
	partition int32
}

func headerSize(h Header) int { return fixedHeaderSize + 2 + len(h.Cluster) + 2 + len(h.Zone) + 4 }

func tableSize(chunks []ChunkInput) int {
	n := 4
	for _, c := range chunks {
		n += chunkEntryFixed + len(c.Topic)
	}
	return n
}

// Encode lays out an object: header, chunk table, then the chunks' batches
// in the given order (see SortChunks). It returns the object and its table.
func Encode(h Header, chunks []ChunkInput) ([]byte, []ChunkInfo, error) {
	data, infos, _, err := EncodeWithTail(h, chunks, nil)
	return data, infos, err
}

// EncodeWithTail is Encode with opaque byte sets after the last chunk
// (zone-local produce's forwarded records, Uploader.AppendRaw), at the
// returned offsets. The chunk table does not name them: a reader of the
// object's chunks (Decode, DecodeTable, the downloader) never sees them,
// and whoever wrote them keeps their offsets.
func EncodeWithTail(h Header, chunks []ChunkInput, tail [][]byte) ([]byte, []ChunkInfo, []int64, error) {
	data, infos, err := encode(h, chunks, tail)
	if err != nil {
		return nil, nil, nil, err
	}
	offs := make([]int64, len(tail))
	p := int64(len(data))
	for i := len(tail) - 1; i >= 0; i-- {
		p -= int64(len(tail[i]))
		offs[i] = p
	}
	return data, infos, offs, nil
}

func encode(h Header, chunks []ChunkInput, tail [][]byte) ([]byte, []ChunkInfo, error) {
	if len(h.Cluster) > maxStringLen || len(h.Zone) > maxStringLen {
		return nil, nil, errors.New("wal: cluster or zone name too long")
	}
	if len(chunks) > maxChunks {
		return nil, nil, fmt.Errorf("wal: %d chunks, at most %d", len(chunks), maxChunks)
	}
	hs, ts := headerSize(h), tableSize(chunks)
	total := int64(hs + ts)
	for i, c := range chunks {
		if len(c.Topic) > maxStringLen || !utf8.ValidString(c.Topic) {
			return nil, nil, fmt.Errorf("wal: chunk %d: invalid topic name", i)
		}
		if c.LastOffset < c.BaseOffset || c.BaseOffset < 0 {
			return nil, nil, fmt.Errorf("wal: chunk %d (%s-%d): offsets [%d,%d]", i, c.Topic, c.Partition, c.BaseOffset, c.LastOffset)
		}
		if n := c.size(); n == 0 || n > math.MaxUint32 {
			return nil, nil, fmt.Errorf("wal: chunk %d (%s-%d): %d bytes", i, c.Topic, c.Partition, n)
		}
		total += c.size()
	}
	for _, t := range tail {
		total += int64(len(t))
	}
	buf := make([]byte, hs+ts, total)
	be := binary.BigEndian

	copy(buf[0:4], Magic[:])
	be.PutUint16(buf[4:], Version)
	be.PutUint16(buf[6:], 0)
	be.PutUint32(buf[8:], uint32(hs))
	be.PutUint32(buf[12:], uint32(len(chunks)))
	be.PutUint32(buf[16:], uint32(ts))
	be.PutUint32(buf[20:], uint32(h.BrokerID))
	be.PutUint64(buf[24:], h.Incarnation)
	be.PutUint64(buf[32:], h.Sequence)
	be.PutUint64(buf[40:], uint64(h.CreatedAt.UnixMilli()))
	p := fixedHeaderSize
	p = putString(buf, p, h.Cluster)
	p = putString(buf, p, h.Zone)
	be.PutUint32(buf[p:], crc32.Checksum(buf[:p], castagnoli))
	p += 4

	infos := make([]ChunkInfo, len(chunks))
	for i, c := range chunks {
		start := int64(len(buf))
		crc := uint32(0)
		for _, b := range c.Batches {
			buf = append(buf, b...)
			crc = crc32.Update(crc, castagnoli, b)
		}
		infos[i] = ChunkInfo{
			Topic: c.Topic, Partition: c.Partition, LeaderEpoch: c.LeaderEpoch,
			BaseOffset: c.BaseOffset, LastOffset: c.LastOffset,
			Offset: start, Length: int64(len(buf)) - start, CRC: crc,
		}
	}
	tstart := p
	for _, c := range infos {
		p = putString(buf, p, c.Topic)
		be.PutUint32(buf[p:], uint32(c.Partition))
		be.PutUint32(buf[p+4:], uint32(c.LeaderEpoch))
		be.PutUint64(buf[p+8:], uint64(c.BaseOffset))
		be.PutUint64(buf[p+16:], uint64(c.LastOffset))
		be.PutUint64(buf[p+24:], uint64(c.Offset))
		be.PutUint32(buf[p+32:], uint32(c.Length))
		be.PutUint32(buf[p+36:], c.CRC)
		p += 40
	}
	be.PutUint32(buf[p:], crc32.Checksum(buf[tstart:p], castagnoli))
	for _, t := range tail {
		buf = append(buf, t...)
	}
	return buf, infos, nil
}

func putString(buf []byte, p int, s string) int {
	binary.BigEndian.PutUint16(buf[p:], uint16(len(s)))
	return p + 2 + copy(buf[p+2:], s)
}

// HeaderTableSize reads the fixed start of an object (at least
// MinHeaderRead bytes) and returns how many bytes from the object's start
// hold the header and the chunk table, i.e. where the data begins. A reader
// that wants only the table GETs that many bytes.
func HeaderTableSize(prefix []byte) (int64, error) {
	if len(prefix) < fixedHeaderSize {
		return 0, corrupt(ErrTruncated, int64(len(prefix)), -1, "%d bytes, the fixed header needs %d", len(prefix), fixedHeaderSize)
	}
	if [4]byte(prefix[0:4]) != Magic {
		return 0, corrupt(ErrBadMagic, 0, -1, "%q", prefix[0:4])
	}
	if v := binary.BigEndian.Uint16(prefix[4:]); v != Version {
		return 0, corrupt(ErrUnsupportedVersion, 4, -1, "version %d, this broker reads %d", v, Version)
	}
	hs, ts := int64(binary.BigEndian.Uint32(prefix[8:])), int64(binary.BigEndian.Uint32(prefix[16:]))
	if hs < fixedHeaderSize+2+2+4 {
		return 0, corrupt(ErrBadTable, 8, -1, "header length %d", hs)
	}
	if ts < 4 {
		return 0, corrupt(ErrBadTable, 16, -1, "table length %d", ts)
	}
	return hs + ts, nil
}

// DecodeHeader decodes just the header from the start of an object; b
// needs the header's bytes only (headerLength, at most a few hundred).
func DecodeHeader(b []byte) (Header, error) {
	if _, err := HeaderTableSize(b); err != nil {
		return Header{}, err
	}
	be := binary.BigEndian
	hs := int(be.Uint32(b[8:]))
	if len(b) < hs {
		return Header{}, corrupt(ErrTruncated, int64(len(b)), -1, "%d bytes, the header needs %d", len(b), hs)
	}
	if got, want := crc32.Checksum(b[:hs-4], castagnoli), be.Uint32(b[hs-4:]); got != want {
		return Header{}, corrupt(ErrHeaderCRC, int64(hs-4), -1, "stored %08x, computed %08x", want, got)
	}
	h := Header{
		Version:     be.Uint16(b[4:]),
		BrokerID:    int32(be.Uint32(b[20:])),
		Incarnation: be.Uint64(b[24:]),
		Sequence:    be.Uint64(b[32:]),
		CreatedAt:   time.UnixMilli(int64(be.Uint64(b[40:]))).UTC(),
	}
	p := fixedHeaderSize
	var ok bool
	if h.Cluster, p, ok = getString(b[:hs-4], p); !ok {
		return Header{}, corrupt(ErrBadTable, int64(p), -1, "cluster name overruns the header")
	}
	if h.Zone, p, ok = getString(b[:hs-4], p); !ok || p != hs-4 {
		return Header{}, corrupt(ErrBadTable, int64(p), -1, "zone name does not end the header")
	}
	return h, nil
}

// DecodeTable decodes the header and the chunk table from the start of an
// object; b may hold just the first HeaderTableSize bytes. objectSize, when
// >= 0, is the whole object's size and chunk ranges are checked against it.
func DecodeTable(b []byte, objectSize int64) (Header, []ChunkInfo, error) {
	end, err := HeaderTableSize(b)
	if err != nil {
		return Header{}, nil, err
	}
	be := binary.BigEndian
	hs := int(be.Uint32(b[8:]))
	n := int(be.Uint32(b[12:]))
	if int64(len(b)) < end {
		return Header{}, nil, corrupt(ErrTruncated, int64(len(b)), -1, "%d bytes, header and chunk table need %d", len(b), end)
	}
	if objectSize >= 0 && end > objectSize {
		return Header{}, nil, corrupt(ErrTruncated, objectSize, -1, "object of %d bytes, header and chunk table need %d", objectSize, end)
	}
	h, err := DecodeHeader(b)
	if err != nil {
		return Header{}, nil, err
	}
	var ok bool
	var p int

	table := b[hs : end-4]
	if got, want := crc32.Checksum(table, castagnoli), be.Uint32(b[end-4:]); got != want {
		return Header{}, nil, corrupt(ErrTableCRC, end-4, -1, "stored %08x, computed %08x", want, got)
	}
	if n > maxChunks || n*chunkEntryFixed > len(table) {
		return Header{}, nil, corrupt(ErrBadTable, 12, -1, "%d chunks do not fit a %d byte table", n, len(table))
	}
	chunks := make([]ChunkInfo, n)
	p = 0
	for i := range chunks {
		c := &chunks[i]
		at := int64(hs + p)
		if c.Topic, p, ok = getString(table, p); !ok || p+40 > len(table) {
			return Header{}, nil, corrupt(ErrBadTable, at, i, "entry overruns the table")
		}
		c.Partition = int32(be.Uint32(table[p:]))
		c.LeaderEpoch = int32(be.Uint32(table[p+4:]))
		c.BaseOffset = int64(be.Uint64(table[p+8:]))
		c.LastOffset = int64(be.Uint64(table[p+16:]))
		c.Offset = int64(be.Uint64(table[p+24:]))
		c.Length = int64(be.Uint32(table[p+32:]))
		c.CRC = be.Uint32(table[p+36:])
		p += 40
		switch {
		case c.BaseOffset < 0 || c.LastOffset < c.BaseOffset:
			return Header{}, nil, corrupt(ErrBadTable, at, i, "offsets [%d,%d]", c.BaseOffset, c.LastOffset)
		case c.Length == 0 || c.Offset < end || c.Offset > math.MaxInt64-c.Length:
			return Header{}, nil, corrupt(ErrBadTable, at, i, "byte range %d+%d outside the data section (starts at %d)", c.Offset, c.Length, end)
		case objectSize >= 0 && c.End() > objectSize:
			return Header{}, nil, corrupt(ErrTruncated, objectSize, i, "chunk ends at %d, object has %d bytes", c.End(), objectSize)
		}
	}
	if p != len(table) {
		return Header{}, nil, corrupt(ErrBadTable, int64(hs+p), -1, "%d bytes after the last entry", len(table)-p)
	}
	return h, chunks, nil
}

func getString(b []byte, p int) (string, int, bool) {
	if p+2 > len(b) {
		return "", p, false
	}
	n := int(binary.BigEndian.Uint16(b[p:]))
	if p+2+n > len(b) {
		return "", p, false
	}
	return string(b[p+2 : p+2+n]), p + 2 + n, true
}

// Object is a decoded WAL object.
type Object struct {
	Header Header
	Chunks []Chunk
}

// Chunk is one chunk of a decoded object: its table entry, and either its
// verified bytes (aliasing the object) or the error that makes it unusable.
type Chunk struct {
	ChunkInfo
	Data []byte
	Err  error
}

// Decode decodes a whole object. A broken header or table fails the whole
// object; a chunk whose bytes fail their CRC gets Err set and the other
// chunks stay usable.
func Decode(b []byte) (*Object, error) {
	h, infos, err := DecodeTable(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	obj := &Object{Header: h, Chunks: make([]Chunk, len(infos))}
	for i, c := range infos {
		obj.Chunks[i].ChunkInfo = c
		data := b[c.Offset:c.End()]
		if err := c.Verify(data); err != nil {
			var ce *CorruptError
			if errors.As(err, &ce) {
				ce.Chunk = i
			}
			obj.Chunks[i].Err = err
			continue
		}
		obj.Chunks[i].Data = data
	}
	return obj, nil
}
