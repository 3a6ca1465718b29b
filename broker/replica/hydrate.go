package replica

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/tier"
)

// Hydration (docs/tiered-storage.md, Hydration): a follower of a tiered
// partition whose log ends below the slow tier's end (a new replica after
// scale-up or reassignment, a replaced volume, a broker down for long)
// copies the history from the tier bucket — same region, no cross-zone
// transfer — and fetches only the rest from the leader. Once per
// leadership epoch, before the partition's first fetch from its leader,
// unless this replica is in the ISR (caught up: a failover must not wait
// for a manifest read), and again after the leader answered that the
// follower's offset is below its local log start, the fetcher leaves the
// partition out and a goroutine:
//
//  1. reads the manifest; one written at a newer leader epoch than this
//     follower knows means its view is stale: it waits for the metadata;
//  2. picks the segments local retention keeps (tier.HydrationPlan);
//  3. keeps the local log below min(LEO, HWM) when it reaches the first
//     of them (committed data is the same on every replica), else empties
//     the log and restarts it at that segment's base;
//  4. downloads each segment into <partition dir>/hydrate-<base>.log.tmp,
//     checked against the manifest (size, CRC-32C, frames, offsets) by
//     tier.DownloadSegment, and appends its batches with AppendAsFollower,
//     as a replica fetch would: the follower builds its own indexes, epoch
//     cache, producer state and aborted-transaction index. A crash leaves
//     the temp file, which log.Open deletes, and a log of whole batches;
//  5. raises its HWM to what it has of the tier after each segment
//     (uploads stop at the leader's last stable offset: committed), so a
//     retried attempt continues where the last one stopped.
//
// Then the fetcher fetches from the log end as usual; the leader adds the
// replica to the ISR only once it has caught up through that path. A
// failure is retried hydrateAttempts times, then the follower fetches
// what is left from the leader (never stall).

// TierSource is the slow tier of one partition as hydration reads it
// (broker/tier.Partition).
type TierSource interface {
	Load(ctx context.Context) (tier.Manifest, error)
	DownloadSegment(ctx context.Context, s tier.Segment, path string) error
}

// ProducerSnapshotTier is a TierSource with the producer snapshots
// uploaded with the segments (tier.Partition).
type ProducerSnapshotTier interface {
	ProducerSnapshot(ctx context.Context, s tier.Segment) ([]byte, error)
}

// hydrateAttempts bounds the hydration attempts of one leadership epoch.
const hydrateAttempts = 3

// hydrateAppendBytes is how many bytes of batches one append takes.
const hydrateAppendBytes = 1 << 20

var (
	errNotFollowing = errors.New("no longer follows that leader at that epoch")
	errStaleEpoch   = errors.New("the slow tier was written at a newer leader epoch")
)

// hydrationState is a partition's hydration progress (guarded by the
// partition's mu).
type hydrationState struct {
	// source returns the partition's tier while its topic is tiered, nil
	// otherwise (set once by SetTierSource before the partition is used).
	source func() TierSource
	// running: a hydration goroutine works on the partition; the fetcher
	// leaves it out.
	running bool
	// settled: hydration is done (or given up) for leader epoch epoch.
	settled bool
	epoch   int32
}

// SetTierSource gives the partition its slow tier: src returns it while
// the topic is tiered (remote.storage.enable), nil otherwise. Call before
// the Manager applies a role.
func (p *Partition) SetTierSource(src func() TierSource) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hydration.source = src
}

// hydrating reports whether the fetcher must leave p out now because it
// hydrates from the slow tier for (leader, epoch); the first call of an
// epoch starts the hydration.
func (m *Manager) hydrating(p *Partition, leader, epoch int32) bool {
	if !m.cfg.Hydrate {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	h := &p.hydration
	if h.running {
		return true
	}
	if h.settled && h.epoch == epoch {
		return false
	}
	if slices.Contains(p.state.ISR, p.self) {
		// In sync: nothing to copy, and a leadership change must not
		// wait for a manifest read before replication resumes.
		h.settled, h.epoch = true, epoch
		return false
	}
	var src TierSource
	if h.source != nil {
		src = h.source()
	}
	if src == nil {
		h.settled, h.epoch = true, epoch
		return false
	}
	h.running = true
	m.wg.Add(1) // the caller, a fetcher, is counted in wg: Close waits for both
	go func() {
		defer m.wg.Done()
		m.hydrate(p, src, leader, epoch)
	}()
	return true
}

// hydrate runs the hydration of p for (leader, epoch) and wakes the
// fetcher when it is settled.
func (m *Manager) hydrate(p *Partition, src TierSource, leader, epoch int32) {
	log := m.cfg.Log.WithValues("partition", p.TP, "leader", leader, "epoch", epoch)
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		start := time.Now()
		res, err := p.hydrateFrom(m.ctx, src, leader, epoch)
		if err == nil {
			if res.segments > 0 {
				log.Info("hydrated from the slow tier", "segments", res.segments, "bytes", res.bytes,
					"from", res.from, "to", res.to, "took", time.Since(start).Round(time.Millisecond))
			}
			break
		}
		if errors.Is(err, errNotFollowing) || errors.Is(err, errStaleEpoch) || m.ctx.Err() != nil {
			log.V(1).Info("hydration stopped", "reason", err.Error())
			break
		}
		if attempt == hydrateAttempts {
			log.Info("hydration from the slow tier failed; fetching the rest from the leader", "attempts", attempt, "error", err.Error())
			break
		}
		log.Info("hydration from the slow tier failed; retrying", "attempt", attempt, "error", err.Error())
		t := time.NewTimer(backoff)
		select {
		case <-m.ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff *= 2
	}
	p.mu.Lock()
	p.hydration.running = false
	p.hydration.settled, p.hydration.epoch = true, epoch
	p.mu.Unlock()
	m.pokeFetcher(leader)
}

type hydrateResult struct {
	segments int
	bytes    int64
	from, to int64
}

// hydrateFrom does one hydration attempt (see the comment at the top).
func (p *Partition) hydrateFrom(ctx context.Context, src TierSource, leader, epoch int32) (hydrateResult, error) {
	var res hydrateResult
	m, err := src.Load(ctx)
	if err != nil {
		return res, err
	}
	if m.LeaderEpoch > epoch {
		return res, fmt.Errorf("%w: manifest of epoch %d, this follower knows epoch %d", errStaleEpoch, m.LeaderEpoch, epoch)
	}
	if len(m.Segments) == 0 || m.EndOffset <= p.Log.EndOffset() {
		return res, nil // the log reaches the tier's end: nothing to gain
	}
	localMs, localBytes := p.Log.Config().LocalRetention()
	first := tier.HydrationPlan(m, localMs, localBytes, p.now())
	from := m.EndOffset
	if first < len(m.Segments) {
		from = m.Segments[first].BaseOffset
	}

	fresh := false // the log restarts empty at from
	p.mu.Lock()
	if p.role != RoleFollower || p.state.Leader != leader || p.state.LeaderEpoch != epoch {
		p.mu.Unlock()
		return res, errNotFollowing
	}
	leo, start := p.Log.EndOffset(), p.Log.StartOffset()
	keep := min(leo, p.hwm.Load())
	if keep > start && keep >= from {
		// The local log reaches the plan and what it holds below its
		// HWM is committed: keep it, fetch the rest from the tier.
		if leo > keep {
			err = p.Log.TruncateTo(keep)
		}
		from = keep
	} else {
		fresh = true
		err = p.Log.TruncateFullyAndStartAt(from)
		if err == nil && p.hwm.Load() > from {
			p.hwm.Store(from)
		}
	}
	if err == nil {
		p.wakeLocked()
	}
	p.mu.Unlock()
	if err != nil {
		return res, fmt.Errorf("%s: prepare the log for hydration at %d: %w", p.TP, from, err)
	}
	res.from, res.to = from, from
	if fresh {
		if err := p.installProducerSnapshot(ctx, src, m, from); err != nil {
			return res, err
		}
	}

	for _, s := range m.Segments {
		if s.LastOffset < from {
			continue
		}
		path := filepath.Join(p.Log.Dir(), fmt.Sprintf("hydrate-%020d.log.tmp", s.BaseOffset))
		if err := src.DownloadSegment(ctx, s, path); err != nil {
			return res, err
		}
		n, err := p.installHydrated(path, from, leader, epoch)
		_ = os.Remove(path)
		if err != nil {
			return res, fmt.Errorf("%s: install segment %d-%d from the slow tier: %w", p.TP, s.BaseOffset, s.LastOffset, err)
		}
		res.segments++
		res.bytes += n
		from = s.LastOffset + 1
		res.to = from
		p.raiseHWMToTier(m.EndOffset, leader, epoch)
	}
	// The first segment copied may hold offsets below the tier's start
	// (DeleteRecords moved it inside the segment): they are deleted, as
	// on the leader, and not served to this replica's consumers.
	if p.Log.StartOffset() < m.StartOffset && p.Log.EndOffset() >= m.StartOffset {
		if err := p.Log.DeleteRecordsBefore(m.StartOffset); err != nil {
			return res, fmt.Errorf("%s: move the log start to the tier's start %d: %w", p.TP, m.StartOffset, err)
		}
	}
	return res, nil
}

// installProducerSnapshot gives a log restarted empty at from the
// leader's producer state as of from, uploaded with the tier segment that
// ends there: the producers whose batches are only in the tier stay known
// (their retries are duplicates, their gaps out of order) when this
// replica leads. Without one (an older manifest, a tier without
// snapshots) the state is what the copied batches give.
func (p *Partition) installProducerSnapshot(ctx context.Context, src TierSource, m tier.Manifest, from int64) error {
	ps, ok := src.(ProducerSnapshotTier)
	if !ok {
		return nil
	}
	for _, s := range m.Segments {
		if s.LastOffset+1 != from || s.ProducerSnapshotSize == 0 {
			continue
		}
		data, err := ps.ProducerSnapshot(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: producer snapshot at %d from the slow tier: %w", p.TP, from, err)
		}
		if err := p.Log.InstallProducerSnapshot(from, data); err != nil {
			return fmt.Errorf("%s: %w", p.TP, err)
		}
		return nil
	}
	return nil
}

// raiseHWMToTier raises the HWM to the log end, at most tierEnd: what
// the tier holds is below the leader's last stable offset, so committed;
// this replica's consumers may read it, and a retried hydration keeps it
// (it keeps the log below the HWM).
func (p *Partition) raiseHWMToTier(tierEnd int64, leader, epoch int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role == RoleFollower && p.state.Leader == leader && p.state.LeaderEpoch == epoch {
		if h := min(tierEnd, p.Log.EndOffset()); h > p.hwm.Load() {
			p.setHWMLocked(h)
		}
	}
}

// installHydrated appends the batches of a downloaded (verified) segment
// file from offset from on, as a follower, in appends of about
// hydrateAppendBytes. It returns the bytes appended.
func (p *Partition) installHydrated(path string, from int64, leader, epoch int32) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rd := bufio.NewReaderSize(f, hydrateAppendBytes)
	var batches []record.Batch
	var pending, total int64
	flush := func() error {
		if len(batches) == 0 {
			return nil
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.role != RoleFollower || p.state.Leader != leader || p.state.LeaderEpoch != epoch {
			return errNotFollowing
		}
		if _, err := p.Log.AppendAsFollower(batches); err != nil {
			return err
		}
		p.wakeLocked()
		total += pending
		batches, pending = nil, 0
		return nil
	}
	hdr := make([]byte, record.BatchHeaderSize)
	for {
		if _, err := io.ReadFull(rd, hdr); err == io.EOF {
			break
		} else if err != nil {
			return total, fmt.Errorf("read %s: %w", path, err)
		}
		h, err := record.ParseHeader(hdr)
		if err != nil {
			return total, fmt.Errorf("read %s: %w", path, err)
		}
		b := make([]byte, h.Size())
		copy(b, hdr)
		if _, err := io.ReadFull(rd, b[len(hdr):]); err != nil {
			return total, fmt.Errorf("read %s: %w", path, err)
		}
		if _, err := record.CheckFrame(b); err != nil {
			return total, fmt.Errorf("read %s: %w", path, err)
		}
		if h.LastOffset() < from {
			continue
		}
		if h.PartitionLeaderEpoch > epoch {
			return total, fmt.Errorf("%w: batch at %d of epoch %d, this follower knows epoch %d", errStaleEpoch, h.BaseOffset, h.PartitionLeaderEpoch, epoch)
		}
		batches = append(batches, record.Batch(b))
		pending += int64(len(b))
		if pending >= hydrateAppendBytes {
			if err := flush(); err != nil {
				return total, err
			}
		}
	}
	return total, flush()
}
