package log

import (
	"errors"
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

// ApplyLocalRetentionUpTo is ApplyRetentionUpTo for a tiered log: segments
// go by LocalRetentionMs and LocalRetentionBytes (-2: RetentionMs and
// RetentionBytes), and only those wholly below limit, which the caller
// sets to the lower of the high watermark and the end of what the slow
// tier holds. The log start offset then becomes the local log start.
func (l *Log) ApplyLocalRetentionUpTo(limit int64) (int, error) {
	return l.applyRetention(limit, func(c Config) (time.Duration, int64) { return c.localRetention() })
}

// localRetention resolves local.retention.* (-2 means the retention.* value).
func (c Config) localRetention() (time.Duration, int64) {
	ms, bytes := c.LocalRetentionMs, c.LocalRetentionBytes
	if ms == LocalRetentionSameAsTotal {
		ms = c.RetentionMs
	}
	if bytes == int64(LocalRetentionSameAsTotal) {
		bytes = c.RetentionBytes
	}
	return ms, bytes
}

// LocalRetentionSameAsTotal is local.retention.ms/bytes = -2: the local log
// keeps what retention.ms/bytes keeps.
const LocalRetentionSameAsTotal = -2

// validateLocalRetention applies Kafka's rules: a local limit (other than
// -2) is at least -1 and never above the total one, -1 (unlimited) only
// with an unlimited total.
func (c Config) validateLocalRetention() error {
	var errs []error
	if c.LocalRetentionMs < LocalRetentionSameAsTotal || c.LocalRetentionBytes < LocalRetentionSameAsTotal {
		errs = append(errs, fmt.Errorf("local retention (%v, %d bytes) below -2", c.LocalRetentionMs, c.LocalRetentionBytes))
	}
	if ms := c.LocalRetentionMs; ms != LocalRetentionSameAsTotal && c.RetentionMs >= 0 && (ms < 0 || ms > c.RetentionMs) {
		errs = append(errs, fmt.Errorf("local.retention.ms %d cannot be more than retention.ms %d", ms.Milliseconds(), c.RetentionMs.Milliseconds()))
	}
	if b := c.LocalRetentionBytes; b != LocalRetentionSameAsTotal && c.RetentionBytes >= 0 && (b < 0 || b > c.RetentionBytes) {
		errs = append(errs, fmt.Errorf("local.retention.bytes %d cannot be more than retention.bytes %d", b, c.RetentionBytes))
	}
	return errors.Join(errs...)
}
