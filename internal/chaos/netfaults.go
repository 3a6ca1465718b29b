package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Network fault kinds. Every broker has two listeners, each behind its own
// proxy: CLIENT (producers, consumers, the admin client; advertised as its
// proxy's address) and REPLICATION (inter.broker.listener.name: replica
// fetchers, inter-broker requests). The replication proxy of broker b
// knows which broker each connection comes from (the client ID of its
// first request), so a link between two brokers can be cut on its own.
const (
	// KindPartition cuts brokers from each other on the replication
	// listener: one link ("link:<a>-<b>") or one broker from every other
	// ("broker:<a>"). Mode drop (connections closed and refused), stall
	// (bytes held both ways) or one-way (the first side's bytes pass,
	// those towards it are held: an asymmetric partition).
	KindPartition = "partition"
	// KindClientPartition cuts a broker from its clients (client
	// listener): drop, stall, or one-way (requests arrive, answers are
	// held: the broker appends what clients will retry).
	KindClientPartition = "client-partition"
	// KindZoneIsolation isolates a zone: its brokers are cut from the
	// other zones' brokers (replication links dropped both ways), from
	// etcd (whose quorum lives in the other zones) and from every client
	// but the zone's own consumers and zone-local clients (strata_az=<zone>),
	// whose bytes to the other zones' brokers are held instead. The zone's
	// bucket stays reachable by everyone (object storage is a regional
	// service).
	KindZoneIsolation = "zone-isolation"
)

// Partition modes besides ModeDrop and ModeStall.
const ModeOneWay = "one-way"

func init() {
	registerKind(kindSpec{name: KindPartition,
		gen: func(g *gen, f *Fault) {
			a := g.broker()
			if g.rng.IntN(3) == 0 || len(g.topo.BrokerIDs) < 2 {
				f.Target = fmt.Sprintf("broker:%d", a)
			} else {
				b := a
				for b == a {
					b = g.broker()
				}
				f.Target = fmt.Sprintf("link:%d-%d", a, b)
			}
			f.Mode = []string{ModeDrop, ModeDrop, ModeStall, ModeOneWay, ModeOneWay}[g.rng.IntN(5)]
			f.Duration = g.between(3*time.Second, 8*time.Second)
		},
		resources: func(n *nemesis, f Fault) ([]string, error) {
			sa, sb, err := n.partitionSides(f.Target)
			return linkResources(sa, sb), err
		},
		apply: func(_ context.Context, n *nemesis, f Fault, _ *broker) (func(context.Context) error, string, error) {
			sa, sb, err := n.partitionSides(f.Target)
			if err != nil {
				return nil, "", err
			}
			n.cut(sa, sb, f.Mode)
			return func(context.Context) error { n.cut(sa, sb, ModePass); return nil },
				fmt.Sprintf("brokers %v | %v %s", sa, sb, f.Mode), nil
		}})
	registerKind(kindSpec{name: KindClientPartition,
		gen: func(g *gen, f *Fault) {
			f.Target = fmt.Sprintf("broker:%d", g.broker())
			f.Mode = []string{ModeDrop, ModeStall, ModeOneWay}[g.rng.IntN(3)]
			f.Duration = g.between(2*time.Second, 6*time.Second)
		},
		resources: func(_ *nemesis, f Fault) ([]string, error) {
			id, err := targetBroker(f.Target)
			return []string{fmt.Sprintf("client:%d", id)}, err
		},
		apply: func(_ context.Context, n *nemesis, f Fault, _ *broker) (func(context.Context) error, string, error) {
			id, err := targetBroker(f.Target)
			if err != nil {
				return nil, "", err
			}
			px := n.c.clientPx[id]
			if px == nil {
				return nil, "", fmt.Errorf("no broker %d", id)
			}
			r := linkRule{f.Mode, f.Mode}
			if f.Mode == ModeOneWay {
				r = linkRule{ModePass, ModeStall}
			}
			px.SetDefault(r)
			return func(context.Context) error { px.SetDefault(passRule); return nil }, fmt.Sprintf("broker %d from its clients %s", id, f.Mode), nil
		}})
	registerKind(kindSpec{name: KindZoneIsolation,
		gen: func(g *gen, f *Fault) {
			f.Target = "zone:" + g.zone()
			f.Duration = g.between(4*time.Second, 10*time.Second)
		},
		resources: func(n *nemesis, f Fault) ([]string, error) {
			in, out := n.zoneSides(strings.TrimPrefix(f.Target, "zone:"))
			if len(in) == 0 {
				return nil, fmt.Errorf("%s: no broker in the zone", f.Target)
			}
			r := linkResources(in, out)
			for _, id := range in {
				r = append(r, fmt.Sprintf("etcd:%d", id), fmt.Sprintf("client:%d", id))
			}
			return r, nil
		},
		apply: func(_ context.Context, n *nemesis, f Fault, _ *broker) (func(context.Context) error, string, error) {
			zone := strings.TrimPrefix(f.Target, "zone:")
			in, out := n.zoneSides(zone)
			n.cut(in, out, ModeDrop)
			for _, id := range in {
				n.c.etcdPx[id].SetMode(ModeDrop)
				px := n.c.clientPx[id]
				px.SetDefault(linkRule{ModeDrop, ModeDrop})
				for _, own := range in {
					px.SetRule(fmt.Sprintf("fetcher:%d", own), passRule)
				}
				px.SetRule(zoneClientSource(zone), passRule)
			}
			// The zone's zone-local clients live in the zone: they reach
			// its brokers, and the others' bytes are held (stall, as a
			// network that drops packets: a connection closed at once
			// would make franz-go fail the records rather than retry
			// them). Only their rule is set on the other brokers' client
			// proxies (whose defaults belong to the client-partition
			// faults).
			for _, id := range out {
				n.c.clientPx[id].SetRule(zoneClientSource(zone), linkRule{ModeStall, ModeStall})
			}
			heal := func(context.Context) error {
				n.cut(in, out, ModePass)
				for _, id := range in {
					n.c.etcdPx[id].SetMode(ModePass)
					n.c.clientPx[id].SetMode(ModePass)
				}
				for _, id := range out {
					n.c.clientPx[id].ClearRule(zoneClientSource(zone))
				}
				return nil
			}
			return heal, fmt.Sprintf("zone %s (brokers %v) from brokers %v, etcd and other clients", zone, in, out), nil
		}})
}

// partitionSides resolves a partition's target: "link:<a>-<b>" is {a} and
// {b}, "broker:<a>" {a} and every other broker.
func (n *nemesis) partitionSides(target string) (a, b []int32, err error) {
	if s, ok := strings.CutPrefix(target, "link:"); ok {
		x, y, found := strings.Cut(s, "-")
		ia, err1 := strconv.ParseInt(x, 10, 32)
		ib, err2 := strconv.ParseInt(y, 10, 32)
		if !found || err1 != nil || err2 != nil || n.c.brokerByID(int32(ia)) == nil || n.c.brokerByID(int32(ib)) == nil {
			return nil, nil, fmt.Errorf("target %q: want link:<broker>-<broker>", target)
		}
		return []int32{int32(ia)}, []int32{int32(ib)}, nil
	}
	id, err := targetBroker(target)
	if err != nil {
		return nil, nil, err
	}
	if n.c.brokerByID(id) == nil {
		return nil, nil, fmt.Errorf("%s: no such broker", target)
	}
	for _, br := range n.c.brokers {
		if br.id != id {
			b = append(b, br.id)
		}
	}
	return []int32{id}, b, nil
}

// zoneSides returns the brokers of zone and the others.
func (n *nemesis) zoneSides(zone string) (in, out []int32) {
	for _, b := range n.c.brokers {
		if b.zone == zone {
			in = append(in, b.id)
		} else {
			out = append(out, b.id)
		}
	}
	return in, out
}

// linkResources are the fault points of the links between sides a and b.
func linkResources(a, b []int32) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			lo, hi := min(x, y), max(x, y)
			out = append(out, fmt.Sprintf("link:%d-%d", lo, hi))
		}
	}
	slices.Sort(out)
	return out
}

// cut sets the replication links between sides a and b: drop, stall,
// one-way (a's bytes reach b, b's do not reach a) or pass (healed). On b's
// replication proxy a's connections go up from a; on a's, b's go up from b.
func (n *nemesis) cut(a, b []int32, mode string) {
	toB, toA := linkRule{mode, mode}, linkRule{mode, mode}
	if mode == ModeOneWay {
		toB = linkRule{ModePass, ModeStall} // a's connections to b: requests pass, answers held
		toA = linkRule{ModeStall, ModePass} // b's connections to a: requests held, answers pass
	}
	for _, x := range a {
		for _, y := range b {
			if mode == ModePass {
				n.c.replPx[y].ClearRule(fmt.Sprintf("broker:%d", x))
				n.c.replPx[x].ClearRule(fmt.Sprintf("broker:%d", y))
				continue
			}
			n.c.replPx[y].SetRule(fmt.Sprintf("broker:%d", x), toB)
			n.c.replPx[x].SetRule(fmt.Sprintf("broker:%d", y), toA)
		}
	}
}
