package chaos

import (
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

// AllKinds lists every fault kind in a fixed order.
var AllKinds = []string{KindKill, KindPause, KindRestart, KindEtcdCut, KindBucketOutage, KindBucketSlow,
	KindS3Errors, KindCorrupt, KindDelete, KindReassign, KindElect, KindPowerLoss, KindDiskFull}

// bucketKinds act on a zone's bucket: classic replication has none.
var bucketKinds = map[string]bool{KindBucketOutage: true, KindBucketSlow: true, KindS3Errors: true, KindCorrupt: true, KindDelete: true}

// IsBucketKind reports whether kind acts on a WAL bucket.
func IsBucketKind(kind string) bool { return bucketKinds[kind] }

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

// ScheduleOptions shape the schedule.
type ScheduleOptions struct {
	// Duration is the workload's length; faults end at least Cooldown
	// before it (default 5 s) and start after Warmup (default 5 s).
	Duration, Warmup, Cooldown time.Duration
	// Kinds are the fault kinds to use (default AllKinds).
	Kinds []string
}

// NewSchedule computes the nemesis schedule of seed: faults one after the
// other (at most one active at a time, so min.insync.replicas of 2 out of 3
// replicas keeps a quorum), kinds drawn round-robin from a shuffled list so
// that a run long enough covers every kind. The same seed, topology and
// options always give the same schedule (math/rand/v2's PCG is stable).
func NewSchedule(seed int64, topo Topology, o ScheduleOptions) []Fault {
	if o.Warmup <= 0 {
		o.Warmup = 5 * time.Second
	}
	if o.Cooldown <= 0 {
		o.Cooldown = 5 * time.Second
	}
	kinds := o.Kinds
	if len(kinds) == 0 {
		kinds = AllKinds
	}
	kinds = slices.Clone(kinds)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5ca1ab1e))
	between := func(lo, hi time.Duration) time.Duration {
		// Whole 100 ms steps keep printed schedules readable.
		steps := int64((hi - lo) / (100 * time.Millisecond))
		return lo + time.Duration(rng.Int64N(steps+1))*100*time.Millisecond
	}
	partition := func() (string, int32) {
		return topo.Topics[rng.IntN(len(topo.Topics))], rng.Int32N(topo.Partitions)
	}
	var out []Fault
	var bag []string
	at := o.Warmup
	end := o.Duration - o.Cooldown
	for {
		if len(bag) == 0 {
			bag = slices.Clone(kinds)
			rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		f := Fault{At: at, Kind: bag[0]}
		bag = bag[1:]
		switch f.Kind {
		case KindKill, KindPause, KindRestart, KindPowerLoss, KindDiskFull:
			if rng.IntN(10) < 7 { // leaders by preference
				t, p := partition()
				f.Target = fmt.Sprintf("leader:%s/%d", t, p)
			} else {
				f.Target = fmt.Sprintf("broker:%d", topo.BrokerIDs[rng.IntN(len(topo.BrokerIDs))])
			}
			if f.Kind != KindRestart {
				f.Duration = between(2*time.Second, 6*time.Second)
			}
		case KindEtcdCut:
			f.Target = fmt.Sprintf("broker:%d", topo.BrokerIDs[rng.IntN(len(topo.BrokerIDs))])
			f.Mode = []string{"drop", "stall"}[rng.IntN(2)]
			f.Duration = between(2*time.Second, 6*time.Second)
		case KindBucketOutage, KindBucketSlow, KindS3Errors, KindCorrupt, KindDelete:
			f.Target = "zone:" + topo.Zones[rng.IntN(len(topo.Zones))]
			switch f.Kind {
			case KindBucketOutage:
				f.Duration = between(2*time.Second, 6*time.Second)
			case KindBucketSlow:
				f.Duration = between(3*time.Second, 8*time.Second)
				f.Latency = between(1*time.Second, 3*time.Second)
			case KindS3Errors:
				f.Duration = between(3*time.Second, 8*time.Second)
				f.Fraction = float64(2+rng.IntN(5)) / 10 // 0.2 .. 0.6
			}
		case KindReassign:
			t, p := partition()
			f.Target = fmt.Sprintf("partition:%s/%d", t, p)
			// Replicas stay in distinct zones (placement rule): one broker
			// of each of Replicas zones, in a new order (a new preferred
			// leader). With one broker per zone that is a reordering;
			// with more, a real move to the zone's other broker.
			perZone := max(topo.PerZone, 1)
			zones := rng.Perm(len(topo.Zones))[:min(topo.Replicas, len(topo.Zones))]
			f.Replicas = nil
			for _, z := range zones {
				f.Replicas = append(f.Replicas, topo.BrokerIDs[z*perZone+rng.IntN(perZone)])
			}
			rng.Shuffle(len(f.Replicas), func(i, j int) { f.Replicas[i], f.Replicas[j] = f.Replicas[j], f.Replicas[i] })
		case KindElect:
			f.Target = "all"
		}
		if f.At+f.Duration > end {
			break
		}
		f.AtS, f.DurationS, f.LatencyS = f.At.Seconds(), f.Duration.Seconds(), f.Latency.Seconds()
		out = append(out, f)
		// The next fault starts after this one healed and the cluster had
		// a moment (1-4 s) to recover.
		at = f.At + f.Duration + between(1*time.Second, 4*time.Second)
	}
	return out
}

// ParseKinds checks a comma-separated list of kinds; empty means all.
func ParseKinds(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
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
