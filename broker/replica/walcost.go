package replica

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-dev/strata/broker/cost"
)

// Replication cost and wal.policy (docs/wal.md "Cost and wal.policy").
//
// Every partition counts the record bytes it appends as leader. Once a
// second the manager's cost loop (costTick) turns the new bytes into
// classic-equivalent bytes (times the partition's follower replicas in
// other zones, from the registered brokers' racks), feeds both to the
// cost meter (Config.Cost) and, with WAL replication on, to the
// wal.policy decider, whose plan it hands to the uploader (cut interval,
// cut size, nudges) and to PlanWALFetch (inline by policy). At the end of
// each produce request (WALProduced) the plan's NudgeBytes cuts an object
// that has reached the size that makes it cheap (cost and auto).
//
// auto starts inline (cost-neutral: what classic costs) and turns WAL
// objects on once it has measured a rate at which they are cheaper.
//
// Inline by policy is not a degradation: the uploader stays healthy
// (WALDegraded, strata_wal_degraded stay false) and replica fetches are
// answered inline with reason InlinePolicy. A bucket in trouble is
// the uploader's breaker, a separate state that wins over the policy.

// costTickInterval is how often the cost loop runs.
const costTickInterval = time.Second

// costState is a manager's accounting, owned by costTick (mu).
type costState struct {
	mu sync.Mutex
	// produced and classic are running totals of leader bytes and their
	// cross-zone copies.
	produced, classic int64
}

// policyState is the wal.policy part of walRep.
type policyState struct {
	mu      sync.Mutex
	decider *cost.Decider
	// seenProduced, seenClassic, seenShared: the totals the decider has
	// seen (shared: zone-local produce's forwarded bytes in objects PUT
	// whatever the path, decide).
	seenProduced, seenClassic, seenShared int64
	lastObserve                           time.Time
	plan                                  cost.Plan
	// nudgeBytes is plan.NudgeBytes for WALProduced, which must not wait
	// for mu on every produce request.
	nudgeBytes atomic.Int64

	switches *prometheus.CounterVec
	inlineG  prometheus.Gauge
	interval prometheus.Gauge
	// bound, ratio and addedP99: auto's operating point (Plan.Bound,
	// Ratio, AddedP99).
	bound    *prometheus.GaugeVec
	ratio    prometheus.Gauge
	addedP99 prometheus.Gauge
}

func newPolicyState(cfg WALConfig, now time.Time) *policyState {
	ps := &policyState{
		decider: cost.NewDecider(cost.DeciderConfig{
			Policy: cfg.Policy, Prices: cfg.Prices, Interval: cfg.UploadInterval, MaxInterval: cfg.MaxUploadInterval,
			MaxObjectBytes: cfg.MaxObjectBytes, MaxGrowBytes: cfg.PolicyMaxObjectBytes,
			MaxLatency: cfg.AutoMaxLatency, MaxCostRatio: cfg.AutoMaxCostRatio,
		}, now),
		lastObserve: now,
		switches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_wal_policy_switches_total",
			Help: "Switches of wal.policy=auto between WAL objects and inline replication, by the path switched to (wal, inline) and reason (below_break_even, above_break_even, no_cross_zone_copies).",
		}, []string{"to", "reason"}),
		inlineG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_wal_policy_inline",
			Help: "1 while wal.policy chose inline replication (cheaper than WAL objects at this throughput); not a degradation.",
		}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_wal_cut_interval_seconds",
			Help: "The WAL cut interval wal.policy chose (between wal.upload.interval.ms and wal.upload.max.interval.ms).",
		}),
		bound: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_wal_policy_bound",
			Help: "1 for what set wal.policy=auto's operating point (target: objects reach the size that costs 8 % of classic; latency: wal.auto.max.latency.ms caps the cut interval; max_interval: wal.upload.max.interval.ms caps it; cost_ceiling: inline, objects within the latency bound would cost more than wal.auto.max.cost.ratio of classic; no_cross_zone_copies: inline, nothing to save; unknown: no traffic yet), 0 for the others.",
		}, []string{"bound"}),
		ratio: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_wal_policy_cost_ratio",
			Help: "WAL objects' estimated cost over classic replication of their bytes at the current plan and rate (-1 before any traffic); inline replication costs 1.",
		}),
		addedP99: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_wal_policy_added_p99_seconds",
			Help: "The acks=all p99 the current plan's WAL objects are expected to add (2 x the cut interval, as measured; 0 while inline).",
		}),
	}
	for _, to := range []cost.Path{cost.PathWAL, cost.PathInline} {
		for _, r := range cost.SwitchReasons() {
			ps.switches.WithLabelValues(string(to), r)
		}
	}
	ps.plan = ps.decider.Plan()
	ps.setPoint(ps.plan)
	return ps
}

// setPoint exports auto's operating point (the bound gauges stay 0 for
// the latency and cost policies).
func (ps *policyState) setPoint(plan cost.Plan) {
	for _, b := range cost.Bounds() {
		v := 0.0
		if b == plan.Bound {
			v = 1
		}
		ps.bound.WithLabelValues(b).Set(v)
	}
	if math.IsNaN(plan.Ratio) || math.IsInf(plan.Ratio, 0) {
		ps.ratio.Set(-1)
	} else {
		ps.ratio.Set(plan.Ratio)
	}
	ps.addedP99.Set(plan.AddedP99.Seconds())
}

func (ps *policyState) collectors() []prometheus.Collector {
	return []prometheus.Collector{ps.switches, ps.inlineG, ps.interval, ps.bound, ps.ratio, ps.addedP99}
}

// PolicyInline reports whether wal.policy currently replicates inline.
func (m *Manager) PolicyInline() bool {
	if m.wal == nil {
		return false
	}
	return m.wal.policyInline.Load()
}

// WALPlan returns wal.policy's current plan (zero without WAL).
func (m *Manager) WALPlan() cost.Plan {
	if m.wal == nil {
		return cost.Plan{}
	}
	m.wal.policy.mu.Lock()
	defer m.wal.policy.mu.Unlock()
	return m.wal.policy.plan
}

// costLoop runs costTick every costTickInterval until the manager closes.
func (m *Manager) costLoop() {
	t := time.NewTicker(costTickInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			m.costTick()
		}
	}
}

// costTick counts the leader bytes appended since the last tick and runs
// the wal.policy decider.
func (m *Manager) costTick() {
	m.cost.mu.Lock()
	defer m.cost.mu.Unlock()
	m.mu.Lock()
	self, ok := m.brokers[m.cfg.NodeID]
	zones := make(map[int32]string, len(m.brokers))
	for id, b := range m.brokers {
		zones[id] = b.Zone
	}
	m.mu.Unlock()
	own := self.Zone
	if !ok && m.wal != nil {
		own = m.wal.cfg.Zone
	}
	var produced, classic int64
	for _, p := range m.partitions() {
		total := p.leaderBytes.Load()
		d := total - p.costSeen
		if d <= 0 {
			continue
		}
		p.costSeen = total
		// Followers in another zone; an unregistered one (zone
		// unknown) is not counted.
		copies := int64(0)
		for _, r := range p.State().Replicas {
			if z, ok := zones[r]; ok && r != m.cfg.NodeID && z != own {
				copies++
			}
		}
		produced += d
		classic += d * copies
	}
	m.cost.produced += produced
	m.cost.classic += classic
	if m.cfg.Cost != nil {
		m.cfg.Cost.Produced(produced, classic)
	}
	if m.wal != nil {
		m.wal.decide(m.cost.produced, m.cost.classic)
	}
}

// decide feeds the decider the totals since its last observation (only
// when the WAL clock moved: a manual test clock observes when the test
// advances it) and applies its plan.
func (w *walRep) decide(produced, classic int64) {
	ps := w.policy
	ps.mu.Lock()
	now := w.cfg.Clock.Now()
	if !now.After(ps.lastObserve) {
		ps.mu.Unlock()
		return
	}
	ps.lastObserve = now
	// Bytes in objects whatever this broker's path: what it forwards
	// (in its own objects) and what it appended from forwarders' (in
	// theirs, which its followers read on the WAL path).
	shared := int64(w.up.Stats().RawBytes) + w.forwardedIn.Load()
	plan, sw := ps.decider.ObserveShared(now, produced-ps.seenProduced, classic-ps.seenClassic, shared-ps.seenShared)
	ps.seenProduced, ps.seenClassic, ps.seenShared = produced, classic, shared
	changed := plan.Interval != ps.plan.Interval || plan.CutBytes != ps.plan.CutBytes || plan.Nudge != ps.plan.Nudge ||
		plan.NudgeBytes != ps.plan.NudgeBytes || plan.Path != ps.plan.Path
	ps.plan = plan
	ps.mu.Unlock()
	if changed {
		w.applyPlan(plan)
	} else {
		// The ratio moves with the rate between plan changes.
		ps.setPoint(plan)
	}
	if sw != nil {
		ps.switches.WithLabelValues(string(sw.To), sw.Reason).Inc()
		ratio := plan.Ratio
		if math.IsInf(ratio, 0) || math.IsNaN(ratio) {
			ratio = -1
		}
		w.m.cfg.Log.Info("wal.policy switched replication path", "from", sw.From, "to", sw.To, "reason", sw.Reason,
			"leaderBytesPerSecond", int64(plan.Rate), "crossZoneCopies", plan.Copies, "walCostOverClassic", ratio, "interval", plan.Interval)
	}
}

// applyPlan hands a plan to the uploader and to the fetch path (inline
// by policy) and sets the policy gauges. EnableWAL applies the first plan
// before any append: auto's is inline.
func (w *walRep) applyPlan(plan cost.Plan) {
	ps := w.policy
	w.up.SetCut(plan.Interval, plan.CutBytes, plan.Nudge)
	ps.nudgeBytes.Store(int64(plan.NudgeBytes))
	ps.interval.Set(plan.Interval.Seconds())
	ps.setPoint(plan)
	w.foreignWake.Store(int64(plan.Interval))
	inline := plan.Path == cost.PathInline
	w.policyInline.Store(inline)
	if inline {
		ps.inlineG.Set(1)
	} else {
		ps.inlineG.Set(0)
	}
}

// produced is WALProduced: a produce request's appends are done. An
// object that holds the plan's NudgeBytes is cut now, at the request
// boundary; otherwise the uploader's nudge rule applies (latency's token
// bucket; off for cost).
func (w *walRep) produced() {
	if n := w.policy.nudgeBytes.Load(); n > 0 && w.up.NudgeAtLeast(int(n)) {
		return
	}
	w.up.Nudge()
}
