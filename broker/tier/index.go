package tier

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
)

// The uploaded indexes have the local log's layout (package log, Kafka's):
//
//	.index      relativeOffset uint32 | position uint32   (8 bytes)
//	.timeindex  timestamp int64 | relativeOffset uint32   (12 bytes)
//	.txnindex   version int16 | producerId int64 | firstOffset int64 |
//	            lastOffset int64 | lastStableOffset int64  (34 bytes)
//
// offsets in .index and .timeindex relative to the uploaded segment's
// BaseOffset, positions within its data object; .txnindex has absolute
// offsets and holds the aborted transactions whose ABORT marker is in the
// segment (only written when there is one). The offset and time indexes
// are rebuilt from the uploaded bytes (which may start inside a local
// segment), never copied from the local files; the transaction entries
// are the local log's for the uploaded range.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
	// indexInterval is the bytes between index entries (Kafka's
	// index.interval.bytes default).
	indexInterval = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// built is a segment ready to upload.
type built struct {
	seg       Segment
	data      []byte
	index     []byte
	timeIndex []byte
	txnIndex  []byte // nil when no aborted transaction's marker is in it
}

// buildSegment checks every batch of data (frame and CRC-32C, increasing
// offsets) and builds the indexes and the manifest entry. aborted are the
// local index entries whose ABORT marker is among the batches.
func buildSegment(data []byte, epoch int32, aborted []log.AbortedTxn) (*built, error) {
	b := &built{data: data}
	s := &b.seg
	s.BaseOffset, s.LastOffset, s.MaxTimestamp, s.LeaderEpoch = -1, -1, -1, epoch
	var since int
	lastTimeEntry := int64(-1)
	maxTsOffset := int64(-1)
	for pos := 0; pos < len(data); {
		n, err := record.CheckFrame(data[pos:])
		if err != nil {
			return nil, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		h, _ := record.ParseHeader(data[pos:])
		if h.BaseOffset <= s.LastOffset {
			return nil, fmt.Errorf("batch at byte %d: offset %d not after %d: %w", pos, h.BaseOffset, s.LastOffset, record.ErrCorrupt)
		}
		if s.BaseOffset < 0 {
			s.BaseOffset = h.BaseOffset
		}
		if n := len(s.Epochs); n == 0 || s.Epochs[n-1].Epoch != h.PartitionLeaderEpoch {
			s.Epochs = append(s.Epochs, EpochStart{Epoch: h.PartitionLeaderEpoch, Start: h.BaseOffset})
		}
		s.LastOffset = h.LastOffset()
		if h.MaxTimestamp > s.MaxTimestamp {
			s.MaxTimestamp, maxTsOffset = h.MaxTimestamp, h.LastOffset()
		}
		since += n
		if since > indexInterval || pos == 0 {
			b.index = binary.BigEndian.AppendUint32(b.index, uint32(h.LastOffset()-s.BaseOffset))
			b.index = binary.BigEndian.AppendUint32(b.index, uint32(pos))
			if s.MaxTimestamp > lastTimeEntry {
				b.timeIndex = binary.BigEndian.AppendUint64(b.timeIndex, uint64(s.MaxTimestamp))
				b.timeIndex = binary.BigEndian.AppendUint32(b.timeIndex, uint32(maxTsOffset-s.BaseOffset))
				lastTimeEntry = s.MaxTimestamp
			}
			since = 0
		}
		pos += n
	}
	if s.BaseOffset < 0 {
		return nil, fmt.Errorf("no batches to upload")
	}
	if s.MaxTimestamp > lastTimeEntry {
		b.timeIndex = binary.BigEndian.AppendUint64(b.timeIndex, uint64(s.MaxTimestamp))
		b.timeIndex = binary.BigEndian.AppendUint32(b.timeIndex, uint32(maxTsOffset-s.BaseOffset))
	}
	if len(aborted) > 0 {
		b.txnIndex = log.EncodeTxnIndex(aborted)
		// The same check a reader makes: a marker outside the batches
		// would be an entry no reader finds.
		if _, err := log.DecodeTxnIndex(b.txnIndex, s.BaseOffset, s.LastOffset+1); err != nil {
			return nil, fmt.Errorf("aborted-transaction entries of [%d, %d]: %w", s.BaseOffset, s.LastOffset, err)
		}
	}
	s.Size = int64(len(data))
	s.CRC = crc32.Checksum(data, castagnoli)
	s.Key = segmentKey(s.BaseOffset, s.LastOffset, epoch)
	s.IndexSize, s.TimeIndexSize, s.TxnIndexSize = int64(len(b.index)), int64(len(b.timeIndex)), int64(len(b.txnIndex))
	return b, nil
}

// lookupOffset returns the byte position to scan from for offset: that of
// the last indexed batch whose last offset is below it, or 0.
func lookupOffset(index []byte, base, offset int64) int64 {
	n := len(index) / offsetEntrySize
	i := sort.Search(n, func(i int) bool {
		rel := int64(binary.BigEndian.Uint32(index[i*offsetEntrySize:]))
		return base+rel >= offset
	})
	if i == 0 {
		return 0
	}
	return int64(binary.BigEndian.Uint32(index[(i-1)*offsetEntrySize+4:]))
}

// lookupTime returns the offset to scan from for timestamp ts: that of
// the batch holding the last time entry below ts (every record before it
// is older), or base.
func lookupTime(timeIndex []byte, base, ts int64) int64 {
	n := len(timeIndex) / timeEntrySize
	i := sort.Search(n, func(i int) bool {
		return int64(binary.BigEndian.Uint64(timeIndex[i*timeEntrySize:])) >= ts
	})
	if i == 0 {
		return base
	}
	return base + int64(binary.BigEndian.Uint32(timeIndex[(i-1)*timeEntrySize+8:]))
}
