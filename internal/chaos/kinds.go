package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// kindSpec is everything the harness knows about one fault kind: how the
// schedule draws its target and parameters, and how the nemesis applies
// and heals it. Adding a kind is one registerKind call (in its own file if
// it needs more code): the schedule, --faults, the nemesis and the checks
// take it from there.
type kindSpec struct {
	name string
	// bucket: the kind acts on a WAL bucket (classic mode leaves it out).
	bucket bool
	// gen fills in f's Target, Duration and parameters from the seed.
	gen func(g *gen, f *Fault)
	// resolve, if set, rewrites f's Target when the fault fires (before
	// resources and apply), e.g. "the zone of this partition's leader".
	resolve func(ctx context.Context, n *nemesis, f *Fault) error
	// apply injects f and returns what it did; heal (nil for an
	// instantaneous fault) ends it. A fault whose target is a broker
	// process (Target "broker:" or "leader:") has been resolved to b,
	// which the nemesis has counted as down; other faults get b nil.
	apply func(ctx context.Context, n *nemesis, f Fault, b *broker) (heal func(context.Context) error, what string, err error)
	// process: the fault takes its broker's process out (kill, pause,
	// restart): it counts towards the brokers down at once.
	process bool
	// resources are the fault points f holds while it is active (an
	// etcd proxy, a zone's bucket, a link); a fault whose resources
	// another active fault holds is not applied. Process faults hold
	// their broker ("proc:<id>") without listing it here.
	resources func(n *nemesis, f Fault) ([]string, error)
	// window is the time an instantaneous fault may need to take
	// effect (an object fault waits for a follower's download): the
	// schedule places it only where that much is left before the
	// cooldown, so that a short run does not schedule a fault it has
	// no time to apply.
	window time.Duration
}

var (
	kindSpecs = map[string]kindSpec{}
	// AllKinds lists every fault kind in registration order (the
	// schedule's draw order: it must be fixed for seeds to reproduce).
	AllKinds []string
)

// registerKind adds a fault kind.
func registerKind(k kindSpec) {
	if _, dup := kindSpecs[k.name]; dup {
		panic("chaos: fault kind registered twice: " + k.name)
	}
	kindSpecs[k.name] = k
	AllKinds = append(AllKinds, k.name)
}

// IsBucketKind reports whether kind acts on a WAL bucket.
func IsBucketKind(kind string) bool { return kindSpecs[kind].bucket }

// gen is what a kind's generator draws from.
type gen struct {
	rng  *rand.Rand
	topo Topology
}

// between draws a duration in [lo, hi] in whole 100 ms steps (readable
// schedules).
func (g *gen) between(lo, hi time.Duration) time.Duration {
	steps := int64((hi - lo) / (100 * time.Millisecond))
	return lo + time.Duration(g.rng.Int64N(steps+1))*100*time.Millisecond
}

func (g *gen) partition() (string, int32) {
	return g.topo.Topics[g.rng.IntN(len(g.topo.Topics))], g.rng.Int32N(g.topo.Partitions)
}

func (g *gen) broker() int32 { return g.topo.BrokerIDs[g.rng.IntN(len(g.topo.BrokerIDs))] }

func (g *gen) zone() string { return g.topo.Zones[g.rng.IntN(len(g.topo.Zones))] }

// processTarget: the leader of a random partition (70 %) or a random broker.
func (g *gen) processTarget() string {
	if g.rng.IntN(10) < 7 {
		t, p := g.partition()
		return fmt.Sprintf("leader:%s/%d", t, p)
	}
	return fmt.Sprintf("broker:%d", g.broker())
}

// genProcess is kill's and pause's generator; one in six may take down
// more brokers than the replication factor allows (Beyond: the partitions
// become unavailable, nothing acknowledged may be lost).
func genProcess(g *gen, f *Fault) {
	f.Target = g.processTarget()
	f.Duration = g.between(2*time.Second, 6*time.Second)
	f.Beyond = g.rng.IntN(6) == 0
}

func zoneResource(prefix string) func(*nemesis, Fault) ([]string, error) {
	return func(_ *nemesis, f Fault) ([]string, error) {
		return []string{prefix + strings.TrimPrefix(f.Target, "zone:")}, nil
	}
}

func init() {
	registerKind(kindSpec{name: KindKill, process: true, gen: genProcess,
		apply: func(_ context.Context, n *nemesis, _ Fault, b *broker) (func(context.Context) error, string, error) {
			n.c.killBroker(b)
			return func(ctx context.Context) error { return n.c.startBroker(ctx, b) }, fmt.Sprintf("broker %d", b.id), nil
		}})
	registerKind(kindSpec{name: KindPause, process: true, gen: genProcess,
		apply: func(_ context.Context, _ *nemesis, _ Fault, b *broker) (func(context.Context) error, string, error) {
			if err := b.pause(); err != nil {
				return nil, "", err
			}
			return func(context.Context) error { return b.resume() }, fmt.Sprintf("broker %d", b.id), nil
		}})
	registerKind(kindSpec{name: KindRestart, process: true, gen: func(g *gen, f *Fault) { f.Target = g.processTarget() },
		apply: func(ctx context.Context, n *nemesis, _ Fault, b *broker) (func(context.Context) error, string, error) {
			if !n.c.stopBroker(b, 30*time.Second) {
				n.problem(fmt.Sprintf("restart: broker %d did not stop cleanly on SIGTERM", b.id))
			}
			return nil, fmt.Sprintf("broker %d", b.id), n.c.startBroker(ctx, b)
		}})
	registerKind(kindSpec{name: KindEtcdCut,
		gen: func(g *gen, f *Fault) {
			f.Target = fmt.Sprintf("broker:%d", g.broker())
			f.Mode = []string{ModeDrop, ModeStall}[g.rng.IntN(2)]
			f.Duration = g.between(2*time.Second, 6*time.Second)
		},
		resources: func(_ *nemesis, f Fault) ([]string, error) {
			id, err := targetBroker(f.Target)
			return []string{fmt.Sprintf("etcd:%d", id)}, err
		},
		apply: func(_ context.Context, n *nemesis, f Fault, _ *broker) (func(context.Context) error, string, error) {
			id, err := targetBroker(f.Target)
			if err != nil {
				return nil, "", err
			}
			px := n.c.etcdPx[id]
			if px == nil {
				return nil, "", fmt.Errorf("no broker %d", id)
			}
			px.SetMode(f.Mode)
			return func(context.Context) error { px.SetMode(ModePass); return nil }, fmt.Sprintf("broker %d etcd %s", id, f.Mode), nil
		}})
	bucket := func(name string, params func(g *gen, f *Fault), fault func(f Fault) bucketFault) {
		registerKind(kindSpec{name: name, bucket: true,
			gen: func(g *gen, f *Fault) {
				f.Target = "zone:" + g.zone()
				params(g, f)
			},
			resources: zoneResource("bucket:"),
			apply: func(_ context.Context, n *nemesis, f Fault, _ *broker) (func(context.Context) error, string, error) {
				zone := strings.TrimPrefix(f.Target, "zone:")
				px := n.c.s3Px[zone]
				if px == nil {
					return nil, "", fmt.Errorf("no bucket proxy for zone %q", zone)
				}
				px.Set(fault(f))
				return func(context.Context) error { px.Set(bucketFault{}); return nil }, "bucket of zone " + zone, nil
			}})
	}
	bucket(KindBucketOutage, func(g *gen, f *Fault) { f.Duration = g.between(2*time.Second, 6*time.Second) },
		func(Fault) bucketFault { return bucketFault{outage: true} })
	bucket(KindBucketSlow, func(g *gen, f *Fault) {
		f.Duration = g.between(3*time.Second, 8*time.Second)
		f.Latency = g.between(1*time.Second, 3*time.Second)
	}, func(f Fault) bucketFault { return bucketFault{latency: f.Latency} })
	bucket(KindS3Errors, func(g *gen, f *Fault) {
		f.Duration = g.between(3*time.Second, 8*time.Second)
		f.Fraction = float64(2+g.rng.IntN(5)) / 10 // 0.2 .. 0.6
	}, func(f Fault) bucketFault { return bucketFault{fraction: f.Fraction} })
	for _, k := range []string{KindCorrupt, KindDelete} {
		registerKind(kindSpec{name: k, bucket: true, window: objectFaultWindow,
			// The bucket of a partition leader's zone: a zone without a
			// leader has no uploads, so no follower downloads to catch.
			gen: func(g *gen, f *Fault) {
				t, p := g.partition()
				f.Target = fmt.Sprintf("leader-zone:%s/%d", t, p)
			},
			resolve:   resolveLeaderZone,
			resources: zoneResource("bucket:"),
			apply: func(ctx context.Context, n *nemesis, f Fault, _ *broker) (func(context.Context) error, string, error) {
				zone := strings.TrimPrefix(f.Target, "zone:")
				for {
					// Each round waits tamperWait, the last one what is
					// left of the schedule (at least tamperMinWait).
					wait := max(min(tamperWait, time.Until(n.end)), tamperMinWait)
					key, err := n.tamper(ctx, zone, f.Kind == KindDelete, wait)
					if !errors.Is(err, errNoDownload) || time.Until(n.end) < tamperMinWait || ctx.Err() != nil {
						return nil, key, err
					}
					// No follower read the zone's bucket: its leaders moved
					// away (a kill, an election) or its followers replicate
					// inline for now (a bucket back-off after another
					// fault). The fault stays armed until the schedule's
					// end, aimed again at the zone that leads the most
					// partitions among those whose bucket no other fault
					// holds.
					if next, ok := n.busiestLeaderZone(ctx, zone); ok {
						zone = next
					}
				}
			}})
	}
	registerKind(kindSpec{name: KindReassign,
		gen: func(g *gen, f *Fault) {
			t, p := g.partition()
			f.Target = fmt.Sprintf("partition:%s/%d", t, p)
			// Replicas stay in distinct zones (placement rule): one broker
			// of each of Replicas zones, in a new order (a new preferred
			// leader). With one broker per zone that is a reordering;
			// with more, a real move to the zone's other broker.
			perZone := max(g.topo.PerZone, 1)
			zones := g.rng.Perm(len(g.topo.Zones))[:min(g.topo.Replicas, len(g.topo.Zones))]
			for _, z := range zones {
				f.Replicas = append(f.Replicas, g.topo.BrokerIDs[z*perZone+g.rng.IntN(perZone)])
			}
			g.rng.Shuffle(len(f.Replicas), func(i, j int) { f.Replicas[i], f.Replicas[j] = f.Replicas[j], f.Replicas[i] })
		},
		apply: func(ctx context.Context, n *nemesis, f Fault, _ *broker) (func(context.Context) error, string, error) {
			tp, err := targetPartition(f.Target)
			if err != nil {
				return nil, "", err
			}
			var req kadm.AlterPartitionAssignmentsReq
			req.Assign(tp.Topic, tp.Partition, f.Replicas)
			tries, err := retryAdmin(ctx, func(rctx context.Context) error {
				resp, err := n.c.adm.AlterPartitionAssignments(rctx, req)
				if err != nil {
					return err
				}
				return resp.Error()
			})
			if err != nil {
				return nil, "", fmt.Errorf("%d attempts: %w", tries, err)
			}
			return nil, fmt.Sprintf("%s to %v%s", tp, f.Replicas, attempts(tries)), nil
		}})
	registerKind(kindSpec{name: KindElect, gen: func(_ *gen, f *Fault) { f.Target = "all" },
		apply: func(ctx context.Context, n *nemesis, _ Fault, _ *broker) (func(context.Context) error, string, error) {
			set := kadm.TopicsSet{}
			for _, tp := range n.c.tps {
				set.Add(tp.Topic, tp.Partition)
			}
			var resp kadm.ElectLeadersResults
			tries, err := retryAdmin(ctx, func(rctx context.Context) error {
				var err error
				resp, err = n.c.adm.ElectLeaders(rctx, kadm.ElectPreferredReplica, set)
				return err
			})
			if err != nil {
				return nil, "", fmt.Errorf("%d attempts: %w", tries, err)
			}
			moved := 0
			for _, ps := range resp {
				for _, r := range ps {
					if r.Err == nil {
						moved++
					}
				}
			}
			return nil, fmt.Sprintf("%d partitions moved to their preferred leader%s", moved, attempts(tries)), nil
		}})
}

// resolveLeaderZone aims an object fault ("leader-zone:<topic>/<partition>")
// at the bucket of the zone where the partition's leader is now, or, when
// that zone leads fewer partitions than another whose bucket no fault
// holds, at that busier zone: more leaders, more uploads for followers to
// download.
func resolveLeaderZone(ctx context.Context, n *nemesis, f *Fault) error {
	b, err := n.resolveBroker(ctx, strings.Replace(f.Target, "leader-zone:", "leader:", 1))
	if err != nil {
		return err
	}
	zone := b.zone
	if busiest, ok := n.busiestLeaderZone(ctx, zone); ok {
		zone = busiest
	}
	f.Target = "zone:" + zone
	return nil
}

// busiestLeaderZone is the zone whose brokers up lead the most partitions
// now, among own and the zones whose bucket no fault holds (own wins a
// tie).
func (n *nemesis) busiestLeaderZone(ctx context.Context, own string) (string, bool) {
	topics := map[string]bool{}
	for _, tp := range n.c.tps {
		topics[tp.Topic] = true
	}
	var td kadm.TopicDetails
	if _, err := retryAdmin(ctx, func(rctx context.Context) error {
		var err error
		td, err = n.c.adm.ListTopics(rctx, slices.Collect(maps.Keys(topics))...)
		return err
	}); err != nil {
		return "", false
	}
	zoneOf := map[int32]string{}
	for _, b := range n.c.brokers {
		zoneOf[b.id] = b.zone
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// A broker a fault took down uploads nothing, whatever the
	// metadata still says before its session expires.
	leads := map[string]int{}
	for _, t := range td {
		for _, p := range t.Partitions {
			if z, ok := zoneOf[p.Leader]; ok && !n.down[p.Leader] {
				leads[z]++
			}
		}
	}
	best, most := own, leads[own]
	for z, c := range leads {
		if !n.held["bucket:"+z] && (c > most || c == most && best != own && z < best) {
			best, most = z, c
		}
	}
	return best, most > 0
}

// retryAdmin runs an admin request as an operator's tool would: attempts
// of at most 5 s, 0.5 s apart, for up to 20 s (a follow-up kill may take
// the controller down under the first one). It returns the attempts made.
func retryAdmin(ctx context.Context, do func(context.Context) error) (int, error) {
	deadline := time.Now().Add(20 * time.Second)
	for tries := 1; ; tries++ {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := do(rctx)
		cancel()
		if err == nil || time.Now().Add(500*time.Millisecond).After(deadline) || ctx.Err() != nil {
			return tries, err
		}
		wait(ctx, 500*time.Millisecond) // retry backoff
	}
}

// attempts describes the attempts an admin fault needed beyond the first.
func attempts(tries int) string {
	if tries <= 1 {
		return ""
	}
	return fmt.Sprintf(" (after %d attempts)", tries)
}
