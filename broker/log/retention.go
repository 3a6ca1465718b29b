package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// ApplyRetention forgets idle producers (Config.ProducerIDExpiration) and
// deletes old segments: those entirely below the log start
// offset, those whose newest timestamp is older than RetentionMs, and the
// oldest ones while the log is larger than RetentionBytes. Like Kafka, it
// never deletes the active segment for size; when every segment including
// a non-empty active one is past RetentionMs, it rolls first so that the
// old active segment can go. The log start offset moves to the first
// remaining segment (and is persisted). It returns how many segments it
// deleted. A compact-only log (Config.Delete false) deletes only below the
// log start offset: its old records go through Clean.
func (l *Log) ApplyRetention() (int, error) { return l.ApplyRetentionUpTo(math.MaxInt64) }

// ApplyRetentionUpTo is ApplyRetention that only deletes segments whose
// offsets are all below limit — the high watermark, so that retention never
// removes data followers may still need (Kafka's rule).
func (l *Log) ApplyRetentionUpTo(limit int64) (int, error) {
	return l.applyRetention(limit, func(c Config) (time.Duration, int64) { return c.RetentionMs, c.RetentionBytes }, true)
}

// applyRetention is ApplyRetentionUpTo with the time and size limits that
// policy picks from the config (retention.* or, for a tiered log,
// local.retention.*; see remote.go). evictProducers is false for local
// retention: the log start it moves is not the tiered log's (remote.go).
func (l *Log) applyRetention(limit int64, policy func(Config) (time.Duration, int64), evictProducers bool) (int, error) {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	retentionMs, retentionBytes := policy(l.cfg)
	now := l.nowMs()
	l.producers.expire(now, l.cfg.ProducerIDExpiration.Milliseconds())
	n := 0
	// below reports whether segment i holds only offsets below limit.
	below := func(i int) bool {
		if i == len(l.segs)-1 {
			return l.leo <= limit
		}
		return l.segs[i+1].base <= limit
	}
	// Below the log start offset (DeleteRecords).
	for n < len(l.segs)-1 && l.segs[n+1].base <= l.start {
		n++
	}
	// A compact-only log (cleanup.policy=compact) keeps segments
	// whatever their age or size; only DeleteRecords removes them.
	if ms := retentionMs.Milliseconds(); retentionMs >= 0 && l.cfg.Delete {
		expired := func(s *segment) bool {
			// A segment without timestamps (all -1) never expires by time.
			return s.maxTs >= 0 && now-s.maxTs > ms
		}
		for n < len(l.segs)-1 && expired(l.segs[n]) && below(n) {
			n++
		}
		if n == len(l.segs)-1 && l.active().size > 0 && expired(l.active()) && below(n) {
			if l.failed == nil {
				if err := l.roll(now); err != nil {
					l.failed = err
					return 0, err
				}
				n++
			}
		}
	}
	if retentionBytes >= 0 && l.cfg.Delete {
		size := l.size
		for i := 0; i < n; i++ {
			size -= l.segs[i].size
		}
		for n < len(l.segs)-1 && size-l.segs[n].size >= retentionBytes && below(n) {
			size -= l.segs[n].size
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, l.deleteOldest(n, evictProducers)
}

// deleteOldest removes the first n segments (never the active one) and
// moves the log start offset; evictProducers forgets the producers whose
// last batch is below it (not for local retention). Called with ioMu and
// mu held.
func (l *Log) deleteOldest(n int, evictProducers bool) error {
	newStart := max(l.start, l.segs[n].base)
	if newStart != l.start {
		// Persist the new start before any file goes: a failure leaves
		// the log as it was.
		if err := l.persistStartOffset(newStart); err != nil {
			return fmt.Errorf("retention: %w", err)
		}
	}
	doomed := l.segs[:n]
	l.segs = append([]*segment(nil), l.segs[n:]...)
	l.start = newStart
	var errs []error
	for _, s := range doomed {
		l.size -= s.size
		errs = append(errs, s.close(), s.remove(l.fs))
		l.logger.V(1).Info("deleted segment", "base", s.base, "bytes", s.size)
	}
	if l.epochs.truncateFromStart(l.start) {
		errs = append(errs, l.epochs.persist())
	}
	start := l.start
	if evictProducers {
		l.producers.truncateHead(start)
	}
	errs = append(errs, l.removeSnapshots(func(off int64) bool { return off < start }))
	if !evictProducers {
		errs = append(errs, l.keepProducerSnapshot())
	}
	errs = append(errs, syncDir(l.fs, l.dir))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	return nil
}

// DeleteRecordsBefore moves the log start offset to offset (DeleteRecords
// API): offsets below it are no longer readable and segments entirely
// below it are deleted. The new start is persisted before this returns.
// offset above the log end offset is ErrOffsetOutOfRange; at or below the
// current start it is a no-op.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset > l.leo || offset < 0 {
		return fmt.Errorf("delete records before %d, log end is %d: %w", offset, l.leo, ErrOffsetOutOfRange)
	}
	if offset <= l.start {
		return nil
	}
	if err := l.persistStartOffset(offset); err != nil {
		return err
	}
	l.start = offset
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= l.start {
		n++
	}
	if n == 0 {
		l.producers.truncateHead(l.start)
		if l.epochs.truncateFromStart(l.start) {
			return l.epochs.persist()
		}
		return nil
	}
	return l.deleteOldest(n, true)
}

// TruncateTo removes every batch at or above offset (a follower truncating
// to the leader's divergence point). Truncation happens at batch
// boundaries: a batch that straddles offset is removed whole, so the new
// log end offset can be below offset. offset at or above the log end is a
// no-op; below the log start, the log is emptied and restarts at offset.
func (l *Log) TruncateTo(offset int64) error {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset >= l.leo {
		return nil
	}
	if offset < 0 {
		return fmt.Errorf("truncate to %d: %w", offset, ErrOffsetOutOfRange)
	}
	if err := l.truncateLocked(offset); err != nil {
		l.failed = err
		return fmt.Errorf("truncate to %d: %w", offset, err)
	}
	close(l.waitCh)
	l.waitCh = make(chan struct{})
	return nil
}

func (l *Log) truncateLocked(offset int64) error {
	if offset < l.start {
		return l.truncateFullyLocked(offset)
	}
	i := l.segmentFor(offset)
	// Drop whole segments after the one holding offset.
	var errs []error
	for _, s := range l.segs[i+1:] {
		l.size -= s.size
		errs = append(errs, s.close(), s.remove(l.fs))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s := l.segs[i]
	l.segs = append([]*segment(nil), l.segs[:i+1]...)
	if s.offIdx.mem == nil { // sealed: becomes active again
		if err := s.offIdx.load(); err != nil {
			return err
		}
		if err := s.timeIdx.load(); err != nil {
			return err
		}
	}
	// Find the first batch that reaches offset.
	pos, err := s.lookup(offset)
	if err != nil {
		return err
	}
	// The index entry points at a batch ending at or before offset... scan.
	limit := s.size
	for pos < limit {
		h, err := readHeader(s.f, pos, limit)
		if err != nil {
			return &CorruptionError{File: s.name, Offset: pos, Err: err}
		}
		if h.LastOffset() >= offset {
			break
		}
		pos += int64(h.Size())
	}
	cut := s.next // first offset removed
	if pos < limit {
		h, err := readHeader(s.f, pos, limit)
		if err != nil {
			return &CorruptionError{File: s.name, Offset: pos, Err: err}
		}
		cut = h.BaseOffset
	}
	if err := s.f.Truncate(pos); err != nil {
		return err
	}
	l.size -= s.size - pos
	// Drop index entries at or past pos, recompute timestamps and the
	// segment's next offset from the remaining tail.
	keep, err := s.offIdx.search(func(e []byte) bool { _, p := decodeOffsetEntry(e); return int64(p) < pos })
	if err != nil {
		return err
	}
	if err := s.offIdx.truncate(keep + 1); err != nil {
		return err
	}
	from := int64(0)
	if keep >= 0 {
		e, _ := s.offIdx.entry(keep)
		_, p := decodeOffsetEntry(e)
		from = int64(p)
	}
	// Time entries whose offset is now gone.
	tkeep := -1
	for j := 0; j < s.timeIdx.n; j++ {
		e, _ := s.timeIdx.entry(j)
		_, rel := decodeTimeEntry(e)
		if s.base+int64(rel) >= cut {
			break
		}
		tkeep = j
	}
	if err := s.timeIdx.truncate(tkeep + 1); err != nil {
		return err
	}
	s.maxTs, s.maxTsOffset, s.lastTimeEntry = -1, -1, -1
	if tkeep >= 0 {
		e, _ := s.timeIdx.entry(tkeep)
		ts, rel := decodeTimeEntry(e)
		s.maxTs, s.maxTsOffset, s.lastTimeEntry = ts, s.base+int64(rel), ts
	}
	s.size, s.next, s.sinceIndex = pos, s.base, 0
	if from > 0 || pos > 0 {
		sc := newScanner(s.f, from, pos, s.base)
		for {
			b, _, err := sc.scan()
			if err == io.EOF {
				break
			}
			if err != nil {
				return &CorruptionError{File: s.name, Offset: sc.pos, Err: err}
			}
			h := b.Header()
			s.next = h.LastOffset() + 1
			if h.MaxTimestamp > s.maxTs {
				s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.LastOffset()
			}
		}
	}
	if from == 0 && pos == 0 {
		s.next = s.base
		s.rollTs = l.nowMs()
	}
	if err := s.sync(); err != nil {
		return err
	}
	l.leo = s.next
	if l.leo < s.base {
		l.leo = s.base
	}
	l.dirty = false
	l.durable = l.leo // s.sync above
	l.truncateCleanerState()
	if l.leo < l.start {
		// A batch straddling the log start was removed whole: the start
		// follows the end back (Kafka: min(targetOffset, logStartOffset)).
		if err := l.persistStartOffset(l.leo); err != nil {
			return err
		}
		l.start = l.leo
	}
	if l.epochs.truncateFromEnd(l.leo) {
		if err := l.epochs.persist(); err != nil {
			return err
		}
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return err
	}
	return l.rebuildProducers()
}

// TruncateFullyAndStartAt empties the log and restarts it at offset: the
// log start and end both become offset (Kafka's truncateFullyAndStartAt).
// A follower uses it when the leader's log starts beyond its own end.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("truncate fully to %d: %w", offset, ErrOffsetOutOfRange)
	}
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.truncateFullyLocked(offset); err != nil {
		l.failed = err
		return fmt.Errorf("truncate fully to %d: %w", offset, err)
	}
	close(l.waitCh)
	l.waitCh = make(chan struct{})
	return nil
}

// truncateFullyLocked deletes every segment and restarts the log empty at
// offset.
func (l *Log) truncateFullyLocked(offset int64) error {
	var errs []error
	for _, s := range l.segs {
		errs = append(errs, s.close(), s.remove(l.fs))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s, err := createSegment(l.fs, l.dir, offset, l.nowMs())
	if err != nil {
		return err
	}
	l.segs = []*segment{s}
	l.start, l.leo, l.size, l.dirty, l.unflushed = offset, offset, 0, false, 0
	l.durable = offset
	l.cleaner.firstDirty = offset
	l.truncateCleanerState()
	if err := l.persistStartOffset(offset); err != nil {
		return err
	}
	l.epochs.entries = nil
	if err := l.epochs.persist(); err != nil {
		return err
	}
	l.producers.reset()
	l.unreplicated = nil
	if err := l.removeSnapshots(func(int64) bool { return true }); err != nil {
		return err
	}
	return syncDir(l.fs, l.dir)
}
