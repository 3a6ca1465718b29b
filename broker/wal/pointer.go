package wal

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Pointer tells a follower where a leader's appended batches sit in the
// fast tier: one chunk of one object.
type Pointer struct {
	Bucket string
	Key    string
	// Offset and Length are the chunk's byte range in the object.
	Offset int64
	Length int64

	Topic       string
	Partition   int32
	BaseOffset  int64
	LastOffset  int64
	LeaderEpoch int32
	// CRC is the CRC-32C of the byte range.
	CRC uint32
	// Rebase marks a foreign pointer: a range of a zone-local forwarder's
	// object (docs/wal.md "Zone-local produce", "Followers read the
	// forwarded object") holding the batches as the producer sent them,
	// before the leader stamped their base offsets and leader epoch. CRC
	// covers those bytes; a follower checks it, then stamps each batch
	// itself (RebaseBatches) before the batch checks. Never set on the
	// pointers of the leader's own objects.
	Rebase bool
}

// PointerTo returns the pointer to chunk c of object key in bucket.
func PointerTo(bucket, key string, c ChunkInfo) Pointer {
	return Pointer{
		Bucket: bucket, Key: key, Offset: c.Offset, Length: c.Length,
		Topic: c.Topic, Partition: c.Partition, BaseOffset: c.BaseOffset, LastOffset: c.LastOffset,
		LeaderEpoch: c.LeaderEpoch, CRC: c.CRC,
	}
}

// Chunk returns the chunk table entry the pointer was made from.
func (p Pointer) Chunk() ChunkInfo {
	return ChunkInfo{
		Topic: p.Topic, Partition: p.Partition, LeaderEpoch: p.LeaderEpoch,
		BaseOffset: p.BaseOffset, LastOffset: p.LastOffset, Offset: p.Offset, Length: p.Length, CRC: p.CRC,
	}
}

func (p Pointer) String() string {
	rebase := ""
	if p.Rebase {
		rebase = " (rebase)"
	}
	return fmt.Sprintf("%s-%d[%d,%d]@s3://%s/%s[%d+%d]%s", p.Topic, p.Partition, p.BaseOffset, p.LastOffset, p.Bucket, p.Key, p.Offset, p.Length, rebase)
}

// KeyPrefix is the first component of every WAL object key.
const KeyPrefix = "wal/"

// ObjectKey is wal/<cluster>/<zone>/<brokerID>/<incarnation>/<seq:020d>, so
// that one uploader's objects list in upload order and sweep by prefix.
// <cluster> may itself contain '/': a broker configured by the operator
// is named <namespace>/<name> (metadata.etcd.prefix /strata/<ns>/<name>/).
// <zone> must not.
func ObjectKey(cluster, zone string, brokerID int32, incarnation, seq uint64) string {
	return fmt.Sprintf("%s%s/%s/%d/%d/%020d", KeyPrefix, cluster, zone, brokerID, incarnation, seq)
}

// KeyInfo is what an object key says about its object.
type KeyInfo struct {
	Cluster     string
	Zone        string
	BrokerID    int32
	Incarnation uint64
	Sequence    uint64
}

// ParseKey decodes an ObjectKey. The last four segments are zone, broker
// ID, incarnation and sequence; everything between wal/ and them is the
// cluster name, slashes included (no segment of it may be empty).
func ParseKey(key string) (KeyInfo, error) {
	all := strings.Split(strings.TrimPrefix(key, KeyPrefix), "/")
	n := len(all)
	if !strings.HasPrefix(key, KeyPrefix) || n < 5 || slices.Contains(all[:n-3], "") || len(all[n-1]) != 20 {
		return KeyInfo{}, fmt.Errorf("wal: %q is not a WAL object key (wal/<cluster>/<zone>/<brokerID>/<incarnation>/<seq:020d>)", key)
	}
	parts := append([]string{strings.Join(all[:n-4], "/")}, all[n-4:]...)
	broker, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("wal: key %q: broker id: %w", key, err)
	}
	inc, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("wal: key %q: incarnation: %w", key, err)
	}
	seq, err := strconv.ParseUint(parts[4], 10, 64)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("wal: key %q: sequence: %w", key, err)
	}
	return KeyInfo{Cluster: parts[0], Zone: parts[1], BrokerID: int32(broker), Incarnation: inc, Sequence: seq}, nil
}

// pointerEncodingVersion opens a marshalled pointer.
const pointerEncodingVersion byte = 1

// AppendBinary appends the pointer's binary form (version byte, then the
// fields as in the pointer file) to b; replica fetch responses carry
// pointers in this form.
func (p Pointer) AppendBinary(b []byte) ([]byte, error) {
	if p.Rebase {
		// Followers learn of foreign pointers only through the Fetch
		// response's TagWALRebase (broker/replica), which a follower
		// that does not read it never gets; the binary form has no flag.
		return b, fmt.Errorf("wal: pointer %v: a foreign pointer has no binary form", p)
	}
	if len(p.Bucket) > maxStringLen || len(p.Key) > maxStringLen || len(p.Topic) > maxStringLen {
		return b, fmt.Errorf("wal: pointer %v: name too long", p)
	}
	e := encoder{b: append(b, pointerEncodingVersion)}
	e.pointer(p)
	return e.b, nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (p Pointer) MarshalBinary() ([]byte, error) { return p.AppendBinary(nil) }

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (p *Pointer) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != pointerEncodingVersion {
		return fmt.Errorf("%w: unknown pointer encoding", ErrBadPointer)
	}
	d := decoder{b: b[1:]}
	q := d.pointer()
	if d.err != nil {
		return fmt.Errorf("%w: %v", ErrBadPointer, d.err)
	}
	*p = q
	return nil
}
