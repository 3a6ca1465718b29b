package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/wal"
)

// WAL replication (DESIGN.md §2, docs/replication.md "WAL replication").
//
// Leader side: every batch a partition appends as leader is also handed to
// the broker's one wal.Uploader (its zone's fast bucket). Upload results
// become pointers in the partition's wal.PointerIndex (memory + pointer
// file beside the log). A replica fetch that asks for pointers (the
// request partition's tagged field TagWALPointers) gets, for a range an
// uploaded object covers, the pointers in the response partition's tagged
// field of the same number instead of record bytes; for a range still
// being uploaded it waits (the long poll wakes on upload completion); for
// everything else (uploader degraded, batch refused by the uploader,
// upload failed, pointer missing, range uploaded too long ago to wait
// for) it answers inline as in classic replication.
//
// Follower side: pointers are downloaded from the leader's zone bucket
// (wal.Downloader: merged ranged GETs, CRC-32C and batch checks) and
// appended as follower like inline bytes. A range that fails (missing
// object, corrupt bytes) is never appended: the follower asks for that
// range inline (without the tag) until its log end passes it.
//
// Deletion: the leader tracks, per object, which followers still need
// which chunk (wal.Tracker fed with the follower LEOs of replica fetches)
// and deletes the object once all have it, or once it is older than
// wal.retention.ms.

// TagWALPointers is the tagged field (Fetch v12+, flexible) that carries
// WAL pointers: in a request partition it says the follower accepts
// pointers (value 0x01); in a response partition it holds them. Kafka
// defines tags 0-2 there; clients skip unknown tags, and the leader only
// sends this one to replica fetches that asked for it.
const TagWALPointers = 0x5354 // "ST"

// TagReplicaToken is the tagged field of a replica Fetch request (top
// level) that carries the follower's registration secret
// (meta.BrokerInfo.FetchToken, 16 bytes), Strata's proof that the fetch
// comes from the broker its ReplicaID names (Manager.CheckReplicaFetcher).
// Kafka defines tags 0-1 there (ClusterId, ReplicaState); a leader of an
// older Strata version skips it.
const TagReplicaToken = 0x5355 // "SU"

// WALConfig enables WAL replication on a Manager (Manager.EnableWAL).
type WALConfig struct {
	// Store is this broker's zone fast bucket (uploads).
	Store   objstore.Store
	Cluster string
	Zone    string
	// Incarnation distinguishes restarts of the broker in object keys.
	Incarnation uint64
	// MaxObjectBytes is wal.object.max.bytes; UploadInterval is
	// wal.upload.interval.ms.
	MaxObjectBytes int
	UploadInterval time.Duration
	// Retention is wal.retention.ms: objects older than this are deleted
	// whatever their replication state (default 1 h).
	Retention time.Duration
	// InlineAfter: a range accepted by the uploader but not uploaded after
	// this long is served inline (default 1 s), so a slow bucket delays
	// followers by at most this much.
	InlineAfter time.Duration
	// Stores returns the store of a bucket a leader's pointer names
	// (downloads). Nil: this broker never asks for pointers.
	Stores func(bucket string) (objstore.Store, error)
	// DownloadTimeout is wal.download.timeout.ms, the budget of one fetch
	// round's downloads (default 1 s): ranges not downloaded by then are
	// fetched inline, so a hanging bucket cannot stall the partitions
	// fetched from a leader (wal.DownloaderConfig.Timeout).
	DownloadTimeout time.Duration
	// DownloadHedge is wal.download.hedge.ms (wal.DownloaderConfig.HedgeAfter:
	// 0 adaptive, < 0 never).
	DownloadHedge time.Duration
	// UploadHedge is wal.upload.hedge.ms (wal.UploaderConfig.HedgeAfter:
	// 0 adaptive, < 0 never).
	UploadHedge time.Duration
	// Clock defaults to the wall clock.
	Clock wal.Clock
	// Policy is wal.policy ("": latency, the behaviour before policies;
	// the broker's config default is auto). MaxUploadInterval is
	// wal.upload.max.interval.ms (default 10 × UploadInterval), Prices the
	// price table (cost.price.*; zero: cost.Default()).
	Policy            cost.Policy
	MaxUploadInterval time.Duration
	Prices            cost.Prices
	// PolicyMaxObjectBytes is wal.policy.object.max.bytes: the largest
	// object cost and auto cut (0: cost.DefaultMaxGrowBytes).
	PolicyMaxObjectBytes int
	// AutoMaxLatency is wal.auto.max.latency.ms and AutoMaxCostRatio
	// wal.auto.max.cost.ratio: auto's bounds (cost.DeciderConfig
	// MaxLatency, MaxCostRatio; 0: none, classic's cost).
	AutoMaxLatency   time.Duration
	AutoMaxCostRatio float64
}

// DefaultDownloadTimeout is the default of wal.download.timeout.ms: like
// InlineAfter on the leader side, a slow bucket delays a follower by
// about this much at most, far below replica.lag.time.max.ms.
const DefaultDownloadTimeout = time.Second

// walRep is a Manager's WAL state.
type walRep struct {
	cfg     WALConfig
	m       *Manager
	up      *wal.Uploader
	down    *wal.Downloader
	tracker *wal.Tracker

	// inline counts the bytes served inline to replica fetches that
	// accept pointers, by reason (strata_wal_inline_bytes_total).
	inline *prometheus.CounterVec
	// inlineBy holds inline's counter of each reason, resolved once.
	inlineBy map[string]prometheus.Counter
	// forwardedIn counts the bytes this leader appended from zone-local
	// forwarders' objects (walAppendLocked), for the policy (decide).
	forwardedIn atomic.Int64
	// foreign counts forwarded ranges by outcome (ForeignPublished,
	// ForeignReuploaded; strata_wal_foreign_pointers_total).
	foreign *prometheus.CounterVec

	mu sync.Mutex
	// objects names the partitions with pointers into each live object;
	// putEnd is when its PUT finished (stage notify).
	objects map[string][]meta.TopicPartition
	putEnd  map[string]time.Time

	// stages is the per-stage latency histogram (walstage.go).
	stages *stageMetrics

	// policy is wal.policy (walcost.go); policyInline is true while it
	// replicates inline.
	policy       *policyState
	policyInline atomic.Bool
	// foreignWake is the delay before a published foreign pointer wakes
	// the partition's replica fetches (the policy's cut interval; 0: at
	// once), foreignWakes the partitions waiting for it (scheduleForeignWake).
	foreignWake  atomic.Int64
	foreignMu    sync.Mutex
	foreignWakes map[*Partition]struct{}
	foreignTimer bool
}

// walPending is a range accepted by the uploader, not yet resolved: one
// batch, or the batches of one append (they share their acceptance
// time). Ranges are never merged across appends, so that every batch
// keeps its own acceptance time: a merged run that kept the time of its
// first batch made every range look slow one InlineAfter into sustained
// load (the run is never resolved whole while appends keep extending it).
type walPending struct {
	base, last int64
	at         time.Time
	// foreign, when set, is the pointer of a forwarded range appended
	// while an upload before it was pending: it enters the pointer index
	// once every range before it is resolved (walForeignLocked), to stay
	// until foreignUntil at most.
	foreign      *wal.Pointer
	foreignUntil time.Time
}

// walForeignLive is a foreign pointer in the index: it goes once every
// replica has its range, or at until, when the forwarder may have
// deleted its object (pruneForeignLocked). Foreign pointers are not
// tracked for deletion (the objects are the forwarder's), so without
// this the index would fill up to its bound with them.
type walForeignLive struct {
	bucket, key string
	last        int64
	until       time.Time
}

// Forwarded names where an append's batches came from: a range of a
// zone-local forwarder's object (docs/wal.md "Zone-local produce"), and
// the range's bytes as forwarded (a copy taken before the append stamped
// the batches in place).
type Forwarded struct {
	Bucket, Key    string
	Offset, Length int64
	// CRC is the CRC-32C of the range as forwarded.
	CRC  uint32
	Data []byte
	// Keep is how long the forwarder keeps the object after answering
	// (protocol.TagZoneLocalKeep): the pointer leaves the index by then.
	Keep time.Duration
}

// Outcomes of a forwarded range under WAL replication
// (strata_wal_foreign_pointers_total).
const (
	// ForeignPublished: followers read the forwarder's object.
	ForeignPublished = "published"
	// ForeignReuploaded: the append changed more than the offsets and
	// the leader epoch (LogAppendTime, a rewrite): uploaded as usual.
	ForeignReuploaded = "reuploaded"
)

// EnableWAL turns WAL replication on; call it before the first Apply.
func (m *Manager) EnableWAL(cfg WALConfig) error {
	if cfg.Retention <= 0 {
		cfg.Retention = time.Hour
	}
	if cfg.InlineAfter <= 0 {
		cfg.InlineAfter = time.Second
	}
	if cfg.DownloadTimeout <= 0 {
		cfg.DownloadTimeout = DefaultDownloadTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = wal.RealClock{}
	}
	if cfg.Policy == "" {
		cfg.Policy = cost.PolicyLatency
	}
	if cfg.UploadInterval <= 0 {
		cfg.UploadInterval = wal.DefaultUploadInterval
	}
	if cfg.MaxObjectBytes <= 0 {
		cfg.MaxObjectBytes = wal.DefaultMaxObjectBytes
	}
	if cfg.MaxUploadInterval <= 0 {
		cfg.MaxUploadInterval = 10 * cfg.UploadInterval
	}
	if cfg.Prices == (cost.Prices{}) {
		cfg.Prices = cost.Default()
	}
	if cfg.PolicyMaxObjectBytes <= 0 {
		cfg.PolicyMaxObjectBytes = cost.DefaultMaxGrowBytes
	}
	// The uploader's own bound is the largest size a plan may cut at;
	// SetCut below sets the policy's cut before the first append.
	maxObject := cfg.MaxObjectBytes
	if cfg.Policy != cost.PolicyLatency {
		maxObject = max(maxObject, cfg.PolicyMaxObjectBytes)
	}
	w := &walRep{cfg: cfg, m: m, tracker: wal.NewTracker(cfg.Retention), objects: map[string][]meta.TopicPartition{},
		putEnd: map[string]time.Time{}, stages: newStageMetrics(),
		inline: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_wal_inline_bytes_total",
			Help: "Record bytes this leader replicated inline to followers that accept WAL pointers, by reason (degraded, upload_slow, not_uploaded, no_pointer, mid_chunk, no_index, follower_asked, foreign_unread: a follower of an older version and a forwarder's range; policy: wal.policy chose inline, not a degradation).",
		}, []string{"reason"}),
		inlineBy: map[string]prometheus.Counter{},
		foreign: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_wal_foreign_pointers_total",
			Help: "Ranges this leader appended from zone-local forwarders' objects, by outcome: published (followers read the forwarder's object, nothing uploaded again) or reuploaded (the append changed the bytes beyond offsets and leader epoch, e.g. LogAppendTime: uploaded as any append). Ranges of forwarders that do not keep their objects are not counted.",
		}, []string{"outcome"})}
	w.foreign.WithLabelValues(ForeignPublished)
	w.foreign.WithLabelValues(ForeignReuploaded)
	for _, r := range []string{InlineDegraded, InlineNoIndex, InlineMidChunk, InlineUploadSlow, InlineNotUploaded, InlineNoPointer, InlineFollowerAsked, InlinePolicy, InlineForeignUnread} {
		w.inlineBy[r] = w.inline.WithLabelValues(r)
	}
	if cfg.Stores != nil {
		w.down = wal.NewDownloader(wal.DownloaderConfig{Store: cfg.Stores, Timeout: cfg.DownloadTimeout, HedgeAfter: cfg.DownloadHedge})
	}
	up, err := wal.NewUploader(wal.UploaderConfig{
		Store: cfg.Store, Cluster: cfg.Cluster, Zone: cfg.Zone, BrokerID: m.cfg.NodeID, Incarnation: cfg.Incarnation,
		MaxObjectBytes: maxObject, UploadInterval: cfg.UploadInterval,
		ReplicaSetKey: w.replicaSetKey, OnUpload: w.onUpload, Clock: cfg.Clock, HedgeAfter: cfg.UploadHedge,
	})
	if err != nil {
		return fmt.Errorf("replica: start WAL uploader: %w", err)
	}
	w.up = up
	w.policy = newPolicyState(cfg, cfg.Clock.Now())
	w.applyPlan(w.policy.plan)
	// The cost loop (NewManager's goroutine) may tick before the WAL is
	// enabled: it reads m.wal, and then w, under cost.mu.
	m.cost.mu.Lock()
	m.wal = w
	m.cost.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		w.deleteLoop(m.ctx)
	}()
	return nil
}

// WALEnabled reports whether EnableWAL was called.
func (m *Manager) WALEnabled() bool { return m.wal != nil }

// WALUploader returns the WAL uploader (nil without WAL), whose objects
// zone-local produce shares (wal.Uploader.AppendRaw).
func (m *Manager) WALUploader() *wal.Uploader {
	if m.wal == nil {
		return nil
	}
	return m.wal.up
}

// WALCollectors returns the WAL metrics to register (none without WAL):
// the uploader's (strata_wal_degraded among them) and the inline bytes by
// reason.
func (m *Manager) WALCollectors() []prometheus.Collector {
	if m.wal == nil {
		return nil
	}
	cs := append([]prometheus.Collector{wal.NewUploaderCollector(m.wal.up), m.wal.inline, m.wal.foreign, m.wal.stages.vec}, m.wal.policy.collectors()...)
	if m.wal.down != nil {
		cs = append(cs, wal.NewDownloaderCollector(m.wal.down))
	}
	return cs
}

// CountWALInline records n record bytes served inline to a replica fetch
// with WAL replication on, for reason (an Inline* constant).
func (m *Manager) CountWALInline(reason string, n int) {
	if m.wal != nil && n > 0 {
		m.wal.inlineBy[reason].Add(float64(n))
	}
}

// WALProduced tells the uploader that a produce request's appends are
// done, so the object holding them is cut as soon as the cut rate allows
// (wal.Uploader.Nudge) instead of a full upload interval later, or, under
// wal.policy cost and auto, once it is large enough (walcost.go produced).
func (m *Manager) WALProduced() {
	if m.wal != nil {
		m.wal.produced()
	}
}

// WALDegraded reports whether the uploader refuses data (fallback inline)
// because the bucket fails. Inline replication chosen by wal.policy is
// not degraded (PolicyInline).
func (m *Manager) WALDegraded() bool { return m.wal != nil && m.wal.up.Degraded() }

func (w *walRep) replicaSetKey(topic string, partition int32) string {
	p := w.m.Partition(meta.TopicPartition{Topic: topic, Partition: partition})
	if p == nil {
		return ""
	}
	st := p.State()
	return fmt.Sprint(st.Replicas)
}

// closeWAL flushes the uploader (its results still land in the indexes).
func (w *walRep) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.up.Close(ctx); err != nil {
		w.m.cfg.Log.Info("WAL uploader did not flush", "reason", err.Error())
	}
}

// walAppendLocked hands appended leader batches to the uploader. Called
// with p.mu held, so a partition's batches reach the uploader in offset
// order. A refused batch is simply not pending: followers get it inline.
// Batches of a forwarded range (fwd) that are as forwarded go to no
// upload: followers read the forwarder's object (walForeignLocked).
func (p *Partition) walAppendLocked(w *walRep, batches []record.Batch, epoch int32, fwd *Forwarded) {
	if fwd != nil && p.walIndex != nil {
		// Bytes in a forwarder's object: on the WAL path its followers
		// read them there (wal.policy=auto prices them as such, decide).
		n := 0
		for _, b := range batches {
			n += len(b)
		}
		w.forwardedIn.Add(int64(n))
	}
	if p.walIndex == nil || w.policyInline.Load() || len(batches) == 0 {
		// Inline by policy: replica fetches read the log (they wait on
		// appends, see PlanWALFetch).
		return
	}
	if fwd != nil {
		if p.walForeignLocked(w, batches, epoch, fwd) {
			w.foreign.WithLabelValues(ForeignPublished).Inc()
			return
		}
		w.foreign.WithLabelValues(ForeignReuploaded).Inc()
	}
	refused := false
	defer func() {
		if refused {
			// Parked replica fetches wait for uploads only: wake them to
			// send these batches inline.
			p.wakeUploadWaitersLocked()
		}
	}()
	now := w.cfg.Clock.Now()
	for _, b := range batches {
		h := b.Header()
		if err := w.up.Append(p.TP.Topic, p.TP.Partition, epoch, h.BaseOffset, h.LastOffset(), b); err != nil {
			refused = true
			continue
		}
		if n := len(p.walPending); n > 0 && p.walPending[n-1].last+1 == h.BaseOffset && p.walPending[n-1].at.Equal(now) {
			p.walPending[n-1].last = h.LastOffset()
			continue
		}
		p.walPending = append(p.walPending, walPending{base: h.BaseOffset, last: h.LastOffset(), at: now})
	}
}

// walForeignLocked publishes a pointer to the forwarder's range fwd for
// batches, the append of that range, when the append left its bytes as
// forwarded except for the base offsets and leader epochs it stamped
// (wal.ForwardedUnchanged): the follower stamps them itself
// (wal.RebaseBatches). It reports false, and publishes nothing, when the
// bytes differ (LogAppendTime, a rewrite): the caller uploads them.
//
// Pointers enter the index in offset order: with a range of the
// partition still being uploaded (walPending), the pointer waits behind
// it as a pending range of its own and enters the index when everything
// before it is resolved (walUploaded); meanwhile replica fetches treat it
// as any pending range (they wait, or go inline past InlineAfter).
func (p *Partition) walForeignLocked(w *walRep, batches []record.Batch, epoch int32, fwd *Forwarded) bool {
	appended := []byte(batches[0])
	if len(batches) > 1 {
		appended = nil
		for _, b := range batches {
			appended = append(appended, b...)
		}
	}
	if !wal.ForwardedUnchanged(fwd.Data, appended) {
		return false
	}
	ptr := wal.Pointer{
		Bucket: fwd.Bucket, Key: fwd.Key, Offset: fwd.Offset, Length: fwd.Length,
		Topic: p.TP.Topic, Partition: p.TP.Partition,
		BaseOffset: batches[0].BaseOffset(), LastOffset: batches[len(batches)-1].LastOffset(),
		LeaderEpoch: epoch, CRC: fwd.CRC, Rebase: true,
	}
	now := w.cfg.Clock.Now()
	until := now.Add(fwd.Keep)
	paced := w.foreignWake.Load() > 0
	if len(p.walPending) > 0 || paced {
		p.walPending = append(p.walPending, walPending{base: ptr.BaseOffset, last: ptr.LastOffset, at: now, foreign: &ptr, foreignUntil: until})
		if paced {
			w.scheduleForeignWake(p)
		}
		return true
	}
	if err := p.walIndex.Add(ptr); err != nil {
		return false // the uploader takes the batches
	}
	p.walForeign = append(p.walForeign, walForeignLive{bucket: ptr.Bucket, key: ptr.Key, last: ptr.LastOffset, until: until})
	p.wakeUploadWaitersLocked()
	return true
}

// scheduleForeignWake publishes p's pending foreign pointers after the
// policy's cut interval (foreignWake), or with the leader's next upload
// of the partition if that comes first (walUploaded): the forwarded
// ranges of every partition that arrive meanwhile are published
// together, so they cost the followers' replica fetches one round per
// interval, as the leader's own uploads do. Publishing (and waking) at
// each one tripled the cross-zone pointer traffic under
// wal.policy=cost, and the faster acknowledgements made producers send
// more, smaller requests, each a forwarded object more (docs/bench.md).
// Called with p.mu held.
func (w *walRep) scheduleForeignWake(p *Partition) {
	d := time.Duration(w.foreignWake.Load())
	w.foreignMu.Lock()
	defer w.foreignMu.Unlock()
	if w.foreignWakes == nil {
		w.foreignWakes = map[*Partition]struct{}{}
	}
	w.foreignWakes[p] = struct{}{}
	if !w.foreignTimer {
		w.foreignTimer = true
		time.AfterFunc(d, w.foreignWakeNow)
	}
}

func (w *walRep) foreignWakeNow() {
	w.foreignMu.Lock()
	ps := w.foreignWakes
	w.foreignWakes, w.foreignTimer = nil, false
	w.foreignMu.Unlock()
	for p := range ps {
		p.walForeignDue()
	}
}

// walForeignDue publishes the foreign ranges at the head of the pending
// list (those behind an upload wait for it, walUploaded) and wakes the
// replica fetches. A range that cannot enter the index any more (a new
// leadership, a truncation, a full index) is served inline.
func (p *Partition) walForeignDue() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.walIndex == nil {
		return
	}
	added := false
	for len(p.walPending) > 0 && p.walPending[0].foreign != nil {
		f := p.walPending[0]
		p.walPending = p.walPending[1:]
		ptr := *f.foreign
		if p.role != RoleLeader || ptr.LastOffset >= p.Log.EndOffset() || ptr.LeaderEpoch != p.state.LeaderEpoch {
			continue
		}
		if err := p.walIndex.Add(ptr); err == nil {
			added = true
			p.walForeign = append(p.walForeign, walForeignLive{bucket: ptr.Bucket, key: ptr.Key, last: ptr.LastOffset, until: f.foreignUntil})
		}
	}
	if added {
		p.wakeUploadWaitersLocked()
	}
}

// pruneForeignLocked drops the foreign pointers whose range every
// replica has, or whose object the forwarder may have deleted (its keep
// time, counted from the append, passed; the forwarder counts from its
// answer, later). Pointers of one object go together (RemoveObject): a
// later range of the same object a follower still lacks then comes
// inline.
func (p *Partition) pruneForeignLocked(now time.Time) {
	if len(p.walForeign) == 0 {
		return
	}
	if p.walIndex == nil || p.role != RoleLeader {
		p.walForeign = nil
		return
	}
	have := p.Log.EndOffset() // every replica has the offsets below
	for _, r := range p.state.Replicas {
		if f, ok := p.followers[r]; ok && r != p.self {
			have = min(have, f.leo) // -1: not known yet
		}
	}
	n := 0
	for n < len(p.walForeign) {
		h := p.walForeign[n]
		if h.last >= have && now.Before(h.until) {
			break
		}
		_ = p.walIndex.RemoveObject(h.bucket, h.key)
		n++
	}
	p.walForeign = p.walForeign[n:]
}

// onUpload runs on the uploader's deliver goroutine, in sequence order.
func (w *walRep) onUpload(res wal.UploadResult) {
	w.stages.observeUpload(res)
	byTP := map[meta.TopicPartition][]wal.Pointer{}
	for _, ptr := range res.Pointers {
		tp := meta.TopicPartition{Topic: ptr.Topic, Partition: ptr.Partition}
		byTP[tp] = append(byTP[tp], ptr)
	}
	var tps []meta.TopicPartition
	var woken []*Partition
	for tp, ptrs := range byTP {
		p := w.m.Partition(tp)
		if p == nil {
			continue
		}
		woken = append(woken, p)
		if p.walUploaded(ptrs, res.Err == nil) && res.Err == nil {
			tps = append(tps, tp)
		}
	}
	// Wake the parked replica fetches only once every partition of the
	// object has its pointers, so that one response carries them all
	// (one GET per object and follower, not one per partition).
	for _, p := range woken {
		p.mu.Lock()
		p.wakeUploadWaitersLocked()
		p.mu.Unlock()
	}
	if res.Err != nil {
		w.m.cfg.Log.V(1).Info("WAL upload failed; followers get those ranges inline", "key", res.Key, "error", res.Err.Error())
		return
	}
	w.mu.Lock()
	w.objects[res.Key] = tps
	if !res.PutStart.IsZero() {
		w.putEnd[res.Key] = res.PutStart.Add(res.Elapsed)
	}
	w.mu.Unlock()
	w.tracker.Add(res.Bucket, res.Key, w.cfg.Clock.Now(), wal.NeedsFor(res.Pointers, func(topic string, partition int32) []int32 {
		p := w.m.Partition(meta.TopicPartition{Topic: topic, Partition: partition})
		if p == nil {
			return nil
		}
		var out []int32
		for _, r := range p.State().Replicas {
			if r != w.m.cfg.NodeID {
				out = append(out, r)
			}
		}
		return out
	}))
}

// walUploaded resolves pending ranges and, on success, records pointers.
// It reports whether pointers were added; the caller wakes walCh.
func (p *Partition) walUploaded(ptrs []wal.Pointer, ok bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.walIndex == nil {
		return false
	}
	last := ptrs[len(ptrs)-1].LastOffset
	var add []wal.Pointer
	if ok {
		add = append(add, ptrs...)
	}
	var foreign []walPending
	for len(p.walPending) > 0 && p.walPending[0].base <= last {
		if p.walPending[0].foreign != nil {
			// A forwarded range between this object's ranges: its
			// pointer goes in between (an object holds a partition's
			// contiguous runs as separate chunks).
			foreign = append(foreign, p.walPending[0])
			p.walPending = p.walPending[1:]
			continue
		}
		if p.walPending[0].last <= last {
			p.walPending = p.walPending[1:]
			continue
		}
		p.walPending[0].base = last + 1
		break
	}
	// Forwarded ranges that waited only for what was just resolved.
	for len(p.walPending) > 0 && p.walPending[0].foreign != nil {
		foreign = append(foreign, p.walPending[0])
		p.walPending = p.walPending[1:]
	}
	until := map[int64]time.Time{}
	for _, f := range foreign {
		add = append(add, *f.foreign)
		until[f.base] = f.foreignUntil
	}
	sort.SliceStable(add, func(i, j int) bool { return add[i].BaseOffset < add[j].BaseOffset })
	added := false
	if p.role == RoleLeader {
		for _, ptr := range add {
			if ptr.LastOffset >= p.Log.EndOffset() || ptr.LeaderEpoch != p.state.LeaderEpoch {
				continue // truncated or from another leadership meanwhile
			}
			if err := p.walIndex.Add(ptr); err == nil {
				added = true
				if ptr.Rebase {
					p.walForeign = append(p.walForeign, walForeignLive{bucket: ptr.Bucket, key: ptr.Key, last: ptr.LastOffset, until: until[ptr.BaseOffset]})
				}
			}
		}
	}
	return added
}

// openWALLocked opens the pointer index when this replica becomes leader
// and checks its pointers against the log: pointers below the log start
// go, and so does every pointer from the first one whose range the log
// does not hold at the pointer's epoch (firstStalePointer: past the log
// end, or overwritten under a later epoch while this broker followed).
// It returns the number of pointers dropped as stale.
func (p *Partition) openWALLocked() (stale int, err error) {
	if p.walIndex == nil {
		x, err := wal.OpenPointerIndex(p.Log.Dir(), 0)
		if err != nil {
			return 0, err
		}
		p.walIndex = x
	}
	p.walPending = nil
	p.walLogStart = -1 // the tracker forgot it on Release: report again
	start, end := p.Log.StartOffset(), p.Log.EndOffset()
	if err := p.walIndex.PruneBelow(start); err != nil {
		return 0, err
	}
	n := p.walIndex.Len()
	// Foreign pointers of an earlier leadership or run: when their
	// objects go is not known any more (pruneForeignLocked), and they
	// only spare a lagging follower an inline range.
	p.walForeign = nil
	for _, ptr := range p.walIndex.All() {
		if ptr.Rebase {
			if err := p.walIndex.RemoveObject(ptr.Bucket, ptr.Key); err != nil {
				return 0, err
			}
		}
	}
	if err := p.walIndex.TruncateFrom(firstStalePointer(p.walIndex.All(), p.Log.Epochs(), start, end)); err != nil {
		return 0, err
	}
	return n - p.walIndex.Len(), nil
}

// dropWALLocked forgets every pointer when this replica becomes follower:
// pointers are served by leaders only, and the follower's log may be
// truncated and rewritten, so none of them stays valid. The pointer file
// goes too, also when the index is not open: after a restart the first
// role is often follower, and a file left by the earlier run must not be
// served when this replica leads again.
func (p *Partition) dropWALLocked() error {
	p.walPending = nil
	p.walForeign = nil
	var err error
	if p.walIndex != nil {
		err = p.walIndex.Close()
		p.walIndex = nil
	}
	return errors.Join(err, wal.RemovePointerFile(p.Log.Dir()))
}

// closeWALLocked closes the pointer index (the partition is removed).
func (p *Partition) closeWALLocked() {
	if p.walIndex != nil {
		_ = p.walIndex.Close()
		p.walIndex = nil
	}
	p.walPending = nil
	p.walForeign = nil
}

// walWaitsOnUploadsLocked reports whether a follower fetching at off
// lacks only ranges still being uploaded, none accepted InlineAfter ago or
// earlier: everything from off to the log end leo is pending, without a
// gap. Such a follower is as caught up as WAL replication lets it be (its
// answer comes with the next upload), so Partition.FollowerFetch counts
// it as caught up; otherwise, under sustained load, it would trail the
// leader's log end by the uploads in flight at every fetch and leave the
// ISR after replica.lag.time.max.ms. A slow upload ends this: past
// InlineAfter the range is served inline and the follower catches up as
// in classic replication.
func (p *Partition) walWaitsOnUploadsLocked(off, leo int64) bool {
	w := p.wal
	if w == nil || p.walIndex == nil || p.role != RoleLeader || off >= leo || w.up.Degraded() {
		return false
	}
	i := p.walPendingAtLocked(off)
	if i < 0 || w.cfg.Clock.Now().Sub(p.walPending[i].at) >= w.cfg.InlineAfter {
		return false
	}
	next := off
	for _, r := range p.walPending[i:] {
		if r.base > next {
			return false // a range the uploader refused: inline
		}
		next = r.last + 1
	}
	return next >= leo
}

// walPendingAtLocked returns the index of the pending range holding off,
// -1 if none does.
func (p *Partition) walPendingAtLocked(off int64) int {
	i := sort.Search(len(p.walPending), func(i int) bool { return p.walPending[i].last >= off })
	if i == len(p.walPending) || p.walPending[i].base > off {
		return -1
	}
	return i
}

// WALServe is the leader's plan for one partition of a replica fetch that
// accepts pointers.
type WALServe struct {
	// Pointers to send instead of records (non-empty: nothing inline).
	Pointers []wal.Pointer
	// InlineUpTo bounds the inline read (records below it), when no
	// pointers are sent; equal to the fetch offset: nothing now.
	InlineUpTo int64
	// Wait wakes the long poll when an upload of this partition finishes.
	Wait <-chan struct{}
	// Reason says why bytes below InlineUpTo go inline (one of the
	// Inline* constants); empty when the plan sends pointers or waits.
	Reason string
}

// Why a leader serves a pointer-accepting replica fetch inline: the
// reason label of strata_wal_inline_bytes_total.
const (
	// InlineDegraded: the uploader refuses data (bucket failing).
	InlineDegraded = "degraded"
	// InlineNoIndex: this replica has no pointer index (not leader).
	InlineNoIndex = "no_index"
	// InlineMidChunk: the follower's log ends inside an uploaded chunk.
	InlineMidChunk = "mid_chunk"
	// InlineUploadSlow: the range waited for its upload longer than
	// InlineAfter.
	InlineUploadSlow = "upload_slow"
	// InlineNotUploaded: the uploader refused the range or its upload
	// failed.
	InlineNotUploaded = "not_uploaded"
	// InlineNoPointer: no pointer and nothing pending covers the range
	// (e.g. appended before this broker led, or its object expired).
	InlineNoPointer = "no_pointer"
	// InlineFollowerAsked: the follower asked inline (it could not use a
	// pointer: missing or corrupt object, refused epoch).
	InlineFollowerAsked = "follower_asked"
	// InlinePolicy: wal.policy chose inline replication (objects would
	// cost more than classic at this throughput). Not a degradation.
	InlinePolicy = "policy"

	// InlineForeignUnread: the range has a foreign pointer (a zone-local
	// forwarder's object) and the follower does not read those (an older
	// version: its fetch lacks TagWALRebase).
	InlineForeignUnread = "foreign_unread"
)

// PlanWALFetch decides how to serve a pointer-accepting replica fetch at
// off (already checked by ServeReplicaFetch) from a follower that does
// not read foreign pointers.
func (m *Manager) PlanWALFetch(p *Partition, off int64, maxBytes int) WALServe {
	return m.PlanWALFetchFor(p, off, maxBytes, false)
}

// PlanWALFetchFor is PlanWALFetch for a follower that reads foreign
// pointers (Pointer.Rebase) when foreign is true (AsksForeignPointers):
// only such a follower is sent them; another one gets those ranges
// inline.
func (m *Manager) PlanWALFetchFor(p *Partition, off int64, maxBytes int, foreign bool) WALServe {
	plan := m.planWALFetch(p, off, maxBytes, foreign)
	if len(plan.Pointers) > 0 {
		m.wal.observeNotify(plan.Pointers)
	}
	return plan
}

// observeNotify records stage notify for each object the pointers name:
// from its PUT's end to this answer.
func (w *walRep) observeNotify(ptrs []wal.Pointer) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	last := ""
	for _, ptr := range ptrs {
		if ptr.Key == last {
			continue
		}
		last = ptr.Key
		if at, ok := w.putEnd[ptr.Key]; ok {
			w.stages.observe(StageNotify, now.Sub(at))
		}
	}
}

func (m *Manager) planWALFetch(p *Partition, off int64, maxBytes int, foreign bool) WALServe {
	p.mu.Lock()
	defer p.mu.Unlock()
	leo := p.Log.EndOffset()
	plan := WALServe{InlineUpTo: leo, Wait: p.walCh, Reason: InlineNoPointer}
	switch {
	case m.wal == nil || p.walIndex == nil:
		plan.Reason = InlineNoIndex
		return plan
	case m.wal.up.Degraded():
		plan.Reason = InlineDegraded
		return plan
	}
	ptrs := p.walIndex.From(off, int64(maxBytes))
	if m.wal.policyInline.Load() && (len(ptrs) == 0 || ptrs[0].BaseOffset != off) {
		// Inline by policy, also when caught up (a non-empty Reason
		// makes the fetch wait for appends, not for uploads).
		plan.Reason = InlinePolicy
		return plan
	}
	if !foreign {
		for i, ptr := range ptrs {
			if !ptr.Rebase {
				continue
			}
			if i > 0 {
				ptrs = ptrs[:i]
				break
			}
			// A follower that cannot rebase: the foreign ranges from off
			// go inline.
			plan.InlineUpTo, plan.Reason = ptr.LastOffset+1, InlineForeignUnread
			for _, q := range ptrs[1:] {
				if !q.Rebase {
					break
				}
				plan.InlineUpTo = q.LastOffset + 1
			}
			return plan
		}
	}
	if len(ptrs) > 0 {
		if ptrs[0].BaseOffset == off {
			plan.Pointers, plan.Reason = ptrs, ""
			return plan
		}
		// The follower stopped inside a chunk: inline to its end.
		plan.InlineUpTo, plan.Reason = ptrs[0].LastOffset+1, InlineMidChunk
		return plan
	}
	if off >= leo {
		// Caught up: wait for the next upload. Appends the uploader
		// refuses wake walCh too (walAppendLocked), so they go inline.
		plan.Reason = ""
		return plan
	}
	i := sort.Search(len(p.walPending), func(i int) bool { return p.walPending[i].last >= off })
	if i == len(p.walPending) {
		return plan
	}
	r := p.walPending[i]
	if r.base > off {
		// Not uploaded and not pending below the next pending range.
		plan.InlineUpTo, plan.Reason = r.base, InlineNotUploaded
		return plan
	}
	// The age of the batch the follower needs next, from its acceptance.
	if m.wal.cfg.Clock.Now().Sub(r.at) < m.wal.cfg.InlineAfter {
		plan.InlineUpTo, plan.Reason = off, "" // wait for the upload
		return plan
	}
	// Slow: the bucket lags. Inline up to the end of the contiguous
	// pending ranges, younger ones included, so that the follower catches
	// up with this log end in one answer (and counts as caught up on its
	// next fetch) instead of trailing the uploads by InlineAfter.
	plan.InlineUpTo, plan.Reason = r.last+1, InlineUploadSlow
	for _, q := range p.walPending[i+1:] {
		if q.base != plan.InlineUpTo {
			break
		}
		plan.InlineUpTo = q.last + 1
	}
	return plan
}

// walProgress records a follower's LEO for object deletion. prev is the
// LEO it reported before in this leadership (-1: none). A first fetch,
// or a LEO below the previous one (the follower restarted without an
// unflushed tail, or truncated), resets what the tracker knew of it: the
// tracker only moves a replica's LEO forward, and would otherwise let
// objects go that the follower needs again.
func (w *walRep) walProgress(tp meta.TopicPartition, follower int32, prev, leo int64) {
	if prev < 0 || leo < prev {
		w.tracker.ResetReplica(tp.Topic, tp.Partition, follower)
	}
	w.tracker.ReplicaProgress(tp.Topic, tp.Partition, follower, leo)
}

// walDiverged: the leader told follower to truncate (its log diverged),
// so it needs again what it had past the divergence point.
func (w *walRep) walDiverged(tp meta.TopicPartition, follower int32) {
	w.tracker.ResetReplica(tp.Topic, tp.Partition, follower)
}

// reportLogStarts drops the foreign pointers every replica has or whose
// objects may be gone (pruneForeignLocked) and tells the tracker and the
// pointer indexes where the
// logs of the led partitions start: retention (broker.ApplyRetention) and
// DeleteRecords move the start, and a chunk below it is needed by no
// follower (one that lags behind it restarts at the leader's log start).
// Called every deletion round, so objects whose chunks all fell below the
// start go in the same round, even when a follower that still "needs"
// them is down.
func (w *walRep) reportLogStarts() {
	for _, p := range w.m.partitions() {
		p.mu.Lock()
		p.pruneForeignLocked(w.cfg.Clock.Now())
		start, moved := int64(0), false
		if p.role == RoleLeader && p.walIndex != nil {
			start = p.Log.StartOffset()
			if moved = start != p.walLogStart; moved {
				p.walLogStart = start
				_ = p.walIndex.PruneBelow(start)
			}
		}
		p.mu.Unlock()
		if moved {
			w.tracker.LogStart(p.TP.Topic, p.TP.Partition, start)
		}
	}
}

// deleteEvery is how often the leader deletes the objects every follower
// has: one DeleteObjects request per round for all of them, so deletions
// cost the bucket a request every deleteEvery, not one per object.
const deleteEvery = 250 * time.Millisecond

// maxDeleteRetries bounds the objects whose deletion failed and is
// retried each round (a bucket down for long); beyond it the oldest are
// left to the operator's sweep and the bucket's lifecycle rule.
const maxDeleteRetries = 50_000

// deleteLoop deletes objects every follower has (or that expired). A
// round whose deletion fails is retried with the next one, so an outage
// of the bucket leaves no objects behind once it is back.
func (w *walRep) deleteLoop(ctx context.Context) {
	t := time.NewTicker(deleteEvery)
	defer t.Stop()
	var retry []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.reportLogStarts()
		done := w.tracker.Collect(w.cfg.Clock.Now())
		fresh := make([]string, len(done))
		for i, d := range done {
			fresh[i] = d.Key
		}
		// An object that also holds zone-local produce's forwarded
		// records (wal.Uploader.AppendRaw) is deleted by whichever of
		// its two holders lets it go last.
		if w.up != nil {
			fresh = w.up.Release(fresh)
		}
		keys := append(retry, fresh...)
		if len(keys) == 0 {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := objstore.DeleteAll(dctx, w.cfg.Store, keys)
		cancel()
		retry = nil
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if drop := len(keys) - maxDeleteRetries; drop > 0 {
				w.m.cfg.Log.Info("too many WAL objects whose deletion fails; the operator's sweep or lifecycle rule removes the oldest", "left", drop)
				keys = keys[drop:]
			}
			retry = keys
			w.m.cfg.Log.V(1).Info("deleting WAL objects failed; retrying next round", "objects", len(keys), "error", err.Error())
		}
		// Every follower has these ranges (or they expired): their
		// pointers go whether or not the objects are gone yet.
		for _, d := range done {
			w.mu.Lock()
			tps := w.objects[d.Key]
			delete(w.objects, d.Key)
			delete(w.putEnd, d.Key)
			w.mu.Unlock()
			for _, tp := range tps {
				if p := w.m.Partition(tp); p != nil {
					p.mu.Lock()
					if p.walIndex != nil {
						_ = p.walIndex.RemoveObject(d.Bucket, d.Key)
					}
					p.mu.Unlock()
				}
			}
		}
		if err == nil {
			w.m.cfg.Log.V(1).Info("WAL objects deleted", "objects", len(keys), "first", keys[0])
		}
	}
}

// EncodePointers is the value of the response tag: uvarint count, then
// per pointer uvarint length + wal.Pointer binary form.
func EncodePointers(ptrs []wal.Pointer) ([]byte, error) {
	b := binary.AppendUvarint(nil, uint64(len(ptrs)))
	for _, p := range ptrs {
		p.Rebase = false // TagWALRebase says which (SetRebase)
		raw, err := p.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(len(raw)))
		b = append(b, raw...)
	}
	return b, nil
}

var errBadPointerTag = errors.New("replica: malformed WAL pointer tag")

// DecodePointers reverses EncodePointers.
func DecodePointers(b []byte) ([]wal.Pointer, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)) {
		return nil, errBadPointerTag
	}
	b = b[l:]
	out := make([]wal.Pointer, 0, n)
	for range n {
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errBadPointerTag
		}
		var p wal.Pointer
		if err := p.UnmarshalBinary(b[l : l+int(size)]); err != nil {
			return nil, fmt.Errorf("%w: %w", errBadPointerTag, err)
		}
		out = append(out, p)
		b = b[l+int(size):]
	}
	if len(b) != 0 {
		return nil, errBadPointerTag
	}
	return out, nil
}

// WantsPointers reports whether a request partition carries the tag.
func WantsPointers(rp *kmsg.FetchRequestTopicPartition) bool {
	return tagValue(&rp.UnknownTags, TagWALPointers) != nil
}

// ReplicaToken is the fetch token a replica Fetch request carries
// (TagReplicaToken; nil: none).
func ReplicaToken(req *kmsg.FetchRequest) []byte {
	return tagValue(&req.UnknownTags, TagReplicaToken)
}

func tagValue(t *kmsg.Tags, key uint32) []byte {
	var out []byte
	t.Each(func(k uint32, v []byte) {
		if k == key {
			out = v
		}
	})
	return out
}

// SetPointers puts pointers into a response partition.
func SetPointers(sp *kmsg.FetchResponseTopicPartition, ptrs []wal.Pointer) error {
	raw, err := EncodePointers(ptrs)
	if err != nil {
		return err
	}
	sp.UnknownTags.Set(TagWALPointers, raw)
	setRebase(sp, ptrs)
	return nil
}
