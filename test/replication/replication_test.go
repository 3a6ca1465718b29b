package replication

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/traffic"
)

var zones = []string{"a", "b", "c"}

func newClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitUntil polls cond until it holds (true) or deadline passes (false).
func waitUntil(deadline time.Time, cond func() bool) bool {
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// state returns a partition's state as the first running broker applied
// it, waiting until every running broker knows the partition (a broker
// applies a new topic a moment after the one that created it; a client
// that asks a broker which knows it may reach a leader which does not
// yet, and without retries fails UNKNOWN_TOPIC_OR_PARTITION, as
// TestWALCompactedTopicReplicas did on a loaded machine).
func state(t *testing.T, c *brokertest.Cluster, topic string, p int32) meta.PartitionState {
	t.Helper()
	var ps meta.PartitionState
	waitFor(t, fmt.Sprintf("partition %s-%d in every running broker's applied metadata", topic, p), 30*time.Second, func() bool {
		running, known := 0, 0
		for _, b := range c.Brokers {
			srv := b.Server()
			if srv == nil {
				continue
			}
			running++
			st := srv.Broker().ClusterState()
			if st == nil {
				continue
			}
			s, ok := st.Partition(meta.TopicPartition{Topic: topic, Partition: p})
			if ok {
				if known == 0 {
					ps = s
				}
				known++
			}
		}
		if running == 0 {
			t.Fatal("no running broker")
		}
		return known == running
	})
	return ps
}

func brokerByID(c *brokertest.Cluster, id int32) *brokertest.Broker { return c.Brokers[id-1] }

func localLEO(t *testing.T, b *brokertest.Broker, topic string, p int32) int64 {
	t.Helper()
	part, err := b.Server().Broker().Partition(topic, p)
	if err != nil {
		t.Fatalf("broker %s: %v", b.Addr(), err)
	}
	return part.Log.EndOffset()
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 3, configs, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
}

// TestThreeZones: placement spreads replicas one per zone with balanced
// leaders; acks=all completes only once both followers have the data; with
// one follower gone and min.insync.replicas=2 it still succeeds, with two
// gone the leader refuses with NOT_ENOUGH_REPLICAS and appends nothing.
func TestThreeZones(t *testing.T) {
	c := brokertest.StartCluster(t, zones, brokertest.WithSetting("replica.lag.time.max.ms", "2000"))
	admCl := newClient(t, c.Addrs())
	adm := kadm.NewClient(admCl)
	two := "2"
	createTopic(t, adm, "orders", 3, map[string]*string{"min.insync.replicas": &two})

	leaders := map[int32]int{}
	for p := range int32(3) {
		st := state(t, c, "orders", p)
		zs := map[string]bool{}
		for _, r := range st.Replicas {
			zs[zones[r-1]] = true
		}
		if len(st.Replicas) != 3 || len(zs) != 3 {
			t.Fatalf("partition %d replicas %v not one per zone", p, st.Replicas)
		}
		leaders[st.Leader]++
	}
	if len(leaders) != 3 {
		t.Fatalf("leaders not balanced over the brokers: %v", leaders)
	}

	// Metadata and DescribeCluster list the three brokers with their racks.
	// (Another broker may apply the new topic a moment after the one that
	// created it: poll.)
	var md kadm.Metadata
	waitFor(t, "metadata of the new topic from every broker", 30*time.Second, func() bool {
		var err error
		md, err = adm.Metadata(context.Background(), "orders")
		return err == nil && len(md.Topics["orders"].Partitions[0].ISR) == 3
	})
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(context.Background(), admCl)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 3 || len(dc.Brokers) != 3 || dc.ControllerID < 1 {
		t.Fatalf("metadata brokers %v, described %v (controller %d)", md.Brokers, dc.Brokers, dc.ControllerID)
	}
	for i, b := range md.Brokers {
		if b.Rack == nil || *b.Rack != zones[b.NodeID-1] || dc.Brokers[i].Rack == nil || *dc.Brokers[i].Rack != *b.Rack {
			t.Fatalf("broker %d rack %v / %v, want %s", b.NodeID, b.Rack, dc.Brokers[i].Rack, zones[b.NodeID-1])
		}
	}
	if p := md.Topics["orders"].Partitions[0]; len(p.Replicas) != 3 || len(p.ISR) != 3 || len(p.OfflineReplicas) != 0 {
		t.Fatalf("metadata of orders-0: %+v", p)
	}

	// acks=all: when a produce is acknowledged, both followers have it.
	st := state(t, c, "orders", 0)
	cl := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	for i := range 50 {
		r := &kgo.Record{Topic: "orders", Partition: 0, Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		for _, f := range st.Replicas[1:] {
			if leo := localLEO(t, brokerByID(c, f), "orders", 0); leo < r.Offset+1 {
				t.Fatalf("record %d acknowledged at offset %d, follower %d has LEO %d", i, r.Offset, f, leo)
			}
		}
	}

	// Replication bytes are counted exactly: what each leader sent to a
	// follower's zone is what that follower received from the leader's
	// zone (polled until no response is in flight).
	waitFor(t, "leader-side and follower-side replication counters to agree", 30*time.Second, func() bool {
		for _, l := range c.Brokers {
			for _, f := range c.Brokers {
				if l == f {
					continue
				}
				lz, fz := l.Server().Traffic().Zone(), f.Server().Traffic().Zone()
				sent := l.Server().Traffic().Bytes(fz, traffic.ReplicationInline, traffic.Out)
				got := f.Server().Traffic().Bytes(lz, traffic.ReplicationInline, traffic.In)
				if sent == 0 || sent != got {
					return false
				}
			}
		}
		return true
	})

	// One follower stops: the ISR shrinks to two, acks=all still succeeds.
	brokerByID(c, st.Replicas[1]).Stop()
	waitFor(t, "ISR without the stopped follower", 30*time.Second, func() bool {
		return !slices.Contains(state(t, c, "orders", 0).ISR, st.Replicas[1])
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("with two")}).FirstErr(); err != nil {
		t.Fatalf("acks=all with ISR of 2: %v", err)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("orders")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, admCl.Broker(int(st.Leader)))
	if err != nil {
		t.Fatal(err)
	}
	if p := mresp.Topics[0].Partitions[0]; !slices.Equal(p.OfflineReplicas, []int32{st.Replicas[1]}) || len(mresp.Brokers) != 2 {
		t.Fatalf("offline replicas %v, want [%d] (metadata %+v, brokers %v)", p.OfflineReplicas, st.Replicas[1], p, mresp.Brokers)
	}
	if n := gauge(t, brokerByID(c, st.Leader), "strata_under_replicated_partitions"); n < 1 {
		t.Fatalf("leader reports %v under-replicated partitions, want >= 1", n)
	}

	// The second follower stops: NOT_ENOUGH_REPLICAS, nothing appended.
	brokerByID(c, st.Replicas[2]).Stop()
	waitFor(t, "ISR of the leader alone", 30*time.Second, func() bool {
		return slices.Equal(state(t, c, "orders", 0).ISR, []int32{st.Leader})
	})
	leader := brokerByID(c, st.Leader)
	before := localLEO(t, leader, "orders", 0)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	batch, err := record.Build(record.DefaultSpec(), []record.Record{{Value: []byte("refused")}})
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(st.Leader)))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR of 1: error %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	if after := localLEO(t, leader, "orders", 0); after != before {
		t.Fatalf("refused produce appended: LEO %d -> %d", before, after)
	}
}

// TestFollowerFetching: a consumer with client.rack=b is served by the
// zone-b replica (KIP-392), seen in the brokers' traffic counters.
func TestFollowerFetching(t *testing.T) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	createTopic(t, adm, "events", 1, nil)
	st := state(t, c, "events", 0)
	leaderZone := zones[st.Leader-1]
	rack := "b"
	if leaderZone == rack {
		rack = "c"
	}
	var rackBroker *brokertest.Broker
	for _, r := range st.Replicas {
		if zones[r-1] == rack {
			rackBroker = brokerByID(c, r)
		}
	}
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()))
	var want []string
	for i := range 200 {
		v := fmt.Sprintf("event-%d", i)
		want = append(want, v)
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "events", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	before := rackBroker.Server().Traffic().Bytes(rack, traffic.Consume, traffic.Out)
	cons := newClient(t, c.Addrs(), kgo.ConsumeTopics("events"), kgo.Rack(rack), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(got), len(want), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %d records out of order or wrong", len(got))
	}
	served := rackBroker.Server().Traffic().Bytes(rack, traffic.Consume, traffic.Out) - before
	if served < float64(200*len("event-000")) {
		t.Fatalf("the zone-%s replica sent %v consume bytes to rack %s; the leader served the consumer", rack, served, rack)
	}
	leader := brokerByID(c, st.Leader)
	if lb := leader.Server().Traffic().Bytes(rack, traffic.Consume, traffic.Out); lb >= served {
		t.Fatalf("leader sent %v consume bytes to rack %s, the follower %v", lb, rack, served)
	}
}

// TestPreferredLeaderElection: after a failover, ElectLeaders through kadm
// moves leadership back to the preferred replica.
func TestPreferredLeaderElection(t *testing.T) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	createTopic(t, adm, "prefs", 1, nil)
	st := state(t, c, "prefs", 0)
	preferred := st.Replicas[0]
	brokerByID(c, preferred).Restart()
	waitFor(t, "a failover away from the preferred leader and its return to the ISR", 30*time.Second, func() bool {
		s := state(t, c, "prefs", 0)
		return s.Leader != preferred && s.Leader >= 0 && slices.Contains(s.ISR, preferred)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res kadm.ElectLeadersResults
	var err error
	waitFor(t, "ElectLeaders to succeed", 30*time.Second, func() bool {
		res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"prefs": {0: {}}})
		return err == nil && res["prefs"][0].Err == nil
	})
	waitFor(t, "the preferred replica to lead again", 30*time.Second, func() bool {
		return state(t, c, "prefs", 0).Leader == preferred
	})
}

// gauge reads an unlabelled gauge from a broker's metrics registry.
func gauge(t *testing.T, b *brokertest.Broker, name string) float64 {
	t.Helper()
	mfs, err := b.Server().Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// waitTopicConfigs waits until each of brokers reports want among the
// topic's configs in DescribeConfigs sent to that broker itself. A config
// change is written through one broker and reaches the others through
// their metadata watch: records produced before a broker applied, say,
// segment.bytes land in a segment sized by the old value.
func waitTopicConfigs(t *testing.T, cl *kgo.Client, topic string, brokers []int32, want map[string]string) {
	t.Helper()
	applied := func(id int32) bool {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		req.Resources = append(req.Resources, rr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			return false
		}
		got := map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			if c.Value != nil {
				got[c.Name] = *c.Value
			}
		}
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}
	waitFor(t, fmt.Sprintf("brokers %v to apply %v to %s", brokers, want, topic), 30*time.Second, func() bool {
		for _, id := range brokers {
			if !applied(id) {
				return false
			}
		}
		return true
	})
}
