package replica

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-dev/strata/broker/wal"
)

// Per-stage latency of WAL replication (issue #18): where an acks=all
// produce spends its time between the leader's append and its answer,
// and a consumer's between the HWM move and its fetch answer. One
// histogram, strata_wal_stage_seconds{stage}; each stage is observed
// where it ends, on the broker that sees it (leader or follower), on the
// wall clock (the WAL clock may be a test's manual clock).
//
// Leader: cut_wait (first byte of an object → its PUT starts: the cut
// rule, the wait for an upload slot, encoding), put, notify (PUT done →
// a replica fetch answered with the object's pointers: in-order delivery
// and the parked fetch's wake-up), hwm_to_produce (HWM reached an
// acks=all request's offsets → its wait ends), hwm_to_consumer_fetch
// (HWM moved → a parked consumer fetch answered with the new records).
// Follower: get (one round's downloads), follower_append (appending that
// round's downloaded batches), next_fetch (appended → the next replica
// fetch, which reports the new log end, is sent).
//
// acks_all_wait is not a stage but their sum as the leader sees it: an
// acks=all request's wait on one partition, appended → HWM past its
// batch (→ woken). What it has beyond the stages is their overlap
// (objects queued behind each other, the slower of two followers).
const (
	StageCutWait            = "cut_wait"
	StagePut                = "put"
	StageNotify             = "notify"
	StageGet                = "get"
	StageFollowerAppend     = "follower_append"
	StageNextFetch          = "next_fetch"
	StageHWMToProduce       = "hwm_to_produce"
	StageHWMToConsumerFetch = "hwm_to_consumer_fetch"
	// StageAcksAllWait is the whole WAL round per partition (see above).
	StageAcksAllWait = "acks_all_wait"
)

// Stages lists the stage label values in data-path order.
func Stages() []string {
	return []string{StageCutWait, StagePut, StageNotify, StageGet, StageFollowerAppend, StageNextFetch, StageHWMToProduce, StageHWMToConsumerFetch, StageAcksAllWait}
}

// stageMetrics holds the histogram and its children, resolved once.
type stageMetrics struct {
	vec *prometheus.HistogramVec
	by  map[string]prometheus.Observer
}

func newStageMetrics() *stageMetrics {
	s := &stageMetrics{
		vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "strata_wal_stage_seconds",
			Help: "Latency of each stage of WAL replication, by stage: cut_wait, put, notify (leader: PUT done to pointers answered), get, follower_append, next_fetch (follower: appended to next replica fetch), hwm_to_produce (HWM reached to acks=all wait ended), hwm_to_consumer_fetch (HWM moved to parked consumer fetch answered); acks_all_wait is their sum per partition (acks=all append to wait ended).",
			// 100 µs to ~6.5 s: sub-millisecond local stages and stalls
			// of a loaded machine alike.
			Buckets: prometheus.ExponentialBuckets(0.0001, 1.5, 28),
		}, []string{"stage"}),
		by: map[string]prometheus.Observer{},
	}
	for _, st := range Stages() {
		s.by[st] = s.vec.WithLabelValues(st)
	}
	return s
}

func (s *stageMetrics) observe(stage string, d time.Duration) {
	if s == nil || d < 0 {
		return
	}
	s.by[stage].Observe(d.Seconds())
}

// observeUpload records the uploader's stages of one stored object.
func (s *stageMetrics) observeUpload(res wal.UploadResult) {
	if res.Err != nil || res.PutStart.IsZero() {
		return
	}
	if !res.FirstByte.IsZero() {
		s.observe(StageCutWait, res.PutStart.Sub(res.FirstByte))
	}
	s.observe(StagePut, res.Elapsed)
}

// hwmMoved is when a partition's HWM last moved (Unix ns, wall clock).
type hwmMoved struct{ at atomic.Int64 }

func (h *hwmMoved) mark() { h.at.Store(time.Now().UnixNano()) }

func (h *hwmMoved) since() (time.Duration, bool) {
	at := h.at.Load()
	if at == 0 {
		return 0, false
	}
	return time.Duration(time.Now().UnixNano() - at), true
}

// ObserveConsumerFetchWake records hwm_to_consumer_fetch for a consumer
// fetch that was parked and is answered with records of p: the time since
// p's HWM last moved. The caller (Fetch's long poll) calls it once per
// partition with records in the answer.
func (m *Manager) ObserveConsumerFetchWake(p *Partition) {
	if m.wal == nil || p == nil {
		return
	}
	if d, ok := p.hwmAt.since(); ok {
		m.wal.stages.observe(StageHWMToConsumerFetch, d)
	}
}
