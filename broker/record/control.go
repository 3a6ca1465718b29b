package record

import (
	"encoding/binary"
	"fmt"
)

// Control records (transaction markers). A control batch has the control
// and transactional attribute bits set and holds one record whose key is
// version int16 (0) | type int16 and whose value is, for COMMIT and ABORT,
// version int16 (0) | coordinatorEpoch int32 — Kafka's
// ControlRecordType and EndTransactionMarker. Consumers skip control
// batches; the log reads the type to end a producer's transaction.

// ControlType is the type in a control record's key.
type ControlType int16

// Control record types Kafka defines.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("control(%d)", int16(t))
}

// Marker is a decoded end-transaction marker.
type Marker struct {
	Type             ControlType
	CoordinatorEpoch int32
}

// BuildMarker encodes a COMMIT or ABORT control batch for a producer, as
// the partition leader appends it for WriteTxnMarkers. Offsets and the
// leader epoch are stamped by the log.
func BuildMarker(producerID int64, producerEpoch int16, m Marker, timestamp int64) (Batch, error) {
	if m.Type != ControlAbort && m.Type != ControlCommit {
		return nil, fmt.Errorf("%w: marker type %d", ErrInvalidRecord, m.Type)
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(m.Type))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(m.CoordinatorEpoch))
	spec := BatchSpec{
		BaseTimestamp: timestamp, PartitionLeaderEpoch: -1,
		ProducerID: producerID, ProducerEpoch: producerEpoch, BaseSequence: -1,
		Transactional: true, Control: true,
	}
	return Build(spec, []Record{{Key: key, Value: value}})
}

// controlLimit bounds the decompressed records of a control batch: one
// marker record of a few bytes.
const controlLimit = 64 << 10

// ParseMarker decodes the marker of a control batch. It checks the batch
// frame and CRC (untrusted bytes are fine) and returns ErrInvalidRecord for
// a batch that is not a control batch or whose key is not a marker's.
func ParseMarker(b Batch) (Marker, error) {
	size, err := CheckFrame(b)
	if err != nil {
		return Marker{}, err
	}
	h := b[:size].Header()
	if !h.IsControl() {
		return Marker{}, fmt.Errorf("%w: not a control batch", ErrInvalidRecord)
	}
	recs, err := Records(b[:size], controlLimit)
	if err != nil {
		return Marker{}, err
	}
	if len(recs) == 0 {
		return Marker{}, fmt.Errorf("%w: control batch without records", ErrInvalidRecord)
	}
	k := recs[0].Key
	if len(k) < 4 {
		return Marker{}, fmt.Errorf("%w: control record key of %d bytes", ErrInvalidRecord, len(k))
	}
	m := Marker{Type: ControlType(binary.BigEndian.Uint16(k[2:4])), CoordinatorEpoch: -1}
	if m.Type != ControlAbort && m.Type != ControlCommit {
		return m, fmt.Errorf("%w: control record type %d is not a transaction marker", ErrInvalidRecord, m.Type)
	}
	if v := recs[0].Value; len(v) >= 6 {
		m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(v[2:6]))
	}
	return m, nil
}

// DeleteHorizon returns the delete horizon the log cleaner stamped into a
// batch (KIP-534: attribute bit 6 set, the base timestamp is the horizon
// in Unix ms), ok false when it has none.
func (h Header) DeleteHorizon() (ms int64, ok bool) {
	if h.Attributes&deleteHorizonMask == 0 {
		return -1, false
	}
	return h.BaseTimestamp, true
}

// WithDeleteHorizon returns a copy of the uncompressed control batch b
// with its delete horizon set to ms (KIP-534, as Kafka's cleaner writes
// it): attribute bit 6 set, the base timestamp becomes ms, and the
// records' timestamp deltas are rewritten so that each record keeps its
// timestamp. Offsets, producer fields and the leader epoch stay.
func WithDeleteHorizon(b Batch, ms int64) (Batch, error) {
	size, err := CheckFrame(b)
	if err != nil {
		return nil, err
	}
	b = b[:size]
	h := b.Header()
	if !h.IsControl() || h.Codec() != None {
		return nil, fmt.Errorf("%w: delete horizon on a batch that is not an uncompressed control batch", ErrInvalidRecord)
	}
	recs, err := Records(b, controlLimit)
	if err != nil {
		return nil, err
	}
	var body []byte
	for _, r := range recs {
		r.TimestampDelta = h.BaseTimestamp + r.TimestampDelta - ms
		body = appendRecord(body, r.OffsetDelta, r)
	}
	out := make([]byte, BatchHeaderSize, BatchHeaderSize+len(body))
	copy(out, b[:BatchHeaderSize])
	be := binary.BigEndian
	be.PutUint32(out[posBatchLength:], uint32(BatchHeaderSize-lengthFieldEnd+len(body)))
	be.PutUint16(out[posAttributes:], uint16(h.Attributes)|deleteHorizonMask)
	be.PutUint64(out[posBaseTimestamp:], uint64(ms))
	out = append(out, body...)
	be.PutUint32(out[posCRC:], ComputeCRC(out))
	return out, nil
}
