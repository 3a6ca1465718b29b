package replication

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/traffic"
)

// leaders returns each partition's leader and replicas of topic as the
// cluster reports them (nil when the metadata is not complete yet).
func leaders(adm *kadm.Client, topic string) map[int32][]int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil
	}
	t, ok := md.Topics[topic]
	if !ok || t.Err != nil || len(t.Partitions) == 0 {
		return nil
	}
	out := map[int32][]int32{}
	for p, pd := range t.Partitions {
		if pd.Err != nil && !errors.Is(pd.Err, kerr.ReplicaNotAvailable) {
			return nil
		}
		out[p] = append([]int32{pd.Leader}, pd.Replicas...)
	}
	return out
}

// waitLeaders waits until every partition of topic is led by a broker in
// want.
func waitLeaders(t *testing.T, adm *kadm.Client, topic string, partitions int, want []int32, what string) {
	t.Helper()
	var last map[int32][]int32
	deadline := time.Now().Add(60 * time.Second)
	for {
		last = leaders(adm, topic)
		ok := len(last) == partitions
		for _, lr := range last {
			ok = ok && slices.Contains(want, lr[0])
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after 60s partition -> [leader, replicas...] is %v, want every leader in %v", what, last, want)
		}
		time.Sleep(20 * time.Millisecond) // poll pace
	}
}

// waitLeadersOnEveryBroker waits until the metadata each broker of c
// answers itself shows every partition of topic led by broker leader.
func waitLeadersOnEveryBroker(t *testing.T, c *brokertest.Cluster, topic string, partitions int, leader int32) {
	t.Helper()
	for i, b := range c.Brokers {
		cl := newClient(t, []string{b.Addr()})
		waitFor(t, fmt.Sprintf("broker %d's metadata to show every partition of %s led by broker %d", i, topic, leader), time.Minute, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl.Broker(i+1)) // brokertest IDs are 1..n
			if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != partitions {
				return false
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.Leader != leader {
					return false
				}
			}
			return true
		})
	}
}

func describeTopicConfig(t *testing.T, adm *kadm.Client, topic, name string) kadm.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("DescribeConfigs of %s has no %s: %v", topic, name, rc.Configs)
	return kadm.Config{}
}

// TestLeaderPlacementZone: with leader.placement.policy=Zone and zone b,
// every partition's leader is the zone-b broker; a producer in zone b
// (strata_az=b in its client ID) sends no produce byte across zones; when
// b's broker stops the leaders fail over, and when it is back they return
// (also those of a topic created while b had no broker, by reassignment);
// a topic override of leader.placement.zone moves the leaders (by
// reassignment when no replica sits in the new zone); a zone without
// brokers is refused with INVALID_CONFIG naming the zones.
func TestLeaderPlacementZone(t *testing.T) {
	c := brokertest.StartCluster(t, zones,
		brokertest.WithSetting("leader.placement.policy", "Zone"),
		brokertest.WithSetting("leader.placement.zone", "b"))
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const parts = 6
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, "pinned"); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, "pinned", parts, []int32{2}, "policy Zone b")
	if cfg := describeTopicConfig(t, adm, "pinned", "leader.placement.zone"); cfg.MaybeValue() != "b" || cfg.Source != 4 /* STATIC_BROKER_CONFIG */ {
		t.Errorf("leader.placement.zone = %q from source %v, want b from the broker default (STATIC_BROKER_CONFIG)", cfg.MaybeValue(), cfg.Source)
	}

	// A zone-b producer: every produce byte stays in zone b — once every
	// broker's own metadata says so (a broker whose view still lags would
	// send the producer to the old leader in zone a, once).
	waitLeadersOnEveryBroker(t, c, "pinned", parts, 2)
	before := produceBytes(c)
	pr := newClient(t, c.Addrs(), kgo.ClientID("zone-b-app,"+protocol.ClientIDZonePrefix+"b"), kgo.DefaultProduceTopic("pinned"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 600 {
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("record-%04d-%s", i, strings.Repeat("x", 200)))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	after := produceBytes(c)
	for k, n := range after {
		d := n - before[k]
		if k.peer != k.local && d != 0 {
			t.Errorf("broker in zone %s counted %v cross-zone produce bytes (%s) from a zone-b producer", k.local, d, k)
		}
	}
	if inZone := after[zoneKey{"b", "b", traffic.In}] - before[zoneKey{"b", "b", traffic.In}]; inZone < 600*200 {
		t.Errorf("zone-b broker counted %v in-zone produce bytes in, want at least %d", inZone, 600*200)
	}
	if cz, usd := clientCrossZone(t, c, "produce"); cz != 0 || usd != 0 {
		t.Errorf("a zone-b producer to zone-b leaders: client cross-zone produce bytes %v, $%v; want none", cz, usd)
	}
	// A zone-a producer to the same leaders: the transfer bill's client
	// part, both directions, priced at both sides' cross-zone rate.
	pa := newClient(t, c.Addrs(), kgo.ClientID(protocol.ClientIDZonePrefix+"a"), kgo.DefaultProduceTopic("pinned"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 600 {
		if err := pa.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("record-%04d-%s", i, strings.Repeat("y", 200)))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	czA := produceBytes(c)
	in, out := czA[zoneKey{"b", "a", traffic.In}]-after[zoneKey{"b", "a", traffic.In}], czA[zoneKey{"b", "a", traffic.Out}]-after[zoneKey{"b", "a", traffic.Out}]
	cz, usd := clientCrossZone(t, c, "produce")
	if in < 600*200 || cz != in+out {
		t.Errorf("a zone-a producer to zone-b leaders: client cross-zone produce bytes %v, want the zone-b broker's produce bytes from zone a in and out (%v + %v, at least %d in)", cz, in, out, 600*200)
	}
	if want := cz * 0.02 / 1e9; math.Abs(usd-want) > want*1e-9 {
		t.Errorf("client produce cost $%v for %v bytes, want $%v ($0.01/GB each way)", usd, cz, want)
	}

	// Failover and return.
	c.Brokers[1].Stop()
	waitLeaders(t, adm, "pinned", parts, []int32{1, 3}, "after zone b's broker stopped")
	// Zone b has no broker now: a new topic is still created (placed
	// balanced on a and c), and moves into b when b is back.
	if _, err := adm.CreateTopic(ctx, 3, 2, nil, "created-without-b"); err != nil {
		t.Fatalf("create a topic while the leader zone has no broker: %v", err)
	}
	c.Brokers[1].Restart()
	waitLeaders(t, adm, "pinned", parts, []int32{2}, "after zone b's broker restarted")
	waitLeaders(t, adm, "created-without-b", 3, []int32{2}, "topic created while b was down, after b restarted")

	// Per-topic override: c's broker holds a replica of every partition.
	alter(t, adm, "pinned", "c", nil)
	waitLeaders(t, adm, "pinned", parts, []int32{3}, "topic override c")
	if cfg := describeTopicConfig(t, adm, "pinned", "leader.placement.zone"); cfg.MaybeValue() != "c" || cfg.Source != 1 /* DYNAMIC_TOPIC_CONFIG */ {
		t.Errorf("leader.placement.zone = %q from source %v, want c from the topic (DYNAMIC_TOPIC_CONFIG)", cfg.MaybeValue(), cfg.Source)
	}

	// Replication factor 2 pinned to a: moving to c needs a reassignment
	// wherever c's broker is not a replica yet.
	if _, err := adm.CreateTopic(ctx, parts, 2, map[string]*string{"leader.placement.zone": kadm.StringPtr("a")}, "rf2"); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, "rf2", parts, []int32{1}, "rf2 pinned to a")
	alter(t, adm, "rf2", "c", nil)
	waitLeaders(t, adm, "rf2", parts, []int32{3}, "rf2 moved to c")
	for p, lr := range leaders(adm, "rf2") {
		if len(lr) != 3 || lr[1] != 3 {
			t.Errorf("rf2-%d: [leader, replicas...] = %v, want 2 replicas led by their first, 3", p, lr)
		}
	}

	// A zone without brokers.
	alter(t, adm, "pinned", "nowhere", kerr.InvalidConfig)
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"leader.placement.zone": kadm.StringPtr("nowhere")}, "typo")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, `zones with brokers: ["a" "b" "c"]`) {
		t.Errorf("create with zone nowhere: %v %q, want INVALID_CONFIG naming the zones a, b, c", err, resp.ErrMessage)
	}
}

func alter(t *testing.T, adm *kadm.Client, topic, zone string, want error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.placement.zone", Value: kadm.StringPtr(zone)}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resps.On(topic, nil); err == nil {
			err = r.Err
			if want != nil && !strings.Contains(r.ErrMessage, `zones with brokers: ["a" "b" "c"]`) {
				t.Errorf("alter %s to zone %s: message %q does not name the zones with brokers", topic, zone, r.ErrMessage)
			}
		}
	}
	if !errors.Is(err, want) && !(want == nil && err == nil) {
		t.Fatalf("alter %s leader.placement.zone=%s: %v, want %v", topic, zone, err, want)
	}
}

type zoneKey struct {
	local, peer string
	dir         traffic.Direction
}

// produceBytes reads every broker's produce counters by (local zone, peer
// zone, direction).
// clientCrossZone sums strata_client_cross_zone_bytes_total and
// strata_client_cost_usd_total of path over every broker.
func clientCrossZone(t *testing.T, c *brokertest.Cluster, path string) (bytes, usd float64) {
	t.Helper()
	for _, b := range c.Brokers {
		mfs, err := b.Server().Metrics().Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "path" && l.GetValue() == path }) {
					continue
				}
				switch mf.GetName() {
				case "strata_client_cross_zone_bytes_total":
					bytes += m.GetCounter().GetValue()
				case "strata_client_cost_usd_total":
					usd += m.GetCounter().GetValue()
				}
			}
		}
	}
	return bytes, usd
}

func produceBytes(c *brokertest.Cluster) map[zoneKey]float64 {
	out := map[zoneKey]float64{}
	for i, b := range c.Brokers {
		ctr := b.Server().Traffic()
		for _, peer := range append(slices.Clone(zones), traffic.UnknownZone) {
			for _, dir := range []traffic.Direction{traffic.In, traffic.Out} {
				out[zoneKey{zones[i], peer, dir}] = ctr.Bytes(peer, traffic.Produce, dir)
			}
		}
	}
	return out
}
