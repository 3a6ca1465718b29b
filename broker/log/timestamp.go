package log

import (
	"errors"
	"fmt"

	"github.com/strata-dev/strata/broker/record"
)

// errFound stops a record.Walk at the record looked for.
var errFound = errors.New("found")

// OffsetForTimestamp returns the earliest offset at or after the log start
// whose record timestamp is >= ts, and that timestamp (ListOffsets by
// timestamp). ok is false when no record is that recent. For
// LogAppendTime batches every record carries the batch's MaxTimestamp.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, ok bool) {
	off, t, ok, err := l.offsetForTimestamp(ts, nil)
	if err != nil {
		l.logger.Error(err, "offset for timestamp", "timestamp", ts)
		return -1, -1, false
	}
	return off, t, ok
}

// LookupTimestamp is OffsetForTimestamp with its error instead of a log
// line and "not found": a corrupt batch (*CorruptionError) or one whose
// records decompress past record.MaxDecompressedBytes (record.ErrTooLarge),
// which ListOffsets reports instead of skipping the batch.
//
// The batch it decodes counts against budget (nil: only
// record.MaxDecompressedBytes); a spent budget is record.ErrBudgetSpent,
// not a corruption.
func (l *Log) LookupTimestamp(ts int64, budget *record.Budget) (offset int64, timestamp int64, ok bool, err error) {
	return l.offsetForTimestamp(ts, budget)
}

func (l *Log) offsetForTimestamp(ts int64, budget *record.Budget) (int64, int64, bool, error) {
	l.ioMu.RLock()
	defer l.ioMu.RUnlock()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, 0, false, ErrClosed
	}
	start := l.start
	type view struct {
		seg   *segment
		limit int64
		pos   int64
	}
	var views []view
	for i := l.segmentFor(start); i < len(l.segs); i++ {
		s := l.segs[i]
		if s.maxTs < ts || s.size == 0 {
			continue
		}
		v := view{seg: s, limit: s.size}
		if s.timeIdx.mem != nil {
			p, err := timeLookup(s, ts)
			if err != nil {
				l.mu.RUnlock()
				return 0, 0, false, err
			}
			v.pos = p
		} else {
			v.pos = -1
		}
		views = append(views, v)
	}
	l.mu.RUnlock()

	for _, v := range views {
		pos := v.pos
		if pos < 0 {
			p, err := timeLookup(v.seg, ts)
			if err != nil {
				return 0, 0, false, err
			}
			pos = p
		}
		for pos < v.limit {
			h, err := readHeader(v.seg.f, pos, v.limit)
			if err != nil {
				return 0, 0, false, &CorruptionError{File: v.seg.name, Offset: pos, Err: err}
			}
			if h.MaxTimestamp >= ts && h.LastOffset() >= start {
				b := make(record.Batch, h.Size())
				if _, err := v.seg.f.ReadAt(b, pos); err != nil {
					return 0, 0, false, fmt.Errorf("read %s at %d: %w", v.seg.name, pos, err)
				}
				if h.TimestampType() == record.TimestampLogAppendTime {
					return max(h.BaseOffset, start), h.MaxTimestamp, true, nil
				}
				// Walk keeps no record: the lookup costs the decoder's
				// memory however far the batch inflates, and at most
				// MaxDecompressedBytes of decompression, within the request's budget.
				var off, t int64
				err := budget.Walk(b, record.MaxDecompressedBytes, func(r *record.Record) error {
					off, t = h.BaseOffset+int64(r.OffsetDelta), h.BaseTimestamp+r.TimestampDelta
					if t >= ts && off >= start {
						return errFound
					}
					return nil
				})
				if err == errFound {
					return off, t, true, nil
				}
				if errors.Is(err, record.ErrBudgetSpent) {
					return 0, 0, false, fmt.Errorf("batch at offset %d of %s: %w", h.BaseOffset, v.seg.name, err)
				}
				if err != nil {
					return 0, 0, false, &CorruptionError{File: v.seg.name, Offset: pos, Err: err}
				}
			}
			pos += int64(h.Size())
		}
	}
	return 0, 0, false, nil
}

// timeLookup returns the position to scan from for timestamp ts: that of
// the batch holding the last time index entry with a timestamp below ts
// (every record before it is older than ts), or 0.
func timeLookup(s *segment, ts int64) (int64, error) {
	i, err := s.timeIdx.search(func(e []byte) bool { t, _ := decodeTimeEntry(e); return t < ts })
	if err != nil || i < 0 {
		return 0, err
	}
	e, err := s.timeIdx.entry(i)
	if err != nil {
		return 0, err
	}
	_, rel := decodeTimeEntry(e)
	return s.lookup(s.base + int64(rel))
}

// MaxTimestampOffset returns the last offset of the batch with the largest
// timestamp and that timestamp (ListOffsets MAX_TIMESTAMP, at batch
// precision), or (-1, -1) for an empty log.
func (l *Log) MaxTimestampOffset() (offset int64, timestamp int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	offset, timestamp = -1, -1
	for _, s := range l.segs {
		if s.maxTs > timestamp && s.maxTsOffset >= l.start {
			offset, timestamp = s.maxTsOffset, s.maxTs
		}
	}
	return offset, timestamp
}
