package replica

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Replication throttle (Kafka's replication quotas, KIP-73).
//
// A broker has two quotas, set by the dynamic broker configs
// leader.replication.throttled.rate and follower.replication.throttled.rate
// (bytes/s). They apply only to throttled replicas — the partitions the
// topic configs leader.replication.throttled.replicas and
// follower.replication.throttled.replicas name for this broker
// (Partition.SetThrottled) — and only while the replica concerned is not in
// the ISR: a replica added by a reassignment, or a restarted follower far
// behind, catches up at the throttled rate, in-sync replication never
// waits.
//
//   - Follower side: a throttled partition whose replica here is not in the
//     ISR is left out of the next replica fetch while the follower quota is
//     exceeded; the bytes it receives (inline records and WAL ranges
//     downloaded) are recorded against the quota.
//   - Leader side: a replica fetch of a throttled partition by a follower
//     not in the ISR gets no data (the fetch long-polls until the quota
//     allows more) while the leader quota is exceeded; the bytes served
//     (inline records and the WAL ranges its pointers name) are recorded
//     once the response is built, so every partition of one fetch sees
//     the quota as it was before it (broker/protocol/01_fetch.go).
//
// As in Kafka, the quota is checked before and recorded after: a fetch
// admitted while the quota has room may overshoot it by one response, and
// the next ones wait until the overshoot is paid back. Over any interval T
// the bytes admitted are at most burst + rate·T + one response.

// Throttle sides (the side label of the throttle metrics).
const (
	ThrottleLeader   = "leader"
	ThrottleFollower = "follower"
)

// Unthrottled is the rate of a quota that never throttles (Kafka's
// default, Long.MAX_VALUE).
const Unthrottled = math.MaxInt64

// minThrottleBurst is the smallest bucket: one replica fetch partition
// (replica.fetch.max.bytes) can be recorded in one reservation, and a
// small rate does not round to nothing.
const minThrottleBurst = 1 << 20

// Throttle is one replication quota: a token bucket of bytes
// (golang.org/x/time/rate) that may go into debt by the bytes of one
// response. It is safe for concurrent use.
type Throttle struct {
	now func() time.Time

	mu   sync.Mutex
	rate int64
	lim  *rate.Limiter // nil: unthrottled

	bytes prometheus.Counter
	held  prometheus.Counter
	gauge prometheus.Gauge
}

// NewThrottle returns an unthrottled quota reading the clock now (nil:
// time.Now), with metrics of its own (tests; a Manager's quotas share the
// manager's).
func NewThrottle(now func() time.Time) *Throttle {
	return newThrottle(ThrottleFollower, now, newThrottleMetrics())
}

func newThrottle(side string, now func() time.Time, m throttleMetrics) *Throttle {
	if now == nil {
		now = time.Now
	}
	l := prometheus.Labels{"side": side}
	t := &Throttle{now: now, rate: Unthrottled, bytes: m.bytes.With(l), held: m.held.With(l), gauge: m.rate.With(l)}
	t.gauge.Set(-1)
	return t
}

// throttleMetrics are a manager's quota metrics, labelled by side.
type throttleMetrics struct {
	bytes, held *prometheus.CounterVec
	rate        *prometheus.GaugeVec
}

func newThrottleMetrics() throttleMetrics {
	return throttleMetrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_replication_throttled_bytes_total",
			Help: "Replication bytes of throttled replicas outside the ISR recorded against the replication quota, by side (leader: served, follower: received).",
		}, []string{"side"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_replication_throttled_partitions_total",
			Help: "Partitions left out of a replica fetch (follower) or answered without data (leader) because the replication quota was exceeded, by side.",
		}, []string{"side"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_replication_throttle_rate_bytes",
			Help: "The replication quota in effect in bytes/s (leader/follower.replication.throttled.rate), -1 when unthrottled, by side.",
		}, []string{"side"}),
	}
}

func (m throttleMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.bytes, m.held, m.rate}
}

// SetRate sets the quota in bytes/s; Unthrottled (or anything <= 0, which
// the config validation refuses) removes it. Setting the rate it already
// has keeps the bucket's state.
func (t *Throttle) SetRate(bytesPerSec int64) {
	if bytesPerSec <= 0 {
		bytesPerSec = Unthrottled
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if bytesPerSec == t.rate {
		return
	}
	t.rate = bytesPerSec
	if bytesPerSec == Unthrottled {
		t.lim = nil
		t.gauge.Set(-1)
		return
	}
	t.gauge.Set(float64(bytesPerSec))
	burst := int(min(max(bytesPerSec, minThrottleBurst), math.MaxInt32))
	if t.lim == nil {
		t.lim = rate.NewLimiter(rate.Limit(bytesPerSec), burst)
		return
	}
	now := t.now()
	t.lim.SetLimitAt(now, rate.Limit(bytesPerSec))
	t.lim.SetBurstAt(now, burst)
}

// Rate returns the quota in bytes/s (Unthrottled when none).
func (t *Throttle) Rate() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rate
}

// Exceeded reports whether the quota has no room now (the bucket is empty
// or in debt), and counts a held-back partition when so.
func (t *Throttle) Exceeded() bool {
	t.mu.Lock()
	lim := t.lim
	t.mu.Unlock()
	if lim == nil || lim.TokensAt(t.now()) > 0 {
		return false
	}
	t.held.Inc()
	return true
}

// Delay is how long until the quota has room again (0 when it has now).
func (t *Throttle) Delay() time.Duration {
	t.mu.Lock()
	lim := t.lim
	t.mu.Unlock()
	if lim == nil {
		return 0
	}
	tokens := lim.TokensAt(t.now())
	if tokens > 0 {
		return 0
	}
	// One more byte than the debt, so that the bucket has room then.
	return time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
}

// Wait returns a channel closed once the quota has room again (at once
// when it has now): what a throttled long poll waits on.
func (t *Throttle) Wait() <-chan struct{} {
	ch := make(chan struct{})
	d := t.Delay()
	if d <= 0 {
		close(ch)
		return ch
	}
	time.AfterFunc(d, func() { close(ch) })
	return ch
}

// Record charges n bytes to the quota (the bucket may go into debt).
func (t *Throttle) Record(n int) {
	if n <= 0 {
		return
	}
	t.bytes.Add(float64(n))
	t.mu.Lock()
	lim := t.lim
	t.mu.Unlock()
	if lim == nil {
		return
	}
	now := t.now()
	// ReserveN takes at most a burst at a time (never refused then: the
	// wait it computes is unbounded); the reservations are never
	// cancelled, which leaves the bucket in debt.
	for burst := lim.Burst(); n > 0; n -= burst {
		lim.ReserveN(now, min(n, burst))
	}
}

// throttledReplicas is what the topic configs say about one partition on
// this broker.
type throttledReplicas struct {
	leader, follower bool
}

// SetThrottled marks the partition as a throttled replica on the leader
// side (its entry in leader.replication.throttled.replicas names this
// broker) and on the follower side (follower.replication.throttled.replicas).
func (p *Partition) SetThrottled(leader, follower bool) {
	p.throttled.Store(&throttledReplicas{leader: leader, follower: follower})
}

// Throttled reports the partition's throttled-replica marks.
func (p *Partition) Throttled() (leader, follower bool) {
	t := p.throttled.Load()
	if t == nil {
		return false, false
	}
	return t.leader, t.follower
}

// followerThrottledLocked reports whether this replica's fetches count
// against the follower quota: it is a throttled follower replica and not
// in the ISR.
func (p *Partition) followerThrottledLocked() bool {
	t := p.throttled.Load()
	return t != nil && t.follower && !slices.Contains(p.state.ISR, p.self)
}

// SetThrottleRates sets the broker's replication quotas in bytes/s
// (Unthrottled: none), from leader.replication.throttled.rate and
// follower.replication.throttled.rate.
func (m *Manager) SetThrottleRates(leader, follower int64) {
	m.leaderQuota.SetRate(leader)
	m.followerQuota.SetRate(follower)
	if follower == Unthrottled {
		// Fetchers waiting for the quota fetch now.
		m.mu.Lock()
		for _, f := range m.fetchers {
			f.poke()
		}
		m.mu.Unlock()
	}
}

// ThrottleRates returns the quotas in effect (Unthrottled: none).
func (m *Manager) ThrottleRates() (leader, follower int64) {
	return m.leaderQuota.Rate(), m.followerQuota.Rate()
}

// LeaderQuota returns the leader quota when a replica fetch of p by
// follower is subject to it (p is a throttled leader replica here and the
// follower is not in the ISR), else nil. The caller answers without data
// while it is Exceeded and Records the bytes it serves.
func (m *Manager) LeaderQuota(p *Partition, follower int32) *Throttle {
	t := p.throttled.Load()
	if t == nil || !t.leader {
		return nil
	}
	p.mu.Lock()
	inSync := slices.Contains(p.state.ISR, follower)
	p.mu.Unlock()
	if inSync {
		return nil
	}
	return m.leaderQuota
}
