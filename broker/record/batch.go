package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// BatchHeaderSize is the size of a v2 record batch header, from BaseOffset
// through NumRecords. The records follow it.
const BatchHeaderSize = 61

// Field positions inside a v2 batch header.
const (
	posBaseOffset      = 0
	posBatchLength     = 8
	posLeaderEpoch     = 12
	posMagic           = 16
	posCRC             = 17
	posAttributes      = 21
	posLastOffsetDelta = 23
	posBaseTimestamp   = 27
	posMaxTimestamp    = 35
	posProducerID      = 43
	posProducerEpoch   = 51
	posBaseSequence    = 53
	posNumRecords      = 57

	// lengthFieldEnd is where the bytes counted by BatchLength start.
	lengthFieldEnd = 12
	// minBatchLength is BatchLength of a batch with no record bytes.
	minBatchLength = BatchHeaderSize - lengthFieldEnd
)

// Attribute bits.
const (
	codecMask          = 0x07
	timestampTypeMask  = 0x08
	transactionalMask  = 0x10
	controlMask        = 0x20
	deleteHorizonMask  = 0x40
	knownAttributeBits = codecMask | timestampTypeMask | transactionalMask | controlMask | deleteHorizonMask
)

// Timestamp types as returned by Header.TimestampType.
const (
	TimestampCreateTime    = 0
	TimestampLogAppendTime = 1
)

// castagnoli is the CRC-32C table used by magic v2 batches.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors. Validate wraps them with detail; callers map them to
// Kafka error codes with errors.Is.
var (
	// ErrCorrupt: framing or CRC is wrong, or the compressed payload does
	// not decompress (CORRUPT_MESSAGE).
	ErrCorrupt = errors.New("corrupt record batch")
	// ErrInvalidRecord: the batch frames and checksums correctly but its
	// contents break the format (INVALID_RECORD).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrTooLarge: a batch is larger than allowed (MESSAGE_TOO_LARGE).
	ErrTooLarge = errors.New("record batch too large")
	// ErrUnsupportedMagic: not a magic v2 batch
	// (UNSUPPORTED_FOR_MESSAGE_FORMAT or CORRUPT_MESSAGE).
	ErrUnsupportedMagic = errors.New("unsupported record batch magic")
	// ErrUnsupportedCodec: compression codec bits name no known codec
	// (UNSUPPORTED_COMPRESSION_TYPE).
	ErrUnsupportedCodec = errors.New("unsupported compression codec")
)

// Codec is the compression codec of a batch (attribute bits 0-2).
type Codec int8

// Codecs Kafka defines.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Header is the decoded header of a magic v2 record batch.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Codec returns the compression codec.
func (h Header) Codec() Codec { return Codec(h.Attributes & codecMask) }

// IsTransactional reports whether the batch is part of a transaction.
func (h Header) IsTransactional() bool { return h.Attributes&transactionalMask != 0 }

// IsControl reports whether the batch holds control records.
func (h Header) IsControl() bool { return h.Attributes&controlMask != 0 }

// TimestampType returns TimestampCreateTime (0) or TimestampLogAppendTime (1).
func (h Header) TimestampType() int {
	if h.Attributes&timestampTypeMask != 0 {
		return TimestampLogAppendTime
	}
	return TimestampCreateTime
}

// RecordTimestamp is the timestamp of a record of this batch: the batch's
// MaxTimestamp under LogAppendTime, BaseTimestamp+TimestampDelta otherwise.
func (h Header) RecordTimestamp(r Record) int64 {
	if h.TimestampType() == TimestampLogAppendTime {
		return h.MaxTimestamp
	}
	return h.BaseTimestamp + r.TimestampDelta
}

// LastOffset is the offset of the last record of the batch.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset following the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Size is the size of the whole batch in bytes.
func (h Header) Size() int { return lengthFieldEnd + int(h.BatchLength) }

// LastSequence is the sequence number of the last record, wrapping at
// MaxInt32 as Kafka does; -1 when the batch has no sequence.
func (h Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (1 << 31))
}

// ParseHeader decodes the header at the start of b. It checks only that b
// holds a whole header; Validate checks the rest.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < BatchHeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, a batch header needs %d", ErrCorrupt, len(b), BatchHeaderSize)
	}
	return parseHeader(b), nil
}

func parseHeader(b []byte) Header {
	be := binary.BigEndian
	return Header{
		BaseOffset:           int64(be.Uint64(b[posBaseOffset:])),
		BatchLength:          int32(be.Uint32(b[posBatchLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[posLeaderEpoch:])),
		Magic:                int8(b[posMagic]),
		CRC:                  be.Uint32(b[posCRC:]),
		Attributes:           int16(be.Uint16(b[posAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[posLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[posBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[posMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[posProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[posProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[posBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[posNumRecords:])),
	}
}

// Batch is one whole magic v2 record batch, header included.
type Batch []byte

// Header decodes the batch header. The batch must have been validated (or
// checked with CheckFrame); Header panics on fewer than BatchHeaderSize bytes.
func (b Batch) Header() Header { return parseHeader(b) }

// BaseOffset returns the base offset without decoding the whole header.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[posBaseOffset:])) }

// LastOffset returns the last offset without decoding the whole header.
func (b Batch) LastOffset() int64 {
	return b.BaseOffset() + int64(int32(binary.BigEndian.Uint32(b[posLastOffsetDelta:])))
}

// ComputeCRC returns the CRC-32C of the bytes the CRC field covers.
func ComputeCRC(b Batch) uint32 { return crc32.Checksum(b[posAttributes:], castagnoli) }

// SetBaseOffset stamps the base offset in place. BaseOffset is outside the
// CRC, so the CRC stays valid.
func SetBaseOffset(b Batch, off int64) {
	binary.BigEndian.PutUint64(b[posBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch stamps the leader epoch in place (outside the CRC).
func SetPartitionLeaderEpoch(b Batch, epoch int32) {
	binary.BigEndian.PutUint32(b[posLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks the batch's timestamps as LogAppendTime, sets
// MaxTimestamp to ts and recomputes the CRC, as Kafka does for topics with
// message.timestamp.type=LogAppendTime.
func SetLogAppendTime(b Batch, ts int64) {
	attrs := binary.BigEndian.Uint16(b[posAttributes:])
	binary.BigEndian.PutUint16(b[posAttributes:], attrs|timestampTypeMask)
	binary.BigEndian.PutUint64(b[posMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[posCRC:], ComputeCRC(b))
}

// CheckFrame checks that b starts with a whole magic v2 batch whose CRC
// matches and returns its size. It does not look inside the records; the log
// uses it to verify stored batches during recovery.
func CheckFrame(b []byte) (int, error) {
	if len(b) < lengthFieldEnd {
		return 0, fmt.Errorf("%w: %d bytes left, need %d for the batch length", ErrCorrupt, len(b), lengthFieldEnd)
	}
	length := int32(binary.BigEndian.Uint32(b[posBatchLength:]))
	if length < minBatchLength {
		return 0, fmt.Errorf("%w: batch length %d is below the minimum %d", ErrCorrupt, length, minBatchLength)
	}
	size := lengthFieldEnd + int(length)
	if size > len(b) {
		return 0, fmt.Errorf("%w: batch of %d bytes truncated to %d", ErrCorrupt, size, len(b))
	}
	if m := int8(b[posMagic]); m != 2 {
		return 0, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, m)
	}
	if want, got := binary.BigEndian.Uint32(b[posCRC:]), crc32.Checksum(b[posAttributes:size], castagnoli); want != got {
		return 0, fmt.Errorf("%w: crc mismatch: header says %08x, data has %08x", ErrCorrupt, want, got)
	}
	return size, nil
}

// Split splits stored or replicated batches (offsets already stamped, as
// in a Fetch response, a WAL object or a segment file) into whole batches,
// checking each one's frame, magic and CRC but not the producer rules
// Validate applies (control batches are allowed). A partial trailing batch,
// as a Fetch response may end with, is reported by partial rather than as
// an error.
func Split(records []byte) (batches []Batch, partial int, err error) {
	for pos := 0; pos < len(records); {
		rest := records[pos:]
		if len(rest) < BatchHeaderSize || lengthFieldEnd+int(int32(binary.BigEndian.Uint32(rest[posBatchLength:]))) > len(rest) {
			if len(rest) >= lengthFieldEnd && int32(binary.BigEndian.Uint32(rest[posBatchLength:])) < minBatchLength {
				return nil, 0, fmt.Errorf("batch %d at byte %d: %w: batch length %d", len(batches), pos, ErrCorrupt, int32(binary.BigEndian.Uint32(rest[posBatchLength:])))
			}
			return batches, len(rest), nil
		}
		size, err := CheckFrame(rest)
		if err != nil {
			return nil, 0, fmt.Errorf("batch %d at byte %d: %w", len(batches), pos, err)
		}
		h := parseHeader(rest)
		if h.LastOffsetDelta < 0 {
			return nil, 0, fmt.Errorf("batch %d at byte %d: %w: last offset delta %d", len(batches), pos, ErrCorrupt, h.LastOffsetDelta)
		}
		batches = append(batches, Batch(rest[:size:size]))
		pos += size
	}
	return batches, 0, nil
}
