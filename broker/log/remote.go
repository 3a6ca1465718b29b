package log

import (
	"fmt"
	"time"
)

// Tiered logs (remote.storage.enable, package broker/tier): the slow tier
// copies sealed segments to object storage and serves reads below the local
// log start; the local log then keeps only local.retention.ms/bytes, and
// never deletes a segment that is not in the tier yet. These hooks are all
// the log knows about it.

// SegmentInfo describes one segment for the slow tier's uploader.
type SegmentInfo struct {
	// Base is the segment's base offset, Next the offset after its last
	// batch (the next segment's base once sealed).
	Base, Next int64
	// Size is the bytes of whole batches in it.
	Size int64
	// MaxTimestamp is its largest batch MaxTimestamp, -1 when it has none.
	MaxTimestamp int64
	// Sealed is false for the active segment (still being appended to).
	Sealed bool
}

// Segments lists the segments from the log start, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, 0, len(l.segs))
	for i, s := range l.segs {
		out = append(out, SegmentInfo{Base: s.base, Next: s.next, Size: s.size, MaxTimestamp: s.maxTs, Sealed: i < len(l.segs)-1})
	}
	return out
}

// AbortedTxnsMarkedIn returns the aborted-transaction index entries whose
// ABORT marker is in [from, next), ordered by marker offset: what the slow
// tier uploads beside the batches of that range (an entry lives with the
// segment holding its marker, as in the local log).
func (l *Log) AbortedTxnsMarkedIn(from, next int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for i := l.segmentFor(from); i < len(l.segs) && l.segs[i].base < next; i++ {
		for _, e := range l.segs[i].txn.entries {
			if e.LastOffset >= from && e.LastOffset < next {
				out = append(out, e)
			}
		}
	}
	return out
}

// ApplyLocalRetentionUpTo is ApplyRetentionUpTo for a tiered log: segments
// go by LocalRetentionMs and LocalRetentionBytes (-2: RetentionMs and
// RetentionBytes), and only those wholly below limit, which the caller
// sets to the lower of the high watermark and the end of what the slow
// tier holds. The log start offset then becomes the local log start.
//
// Idempotent-producer state is not evicted at the local log start: a
// producer whose last batch is only in the slow tier now is still within
// the log, and forgetting it would accept its retries as new records and
// any sequence gap (Kafka ties eviction to the log start offset as a
// whole and producer.id.expiration.ms, never to local retention). The
// broker evicts at the tier's start with EvictProducersBelow; the
// producer snapshot at the new local start stays, so a restart finds them.
func (l *Log) ApplyLocalRetentionUpTo(limit int64) (int, error) {
	return l.applyRetention(limit, func(c Config) (time.Duration, int64) { return c.localRetention() }, false)
}

// EvictProducersBelow forgets the producers whose last batch is below
// start, the start of a tiered log as a whole (the tier's, after its
// retention or DeleteRecords), and those with an open transaction stay, as
// for the local log start. start above the local log start is capped at
// it: the local log's producers are the log's to evict.
func (l *Log) EvictProducersBelow(start int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.producers.truncateHead(min(start, l.start))
}

// keepProducerSnapshot makes sure that after local retention a producer
// snapshot at or above the local log start remains for rebuildProducers
// (the one written when the first remaining segment was rolled to, or,
// when that one is missing, a new one of the current state at the log
// end): replaying the local segments alone would lose the producers whose
// batches are only in the tier. Called with mu held.
func (l *Log) keepProducerSnapshot() error {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	if len(offs) > 0 && offs[len(offs)-1] >= l.start {
		return nil
	}
	return l.writeProducerSnapshot()
}

// localRetention resolves local.retention.* (-2 means the retention.*
// value); a local limit never exceeds the total one (a broker default of
// one day on a topic that keeps an hour keeps an hour).
func (c Config) localRetention() (time.Duration, int64) {
	ms, bytes := c.LocalRetentionMs, c.LocalRetentionBytes
	if ms == LocalRetentionSameAsTotal || c.RetentionMs >= 0 && (ms < 0 || ms > c.RetentionMs) {
		ms = c.RetentionMs
	}
	if bytes == int64(LocalRetentionSameAsTotal) || c.RetentionBytes >= 0 && (bytes < 0 || bytes > c.RetentionBytes) {
		bytes = c.RetentionBytes
	}
	return ms, bytes
}

// LocalRetentionSameAsTotal is local.retention.ms/bytes = -2: the local log
// keeps what retention.ms/bytes keeps.
const LocalRetentionSameAsTotal = -2

// validateLocalRetention refuses values below -2.
func (c Config) validateLocalRetention() error {
	if c.LocalRetentionMs < LocalRetentionSameAsTotal || c.LocalRetentionBytes < LocalRetentionSameAsTotal {
		return fmt.Errorf("local retention (%v, %d bytes) below -2", c.LocalRetentionMs, c.LocalRetentionBytes)
	}
	return nil
}

// ProducerSnapshot returns the producer snapshot as of offset (written
// when the segment starting there was rolled to), ok false when the log
// has none there or it is unreadable: what the slow tier uploads with the
// segment ending at offset, so that a replica hydrated from offset on
// knows the producers whose batches are only in the tier
// (InstallProducerSnapshot).
func (l *Log) ProducerSnapshot(offset int64) ([]byte, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	data, err := readFile(l.fs, l.snapshotName(offset))
	if err != nil {
		return nil, false
	}
	if _, err := decodeSnapshot(data); err != nil {
		return nil, false
	}
	return data, true
}

// InstallProducerSnapshot sets the producer state of an empty log that
// starts and ends at offset (a replica hydrating from the slow tier, after
// TruncateFullyAndStartAt(offset)) from another replica's snapshot as of
// offset (ProducerSnapshot), and keeps it as this log's snapshot there, so
// a restart finds it too.
func (l *Log) InstallProducerSnapshot(offset int64, data []byte) error {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.start != offset || l.leo != offset {
		return fmt.Errorf("install producer snapshot at %d: the log is [%d, %d), not empty at that offset", offset, l.start, l.leo)
	}
	m, err := decodeSnapshot(data)
	if err != nil {
		return fmt.Errorf("install producer snapshot at %d: %w", offset, err)
	}
	l.producers.reset()
	l.producers.m = m
	for id, e := range m {
		l.producers.track(id, e)
	}
	return l.writeProducerSnapshot()
}
