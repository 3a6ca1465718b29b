package replica

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/wal"
)

// Compact WAL pointers.
//
// A pointer in the per-partition form (EncodePointers) repeats the bucket,
// the object key and the topic for every partition, ~120 bytes each; an
// object holds chunks of many partitions, so one answer to a follower
// named the same key once per partition. With compact pointers the answer
// names each object once, in a top-level tagged field of the Fetch
// response (TagWALPointers: uvarint count, then per object the bucket and
// the key as uvarint-length strings), and each partition's tag holds only
// what differs, ~12 bytes a pointer:
//
//	uvarint count, then per pointer:
//	varint base offset minus the offset expected (0 for the first, then
//	the previous pointer's last offset + 1), uvarint object index,
//	uvarint last-base, uvarint leader epoch, uvarint byte offset,
//	uvarint length, 4-byte big-endian CRC-32C.
//
// Topic and partition are those of the response partition. A follower
// asks for this form with the request's top-level tag TagWALPointers
// (value CompactPointers); a leader that does not know the form ignores
// the tag and answers in the per-partition form, which the follower still
// reads — so brokers of both kinds replicate during a rolling upgrade.
// The leader builds either form with a PointerAnswer.

// CompactPointers is the value of the request's top-level TagWALPointers
// by which a follower accepts compact pointers.
const CompactPointers = 0x02

var errBadCompactPointers = errors.New("replica: malformed compact WAL pointers")

// AsksCompactPointers reports whether a replica fetch accepts compact
// pointers.
func AsksCompactPointers(req *kmsg.FetchRequest) bool {
	v := tagValue(&req.UnknownTags, TagWALPointers)
	return len(v) == 1 && v[0] == CompactPointers
}

// askCompactPointers marks a follower's fetch as accepting them.
func askCompactPointers(req *kmsg.FetchRequest) {
	req.UnknownTags.Set(TagWALPointers, []byte{CompactPointers})
}

// PointerAnswer puts pointers into the partitions of one Fetch response,
// in the form the follower asked for: compact (an object table for the
// whole answer, set by Finish) or per partition (SetPointers).
type PointerAnswer struct {
	compact bool
	index   map[[2]string]uint64
	table   [][2]string
}

// NewPointerAnswer starts an answer; compact is AsksCompactPointers of
// the request.
func NewPointerAnswer(compact bool) *PointerAnswer {
	return &PointerAnswer{compact: compact, index: map[[2]string]uint64{}}
}

// Set puts one partition's pointers (all of that partition, in offset
// order) into sp.
func (a *PointerAnswer) Set(sp *kmsg.FetchResponseTopicPartition, ptrs []wal.Pointer) error {
	if !a.compact {
		return SetPointers(sp, ptrs)
	}
	b := binary.AppendUvarint(nil, uint64(len(ptrs)))
	var next int64
	for _, p := range ptrs {
		if p.LastOffset < p.BaseOffset || p.LeaderEpoch < 0 || p.Offset < 0 || p.Length < 0 {
			return fmt.Errorf("%w: pointer %v", errBadCompactPointers, p)
		}
		o := [2]string{p.Bucket, p.Key}
		idx, ok := a.index[o]
		if !ok {
			idx = uint64(len(a.table))
			a.index[o] = idx
			a.table = append(a.table, o)
		}
		b = binary.AppendVarint(b, p.BaseOffset-next)
		b = binary.AppendUvarint(b, idx)
		b = binary.AppendUvarint(b, uint64(p.LastOffset-p.BaseOffset))
		b = binary.AppendUvarint(b, uint64(p.LeaderEpoch))
		b = binary.AppendUvarint(b, uint64(p.Offset))
		b = binary.AppendUvarint(b, uint64(p.Length))
		b = binary.BigEndian.AppendUint32(b, p.CRC)
		next = p.LastOffset + 1
	}
	sp.UnknownTags.Set(TagWALPointers, b)
	setRebase(sp, ptrs)
	return nil
}

// Finish puts the object table of a compact answer into resp (nothing
// when no pointer was set).
func (a *PointerAnswer) Finish(resp *kmsg.FetchResponse) {
	if len(a.table) == 0 {
		return
	}
	t := binary.AppendUvarint(nil, uint64(len(a.table)))
	for _, o := range a.table {
		for _, s := range o {
			t = binary.AppendUvarint(t, uint64(len(s)))
			t = append(t, s...)
		}
	}
	resp.UnknownTags.Set(TagWALPointers, t)
}

// compactObjects decodes the response's object table; ok is false when
// the response has none (per-partition pointers).
func compactObjects(resp *kmsg.FetchResponse) (objects [][2]string, ok bool, err error) {
	raw := tagValue(&resp.UnknownTags, TagWALPointers)
	if raw == nil {
		return nil, false, nil
	}
	n, l := binary.Uvarint(raw)
	if l <= 0 || n == 0 || n > uint64(len(raw)) {
		return nil, true, fmt.Errorf("%w: object table", errBadCompactPointers)
	}
	raw = raw[l:]
	str := func() (string, bool) {
		size, l := binary.Uvarint(raw)
		if l <= 0 || size == 0 || uint64(len(raw)-l) < size {
			return "", false
		}
		s := string(raw[l : l+int(size)])
		raw = raw[l+int(size):]
		return s, true
	}
	for range n {
		bucket, ok1 := str()
		key, ok2 := str()
		if !ok1 || !ok2 {
			return nil, true, fmt.Errorf("%w: object table", errBadCompactPointers)
		}
		objects = append(objects, [2]string{bucket, key})
	}
	if len(raw) != 0 {
		return nil, true, fmt.Errorf("%w: object table: %d trailing bytes", errBadCompactPointers, len(raw))
	}
	return objects, true, nil
}

// decodeCompactPointers reads one partition's compact pointers.
func decodeCompactPointers(raw []byte, objects [][2]string, topic string, partition int32) ([]wal.Pointer, error) {
	n, l := binary.Uvarint(raw)
	if l <= 0 || n == 0 || n > uint64(len(raw)) {
		return nil, errBadCompactPointers
	}
	raw = raw[l:]
	uv := func() (uint64, bool) {
		v, l := binary.Uvarint(raw)
		if l <= 0 {
			return 0, false
		}
		raw = raw[l:]
		return v, true
	}
	out := make([]wal.Pointer, 0, n)
	var next int64
	for range n {
		delta, l := binary.Varint(raw)
		if l <= 0 {
			return nil, errBadCompactPointers
		}
		raw = raw[l:]
		idx, ok1 := uv()
		span, ok2 := uv()
		epoch, ok3 := uv()
		pos, ok4 := uv()
		length, ok5 := uv()
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || len(raw) < 4 {
			return nil, errBadCompactPointers
		}
		crc := binary.BigEndian.Uint32(raw)
		raw = raw[4:]
		if idx >= uint64(len(objects)) || span > 1<<40 || epoch > 1<<31-1 || pos > 1<<62 || length > 1<<62 {
			return nil, fmt.Errorf("%w: field out of range", errBadCompactPointers)
		}
		base := next + delta
		p := wal.Pointer{
			Bucket: objects[idx][0], Key: objects[idx][1], Offset: int64(pos), Length: int64(length),
			Topic: topic, Partition: partition, BaseOffset: base, LastOffset: base + int64(span),
			LeaderEpoch: int32(epoch), CRC: crc,
		}
		if base < 0 {
			return nil, fmt.Errorf("%w: negative offset", errBadCompactPointers)
		}
		out = append(out, p)
		next = p.LastOffset + 1
	}
	if len(raw) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errBadCompactPointers, len(raw))
	}
	return out, nil
}
