package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// BatchSpec describes the header fields of a batch Build encodes.
type BatchSpec struct {
	Codec                Codec
	BaseOffset           int64
	BaseTimestamp        int64
	PartitionLeaderEpoch int32
	ProducerID           int64 // -1: not idempotent
	ProducerEpoch        int16 // -1 without a producer
	BaseSequence         int32 // -1 without a producer
	Transactional        bool
	Control              bool
	LogAppendTime        bool
}

// DefaultSpec is the spec of a plain, uncompressed, non-idempotent batch as
// a producer sends it.
func DefaultSpec() BatchSpec {
	return BatchSpec{PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

// Build encodes records into a magic v2 batch, compressing them with
// spec.Codec (snappy in the xerial framing the Java client writes). Record
// offset deltas are set to 0..n-1; TimestampDelta is taken from each record.
// It is used by tests, tools and for broker-written batches.
func Build(spec BatchSpec, recs []Record) (Batch, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: no records", ErrInvalidRecord)
	}
	var body []byte
	maxDelta := int64(0)
	for i, r := range recs {
		body = appendRecord(body, int32(i), r)
		maxDelta = max(maxDelta, r.TimestampDelta)
	}
	payload, err := compress(spec.Codec, body)
	if err != nil {
		return nil, err
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(payload))
	be := binary.BigEndian
	attrs := uint16(spec.Codec) & codecMask
	if spec.LogAppendTime {
		attrs |= timestampTypeMask
	}
	if spec.Transactional {
		attrs |= transactionalMask
	}
	if spec.Control {
		attrs |= controlMask
	}
	be.PutUint64(b[posBaseOffset:], uint64(spec.BaseOffset))
	be.PutUint32(b[posBatchLength:], uint32(BatchHeaderSize-lengthFieldEnd+len(payload)))
	be.PutUint32(b[posLeaderEpoch:], uint32(spec.PartitionLeaderEpoch))
	b[posMagic] = 2
	be.PutUint16(b[posAttributes:], attrs)
	be.PutUint32(b[posLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[posBaseTimestamp:], uint64(spec.BaseTimestamp))
	be.PutUint64(b[posMaxTimestamp:], uint64(spec.BaseTimestamp+maxDelta))
	be.PutUint64(b[posProducerID:], uint64(spec.ProducerID))
	be.PutUint16(b[posProducerEpoch:], uint16(spec.ProducerEpoch))
	be.PutUint32(b[posBaseSequence:], uint32(spec.BaseSequence))
	be.PutUint32(b[posNumRecords:], uint32(len(recs)))
	b = append(b, payload...)
	be.PutUint32(b[posCRC:], ComputeCRC(b))
	return b, nil
}

func appendVarintBytes(dst, b []byte, null bool) []byte {
	if null {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func appendRecord(dst []byte, offsetDelta int32, r Record) []byte {
	var body []byte
	body = append(body, byte(r.Attributes))
	body = binary.AppendVarint(body, r.TimestampDelta)
	body = binary.AppendVarint(body, int64(offsetDelta))
	body = appendVarintBytes(body, r.Key, r.Key == nil)
	body = appendVarintBytes(body, r.Value, r.Value == nil)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = appendVarintBytes(body, []byte(h.Key), false)
		body = appendVarintBytes(body, h.Value, h.Value == nil)
	}
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

var (
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
)

func compress(c Codec, body []byte) ([]byte, error) {
	switch c {
	case None:
		return body, nil
	case Gzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case Snappy:
		out := append([]byte{}, xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1)
		out = binary.BigEndian.AppendUint32(out, 1)
		for len(body) > 0 {
			n := min(len(body), 32<<10)
			block := s2.EncodeSnappy(nil, body[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			body = body[n:]
		}
		return out, nil
	case LZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case Zstd:
		zstdEncOnce.Do(func() {
			zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		})
		return zstdEnc.EncodeAll(body, nil), nil
	}
	return nil, fmt.Errorf("%w: %v", ErrUnsupportedCodec, c)
}

// Rebuild re-encodes a stored batch with only the records kept (the log
// cleaner's rewrite). Everything that identifies the batch stays: base
// offset, last offset delta (so the producer's last sequence and the
// offsets after the batch do not move), leader epoch, producer id, epoch
// and base sequence, attributes and base timestamp; each kept record keeps
// its offset and timestamp deltas. The records are compressed again with
// the batch's codec and the CRC is recomputed. MaxTimestamp is the largest
// kept record timestamp (CreateTime) or unchanged (LogAppendTime, or no
// record kept). kept may be empty: Kafka keeps such an empty batch when it
// is an idempotent producer's last one, so that its sequence survives.
func Rebuild(orig Batch, kept []Record) (Batch, error) {
	h := orig.Header()
	var body []byte
	maxTs := int64(-1)
	for _, r := range kept {
		body = appendRecord(body, r.OffsetDelta, r)
		maxTs = max(maxTs, h.BaseTimestamp+r.TimestampDelta)
	}
	payload, err := compress(h.Codec(), body)
	if err != nil {
		return nil, fmt.Errorf("rebuild batch at %d: %w", h.BaseOffset, err)
	}
	if len(kept) == 0 || h.TimestampType() == TimestampLogAppendTime {
		maxTs = h.MaxTimestamp
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(payload))
	copy(b, orig[:BatchHeaderSize])
	be := binary.BigEndian
	be.PutUint32(b[posBatchLength:], uint32(BatchHeaderSize-lengthFieldEnd+len(payload)))
	be.PutUint64(b[posMaxTimestamp:], uint64(maxTs))
	be.PutUint32(b[posNumRecords:], uint32(len(kept)))
	b = append(b, payload...)
	be.PutUint32(b[posCRC:], ComputeCRC(b))
	return b, nil
}
