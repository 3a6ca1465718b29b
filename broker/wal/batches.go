package wal

import (
	"github.com/strata-dev/strata/broker/record"
)

// SplitBatches verifies a chunk's bytes (already CRC-checked) batch by
// batch and returns them: every batch must be a whole magic v2 batch with a
// valid CRC, stamped with the chunk's leader epoch, and their offsets must
// run contiguously from the chunk's base to its last offset. The batches
// alias data.
func SplitBatches(c ChunkInfo, data []byte) ([]record.Batch, error) {
	var out []record.Batch
	next := c.BaseOffset
	for pos := 0; pos < len(data); {
		n, err := record.CheckFrame(data[pos:])
		if err != nil {
			return nil, corrupt(ErrChunkContent, c.Offset+int64(pos), -1, "%s-%d: batch %d: %v", c.Topic, c.Partition, len(out), err)
		}
		b := record.Batch(data[pos : pos+n])
		h, err := record.ParseHeader(b)
		if err != nil {
			return nil, corrupt(ErrChunkContent, c.Offset+int64(pos), -1, "%s-%d: batch %d: %v", c.Topic, c.Partition, len(out), err)
		}
		switch {
		case h.BaseOffset != next:
			return nil, corrupt(ErrChunkContent, c.Offset+int64(pos), -1, "%s-%d: batch %d starts at offset %d, want %d", c.Topic, c.Partition, len(out), h.BaseOffset, next)
		case h.LastOffset() > c.LastOffset || h.LastOffsetDelta < 0:
			return nil, corrupt(ErrChunkContent, c.Offset+int64(pos), -1, "%s-%d: batch %d ends at offset %d, past the chunk's last offset %d", c.Topic, c.Partition, len(out), h.LastOffset(), c.LastOffset)
		case h.PartitionLeaderEpoch != c.LeaderEpoch:
			return nil, corrupt(ErrChunkContent, c.Offset+int64(pos), -1, "%s-%d: batch %d has leader epoch %d, chunk %d", c.Topic, c.Partition, len(out), h.PartitionLeaderEpoch, c.LeaderEpoch)
		}
		out = append(out, b)
		next = h.LastOffset() + 1
		pos += n
	}
	if next != c.LastOffset+1 {
		return nil, corrupt(ErrChunkContent, c.End(), -1, "%s-%d: batches end at offset %d, chunk says %d", c.Topic, c.Partition, next-1, c.LastOffset)
	}
	return out, nil
}
