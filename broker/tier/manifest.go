package tier

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ManifestVersion is the format version of the manifests this package writes.
const ManifestVersion = 1

// Manifest is the slow tier's record of one partition: which segments it
// holds and from which offset it may be read. It is written whole, as a
// new object per version (see Key), never changed in place.
type Manifest struct {
	Version   int    `json:"version"`
	Topic     string `json:"topic"`
	TopicID   string `json:"topicId"`
	Partition int32  `json:"partition"`
	// LeaderEpoch is the epoch of the leader that wrote this version and
	// Seq its number; both are in the object key.
	LeaderEpoch int32 `json:"leaderEpoch"`
	Seq         int64 `json:"seq"`
	// StartOffset is the first offset readable from the tier (moved by
	// retention and DeleteRecords); EndOffset is the offset after the last
	// uploaded batch, where the next upload starts.
	StartOffset int64     `json:"startOffset"`
	EndOffset   int64     `json:"endOffset"`
	Segments    []Segment `json:"segments"`
}

// Segment is one uploaded segment: the batches of a local segment from
// BaseOffset to LastOffset, exactly as in the leader's log.
type Segment struct {
	// BaseOffset is the first batch's base offset, LastOffset the last
	// batch's last offset.
	BaseOffset int64 `json:"baseOffset"`
	LastOffset int64 `json:"lastOffset"`
	// LeaderEpoch is the epoch of the leader that uploaded it (part of its
	// object key, so two leaders never write the same object).
	LeaderEpoch int32 `json:"leaderEpoch"`
	// Size is the data object's length and CRC its CRC-32C (Castagnoli).
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc"`
	// MaxTimestamp is the largest batch MaxTimestamp, -1 when none.
	MaxTimestamp int64 `json:"maxTimestamp"`
	// Key is the data object's key below the partition prefix; the offset
	// and time indexes are Key+".index" and Key+".timeindex", the
	// aborted-transaction index Key+".txnindex".
	Key           string `json:"key"`
	IndexSize     int64  `json:"indexSize"`
	TimeIndexSize int64  `json:"timeIndexSize"`
	// TxnIndexSize is the length of the aborted-transaction index (the
	// entries whose ABORT marker is in this segment, the local .txnindex
	// format); 0 when it has none, and then no object is written.
	// Manifests written before it existed have none: their segments read
	// as holding no aborted transaction.
	TxnIndexSize int64 `json:"txnIndexSize,omitempty"`
	// ProducerSnapshotSize is the length of the leader's idempotent-producer
	// snapshot as of LastOffset+1 (package log's snapshot format), object
	// Key+".producers"; 0 when none was uploaded (older manifests, or the
	// leader had none). A replica hydrated from the next segment on starts
	// from it, so it knows the producers whose batches are only in the tier.
	ProducerSnapshotSize int64 `json:"producerSnapshotSize,omitempty"`
	// Epochs is the segment's leader-epoch lineage: the leader epoch of
	// its batches and the offset where each starts (as a log's
	// leader-epoch checkpoint). A new leader compares the manifest's
	// lineage with its log's epochs before it uploads (lineage.go).
	// Manifests written before it existed have none: their segments'
	// lineage is unknown and never compared.
	Epochs []EpochStart `json:"epochs,omitempty"`
}

// EpochStart is one entry of a lineage: batches of Epoch from Start on.
type EpochStart struct {
	Epoch int32 `json:"epoch"`
	Start int64 `json:"start"`
}

// empty reports whether the manifest was never written.
func (m *Manifest) empty() bool { return m.Seq < 0 }

func (m *Manifest) clone() *Manifest {
	c := *m
	c.Segments = append([]Segment(nil), m.Segments...)
	for i := range c.Segments {
		c.Segments[i].Epochs = append([]EpochStart(nil), c.Segments[i].Epochs...)
	}
	return &c
}

// segmentFor returns the index of the segment holding offset (the first
// whose last offset is at or above it), or -1.
func (m *Manifest) segmentFor(offset int64) int {
	for i, s := range m.Segments {
		if s.LastOffset >= offset {
			return i
		}
	}
	return -1
}

// Size is the bytes of all segments.
func (m *Manifest) Size() int64 {
	var n int64
	for _, s := range m.Segments {
		n += s.Size
	}
	return n
}

// check verifies what a reader relies on: segments in offset order, within
// [StartOffset's segment, EndOffset), and no negative object size (a size
// is a read's length: -1 reads a whole object, FuzzDecodeManifest).
func (m *Manifest) check() error {
	if m.Version != ManifestVersion {
		return fmt.Errorf("manifest version %d, want %d", m.Version, ManifestVersion)
	}
	prev := int64(-1)
	for i, s := range m.Segments {
		if s.BaseOffset <= prev || s.LastOffset < s.BaseOffset || s.LastOffset >= m.EndOffset || s.Key == "" {
			return fmt.Errorf("manifest segment %d [%d, %d] %q out of order (previous last %d, end %d)", i, s.BaseOffset, s.LastOffset, s.Key, prev, m.EndOffset)
		}
		if s.Size < 0 || s.IndexSize < 0 || s.TimeIndexSize < 0 || s.TxnIndexSize < 0 || s.ProducerSnapshotSize < 0 {
			return fmt.Errorf("manifest segment %d [%d, %d] has a negative object size", i, s.BaseOffset, s.LastOffset)
		}
		prev = s.LastOffset
	}
	if m.StartOffset > m.EndOffset {
		return fmt.Errorf("manifest start %d past its end %d", m.StartOffset, m.EndOffset)
	}
	return nil
}

func decodeManifest(raw []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Object keys, below tier/<cluster>/<topic>-<topicID>/<partition>/:
//
//	manifest/<leaderEpoch:010d>-<seq:020d>.json   one object per version
//	segments/<base:020d>-<last:020d>-<epoch>.log   data (+ .index, .timeindex, .txnindex, .producers)
//
// Manifests list in (epoch, seq) order, so the newest is the last key: a
// deposed leader's late writes (a lower epoch) sort below its successor's
// and are ignored as soon as the successor has written once. Segment keys
// carry the uploader's epoch: a re-upload of the same range by the same
// leader rewrites identical bytes (idempotent), another leader's upload of
// an overlapping range goes to another key.

// PartitionPrefix is where one partition's objects live.
func PartitionPrefix(cluster, topic, topicID string, partition int32) string {
	return fmt.Sprintf("%s%s-%s/%d/", ClusterPrefix(cluster), topic, topicID, partition)
}

func manifestKey(epoch int32, seq int64) string {
	return fmt.Sprintf("manifest/%010d-%020d.json", epoch, seq)
}

func segmentKey(base, last int64, epoch int32) string {
	return fmt.Sprintf("segments/%020d-%020d-%d.log", base, last, epoch)
}

// parseManifestKey returns the epoch and seq of a manifest key (below the
// partition prefix).
func parseManifestKey(k string) (int32, int64, bool) {
	name, ok := strings.CutPrefix(k, "manifest/")
	if !ok {
		return 0, 0, false
	}
	name, ok = strings.CutSuffix(name, ".json")
	e, s, ok2 := strings.Cut(name, "-")
	if !ok || !ok2 {
		return 0, 0, false
	}
	epoch, err1 := strconv.ParseInt(e, 10, 32)
	seq, err2 := strconv.ParseInt(s, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return int32(epoch), seq, true
}
