package cost

import (
	"fmt"
	"math"
	"time"
)

// Policy is wal.policy: how a broker with WAL replication cuts objects
// and whether it uses them at all.
type Policy string

// The policies.
const (
	// PolicyLatency cuts an object every wal.upload.interval.ms (and on
	// produce requests, at that rate): the lowest latency, a PUT per
	// interval whatever the throughput.
	PolicyLatency Policy = "latency"
	// PolicyCost cuts an object at the end of the produce request that
	// brings it to the size where it costs TargetRatio of classic
	// replication of its bytes (the fixed request prices spread thin
	// enough; up to wal.policy.object.max.bytes), or
	// wal.upload.max.interval.ms after its first byte. (Cutting at the
	// break-even size, as first built, made every object cost as much as
	// classic at any rate that fills one before the max interval.)
	PolicyCost Policy = "cost"
	// PolicyAuto chooses, from the leader throughput, between WAL objects
	// and inline replication and the cut interval within [interval,
	// max interval]: objects only while they cost less than classic. It
	// starts inline (what classic costs) and turns objects on once the
	// measured rate makes them cheaper.
	PolicyAuto Policy = "auto"
)

// DefaultPolicy is wal.policy's default.
const DefaultPolicy = PolicyAuto

// ParsePolicy parses a wal.policy value ("" is the default).
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return DefaultPolicy, nil
	case PolicyLatency, PolicyCost, PolicyAuto:
		return p, nil
	}
	return "", fmt.Errorf("unknown wal.policy %q (want latency, cost or auto)", s)
}

// Path is how a leader replicates its appends.
type Path string

// The paths.
const (
	PathWAL    Path = "wal"
	PathInline Path = "inline"
)

// Why the auto policy switched: the reason label of
// strata_wal_policy_switches_total (a closed set).
const (
	// ReasonBelowBreakEven: at the current throughput even an object cut
	// at the max interval costs more than classic replication of its
	// bytes.
	ReasonBelowBreakEven = "below_break_even"
	// ReasonAboveBreakEven: the throughput fills objects that cost
	// clearly less than classic again.
	ReasonAboveBreakEven = "above_break_even"
	// ReasonNoCrossZoneCopies: nothing this broker leads has a follower
	// in another zone, so objects would save nothing.
	ReasonNoCrossZoneCopies = "no_cross_zone_copies"
)

// SwitchReasons lists the reason label values.
func SwitchReasons() []string {
	return []string{ReasonBelowBreakEven, ReasonAboveBreakEven, ReasonNoCrossZoneCopies}
}

// Defaults of DeciderConfig.
const (
	DefaultHalfLife = 10 * time.Second
	// DefaultWarmup: auto starts inline and turns objects on after 2 s of
	// traffic at a rate that makes them cheaper (three observations of
	// the cost loop); a longer warmup pays classic's price longer.
	DefaultWarmup   = 2 * time.Second
	DefaultMinDwell = 30 * time.Second
	// DefaultTargetRatio is below issue #15's 10 % of classic for what
	// the estimate cannot know: objects cut smaller than planned when the
	// rate dips below its average, hedged GETs, fallbacks to inline.
	// (Pointer notices crossing zones are in the estimate, Object.)
	DefaultTargetRatio = 0.08
	// DefaultMaxGrowBytes is wal.policy.object.max.bytes's default: the
	// largest object cost and auto cut, enough for TargetRatio down to
	// about 2 % of classic with RF 3 (a target object of ~1 MB).
	DefaultMaxGrowBytes = 1 << 20
	// EnterRatio and LeaveRatio are the hysteresis of auto, as fractions
	// of its cost ceiling (MaxCostRatio, by default classic's cost): it
	// turns WAL objects on when they cost at most EnterRatio of the
	// ceiling, off when they would cost more than LeaveRatio of it.
	EnterRatio = 0.8
	LeaveRatio = 1.0
	// DefaultMaxLatency is wal.auto.max.latency.ms's default: the
	// acks=all p99 auto's objects may add. 50 ms makes auto cut at least
	// every 25 ms (LatencyPerInterval), where the frontier runs
	// (docs/bench.md) put the acks=all p99 at about 50 ms at 2,000
	// records/s and about 70 ms at 10,000 on three brokers: Kafka-class
	// latency by default. With DefaultMaxCostRatio it means: objects where
	// 25 ms objects cost at most classic (from about 3 MB/s produced on
	// three brokers at S3 Express One Zone prices, saving 70 % at 10
	// MB/s), inline replication below that. A user who wants the cheapest
	// point whatever its latency sets 0 (no bound).
	DefaultMaxLatency = 50 * time.Millisecond
	// DefaultMaxCostRatio is wal.auto.max.cost.ratio's default: auto
	// never pays more for objects than classic replication would cost.
	DefaultMaxCostRatio = 1.0
	// LatencyPerInterval is how many cut intervals an acks=all produce's
	// p99 took in the frontier runs (docs/bench.md "The frontier at 2,000
	// and 10,000 records/s": 1.9–2.3× the interval from 20 to 80 ms, at
	// 2,000 and 10,000 records/s): a producer has at most 5 requests in
	// flight per broker, all answered by the same object, and without
	// linger it spends them early in the interval, so a later record
	// waits for that object's answers to get a slot, then for the next
	// object (docs/bench.md "Why twice the interval"; a producer that
	// lingers 5 ms, Java's and librdkafka's default, waits about one
	// interval). auto turns wal.auto.max.latency.ms into a cut interval
	// with it.
	LatencyPerInterval = 2
	// DefaultCopies is assumed before any byte was seen (RF 3 in 3 zones).
	DefaultCopies = 2
)

// DeciderConfig configures a Decider.
type DeciderConfig struct {
	Policy Policy
	Prices Prices
	// Interval is wal.upload.interval.ms, MaxInterval
	// wal.upload.max.interval.ms (the latency budget of cost and auto).
	Interval, MaxInterval time.Duration
	// MaxObjectBytes is wal.object.max.bytes: the size cut of latency.
	MaxObjectBytes int
	// MaxGrowBytes is wal.policy.object.max.bytes: the largest object
	// cost and auto cut (their size cut; DefaultMaxGrowBytes, never below
	// MaxObjectBytes).
	MaxGrowBytes int
	// HalfLife of the throughput average (DefaultHalfLife).
	HalfLife time.Duration
	// Warmup: auto decides nothing before it has seen this long of
	// traffic (DefaultWarmup); an idle broker keeps its path (inline
	// from the start).
	Warmup time.Duration
	// MinDwell: auto switches paths at most once per MinDwell
	// (DefaultMinDwell).
	MinDwell time.Duration
	// TargetRatio: auto stretches the interval (up to MaxInterval) until
	// an object costs this fraction of classic (DefaultTargetRatio).
	TargetRatio float64
	// MaxLatency is wal.auto.max.latency.ms: the acks=all p99 auto's
	// objects may add (0: no bound but MaxInterval). auto cuts at least
	// every MaxLatency / LatencyPerInterval, whatever that costs; when
	// objects cut that often cost more than MaxCostRatio of classic, it
	// replicates inline.
	MaxLatency time.Duration
	// MaxCostRatio is wal.auto.max.cost.ratio: the most auto's objects
	// may cost, as a fraction of classic replication of their bytes
	// (DefaultMaxCostRatio). The hysteresis is relative to it.
	MaxCostRatio float64
}

// Why auto's operating point is where it is: the bound that set it
// (Plan.Bound; the bound label of strata_wal_policy_bound).
const (
	// BoundTarget: objects reach the size that costs TargetRatio of
	// classic within both bounds; a longer interval would save little.
	BoundTarget = "target"
	// BoundLatency: wal.auto.max.latency.ms caps the interval before
	// objects reach the target.
	BoundLatency = "latency"
	// BoundMaxInterval: wal.upload.max.interval.ms caps it.
	BoundMaxInterval = "max_interval"
	// BoundCostCeiling: inline, because objects cut within the latency
	// bound would cost more than wal.auto.max.cost.ratio of classic.
	BoundCostCeiling = "cost_ceiling"
	// BoundNoCrossZone: inline, because no follower is in another zone:
	// objects would save nothing.
	BoundNoCrossZone = "no_cross_zone_copies"
	// BoundUnknown: no traffic seen yet (auto starts inline).
	BoundUnknown = "unknown"
)

// Bounds lists the bound label values.
func Bounds() []string {
	return []string{BoundTarget, BoundLatency, BoundMaxInterval, BoundCostCeiling, BoundNoCrossZone, BoundUnknown}
}

// Plan is what the uploader and the leader do until the next decision.
type Plan struct {
	Path Path
	// Interval: an object is cut at the latest this long after its first
	// byte, and produce requests cut earlier at most once per Interval on
	// average (when Nudge).
	Interval time.Duration
	// CutBytes: an object is cut before an append that would take it
	// past this many bytes (the uploader's size cut).
	CutBytes int
	// Nudge: produce requests may cut early, at most once per Interval
	// on average (the uploader's token bucket).
	Nudge bool
	// NudgeBytes: at the end of a produce request the object is cut at
	// once if it holds at least this many bytes (0: never). cost and
	// auto set it to the target object: objects end at a request
	// boundary once they are cheap enough, so they are not cut smaller
	// by the size cut and the request does not wait for the interval.
	NudgeBytes int
	// Rate and Copies are the averages the plan was made from: leader
	// bytes per second, and cross-zone follower copies per byte.
	Rate, Copies float64
	// Ratio is the estimated WAL cost over classic at this plan (NaN
	// before any byte).
	Ratio float64
	// Bound is what set auto's operating point (BoundTarget, ...; ""
	// for the latency and cost policies).
	Bound string
	// AddedP99 is the acks=all p99 the plan's objects are expected to add
	// (LatencyPerInterval × Interval on WAL objects, 0 inline).
	AddedP99 time.Duration
}

// Switch is a change of path by the auto policy.
type Switch struct {
	From, To Path
	Reason   string
}

// Decider is the wal.policy state machine. It is not safe for concurrent
// use: the broker calls Observe from one goroutine.
type Decider struct {
	cfg  DeciderConfig
	last time.Time // last observation
	// firstSeen is the first observation with bytes (zero: none yet);
	// switched the last switch (zero: none).
	firstSeen, switched time.Time
	// rate and classic are EWMAs of leader bytes/s and cross-zone copy
	// bytes/s since firstSeen, divided by weight (bias correction: the
	// average of the time seen so far, not pulled towards 0 at start).
	rate, classic, weight float64
	// shared is the EWMA (same weight) of bytes/s that ride in this
	// broker's objects whichever path its own replication takes:
	// zone-local produce's forwarded records (ObserveShared).
	shared   float64
	seen     bool
	path     Path
	interval time.Duration
}

// NewDecider starts deciding at now. auto starts inline and decides
// once it has seen Warmup of traffic.
func NewDecider(cfg DeciderConfig, now time.Time) *Decider {
	if cfg.Policy == "" {
		cfg.Policy = DefaultPolicy
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	if cfg.MaxInterval < cfg.Interval {
		cfg.MaxInterval = cfg.Interval
	}
	if cfg.MaxObjectBytes <= 0 {
		cfg.MaxObjectBytes = 256 << 10
	}
	if cfg.MaxGrowBytes <= 0 {
		cfg.MaxGrowBytes = DefaultMaxGrowBytes
	}
	cfg.MaxGrowBytes = max(cfg.MaxGrowBytes, cfg.MaxObjectBytes)
	if cfg.HalfLife <= 0 {
		cfg.HalfLife = DefaultHalfLife
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = DefaultWarmup
	}
	if cfg.MinDwell <= 0 {
		cfg.MinDwell = DefaultMinDwell
	}
	if cfg.TargetRatio <= 0 {
		cfg.TargetRatio = DefaultTargetRatio
	}
	if cfg.MaxCostRatio <= 0 {
		cfg.MaxCostRatio = DefaultMaxCostRatio
	}
	if cfg.MaxLatency < 0 {
		cfg.MaxLatency = 0
	}
	d := &Decider{cfg: cfg, last: now, path: PathWAL, interval: cfg.Interval}
	if cfg.Policy == PolicyAuto {
		// Inline costs what classic costs; objects cost more until the
		// rate fills them, and the rate is not known yet. (Starting on
		// objects made auto dearer than classic at 0.5 MB/s: the first
		// seconds' objects.)
		d.path = PathInline
		d.interval, _ = d.longestInterval()
	}
	return d
}

// Config returns the configuration with defaults filled in.
func (d *Decider) Config() DeciderConfig { return d.cfg }

// Plan returns the current plan without observing.
func (d *Decider) Plan() Plan { return d.plan() }

// Observe feeds the bytes this broker appended as leader since the last
// call (produced) and their cross-zone follower copies (classic: what
// classic replication would send across zones), and returns the plan, and
// the switch when auto changed paths.
func (d *Decider) Observe(now time.Time, produced, classic int64) (Plan, *Switch) {
	return d.ObserveShared(now, produced, classic, 0)
}

// ObserveShared is Observe with the bytes that are in objects since the
// last call whatever the path: zone-local produce's forwarded records,
// in this broker's objects (wal.Uploader.AppendRaw) or, appended as
// leader, in their forwarders', whose objects are PUT anyway. The WAL path's cost is then what its own chunks add to those
// objects (their PUT is sunk: sharedRatio), not whole objects: a broker
// that forwards much finds WAL objects cheaper than inline replication
// at rates where alone it would not.
func (d *Decider) ObserveShared(now time.Time, produced, classic, shared int64) (Plan, *Switch) {
	dt := now.Sub(d.last).Seconds()
	if dt > 0 {
		d.last = now
		if produced > 0 && !d.seen {
			d.seen, d.firstSeen = true, now
		}
		if d.seen {
			a := 1 - math.Exp(-dt*math.Ln2/d.cfg.HalfLife.Seconds())
			d.rate += a * (float64(produced)/dt - d.rate)
			d.classic += a * (float64(classic)/dt - d.classic)
			d.shared += a * (float64(shared)/dt - d.shared)
			d.weight += a * (1 - d.weight)
		}
	}
	if d.cfg.Policy != PolicyAuto || !d.seen {
		return d.plan(), nil
	}
	copies := d.copies()
	d.interval = d.autoInterval(copies)
	ratio := d.ratio(copies, d.interval)
	want, reason := d.path, ""
	rate, classicRate := d.rates()
	switch {
	case classicRate <= 0 && rate > 0:
		want, reason = PathInline, ReasonNoCrossZoneCopies
	case d.path == PathWAL && ratio > LeaveRatio*d.cfg.MaxCostRatio:
		want, reason = PathInline, ReasonBelowBreakEven
	case d.path == PathInline && ratio <= EnterRatio*d.cfg.MaxCostRatio && classicRate > 0:
		want, reason = PathWAL, ReasonAboveBreakEven
	}
	if want == d.path || now.Sub(d.firstSeen) < d.cfg.Warmup || (!d.switched.IsZero() && now.Sub(d.switched) < d.cfg.MinDwell) {
		return d.plan(), nil
	}
	sw := &Switch{From: d.path, To: want, Reason: reason}
	d.path, d.switched = want, now
	return d.plan(), sw
}

// rates are the bias-corrected averages: leader bytes/s and cross-zone
// copy bytes/s.
func (d *Decider) rates() (rate, classic float64) {
	if d.weight <= 0 {
		return 0, 0
	}
	return d.rate / d.weight, d.classic / d.weight
}

// copies is the average number of cross-zone follower copies per leader
// byte.
func (d *Decider) copies() float64 {
	if d.rate <= 0 || !d.seen {
		return DefaultCopies
	}
	return d.classic / d.rate // the weights cancel
}

// targetBytes is the size of an object that costs TargetRatio of
// classic replication of its bytes (its fixed prices — PUT, GETs, pointer
// notices — spread over its bytes); 0 when objects save nothing (no
// cross-zone copy).
func (d *Decider) targetBytes(copies float64) float64 {
	perByte := d.cfg.Prices.CrossZone(1e9) / 1e9 * copies
	if perByte <= 0 {
		return 0
	}
	fixed := d.cfg.Prices.Object(0, Readers(copies), copies)
	return fixed / (d.cfg.TargetRatio * perByte)
}

// nudgeBytes is the object cost and auto cut at the end of a produce
// request: the target object, at most MaxGrowBytes (0: none, when
// objects save nothing).
func (d *Decider) nudgeBytes(copies float64) int {
	t := d.targetBytes(copies)
	if t <= 0 {
		return 0
	}
	return int(min(max(math.Ceil(t), 1), float64(d.cfg.MaxGrowBytes)))
}

// burstNudgeBytes is NudgeBytes: the target object, or 0 (no cut at a
// request boundary) when the average rate does not fill the target
// within the max interval. Then the interval cut at the max interval
// makes the largest objects the latency budget allows, and a cut at the
// target would only split them: producers send in bursts, and a burst
// that reached the target early left a remainder object the interval cut
// small (on the quiet machine at 10,000 × 1 KiB records/s over three
// brokers, 3.1 MB/s each: a 437 KB object 7 ms after its first byte,
// then a 182 KB one at 100 ms — 12.6 PUTs/s per broker, 0.110× classic,
// where one object per 100 ms makes 10).
func (d *Decider) burstNudgeBytes(rate, copies float64) int {
	n := d.nudgeBytes(copies)
	if rate > 0 && rate*d.cfg.MaxInterval.Seconds() < float64(n) {
		return 0
	}
	return n
}

// longestInterval is the longest cut auto may make: MaxInterval, or
// shorter where wal.auto.max.latency.ms asks (never below Interval);
// bound says which of the two it is.
func (d *Decider) longestInterval() (time.Duration, string) {
	if d.cfg.MaxLatency > 0 {
		if l := max(d.cfg.MaxLatency/LatencyPerInterval, d.cfg.Interval); l < d.cfg.MaxInterval {
			return l, BoundLatency
		}
	}
	return d.cfg.MaxInterval, BoundMaxInterval
}

// autoInterval stretches the interval within [Interval, longestInterval]
// until an object would cost TargetRatio of classic.
func (d *Decider) autoInterval(copies float64) time.Duration {
	longest, _ := d.longestInterval()
	rate, _ := d.rates()
	if rate <= 0 {
		return longest
	}
	target := d.targetBytes(copies)
	if target <= 0 {
		return d.cfg.Interval
	}
	t := time.Duration(target / rate * float64(time.Second))
	return min(max(t, d.cfg.Interval), longest).Round(time.Millisecond)
}

// bound says what set auto's plan p (BoundTarget, ...).
func (d *Decider) bound(p Plan) string {
	rate, classicRate := d.rates()
	switch {
	case !d.seen:
		return BoundUnknown
	case classicRate <= 0 && rate > 0:
		return BoundNoCrossZone
	case p.Path == PathInline:
		return BoundCostCeiling
	}
	longest, why := d.longestInterval()
	if p.Interval >= longest && rate*longest.Seconds() < d.targetBytes(p.Copies) {
		return why
	}
	return BoundTarget
}

// ratio estimates WAL cost over classic for objects cut every interval
// (or at the target size) at the current rate; +Inf when objects save
// nothing.
func (d *Decider) ratio(copies float64, interval time.Duration) float64 {
	rate, _ := d.rates()
	if rate <= 0 || copies <= 0 {
		return math.Inf(1)
	}
	size := d.objectBytes(rate, interval, copies)
	if size < 1 {
		return math.Inf(1)
	}
	return d.sharedRatio(copies, size, interval)
}

// sharedRatio is ratioAt for objects of size own bytes cut every
// interval, when shared bytes ride in the same objects (ObserveShared):
// the object's cost beyond the PUT that the shared bytes pay anyway,
// over classic replication of its own bytes. Without shared bytes it is
// ratioAt.
func (d *Decider) sharedRatio(copies, size float64, interval time.Duration) float64 {
	shared := 0.0
	if d.weight > 0 {
		shared = d.shared / d.weight * interval.Seconds()
	}
	if shared < 1 || copies <= 0 {
		return d.ratioAt(copies, int64(size))
	}
	p := d.cfg.Prices
	whole := p.Object(int64(size+shared), Readers(copies), copies)
	return (whole - p.Put(int64(shared))) / (p.CrossZone(int64(size)) * copies)
}

// objectBytes is the object a plan makes at rate: what the interval
// fills, at most the target (cost and auto cut there at a request
// boundary) or, for latency, the size cut.
func (d *Decider) objectBytes(rate float64, interval time.Duration, copies float64) float64 {
	bound := float64(d.cfg.MaxObjectBytes)
	if d.cfg.Policy != PolicyLatency {
		bound = float64(d.cfg.MaxGrowBytes)
		if n := d.nudgeBytes(copies); n > 0 {
			bound = float64(n)
		}
	}
	return min(rate*interval.Seconds(), bound)
}

// plan: latency cuts at wal.object.max.bytes or the interval, with
// nudges; cost and auto cut at the end of the produce request that brings
// an object to the target size (NudgeBytes) or at their interval, and
// their size cut is only the bound wal.policy.object.max.bytes. (A size
// cut at the target itself cut objects short: a request whose batches did
// not fit went into the next object, so at 10 MB/s over three brokers,
// where 100 ms fill 346 KB, objects averaged 276 KB instead of the 372 KB
// cut — 12.5 PUTs/s per broker for the planned 10, 0.108× classic.)
func (d *Decider) plan() Plan {
	copies := d.copies()
	rate, _ := d.rates()
	p := Plan{Path: PathWAL, Interval: d.cfg.Interval, CutBytes: d.cfg.MaxObjectBytes, Nudge: true, Copies: copies, Rate: rate}
	switch d.cfg.Policy {
	case PolicyCost:
		p.Interval, p.Nudge = d.cfg.MaxInterval, false
		p.CutBytes, p.NudgeBytes = d.cfg.MaxGrowBytes, d.burstNudgeBytes(rate, copies)
	case PolicyAuto:
		p.Path, p.Interval = d.path, d.interval
		p.CutBytes, p.NudgeBytes = d.cfg.MaxGrowBytes, d.burstNudgeBytes(rate, copies)
	}
	p.Ratio = math.NaN()
	if d.seen {
		p.Ratio = d.sharedRatio(copies, max(d.objectBytes(rate, p.Interval, copies), 1), p.Interval)
	}
	if p.Path == PathWAL {
		p.AddedP99 = LatencyPerInterval * p.Interval
	}
	if d.cfg.Policy == PolicyAuto {
		p.Bound = d.bound(p)
	}
	return p
}

func (d *Decider) ratioAt(copies float64, size int64) float64 {
	if copies <= 0 {
		return math.Inf(1)
	}
	return d.cfg.Prices.Object(size, Readers(copies), copies) / (d.cfg.Prices.CrossZone(size) * copies)
}
