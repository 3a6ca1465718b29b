package tier

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"time"

	"github.com/strata-dev/strata/broker/record"
)

// Hydration (docs/tiered-storage.md, Hydration): a follower replica that is
// empty or behind the tier's end copies the history from the bucket (same
// region: no cross-zone transfer) instead of from the leader. This file is
// the reading side: which segments to copy, and a verified download of one.

// HydrationPlan returns the index of the first segment of m a replica
// hydrating now should copy, so that it keeps what local retention
// (local.retention.ms and .bytes as resolved by the log: negative is
// unlimited) would keep and downloads nothing it would delete at once:
// the newest segments whose max timestamp is within localMs of now and
// whose sizes, from the newest back, stay below localBytes (Kafka's size
// rule: a segment goes while the rest is still at least the limit).
// Segments wholly below the manifest's start are never copied. It
// returns len(m.Segments) when nothing should be copied.
func HydrationPlan(m Manifest, localMs time.Duration, localBytes int64, now time.Time) int {
	first := len(m.Segments)
	var newer int64
	for i := len(m.Segments) - 1; i >= 0; i-- {
		s := m.Segments[i]
		if s.LastOffset < m.StartOffset {
			break
		}
		if localMs >= 0 && s.MaxTimestamp >= 0 && now.UnixMilli()-s.MaxTimestamp > localMs.Milliseconds() {
			break
		}
		if localBytes >= 0 && newer >= localBytes {
			break
		}
		newer += s.Size
		first = i
	}
	return first
}

// ErrHydrationCorrupt marks a downloaded segment that does not match its
// manifest entry (size, CRC-32C, batch frames or offsets): it is never
// installed.
var ErrHydrationCorrupt = errors.New("tier: downloaded segment does not match the manifest")

// DownloadSegment copies segment s's data object into a new file at path
// with ranged GETs of ChunkBytes (not through the read cache: hydration
// reads every byte once, and would evict what consumers read), checks its
// length and CRC-32C against the manifest and that it holds whole batches
// from s.BaseOffset to s.LastOffset, and fsyncs it. On any error the file
// is removed: a torn or corrupt download never reaches the caller, who
// installs only a file this returned without error. The caller names path
// so that its own recovery removes a file left by a crash (package log
// deletes *.tmp files on Open).
func (p *Partition) DownloadSegment(ctx context.Context, s Segment, path string) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("tier: hydrate %s%s: %w", p.prefix, s.Key, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("tier: hydrate %s%s: %w", p.prefix, s.Key, cerr)
		}
		if err != nil {
			p.t.hydrationErrors.Add(1)
			_ = os.Remove(path)
		}
	}()
	full := p.prefix + s.Key
	crc := uint32(0)
	var pending []byte // a batch cut by a chunk boundary
	next, seen := s.BaseOffset, false
	for pos := int64(0); pos < s.Size; {
		n := min(p.t.cfg.ChunkBytes, s.Size-pos)
		b, err := p.t.store.Get(ctx, full, pos, n)
		if err != nil {
			return fmt.Errorf("tier: hydrate %s at %d: %w", full, pos, err)
		}
		if int64(len(b)) != n {
			return fmt.Errorf("%w: %s at %d: %d bytes, want %d", ErrHydrationCorrupt, full, pos, len(b), n)
		}
		crc = crc32.Update(crc, castagnoli, b)
		if _, err := f.Write(b); err != nil {
			return fmt.Errorf("tier: hydrate %s: %w", full, err)
		}
		pos += n
		// Frames and offsets as the bytes arrive: a segment whose CRC
		// matches a corrupted manifest entry still fails here.
		pending = append(pending, b...)
		for len(pending) >= record.BatchHeaderSize {
			h, err := record.ParseHeader(pending)
			if err != nil || h.BatchLength < record.BatchHeaderSize-12 {
				return fmt.Errorf("%w: %s: bad batch header at offset %d", ErrHydrationCorrupt, full, next)
			}
			if len(pending) < h.Size() {
				break
			}
			if _, err := record.CheckFrame(pending[:h.Size()]); err != nil {
				return fmt.Errorf("%w: %s: batch at offset %d: %v", ErrHydrationCorrupt, full, h.BaseOffset, err)
			}
			if h.BaseOffset < next || !seen && h.BaseOffset != s.BaseOffset {
				return fmt.Errorf("%w: %s: batch at offset %d, expected %d", ErrHydrationCorrupt, full, h.BaseOffset, next)
			}
			next, seen = h.LastOffset()+1, true
			pending = pending[h.Size():]
		}
		pending = append([]byte(nil), pending...)
	}
	if len(pending) > 0 || next != s.LastOffset+1 || crc != s.CRC {
		return fmt.Errorf("%w: %s: ends at offset %d with %d stray bytes and CRC %08x; the manifest says last offset %d, CRC %08x",
			ErrHydrationCorrupt, full, next-1, len(pending), crc, s.LastOffset, s.CRC)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("tier: hydrate %s: %w", full, err)
	}
	p.t.hydratedBytes.Add(s.Size)
	p.t.hydratedSegments.Add(1)
	return nil
}
