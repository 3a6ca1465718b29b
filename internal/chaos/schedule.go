package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Fault kinds. The bucket kinds need WAL replication.
const (
	KindKill         = "kill"           // SIGKILL a broker, start it again after Duration
	KindPause        = "pause"          // SIGSTOP a broker, SIGCONT after Duration
	KindRestart      = "restart"        // SIGTERM a broker and start it again at once
	KindEtcdCut      = "etcd-cut"       // a broker's etcd proxy drops or stalls for Duration
	KindBucketOutage = "bucket-outage"  // a zone's bucket answers 503 for Duration
	KindBucketSlow   = "bucket-slow"    // a zone's bucket answers Latency late for Duration
	KindS3Errors     = "s3-errors"      // a zone's bucket answers 500 on Fraction of requests for Duration
	KindCorrupt      = "corrupt-object" // a byte of a WAL object in a zone's bucket flipped
	KindDelete       = "delete-object"  // a WAL object in a zone's bucket deleted
	KindReassign     = "reassign"       // a partition's replica list reordered (AlterPartitionReassignments)
	KindElect        = "elect-leaders"  // preferred leader election of every partition
)

// Fault is one entry of the nemesis schedule. Everything in it is decided
// by the seed before the run starts; Target is a selector that may only be
// resolved at run time ("leader:<topic>/<partition>" names whichever broker
// leads that partition when the fault fires).
type Fault struct {
	// At is the offset from the start of the workload.
	At time.Duration `json:"-"`
	// Duration is how long the fault lasts before it is healed (0: an
	// instantaneous fault).
	Duration time.Duration `json:"-"`
	Kind     string        `json:"kind"`
	// Target is "broker:<id>", "leader:<topic>/<partition>",
	// "zone:<zone>", "partition:<topic>/<partition>" or "all".
	Target string `json:"target"`
	// Mode is etcd-cut's "drop" or "stall".
	Mode string `json:"mode,omitempty"`
	// Latency is bucket-slow's added delay per request.
	Latency time.Duration `json:"-"`
	// Fraction is s3-errors' share of requests answered 500.
	Fraction float64 `json:"fraction,omitempty"`
	// Replicas is reassign's new replica order (broker IDs).
	Replicas []int32 `json:"replicas,omitempty"`
	// Beyond lets a process fault take down more brokers than the
	// replication factor less one (partitions become unavailable; nothing
	// acknowledged may be lost).
	Beyond bool `json:"beyond,omitempty"`
	// During names the fault a follow-up was scheduled into ("reassign",
	// "elect-leaders", "kill": the leader election a kill causes).
	During string `json:"during,omitempty"`

	// For JSON: durations in seconds.
	AtS       float64 `json:"at_s"`
	DurationS float64 `json:"duration_s,omitempty"`
	LatencyS  float64 `json:"latency_s,omitempty"`
}

// String is the fault as printed in verbose output.
func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%5.1fs %-14s %s", f.At.Seconds(), f.Kind, f.Target)
	if f.Duration > 0 {
		fmt.Fprintf(&b, " for %v", f.Duration)
	}
	if f.Beyond {
		b.WriteString(" beyond")
	}
	if f.During != "" {
		fmt.Fprintf(&b, " during %s", f.During)
	}
	switch {
	case f.Mode != "":
		fmt.Fprintf(&b, " mode=%s", f.Mode)
	case f.Latency > 0:
		fmt.Fprintf(&b, " latency=%v", f.Latency)
	case f.Fraction > 0:
		fmt.Fprintf(&b, " fraction=%.2f", f.Fraction)
	case len(f.Replicas) > 0:
		fmt.Fprintf(&b, " replicas=%v", f.Replicas)
	}
	return b.String()
}

// Topology is what the schedule picks targets from.
type Topology struct {
	Zones      []string
	BrokerIDs  []int32 // every broker, in zone order
	Topics     []string
	Partitions int32
	// PerZone is the number of brokers per zone (BrokerIDs holds them
	// zone by zone).
	PerZone int
	// Replicas is the replication factor (one replica per zone).
	Replicas int
}

// defaultCooldown is the quiet time at the end of a run: no fault is
// active in it (faults end before it, object faults stop waiting).
const defaultCooldown = 5 * time.Second

// ScheduleOptions shape the schedule.
type ScheduleOptions struct {
	// Duration is the workload's length; faults end at least Cooldown
	// before it (default 5 s) and start after Warmup (default 5 s).
	Duration, Warmup, Cooldown time.Duration
	// Kinds are the fault kinds to use (default AllKinds).
	Kinds []string
}

// NewSchedule computes the nemesis schedule of seed. Kinds are drawn
// round-robin from a shuffled list, so that a run long enough covers every
// kind. Faults overlap: half of them start 0.5-3 s after the previous one
// started, whether it healed or not; the others 1-4 s after it healed.
// Some faults bring follow-ups, scheduled into the trouble they cause: a
// kill of the moving partition's leader 0.2-1.5 s into a reassignment, of
// a leader 0.2-1.5 s after a preferred leader election, and of a second
// leader 2.5-4 s after a kill (when the first kill's leader elections
// happen, the session timeout being 3 s). Process faults are limited at run
// time to the replication factor less one brokers down at once, unless
// Beyond (the nemesis). The same seed, topology and options always give
// the same schedule (math/rand/v2's PCG is stable).
func NewSchedule(seed int64, topo Topology, o ScheduleOptions) []Fault {
	if o.Warmup <= 0 {
		o.Warmup = 5 * time.Second
	}
	if o.Cooldown <= 0 {
		o.Cooldown = defaultCooldown
	}
	kinds := o.Kinds
	if len(kinds) == 0 {
		kinds = AllKinds
	}
	kinds = slices.Clone(kinds)
	g := &gen{rng: rand.New(rand.NewPCG(uint64(seed), 0x5ca1ab1e)), topo: topo}
	var out []Fault
	var bag []string
	at := o.Warmup
	end := o.Duration - o.Cooldown
	add := func(f Fault) bool {
		if f.At+max(f.Duration, kindSpecs[f.Kind].window) > end {
			return false
		}
		f.AtS, f.DurationS, f.LatencyS = f.At.Seconds(), f.Duration.Seconds(), f.Latency.Seconds()
		out = append(out, f)
		return true
	}
	killFollowUp := slices.Contains(kinds, KindKill)
	for {
		if len(bag) == 0 {
			bag = slices.Clone(kinds)
			g.rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		f := Fault{At: at, Kind: bag[0]}
		bag = bag[1:]
		kindSpecs[f.Kind].gen(g, &f)
		if !add(f) {
			break
		}
		// Follow-ups: drawn whether or not they fit, so that the draws
		// after them do not depend on the run's length.
		if killFollowUp {
			var follow *Fault
			switch {
			case f.Kind == KindReassign && g.rng.IntN(2) == 0:
				follow = &Fault{At: f.At + g.between(200*time.Millisecond, 1500*time.Millisecond),
					Target: strings.Replace(f.Target, "partition:", "leader:", 1)}
			case f.Kind == KindElect && g.rng.IntN(2) == 0:
				t, p := g.partition()
				follow = &Fault{At: f.At + g.between(200*time.Millisecond, 1500*time.Millisecond), Target: fmt.Sprintf("leader:%s/%d", t, p)}
			case f.Kind == KindKill && g.rng.IntN(3) == 0:
				t, p := g.partition()
				follow = &Fault{At: f.At + g.between(2500*time.Millisecond, 4*time.Second), Target: fmt.Sprintf("leader:%s/%d", t, p)}
			}
			if follow != nil {
				follow.Kind, follow.During = KindKill, f.Kind
				follow.Duration = g.between(2*time.Second, 6*time.Second)
				add(*follow)
			}
		}
		if g.rng.IntN(2) == 0 {
			at = f.At + g.between(500*time.Millisecond, 3*time.Second) // may overlap f
		} else {
			at = f.At + f.Duration + g.between(1*time.Second, 4*time.Second)
		}
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return cmp.Compare(a.At, b.At) })
	return out
}

// ParseKinds checks a comma-separated list of kinds; empty or "all" means
// all (nil), "none" no fault at all (an empty, non-nil list).
func ParseKinds(s string) ([]string, error) {
	switch strings.TrimSpace(s) {
	case "", "all":
		return nil, nil
	case "none":
		return []string{}, nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(AllKinds, k) {
			return nil, fmt.Errorf("unknown fault kind %q (known: %s)", k, strings.Join(AllKinds, ","))
		}
		out = append(out, k)
	}
	return out, nil
}
