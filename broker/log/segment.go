package log

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/strata-dev/strata/broker/record"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

func segmentName(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// segment is one .log file with its two indexes. Fields are guarded by the
// owning Log's mu; the files themselves are read without it (see Log).
type segment struct {
	base    int64
	name    string // path of the .log file
	f       File
	offIdx  *index
	timeIdx *index
	txn     *txnIndex // aborted transactions whose marker is in this segment

	size int64 // bytes of whole batches in f
	next int64 // offset after the last batch (or the next segment's base when sealed)

	maxTs         int64 // largest batch MaxTimestamp, -1 when empty
	maxTsOffset   int64 // last offset of the batch holding maxTs
	rollTs        int64 // ms: max(creation time, first batch's MaxTimestamp); segment.ms counts from it
	sinceIndex    int   // bytes appended since the last index entry
	lastTimeEntry int64 // timestamp of the last time index entry, -1 when none
	missingIndex  bool  // an index file did not exist when the segment was opened
}

func openSegmentFiles(fs FS, dir string, base int64, flag int) (*segment, error) {
	s := &segment{base: base, name: segmentName(dir, base, logSuffix), maxTs: -1, maxTsOffset: -1, lastTimeEntry: -1, next: base}
	var err error
	if s.f, err = fs.OpenFile(s.name, os.O_RDWR|flag, 0o644); err != nil {
		return nil, err
	}
	open := func(suffix string, width int) (*index, error) {
		name := segmentName(dir, base, suffix)
		if _, err := fs.Stat(name); err != nil {
			s.missingIndex = true
		}
		f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|flag, 0o644)
		if err != nil {
			return nil, err
		}
		return &index{f: f, name: name, width: width}, nil
	}
	if s.offIdx, err = open(indexSuffix, offsetEntrySize); err != nil {
		s.close()
		return nil, err
	}
	if s.timeIdx, err = open(timeIndexSuffix, timeEntrySize); err != nil {
		s.close()
		return nil, err
	}
	if s.txn, err = openTxnIndex(fs, dir, base, flag); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// createSegment creates an empty active segment.
func createSegment(fs FS, dir string, base int64, nowMs int64) (*segment, error) {
	s, err := openSegmentFiles(fs, dir, base, os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", base, err)
	}
	s.offIdx.mem = make([]byte, 0, 64*offsetEntrySize)
	s.timeIdx.mem = make([]byte, 0, 64*timeEntrySize)
	s.rollTs = nowMs
	return s, nil
}

func (s *segment) close() error {
	var errs []error
	var txnF io.Closer
	if s.txn != nil && s.txn.f != nil {
		txnF = s.txn.f
	}
	for _, f := range []io.Closer{s.f, fileOf(s.offIdx), fileOf(s.timeIdx), txnF} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

func fileOf(ix *index) io.Closer {
	if ix == nil || ix.f == nil {
		return nil
	}
	return ix.f
}

func (s *segment) remove(fs FS) error {
	var errs []error
	names := []string{s.name, s.offIdx.name, s.timeIdx.name}
	if s.txn != nil {
		names = append(names, s.txn.name)
	}
	for _, n := range names {
		if err := fs.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sync persists the in-memory index entries and fsyncs all three files.
func (s *segment) sync() error {
	if err := s.offIdx.persist(); err != nil {
		return err
	}
	if err := s.timeIdx.persist(); err != nil {
		return err
	}
	files := []File{s.f, s.offIdx.f, s.timeIdx.f}
	if s.txn != nil && s.txn.f != nil {
		files = append(files, s.txn.f)
	}
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", s.name, err)
		}
	}
	return nil
}

// seal makes sure the time index ends with the segment's largest
// timestamp (retention and ListOffsets read it from there after a
// restart), writes the indexes and fsyncs. Reads then use the files.
func (s *segment) seal() error {
	if s.maxTs >= 0 && s.maxTs > s.lastTimeEntry {
		s.timeIdx.append(timeEntry(s.maxTs, uint32(s.maxTsOffset-s.base)))
		s.lastTimeEntry = s.maxTs
	}
	if err := s.sync(); err != nil {
		return err
	}
	s.offIdx.mem, s.timeIdx.mem = nil, nil
	return nil
}

// track updates sizes, indexes and timestamps for a batch written at pos.
func (s *segment) track(h record.Header, pos int64, indexInterval int) {
	if s.size == 0 {
		// segment.ms counts from the first batch's timestamp (Kafka), but
		// never from before the segment was created: batches with old
		// CreateTime timestamps would otherwise roll on every append.
		s.rollTs = max(s.rollTs, h.MaxTimestamp)
	}
	size := int64(h.Size())
	s.size = pos + size
	s.next = h.LastOffset() + 1
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.LastOffset()
	}
	s.sinceIndex += int(size)
	if s.sinceIndex > indexInterval {
		s.offIdx.append(offsetEntry(uint32(h.LastOffset()-s.base), uint32(pos)))
		if s.maxTs > s.lastTimeEntry {
			s.timeIdx.append(timeEntry(s.maxTs, uint32(s.maxTsOffset-s.base)))
			s.lastTimeEntry = s.maxTs
		}
		s.sinceIndex = 0
	}
}

// fits reports whether a batch ending at lastOffset can go into s: relative
// offsets must fit the index's uint32 and positions must fit uint32.
func (s *segment) fits(lastOffset int64, bytes int64) bool {
	return lastOffset-s.base <= math.MaxInt32 && s.size+bytes <= math.MaxInt32
}

// lookup returns a byte position at or before the batch containing
// offset: the position of the last indexed batch whose last offset is
// below offset... or at it.
func (s *segment) lookup(offset int64) (int64, error) {
	rel := offset - s.base
	if rel <= 0 {
		return 0, nil
	}
	i, err := s.offIdx.search(func(e []byte) bool {
		r, _ := decodeOffsetEntry(e)
		return int64(r) <= rel
	})
	if err != nil || i < 0 {
		return 0, err
	}
	e, err := s.offIdx.entry(i)
	if err != nil {
		return 0, err
	}
	_, pos := decodeOffsetEntry(e)
	return int64(pos), nil
}

// readHeader reads the batch header at pos of a segment whose valid bytes
// end at limit.
func readHeader(f File, pos, limit int64) (record.Header, error) {
	if limit-pos < record.BatchHeaderSize {
		return record.Header{}, fmt.Errorf("%d bytes left at %d: %w", limit-pos, pos, io.ErrUnexpectedEOF)
	}
	var buf [record.BatchHeaderSize]byte
	if _, err := f.ReadAt(buf[:], pos); err != nil {
		return record.Header{}, err
	}
	h, _ := record.ParseHeader(buf[:])
	if h.BatchLength < record.BatchHeaderSize-12 || pos+int64(h.Size()) > limit {
		return h, fmt.Errorf("batch at %d has length %d, %d bytes left: %w", pos, h.BatchLength, limit-pos, record.ErrCorrupt)
	}
	return h, nil
}

// scanner reads the batches of a segment sequentially, checking each one's
// frame and CRC and that offsets increase.
type scanner struct {
	r    *bufio.Reader
	pos  int64
	end  int64
	next int64 // smallest acceptable base offset
	buf  []byte
}

func newScanner(f File, from, end, next int64) *scanner {
	return &scanner{r: bufio.NewReaderSize(io.NewSectionReader(f, from, end-from), 1<<20), pos: from, end: end, next: next}
}

// scan returns the next batch and its position; io.EOF at a clean end, a
// record.ErrCorrupt-wrapped error at the first bad batch (s.pos is its
// position).
func (sc *scanner) scan() (record.Batch, int64, error) {
	if sc.pos == sc.end {
		return nil, sc.pos, io.EOF
	}
	var lenBuf [12]byte
	if _, err := io.ReadFull(sc.r, lenBuf[:]); err != nil {
		return nil, sc.pos, fmt.Errorf("%w: %d trailing bytes", record.ErrCorrupt, sc.end-sc.pos)
	}
	length := int32(binary.BigEndian.Uint32(lenBuf[8:]))
	size := 12 + int64(length)
	if length < record.BatchHeaderSize-12 || sc.pos+size > sc.end {
		return nil, sc.pos, fmt.Errorf("%w: batch length %d with %d bytes left", record.ErrCorrupt, length, sc.end-sc.pos)
	}
	if cap(sc.buf) < int(size) {
		sc.buf = make([]byte, size)
	}
	b := sc.buf[:size]
	copy(b, lenBuf[:])
	if _, err := io.ReadFull(sc.r, b[12:]); err != nil {
		return nil, sc.pos, fmt.Errorf("read batch: %w", err)
	}
	if _, err := record.CheckFrame(b); err != nil {
		return nil, sc.pos, err
	}
	h := record.Batch(b).Header()
	if h.BaseOffset < sc.next || h.LastOffsetDelta < 0 {
		return nil, sc.pos, fmt.Errorf("%w: batch offsets %d..%d after offset %d", record.ErrCorrupt, h.BaseOffset, h.LastOffset(), sc.next-1)
	}
	pos := sc.pos
	sc.pos += size
	sc.next = h.LastOffset() + 1
	return b, pos, nil
}

// rebuild scans the segment from byte 0, checking every batch, and
// rebuilds both indexes and the in-memory state. It returns the position
// of the first bad batch and the error, or (size, nil).
func (s *segment) rebuild(fileSize int64, indexInterval int, visit func(record.Batch)) (int64, error) {
	if err := s.offIdx.reset(); err != nil {
		return 0, err
	}
	if err := s.timeIdx.reset(); err != nil {
		return 0, err
	}
	s.size, s.next, s.maxTs, s.maxTsOffset, s.sinceIndex, s.lastTimeEntry = 0, s.base, -1, -1, 0, -1
	sc := newScanner(s.f, 0, fileSize, s.base)
	for {
		b, pos, err := sc.scan()
		if err == io.EOF {
			return fileSize, nil
		}
		if err != nil {
			return pos, err
		}
		s.track(b.Header(), pos, indexInterval)
		if visit != nil {
			visit(b)
		}
	}
}
