package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/replica"
	"github.com/strata-dev/strata/broker/tier"
)

// The slow tier (remote.storage.enable, package broker/tier) as the broker
// sees it: every hosted partition of a tiered topic has a tier handle; the
// leader uploads sealed segments below the last stable offset and applies
// retention.ms/bytes to the tier, every replica keeps only
// local.retention.ms/bytes of what the tier holds, consumers read below
// the local log start from the tier.

// ConfigRemoteStorage is the topic config that tiers a topic (Kafka's).
const ConfigRemoteStorage = "remote.storage.enable"

// remoteReadTimeout bounds one remote read of a fetch or ListOffsets.
const remoteReadTimeout = 10 * time.Second

// SetTier turns the slow tier on (remote.log.storage.system.enable): the
// partitions opened from now on, and those open already, get their tier
// handle. Call it once, before serving.
func (b *Broker) SetTier(t *tier.Tier) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tier = t
	for _, top := range b.topics {
		for _, p := range top.partitions {
			if p != nil {
				b.attachTierLocked(top, p)
			}
		}
	}
}

// Tier is the slow tier, nil when off.
func (b *Broker) Tier() *tier.Tier {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.tier
}

// attachTierLocked gives p its tier handle (every partition has one while
// the tier is on; whether it is used follows remote.storage.enable, which
// may change). Called with b.mu held.
func (b *Broker) attachTierLocked(t *Topic, p *Partition) {
	if b.tier == nil || p.tier.Load() != nil {
		return
	}
	p.tier.Store(b.tier.Partition(t.Name, meta.TopicID(t.ID).String(), p.Index))
}

// Tiered returns p's tier handle when its topic is tiered, else nil.
func (p *Partition) Tiered() *tier.Partition {
	// The handle first: a broker without a tier pays one atomic load on
	// the fetch path, not a config copy.
	tp := p.tier.Load()
	if tp == nil || !p.Log.Config().RemoteStorage {
		return nil
	}
	return tp
}

// StartOffset is the partition's log start offset: the tier's start when
// the tier holds offsets below the local log (what consumers and
// ListOffsets earliest see), else the local log start. A tiered
// partition's answer needs its manifest: when this broker has not read it
// yet (after a restart, before the tier manager's first round) it is read
// now, and when that fails the answer is KAFKA_STORAGE_ERROR (retriable)
// rather than the local log start, which would hide the tier's history
// (a consumer resetting to earliest would skip it).
func (p *Partition) StartOffset() (int64, error) {
	local := p.Log.StartOffset()
	tp := p.Tiered()
	if tp == nil || local == 0 {
		return local, nil // nothing can be below offset 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
	defer cancel()
	m, err := tp.View(ctx)
	if err != nil {
		return -1, fmt.Errorf("%w: the slow tier's manifest of %s-%d is unknown (its start may be below the local log start %d): %v", kerr.KafkaStorageError, p.Topic, p.Index, local, err)
	}
	return tierStart(&m, local), nil
}

// KnownStartOffset is StartOffset without I/O, for the LogStartOffset of
// fetch responses (informational for consumers): the tier's start as this
// broker knows it, else the local log start.
func (p *Partition) KnownStartOffset() int64 {
	local := p.Log.StartOffset()
	if tp := p.Tiered(); tp != nil {
		if m, ok := tp.Manifest(); ok {
			return tierStart(&m, local)
		}
	}
	return local
}

// tierStart is the start of a partition whose tier manifest is m and whose
// local log starts at local. The tier's start counts whenever it is below
// the local start, even when m ends below it: a manifest older than the
// local retention that trimmed the log (a follower's view, a deposed
// leader's superseded one) names less than the bucket's newest, which
// holds the offsets in between.
func tierStart(m *tier.Manifest, local int64) int64 {
	if start, _, ok := m.Range(); ok && start < local {
		return start
	}
	return local
}

// ReadRemote serves a consumer read below the local log start from the
// tier. ok is false when the offset is not the tier's to serve (not
// tiered, or at or above the local log start). A bucket failure is
// KAFKA_STORAGE_ERROR, which clients retry (Kafka's answer for a failed
// remote read). Never a silent skip: an offset the tier's view does not
// hold, or whose object is gone, is looked up again in the bucket's newest
// manifest; only an offset below the tier's start there (deleted by
// retention or DeleteRecords) is OFFSET_OUT_OF_RANGE. One between the
// tier's end and the local log start (this broker trimmed its log against
// a manifest a new leader superseded) exists on the leader and reaches
// the tier with its next upload: KAFKA_STORAGE_ERROR, retried (a consumer
// reading from this follower goes back to the leader).
func (p *Partition) ReadRemote(offset int64, maxBytes int, maxOffset int64) (records []byte, ok bool, err error) {
	tp := p.Tiered()
	if tp == nil || offset >= p.Log.StartOffset() {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
	defer cancel()
	data, err := tp.Read(ctx, offset, maxBytes, maxOffset)
	if errors.Is(err, tier.ErrOffsetOutOfRange) || errors.Is(err, objstore.ErrNotFound) {
		// The view may be older than the bucket: read the newest once.
		if _, lerr := tp.Load(ctx); lerr != nil {
			return nil, true, fmt.Errorf("%w: remote read of %s-%d at %d: %v (reloading the manifest: %v)", kerr.KafkaStorageError, p.Topic, p.Index, offset, err, lerr)
		}
		data, err = tp.Read(ctx, offset, maxBytes, maxOffset)
	}
	switch {
	case errors.Is(err, tier.ErrOffsetOutOfRange):
		if m, _ := tp.Manifest(); m.Seq < 0 || offset < m.StartOffset {
			return nil, true, fmt.Errorf("%w: %v", kerr.OffsetOutOfRange, err)
		}
		return nil, true, fmt.Errorf("%w: %s-%d at %d is below the local log start %d and not in the slow tier yet: %v", kerr.KafkaStorageError, p.Topic, p.Index, offset, p.Log.StartOffset(), err)
	case err != nil:
		return nil, true, fmt.Errorf("%w: remote read of %s-%d at %d: %v", kerr.KafkaStorageError, p.Topic, p.Index, offset, err)
	}
	return data, true, nil
}

// remoteAbortedTxnsTries bounds RemoteAbortedTxns' retries when local
// retention moves past the tier's end it saw.
const remoteAbortedTxnsTries = 3

// RemoteAbortedTxns returns, for a read_committed fetch served from the
// tier, the aborted transactions overlapping [from, upTo): those the tier
// holds with the segments of their markers, then those of the local log's
// index whose marker is at or past the tier's end (a transaction's data
// may be in the tier while its marker is still only local). A bucket
// failure is KAFKA_STORAGE_ERROR, as for a failed remote read.
func (p *Partition) RemoteAbortedTxns(from, upTo int64) ([]log.AbortedTxn, error) {
	tp := p.Tiered()
	if tp == nil {
		return p.Log.AbortedTxns(from, upTo), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
	defer cancel()
	for range remoteAbortedTxnsTries {
		remote, end, done, err := tp.AbortedTxns(ctx, from, upTo)
		if err != nil {
			return nil, fmt.Errorf("%w: aborted transactions of %s-%d from the tier at %d: %v", kerr.KafkaStorageError, p.Topic, p.Index, from, err)
		}
		if done {
			return remote, nil
		}
		local := p.Log.AbortedTxns(max(from, end), upTo)
		// Local retention deletes only below the tier's end as this
		// broker knows it; if it moved past the end seen above meanwhile,
		// markers in between may be gone from the local index: the
		// manifest cache is newer now, ask again.
		if p.Log.StartOffset() <= end {
			return append(remote, local...), nil
		}
	}
	return nil, fmt.Errorf("%w: aborted transactions of %s-%d: the local log start kept moving past the tier's end", kerr.KafkaStorageError, p.Topic, p.Index)
}

// tierView returns the manifest of a tiered partition for a ListOffsets
// answer; ok is false when the tier holds nothing below the local log
// start (or the partition is not tiered). An unknown manifest is
// KAFKA_STORAGE_ERROR (StartOffset says why).
func (p *Partition) tierView(ctx context.Context) (m tier.Manifest, ok bool, err error) {
	tp := p.Tiered()
	local := p.Log.StartOffset()
	if tp == nil || local == 0 {
		return tier.Manifest{}, false, nil
	}
	if m, err = tp.View(ctx); err != nil {
		return tier.Manifest{}, false, fmt.Errorf("%w: the slow tier's manifest of %s-%d is unknown: %v", kerr.KafkaStorageError, p.Topic, p.Index, err)
	}
	start, _, has := m.Range()
	return m, has && start < local, nil
}

// OffsetForTimestamp is ListOffsets by timestamp across both tiers: the
// tier first (older records), then the local log. The batches it decodes
// count against the decompression budget ctx carries (record.WithBudget).
func (p *Partition) OffsetForTimestamp(ctx context.Context, ts int64) (offset, timestamp int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, remoteReadTimeout)
	defer cancel()
	_, below, err := p.tierView(ctx)
	if err != nil {
		return -1, -1, false, err
	}
	if below {
		o, t, found, err := p.Tiered().OffsetForTimestamp(ctx, ts)
		if errors.Is(err, record.ErrTooLarge) {
			return -1, -1, false, fmt.Errorf("remote timestamp lookup of %s-%d: %w", p.Topic, p.Index, err)
		}
		if err != nil {
			return -1, -1, false, fmt.Errorf("%w: remote timestamp lookup of %s-%d: %v", kerr.KafkaStorageError, p.Topic, p.Index, err)
		}
		if found && o < p.Log.StartOffset() {
			return o, t, true, nil
		}
	}
	o, t, found, err := p.Log.LookupTimestamp(ts, record.BudgetFrom(ctx))
	if err != nil {
		return -1, -1, false, fmt.Errorf("timestamp lookup of %s-%d: %w", p.Topic, p.Index, err)
	}
	return o, t, found, nil
}

// remoteMaxTimestamp completes the local log's answer to ListOffsets -3
// (offset, ts; -1 when the local log has no record) with the tier's
// records below the local log start: the tier's when its largest
// timestamp is larger, or equal (an older record: the first with the
// largest timestamp wins). The manifest carries each segment's max
// timestamp, so one segment is read. A bucket failure is
// KAFKA_STORAGE_ERROR.
func (p *Partition) remoteMaxTimestamp(ctx context.Context, offset, ts int64) (int64, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, remoteReadTimeout)
	defer cancel()
	_, below, err := p.tierView(ctx)
	if err != nil || !below {
		return offset, ts, err
	}
	o, t, found, err := p.Tiered().MaxTimestamp(ctx, p.Log.StartOffset())
	if errors.Is(err, record.ErrTooLarge) {
		return -1, -1, fmt.Errorf("max timestamp of %s-%d in the tier: %w", p.Topic, p.Index, err)
	}
	if err != nil {
		return -1, -1, fmt.Errorf("%w: max timestamp of %s-%d in the tier: %v", kerr.KafkaStorageError, p.Topic, p.Index, err)
	}
	if found && (offset < 0 || t >= ts) {
		return o, t, nil
	}
	return offset, ts, nil
}

// LatestTieredOffset is ListOffsets -5 (KIP-1005): the last offset in the
// tier, -1 when it holds none; KAFKA_STORAGE_ERROR while its manifest is
// unknown.
func (p *Partition) LatestTieredOffset() (int64, error) {
	tp := p.Tiered()
	if tp == nil {
		return -1, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
	defer cancel()
	m, err := tp.View(ctx)
	if err != nil {
		return -1, fmt.Errorf("%w: the slow tier's manifest of %s-%d is unknown: %v", kerr.KafkaStorageError, p.Topic, p.Index, err)
	}
	if _, end, ok := m.Range(); ok {
		return end - 1, nil
	}
	return -1, nil
}

// leadership returns whether this broker leads p, at which epoch, and the
// high watermark (a standalone broker always leads, at epoch 0).
func (p *Partition) leadership() (leader bool, epoch int32, hwm int64) {
	if p.Replica == nil {
		return true, LeaderEpoch, p.Log.EndOffset()
	}
	return p.Replica.Role() == replica.RoleLeader, p.Replica.LeaderEpoch(), p.Replica.HighWatermark()
}

// DeleteRecordsBefore moves the log start offset of both tiers to offset
// (DeleteRecords): the tier's manifest first (so a failed write leaves
// everything as it was), then the local log.
func (p *Partition) DeleteRecordsBefore(offset int64) error {
	if tp := p.Tiered(); tp != nil {
		leader, epoch, _ := p.leadership()
		if !leader {
			return fmt.Errorf("%w: %s-%d", kerr.NotLeaderForPartition, p.Topic, p.Index)
		}
		ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
		defer cancel()
		if err := tp.DeleteRecordsBefore(ctx, epoch, offset); err != nil {
			return fmt.Errorf("%w: moving the tier's start of %s-%d: %v", kerr.KafkaStorageError, p.Topic, p.Index, err)
		}
	}
	if offset < p.Log.StartOffset() {
		p.Log.EvictProducersBelow(offset)
		return nil
	}
	return p.Log.DeleteRecordsBefore(offset)
}

// evictTieredProducers forgets the idempotent producers whose last batch
// is below the tiered partition's start (the tier's, moved by its
// retention or DeleteRecords): local retention keeps them (their batches
// are still in the log, in the tier), as Kafka ties producer eviction to
// the log start offset as a whole. Nothing goes while the manifest is
// unknown; a stale view starts lower, so it evicts less, never more.
func (p *Partition) evictTieredProducers() {
	tp := p.Tiered()
	if tp == nil {
		return
	}
	if m, ok := tp.Manifest(); ok {
		p.Log.EvictProducersBelow(tierStart(&m, p.Log.StartOffset()))
	}
}

// retentionLimit is the offset below which retention may delete local
// segments of p: the high watermark, and for a tiered log also the end of
// what the tier holds.
func (p *Partition) retentionLimit() (int64, bool) {
	limit := int64(math.MaxInt64)
	if p.Replica != nil {
		limit = p.Replica.HighWatermark()
	}
	tp := p.Tiered()
	if tp == nil {
		return limit, false
	}
	// Not past the point where the tier's lineage leaves this replica's
	// log (after an unclean election the tier may hold another history
	// there until the new leader cuts it out).
	return min(limit, tp.ConsistentEnd(p.Log)), true
}

// tierDeleteTimeout bounds the deletion of a deleted topic's tier data.
const tierDeleteTimeout = 2 * time.Minute

// deleteTierData removes a deleted topic's partition from the slow tier in
// the background (best effort: a failure leaves objects no manifest names
// in the bucket, logged). Every replica of the partition does it; the
// deletions are idempotent.
func (b *Broker) deleteTierData(p *Partition) {
	tp := p.tier.Load()
	if tp == nil || !p.Log.Config().RemoteStorage {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), tierDeleteTimeout)
		defer cancel()
		if err := tp.DeleteAll(ctx); err != nil {
			b.log.Error(err, "deleting a deleted topic's slow-tier data", "partition", p.Topic, "index", p.Index)
			return
		}
		b.log.Info("deleted a deleted topic's slow-tier data", "topic", p.Topic, "partition", p.Index, "prefix", tp.Prefix())
	}()
}

// hostedPartition returns the local replica of tp, nil when not hosted.
func (b *Broker) hostedPartition(tp meta.TopicPartition) *Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if t, ok := b.topics[tp.Topic]; ok && tp.Partition >= 0 && int(tp.Partition) < len(t.partitions) {
		return t.partitions[tp.Partition]
	}
	return nil
}

// applyRetention deletes p's old local segments. Kafka never deletes above
// the high watermark; a tiered log goes by local.retention.* and keeps what
// the slow tier does not hold yet.
func (p *Partition) applyRetention() (int, error) {
	limit, tiered := p.retentionLimit()
	if tiered {
		return p.Log.ApplyLocalRetentionUpTo(limit)
	}
	return p.Log.ApplyRetentionUpTo(limit)
}

// checkRemoteStorage applies Kafka's rules to a topic's configs:
// remote.storage.enable needs the broker's slow tier
// (remote.log.storage.system.enable); set on the topic it needs
// cleanup.policy=delete (a compacted topic under the cluster default
// log.remote.storage.enable=true is simply not tiered: tieredByConfig), and
// the topic's own local.retention.ms/bytes must not exceed its
// retention.ms/bytes.
func (b *Broker) checkRemoteStorage(overrides map[string]string) error {
	if b.effectiveTopicConfig(topicConfigByName[ConfigRemoteStorage], overrides).Value != "true" {
		return nil
	}
	if !b.cfg.RemoteStorageSystem {
		return fmt.Errorf("%w: tiered storage functionality is disabled in the broker (remote.log.storage.system.enable=false); topic cannot be configured with %s=true", kerr.InvalidConfig, ConfigRemoteStorage)
	}
	if overrides[ConfigRemoteStorage] == "true" && policyHas(b.effectiveTopicConfig(topicConfigByName["cleanup.policy"], overrides).Value, "compact") {
		return fmt.Errorf("%w: remote log storage is only supported for topics with cleanup.policy=delete", kerr.InvalidConfig)
	}
	for _, pair := range [][2]string{{"local.retention.ms", "retention.ms"}, {"local.retention.bytes", "retention.bytes"}} {
		lv, ok := overrides[pair[0]]
		if !ok {
			continue
		}
		local, _ := strconv.ParseInt(lv, 10, 64)
		total, _ := strconv.ParseInt(b.effectiveTopicConfig(topicConfigByName[pair[1]], overrides).Value, 10, 64)
		if local != log.LocalRetentionSameAsTotal && total >= 0 && (local < 0 || local > total) {
			return fmt.Errorf("%w: %s %d cannot be more than %s %d", kerr.InvalidConfig, pair[0], local, pair[1], total)
		}
	}
	return nil
}

// tieredByConfig reports whether a topic's effective configs tier it:
// remote.storage.enable and not compacted.
func (b *Broker) tieredByConfig(overrides map[string]string) bool {
	return b.effectiveTopicConfig(topicConfigByName[ConfigRemoteStorage], overrides).Value == "true" &&
		!policyHas(b.effectiveTopicConfig(topicConfigByName["cleanup.policy"], overrides).Value, "compact")
}

// checkRemoteStorageChange refuses turning remote.storage.enable off on a
// tiered topic, as Kafka does: the tier's data would be stranded.
func (b *Broker) checkRemoteStorageChange(prev, next map[string]string) error {
	tc := topicConfigByName[ConfigRemoteStorage]
	if b.effectiveTopicConfig(tc, prev).Value == "true" && b.effectiveTopicConfig(tc, next).Value != "true" {
		return fmt.Errorf("%w: disabling remote storage on a topic is not supported (%s stays true)", kerr.InvalidConfig, ConfigRemoteStorage)
	}
	return nil
}

// TierStats is what the slow tier's metrics read.
type TierStats struct {
	tier.Stats
	// LagBytes is the bytes of led tiered partitions not in the tier yet.
	LagBytes int64
	// Partitions is the number of tiered partitions this broker leads,
	// FailingPartitions those of them whose last upload failed (backing
	// off: the bucket is unreachable or refuses).
	Partitions, FailingPartitions int
}

// TierManager runs the slow tier for a broker: every interval
// (remote.log.manager.task.interval.ms) it uploads the led partitions'
// sealed segments, applies tier retention, and refreshes the manifests of
// followed partitions (whose local retention waits for the tier).
type TierManager struct {
	b        *Broker
	interval time.Duration

	mu    sync.Mutex
	stats TierStats
	// runMu serialises rounds; nextLoad is guarded by it.
	runMu sync.Mutex
	// nextLoad is when a followed partition's manifest is read again:
	// every followerRefreshRounds rounds (a LIST and a GET each time; a
	// follower only needs it to let local retention go on, so a stale view
	// keeps more on disk, never less).
	nextLoad map[*tier.Partition]time.Time
	// The orphan sweep (tiersweep.go), guarded by runMu: the grace, when
	// each led partition and the deleted topics are swept next.
	grace          time.Duration
	sweepOff       bool
	nextSweep      map[*tier.Partition]time.Time
	nextTopicSweep time.Time
}

// followerRefreshRounds is how many rounds a follower's manifest view
// lasts (10 × the default 30 s: 5 minutes, log.retention.check.interval.ms's
// default).
const followerRefreshRounds = 10

// NewTierManager returns the manager; Run starts it.
func NewTierManager(b *Broker, interval time.Duration) *TierManager {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	return &TierManager{b: b, interval: interval, nextLoad: map[*tier.Partition]time.Time{}, nextSweep: map[*tier.Partition]time.Time{}}
}

// Stats returns the counters and the upload lag of the last round.
func (m *TierManager) Stats() TierStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	if t := m.b.Tier(); t != nil {
		s.Stats = t.Stats()
	}
	return s
}

// Run works until ctx ends.
func (m *TierManager) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	var rl roundLog
	for {
		err := m.RunOnce(ctx)
		if ctx.Err() == nil {
			rl.note(m.b.log, err, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// roundLogEvery is how often a slow tier that keeps failing is logged
// again at the default level.
const roundLogEvery = time.Minute

// roundLog logs the tier rounds' failures at the default level without
// a line per round: the first failed round, then at most one a minute
// while rounds keep failing (with how many failed), and the first round
// that succeeds again. Every failed round is logged at V(1). An operator
// reading the broker's log sees that uploads fail and why, not only
// strata_tier_failing_partitions.
type roundLog struct {
	failing    bool
	failed     int // rounds failed since the last line
	lastLogged time.Time
}

func (r *roundLog) note(lg logr.Logger, err error, now time.Time) {
	if err == nil {
		if r.failing {
			lg.Info("slow tier rounds succeed again", "failedRoundsSinceLastLog", r.failed)
		}
		*r = roundLog{}
		return
	}
	lg.V(1).Info("slow tier round", "error", err.Error())
	r.failed++
	if r.failing && now.Sub(r.lastLogged) < roundLogEvery {
		return
	}
	msg := "slow tier round failed; each partition retries with its own backoff"
	if r.failing {
		msg = "slow tier rounds still failing"
	}
	lg.Info(msg, "failedRounds", r.failed, "error", err.Error())
	r.failing, r.failed, r.lastLogged = true, 0, now
}

// RunOnce does one round over every hosted tiered partition and returns
// the errors joined (each partition retries with its own backoff).
func (m *TierManager) RunOnce(ctx context.Context) error {
	m.runMu.Lock()
	defer m.runMu.Unlock()
	var errs []error
	var lagBytes int64
	seen := map[*tier.Partition]bool{}
	led, failing := 0, 0
	sweep := m.newSweepRound()
	for _, p := range m.b.AllPartitions() {
		tp := p.Tiered()
		if tp == nil {
			continue
		}
		seen[tp] = true
		leader, epoch, hwm := p.leadership()
		if !leader {
			if now := time.Now(); !now.Before(m.nextLoad[tp]) {
				if _, err := tp.Load(ctx); err != nil {
					errs = append(errs, fmt.Errorf("%s-%d: %w", p.Topic, p.Index, err))
					continue
				}
				m.nextLoad[tp] = now.Add(followerRefreshRounds * m.interval)
			}
			continue
		}
		delete(m.nextLoad, tp)
		led++
		// Below the last stable offset, not just the high watermark (as
		// Kafka's RemoteLogManager): an undecided transaction's data never
		// goes to the tier, so the aborted-transaction entries uploaded
		// with a segment are complete, and local retention (bounded by
		// the tier's end) never deletes the start of an open transaction.
		res, err := tp.Upload(ctx, p.Log, p.Log.LastStableOffset(hwm), epoch)
		lagBytes += res.Lag
		if tp.UploadFailing() {
			failing++
		}
		if err != nil {
			if errors.Is(err, tier.ErrFenced) {
				continue // a newer leader took over; this one steps down soon
			}
			errs = append(errs, fmt.Errorf("upload %s-%d: %w", p.Topic, p.Index, err))
			continue
		}
		cfg := p.Log.Config()
		pol := tier.RetentionPolicy{RetentionMs: cfg.RetentionMs, RetentionBytes: cfg.RetentionBytes, LocalBytes: res.Lag}
		if _, err := tp.ApplyRetention(ctx, epoch, pol); err != nil && !errors.Is(err, tier.ErrFenced) {
			errs = append(errs, fmt.Errorf("tier retention %s-%d: %w", p.Topic, p.Index, err))
		}
		if err := m.sweepLed(ctx, sweep, p, tp, epoch); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.sweepDeletedTopics(ctx, sweep); err != nil {
		errs = append(errs, err)
	}
	for tp := range m.nextLoad {
		if !seen[tp] {
			delete(m.nextLoad, tp) // no longer hosted or tiered
		}
	}
	for tp := range m.nextSweep {
		if !seen[tp] {
			delete(m.nextSweep, tp)
		}
	}
	m.mu.Lock()
	m.stats.LagBytes, m.stats.Partitions, m.stats.FailingPartitions = lagBytes, led, failing
	m.mu.Unlock()
	// Local retention of the tiered logs right after the round: segments
	// just uploaded (or, on followers, just seen in the manifest) may go.
	for _, p := range m.b.AllPartitions() {
		if p.Tiered() == nil {
			continue
		}
		if _, err := p.applyRetention(); err != nil {
			errs = append(errs, fmt.Errorf("local retention of %s-%d: %w", p.Topic, p.Index, err))
		}
		p.evictTieredProducers()
	}
	return errors.Join(errs...)
}
