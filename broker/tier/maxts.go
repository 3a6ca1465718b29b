package tier

import (
	"context"
	"sort"

	"github.com/strata-dev/strata/broker/record"
)

// MaxTimestamp returns the offset and timestamp of the first record with
// the largest timestamp in the tier below offset below (ListOffsets -3,
// KIP-734: the caller compares it with the local log's from below on); ok
// is false when the tier holds no record there. The manifest's per-segment
// max timestamps choose the segment; only that segment is read (and the
// next best when the tier's start or below cut off the record that gave
// its maximum).
func (p *Partition) MaxTimestamp(ctx context.Context, below int64) (offset, timestamp int64, ok bool, err error) {
	m, loaded := p.Manifest()
	if !loaded {
		if m, err = p.Load(ctx); err != nil {
			return -1, -1, false, err
		}
	}
	var cands []Segment
	for _, s := range m.Segments {
		if s.LastOffset >= m.StartOffset && s.BaseOffset < below && s.MaxTimestamp >= 0 {
			cands = append(cands, s)
		}
	}
	// Highest max timestamp first, the oldest segment first among equals
	// (the first record with the largest timestamp wins, as locally).
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].MaxTimestamp > cands[j].MaxTimestamp })
	offset, timestamp = -1, -1
	for _, s := range cands {
		if ok && s.MaxTimestamp < timestamp {
			break
		}
		o, ts, found, err := p.segmentMax(ctx, m, s, below)
		if err != nil {
			return -1, -1, false, err
		}
		if found && (!ok || ts > timestamp || ts == timestamp && o < offset) {
			offset, timestamp, ok = o, ts, true
		}
	}
	return offset, timestamp, ok, nil
}

// segmentMax scans segment s's batches in [max(base, start), below) and
// returns the first record with the largest timestamp.
func (p *Partition) segmentMax(ctx context.Context, m Manifest, s Segment, below int64) (offset, timestamp int64, ok bool, err error) {
	offset, timestamp = -1, -1
	end := min(s.LastOffset+1, below)
	for from := max(s.BaseOffset, m.StartOffset); from < end; {
		data, err := p.read(ctx, from, 1<<20, end)
		if err != nil {
			return -1, -1, false, err
		}
		if len(data) == 0 {
			break
		}
		for buf := data; len(buf) >= record.BatchHeaderSize; {
			h, err := record.ParseHeader(buf)
			if err != nil || h.Size() > len(buf) {
				return -1, -1, false, record.ErrCorrupt
			}
			batch := buf[:h.Size()]
			buf = buf[h.Size():]
			from = h.LastOffset() + 1
			if h.MaxTimestamp <= timestamp && ok {
				continue
			}
			if h.TimestampType() == record.TimestampLogAppendTime {
				if o := max(h.BaseOffset, m.StartOffset); o < end && h.MaxTimestamp > timestamp {
					offset, timestamp, ok = o, h.MaxTimestamp, true
				}
				continue
			}
			err = record.BudgetFrom(ctx).Walk(record.Batch(batch), record.MaxDecompressedBytes, func(r *record.Record) error {
				o, t := h.BaseOffset+int64(r.OffsetDelta), h.BaseTimestamp+r.TimestampDelta
				if o >= m.StartOffset && o < end && t > timestamp {
					offset, timestamp, ok = o, t, true
				}
				return nil
			})
			if err != nil {
				return -1, -1, false, err
			}
		}
	}
	return offset, timestamp, ok, nil
}
