package record

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// Validate splits the record set of a Produce request into batches and
// validates each one as a producer sent it: length framing, magic 2,
// CRC-32C, LastOffsetDelta == NumRecords-1, NumRecords > 0, a known codec,
// no control batch, and every record (decompressing as needed) with offset
// deltas 0..n-1 and consistent lengths. A batch larger than maxBatchBytes,
// or whose records decompress to more than DecompressLimit(maxBatchBytes),
// fails with ErrTooLarge. maxBatchBytes <= 0 (a topic config stored before
// max.message.bytes had to be positive) counts as DefaultMaxMessageBytes,
// never as "no limit".
//
// The returned batches alias records; the log stamps offsets into them in
// place.
func Validate(records []byte, maxBatchBytes int) ([]Batch, error) {
	return validate(records, maxBatchBytes, nil)
}

func validate(records []byte, maxBatchBytes int, budget *Budget) ([]Batch, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: empty record set", ErrInvalidRecord)
	}
	if maxBatchBytes <= 0 {
		maxBatchBytes = DefaultMaxMessageBytes
	}
	var batches []Batch
	for pos := 0; pos < len(records); {
		size, err := CheckFrame(records[pos:])
		if err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", len(batches), pos, err)
		}
		b := Batch(records[pos : pos+size : pos+size])
		if size > maxBatchBytes {
			return nil, fmt.Errorf("batch %d at byte %d: %w: %d bytes, limit %d", len(batches), pos, ErrTooLarge, size, maxBatchBytes)
		}
		if err := validateBatch(b, DecompressLimit(maxBatchBytes), budget); err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", len(batches), pos, err)
		}
		batches = append(batches, b)
		pos += size
	}
	return batches, nil
}

// DecompressionRatio bounds the decompressed size of a batch's records
// relative to max.message.bytes (which bounds its compressed size): with
// the default 1 MiB, 32 MiB. A few KiB of zstd or gzip can inflate to GiBs,
// which cost seconds of CPU to check; real producers fill batches of at
// most a few MiB before compressing.
const DecompressionRatio = 32

// DefaultMaxMessageBytes is Kafka's default max.message.bytes.
const DefaultMaxMessageBytes = 1048588

// MaxDecompressedBytes caps the decompressed records of any one batch,
// whatever max.message.bytes says: Produce accepts no batch beyond it, and
// every path that decodes stored batches (ListOffsets by timestamp, the
// max-timestamp lookup, the log cleaner, the tier) stops there with
// ErrTooLarge. A batch stored before the cap (when max.message.bytes=0
// meant no limit) is refused, not inflated.
const MaxDecompressedBytes = 256 << 20

// DecompressLimit is the decompression budget of one batch of a topic
// whose max.message.bytes is maxBatchBytes: DecompressionRatio times it,
// at most MaxDecompressedBytes; maxBatchBytes <= 0 counts as
// DefaultMaxMessageBytes.
func DecompressLimit(maxBatchBytes int) int64 {
	if maxBatchBytes <= 0 {
		maxBatchBytes = DefaultMaxMessageBytes
	}
	return min(int64(maxBatchBytes)*DecompressionRatio, MaxDecompressedBytes)
}

// validateBatch checks a framed, CRC-checked batch's header and records.
func validateBatch(b Batch, limit int64, budget *Budget) error {
	h := b.Header()
	if h.Attributes&^knownAttributeBits != 0 {
		return fmt.Errorf("%w: unknown attribute bits %#x", ErrInvalidRecord, h.Attributes)
	}
	if h.Codec() > Zstd {
		return fmt.Errorf("%w: %v", ErrUnsupportedCodec, h.Codec())
	}
	if h.NumRecords <= 0 {
		return fmt.Errorf("%w: batch has %d records", ErrInvalidRecord, h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return fmt.Errorf("%w: last offset delta %d does not match %d records", ErrInvalidRecord, h.LastOffsetDelta, h.NumRecords)
	}
	if h.IsControl() {
		return fmt.Errorf("%w: clients may not write control batches", ErrInvalidRecord)
	}
	return walkRecords(b, h, limit, budget, nil, keepNothing, true)
}

// walkRecords walks the records of b and checks their framing. With visit
// non-nil it decodes each record and hands it over, copying key, value
// and headers as keep says (their lengths only otherwise).
// Decompressing more than limit bytes fails with ErrTooLarge. strict
// requires offset deltas 0..n-1 (what producers send); otherwise they only
// have to increase and stay within LastOffsetDelta, as in batches the log
// cleaner rewrote (offsets are kept, records dropped). The decompressed
// bytes of a compressed batch count against budget (nil: none), which
// may lower limit; failing on the lowered limit is ErrBudgetSpent.
func walkRecords(b Batch, h Header, limit int64, budget *Budget, visit func(*Record) error, keep keepMode, strict bool) (err error) {
	bound := false
	if h.Codec() != None {
		limit, bound = budget.limit(limit)
		if bound && limit == 0 {
			return ErrBudgetSpent
		}
	}
	src, done, err := openPayload(h.Codec(), b[BatchHeaderSize:], limit)
	if err != nil {
		if bound && errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("%w: %w", ErrBudgetSpent, err)
		}
		return err
	}
	defer done()
	w := walker{r: src, loose: !strict, prevDelta: -1, lastDelta: int64(h.LastOffsetDelta)}
	if h.Codec() != None {
		defer func() {
			budget.spend(w.n)
			if bound && errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrBudgetSpent) {
				err = fmt.Errorf("%w: %w", ErrBudgetSpent, err)
			}
		}()
	}
	w.sl, _ = src.(*sliceReader)
	k := keep
	if visit == nil {
		k = keepNothing
	}
	// One Record for the whole walk: visit gets a pointer to it (so it
	// lives on the heap), and one per record was an allocation per record.
	// visit must not keep the pointer.
	var rec Record
	for i := int32(0); i < h.NumRecords; i++ {
		var err error
		rec, err = w.record(i, k)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, classify(err))
		}
		if visit != nil {
			if err := visit(&rec); err != nil {
				return err
			}
		}
	}
	if _, err := src.ReadByte(); err == nil {
		return fmt.Errorf("%w: bytes left after %d records", ErrInvalidRecord, h.NumRecords)
	} else if !errors.Is(err, io.EOF) {
		return fmt.Errorf("after %d records: %w", h.NumRecords, classify(err))
	}
	return nil
}

// classify maps errors from walking records to sentinel errors: running out
// of bytes means the records are shorter than they claim (invalid record),
// a decompressor failure means the payload is corrupt.
func classify(err error) error {
	switch {
	case errors.Is(err, ErrInvalidRecord), errors.Is(err, ErrCorrupt), errors.Is(err, ErrTooLarge):
		return err
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: records end early", ErrInvalidRecord)
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

// Record is one decoded record of a batch.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil for a null key (and always from Walk)
	Value          []byte // nil for a null value (and always from Walk)
	Headers        []RecordHeader
	// KeyLen and ValueLen are the lengths of key and value, -1 for null.
	KeyLen, ValueLen int32
}

// RecordHeader is a record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Records decodes every record of a batch, decompressing it, with at most
// limit decompressed bytes (ErrTooLarge past them; DecompressLimit of the
// topic's max.message.bytes, or MaxDecompressedBytes for batches read back
// from a log). It copies every key, value and header: callers that need
// offsets, timestamps or whether a key is null use Walk, which keeps
// nothing. It validates the batch frame and records as Validate does
// (without the control batch rule, and accepting the offset gaps of
// compacted batches: deltas need only increase), so it is safe on
// untrusted bytes.
func Records(b Batch, limit int64) ([]Record, error) {
	var recs []Record
	err := decode(b, limit, func(r *Record) error { recs = append(recs, *r); return nil }, keepAll, nil)
	return recs, err
}

// Walk decodes the records of a batch as Records does, but hands each one
// to visit without its key, value and headers (KeyLen and ValueLen say
// what they were): a walk takes the decoder's memory, not the batch's
// decompressed size. visit's error stops the walk and is returned; the
// Record it gets is reused for the next one, so visit must not keep it.
func Walk(b Batch, limit int64, visit func(*Record) error) error {
	return decode(b, limit, visit, keepNothing, nil)
}

// WalkKeys is Walk with each record's key (copied; nil for a null key):
// what the log cleaner needs of a record, without its value and headers.
func WalkKeys(b Batch, limit int64, visit func(*Record) error) error {
	return decode(b, limit, visit, keepKeys, nil)
}

// keepMode is what a record walk copies out of the batch.
type keepMode uint8

const (
	keepNothing keepMode = iota // lengths only
	keepKeys                    // keys
	keepAll                     // keys, values and headers
)

func decode(b Batch, limit int64, visit func(*Record) error, keep keepMode, budget *Budget) error {
	size, err := CheckFrame(b)
	if err != nil {
		return err
	}
	b = b[:size]
	h := b.Header()
	if h.Codec() > Zstd {
		return fmt.Errorf("%w: %v", ErrUnsupportedCodec, h.Codec())
	}
	// Every record takes at least one byte of the (decompressed) records:
	// of the batch when uncompressed, of the limit when compressed (a zstd
	// batch of 900 KiB holds a million tiny records; refusing it here
	// stopped the cleaner and ListOffsets on batches Produce accepted).
	if most := int64(len(b)); h.NumRecords < 0 || h.Codec() == None && int64(h.NumRecords) > most || int64(h.NumRecords) > limit {
		return fmt.Errorf("%w: batch claims %d records", ErrInvalidRecord, h.NumRecords)
	}
	return walkRecords(b, h, limit, budget, visit, keep, false)
}

// byteSource is what the record walker reads from: a bufio.Reader over a
// decompressor or a sliceReader.
type byteSource interface {
	io.Reader
	io.ByteReader
	Discard(n int) (int, error)
}

// walker reads varint-framed records and counts the bytes it consumed.
type walker struct {
	r  byteSource
	sl *sliceReader // r when records are uncompressed: a fast path without interface calls
	n  int64
	// loose accepts increasing offset deltas up to lastDelta (compacted
	// batches) instead of exactly 0..n-1.
	loose     bool
	prevDelta int64
	lastDelta int64
}

func (w *walker) ReadByte() (byte, error) {
	if w.sl != nil {
		if len(w.sl.b) == 0 {
			return 0, io.EOF
		}
		c := w.sl.b[0]
		w.sl.b = w.sl.b[1:]
		w.n++
		return c, nil
	}
	c, err := w.r.ReadByte()
	if err == nil {
		w.n++
	}
	return c, err
}

// varint reads a zigzag varint as Kafka writes them; out-of-range values
// are invalid records.
func (w *walker) varint(what string, lo, hi int64) (int64, error) {
	v, err := w.readVarint()
	if err != nil {
		return 0, err
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%w: %s %d out of range [%d, %d]", ErrInvalidRecord, what, v, lo, hi)
	}
	return v, nil
}

func (w *walker) readVarint() (int64, error) {
	var ux uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c, err := w.ReadByte()
		if err != nil {
			return 0, err
		}
		ux |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(ux>>1) ^ -int64(ux&1), nil
		}
	}
	return 0, fmt.Errorf("%w: varint overflows 64 bits", ErrInvalidRecord)
}

// bytes reads or skips a length-prefixed field and returns it (when keep)
// and its length. A length of -1 is null when nullable.
func (w *walker) bytes(what string, nullable, keep bool) ([]byte, int32, error) {
	lo := int64(0)
	if nullable {
		lo = -1
	}
	n, err := w.readVarint()
	if err != nil {
		return nil, 0, err
	}
	if n < lo || n > math.MaxInt32 {
		return nil, 0, fmt.Errorf("%w: %s length %d out of range [%d, %d]", ErrInvalidRecord, what, n, lo, math.MaxInt32)
	}
	if n < 0 {
		return nil, -1, nil
	}
	if keep {
		buf := make([]byte, 0, min(n, 1<<20))
		for int64(len(buf)) < n {
			chunk := min(n-int64(len(buf)), 1<<20)
			buf = append(buf, make([]byte, chunk)...)
			k, err := io.ReadFull(w.r, buf[len(buf)-int(chunk):])
			w.n += int64(k)
			if err != nil {
				return nil, 0, err
			}
		}
		return buf, int32(n), nil
	}
	k, err := w.r.Discard(int(n))
	w.n += int64(k)
	return nil, int32(n), err
}

// record reads record number i. Its offset delta must be i and its fields
// must fill exactly the length it declares.
func (w *walker) record(i int32, keep keepMode) (Record, error) {
	var rec Record
	length, err := w.varint("record length", 0, math.MaxInt32)
	if err != nil {
		return rec, err
	}
	start := w.n
	attrs, err := w.ReadByte()
	if err != nil {
		return rec, err
	}
	rec.Attributes = int8(attrs)
	if rec.TimestampDelta, err = w.readVarint(); err != nil {
		return rec, err
	}
	od, err := w.varint("offset delta", math.MinInt32, math.MaxInt32)
	if err != nil {
		return rec, err
	}
	if w.loose {
		if od <= w.prevDelta || od > w.lastDelta {
			return rec, fmt.Errorf("%w: offset delta %d after %d, last offset delta %d", ErrInvalidRecord, od, w.prevDelta, w.lastDelta)
		}
		w.prevDelta = od
	} else if od != int64(i) {
		return rec, fmt.Errorf("%w: offset delta %d, expected %d", ErrInvalidRecord, od, i)
	}
	rec.OffsetDelta = int32(od)
	if rec.Key, rec.KeyLen, err = w.bytes("key", true, keep >= keepKeys); err != nil {
		return rec, err
	}
	if rec.Value, rec.ValueLen, err = w.bytes("value", true, keep == keepAll); err != nil {
		return rec, err
	}
	nh, err := w.varint("header count", 0, math.MaxInt32)
	if err != nil {
		return rec, err
	}
	for j := int64(0); j < nh; j++ {
		if w.n-start > length {
			break // reported below; stops a huge count from looping
		}
		k, _, err := w.bytes("header key", false, keep == keepAll)
		if err != nil {
			return rec, err
		}
		v, _, err := w.bytes("header value", true, keep == keepAll)
		if err != nil {
			return rec, err
		}
		if keep == keepAll {
			rec.Headers = append(rec.Headers, RecordHeader{Key: string(k), Value: v})
		}
	}
	if got := w.n - start; got != length {
		return rec, fmt.Errorf("%w: record declares %d bytes, its fields take %d", ErrInvalidRecord, length, got)
	}
	return rec, nil
}

// sliceReader is a byteSource over uncompressed records.
type sliceReader struct {
	b []byte
}

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

func (s *sliceReader) ReadByte() (byte, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c, nil
}

func (s *sliceReader) Discard(n int) (int, error) {
	if n > len(s.b) {
		k := len(s.b)
		s.b = nil
		return k, io.ErrUnexpectedEOF
	}
	s.b = s.b[n:]
	return n, nil
}
