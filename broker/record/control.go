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
