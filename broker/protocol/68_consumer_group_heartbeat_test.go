package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// ownership is who owns each partition according to the members'
// assignment callbacks; a partition assigned while another member still
// holds it (it has not run its revoke callback) is a violation of KIP-848's
// "revoke before assign".
type ownership struct {
	mu         sync.Mutex
	owner      map[int32]string
	violations []string
	lost       []string
}

func (o *ownership) assign(member string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if cur, ok := o.owner[p]; ok && cur != member {
			o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, member, cur))
		}
		o.owner[p] = member
	}
}

func (o *ownership) release(member string, ps []int32, lost bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if o.owner[p] == member {
			delete(o.owner, p)
		}
	}
	if lost && len(ps) > 0 {
		o.lost = append(o.lost, fmt.Sprintf("%s lost %v", member, ps))
	}
}

// balanced reports whether the named members own every partition once,
// their counts differing by at most one. It fails the test at once on a
// violation.
func (o *ownership) balanced(t *testing.T, partitions int, members ...string) bool {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.violations) > 0 || len(o.lost) > 0 {
		t.Fatalf("ownership violations %v, lost partitions %v", o.violations, o.lost)
	}
	if len(o.owner) != partitions {
		return false
	}
	count := map[string]int{}
	for _, m := range o.owner {
		count[m]++
	}
	lo, hi := partitions, 0
	for _, m := range members {
		lo, hi = min(lo, count[m]), max(hi, count[m])
	}
	total := 0
	for _, m := range members {
		total += count[m]
	}
	return total == partitions && hi-lo <= 1 && lo > 0
}

// kip848Member is a kgo consumer on the KIP-848 protocol
// (ServerSideBalancer), consuming in a goroutine. It commits what it polled
// when partitions are revoked (and on close), as kgo's default revoke
// callback does.
type kip848Member struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startKIP848Member(t *testing.T, addrs []string, group, topic, name string, seen *seenLog, own *ownership, opts ...kgo.Opt) *kip848Member {
	t.Helper()
	m := &kip848Member{name: name, done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ServerSideBalancer(),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			own.assign(name, ps[topic])
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Errorf("%s: commit on revoke: %v", name, err)
			}
			own.release(name, ps[topic], false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			own.release(name, ps[topic], true)
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { seen.add(r.Partition, r.Offset) })
		}
	}()
	t.Cleanup(m.stop)
	return m
}

// stop ends the poll loop and closes the client: it commits what it
// polled (revoke callback) and leaves with member epoch -1.
func (m *kip848Member) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// loadProducer produces to every partition until stopped and reports the
// records acknowledged per partition.
type loadProducer struct {
	stopCh chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	end    map[int32]int64 // next offset per partition
	err    error
}

func startLoad(cl *kgo.Client, topic string, partitions int) *loadProducer {
	lp := &loadProducer{stopCh: make(chan struct{}), done: make(chan struct{}), end: map[int32]int64{}}
	go func() {
		defer close(lp.done)
		for round := 0; ; round++ {
			select {
			case <-lp.stopCh:
				return
			default:
			}
			var recs []*kgo.Record
			for p := range partitions {
				for i := range 5 {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "r%d-%d", round, i)})
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res := cl.ProduceSync(ctx, recs...)
			cancel()
			lp.mu.Lock()
			for _, r := range res {
				if r.Err != nil {
					lp.err = r.Err
					continue
				}
				lp.end[r.Record.Partition] = max(lp.end[r.Record.Partition], r.Record.Offset+1)
			}
			lp.mu.Unlock()
			time.Sleep(10 * time.Millisecond) // pacing, not synchronization
		}
	}()
	return lp
}

func (lp *loadProducer) stop(t *testing.T) map[int32]int64 {
	t.Helper()
	close(lp.stopCh)
	<-lp.done
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.err != nil {
		t.Fatalf("produce: %v", lp.err)
	}
	return lp.end
}

func startKIP848Broker(t *testing.T, opts ...brokertest.Option) *brokertest.Broker {
	return brokertest.Start(t, append([]brokertest.Option{
		brokertest.WithSetting("group.consumer.heartbeat.interval.ms", "200"),
	}, opts...)...)
}

// TestConsumerProtocolKgo runs franz-go consumers on the KIP-848 protocol
// (ConsumerGroupHeartbeat, server-side uniform assignor) against a broker:
// three members on six partitions, a fourth joining and one leaving while
// a producer keeps writing. Every record is consumed exactly once (each
// handover happens after the previous owner committed in its revoke
// callback), no partition is ever assigned while another member still
// holds it, no member loses its partitions, and the committed offsets end
// at the log ends.
func TestConsumerProtocolKgo(t *testing.T) {
	const (
		partitions = 6
		group      = "cg848"
		topic      = "events848"
	)
	b := startKIP848Broker(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, topic, partitions, nil)
	producer := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	seen := &seenLog{count: map[[2]int64]int{}}
	own := &ownership{owner: map[int32]string{}}
	addrs := []string{b.Addr()}

	load := startLoad(producer, topic, partitions)
	ms := map[string]*kip848Member{}
	for i := range 3 {
		name := fmt.Sprintf("m%d", i)
		ms[name] = startKIP848Member(t, addrs, group, topic, name, seen, own)
	}
	waitFor(t, "3 members with 2 partitions each", func() bool { return own.balanced(t, partitions, "m0", "m1", "m2") })

	described, err := adm.DescribeConsumerGroups(testCtx(t), group)
	if err != nil {
		t.Fatalf("DescribeConsumerGroups: %v", err)
	}
	d := described[group]
	if d.Err != nil || d.AssignorName != "uniform" || len(d.Members) != 3 || d.AssignmentEpoch != d.Epoch {
		t.Fatalf("described group: %+v", d)
	}
	listed, err := adm.ListGroupsByType(testCtx(t), []string{"consumer"})
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if lg, ok := listed[group]; !ok || lg.GroupType != "consumer" || lg.ProtocolType != "consumer" {
		t.Fatalf("listed groups: %+v", listed)
	}

	// A fourth member joins under load: partitions move to it only after
	// their owners revoked them.
	ms["m3"] = startKIP848Member(t, addrs, group, topic, "m3", seen, own)
	waitFor(t, "4 members balanced", func() bool { return own.balanced(t, partitions, "m0", "m1", "m2", "m3") })

	// One leaves (commit, then ConsumerGroupHeartbeat with epoch -1).
	ms["m1"].stop()
	waitFor(t, "3 members balanced after m1 left", func() bool { return own.balanced(t, partitions, "m0", "m2", "m3") })

	end := load.stop(t)
	total := 0
	for _, n := range end {
		total += int(n)
	}
	waitFor(t, "every produced record consumed", func() bool { return seen.n() >= total })
	for _, name := range []string{"m0", "m2", "m3"} {
		ms[name].stop()
	}

	own.mu.Lock()
	if len(own.violations) > 0 || len(own.lost) > 0 {
		t.Errorf("ownership violations %v, lost partitions %v", own.violations, own.lost)
	}
	own.mu.Unlock()
	seen.mu.Lock()
	for p := range int32(partitions) {
		for o := range end[p] {
			if n := seen.count[[2]int64{int64(p), o}]; n != 1 {
				t.Errorf("partition %d offset %d consumed %d times", p, o, n)
			}
		}
	}
	if seen.total != total {
		t.Errorf("consumed %d records, produced %d", seen.total, total)
	}
	t.Logf("%d records consumed once each across a join and a leave", total)
	seen.mu.Unlock()
	checkCommittedEnds(t, adm, group, topic, end)
}

func checkCommittedEnds(t *testing.T, adm *kadm.Client, group, topic string, end map[int32]int64) {
	t.Helper()
	offsets, err := adm.FetchOffsets(testCtx(t), group)
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	for p, want := range end {
		o, ok := offsets.Lookup(topic, p)
		if !ok || o.Err != nil || o.At != want {
			t.Errorf("committed offset of %s-%d = %+v (found %v), want %d", topic, p, o, ok, want)
		}
	}
}

// TestConsumerProtocolCoordinatorFailover takes the group coordinator of
// a 3-broker cluster away while three KIP-848 members consume under load,
// gracefully (stop: controlled shutdown) and with kill -9 (broker
// processes): the broker that takes the group over reads its state
// (epochs, assignments) from etcd, so the members heartbeat on with the
// same member ids, lose no partitions and consume every record exactly
// once.
func TestConsumerProtocolCoordinatorFailover(t *testing.T) {
	settings := []brokertest.Option{brokertest.WithSetting("group.consumer.heartbeat.interval.ms", "200")}
	t.Run("stop", func(t *testing.T) {
		c := brokertest.StartCluster(t, []string{"a", "b", "c"}, settings...)
		testConsumerFailover(t, c.Addrs(), func(id int32) { c.Brokers[id-1].Stop() })
	})
	t.Run("kill-9", func(t *testing.T) {
		c := brokertest.StartProcessCluster(t, []string{"a", "b", "c"}, settings...)
		testConsumerFailover(t, c.Addrs(), func(id int32) { c.Processes[id-1].Kill() })
	})
}

// testConsumerFailover runs the failover scenario on a cluster whose
// broker i+1 listens on addrs[i]; takeAway stops or kills a broker.
func testConsumerFailover(t *testing.T, addrs []string, takeAway func(id int32)) {
	const (
		partitions = 6
		group      = "cg848-failover"
		topic      = "events848-failover"
	)
	adm := kadm.NewClient(newClient(t, addrs[0], kgo.SeedBrokers(addrs...)))
	resp, err := adm.CreateTopics(testCtx(t), partitions, 3, nil, topic)
	if err != nil || resp[topic].Err != nil {
		t.Fatalf("CreateTopics: %v %v", err, resp[topic].Err)
	}
	producer := newClient(t, addrs[0], kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	seen := &seenLog{count: map[[2]int64]int{}}
	own := &ownership{owner: map[int32]string{}}
	load := startLoad(producer, topic, partitions)
	var ms []*kip848Member
	for i, zone := range []string{"a", "b", "c"} {
		ms = append(ms, startKIP848Member(t, addrs, group, topic, fmt.Sprintf("m%d", i), seen, own, kgo.Rack(zone)))
	}
	waitFor(t, "3 members balanced", func() bool { return own.balanced(t, partitions, "m0", "m1", "m2") })

	// A fresh admin client each time: one that knew the stopped
	// coordinator keeps dialing it for a while.
	live := addrs
	describe := func() kadm.DescribedConsumerGroup {
		cl, err := kgo.NewClient(kgo.SeedBrokers(live...))
		if err != nil {
			t.Fatalf("kgo.NewClient: %v", err)
		}
		defer cl.Close()
		d, err := kadm.NewClient(cl).DescribeConsumerGroups(testCtx(t), group)
		if err != nil {
			return kadm.DescribedConsumerGroup{Err: err}
		}
		return d[group]
	}
	before := describe()
	if before.Err != nil || len(before.Members) != 3 {
		t.Fatalf("describe before failover: %+v", before)
	}
	coord := adm.FindGroupCoordinators(testCtx(t), group)
	var coordID int32 = -1
	for _, r := range coord {
		if r.Err != nil {
			t.Fatalf("FindCoordinator: %v", r.Err)
		}
		coordID = r.NodeID
	}
	live = nil
	for i, a := range addrs {
		if int32(i+1) != coordID {
			live = append(live, a)
		}
	}
	takeAway(coordID)
	t.Logf("stopped coordinator broker %d", coordID)

	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last state: %s", last)
		}
	})
	waitFor(t, "the group served by another coordinator", func() bool {
		for _, r := range adm.FindGroupCoordinators(testCtx(t), group) {
			if r.Err != nil || r.NodeID == coordID {
				last = fmt.Sprintf("coordinator %d, %v", r.NodeID, r.Err)
				return false
			}
		}
		d := describe()
		last = fmt.Sprintf("%+v", d)
		return d.Err == nil && d.State == "Stable" && len(d.Members) == 3
	})
	after := describe()
	for i, m := range before.Members {
		if after.Members[i].MemberID != m.MemberID {
			t.Fatalf("members changed across the failover: %+v -> %+v", before.Members, after.Members)
		}
	}
	// The members keep heartbeating to the new coordinator: wait for a
	// few of their heartbeats to land there (it tracks no heartbeat
	// count, so let the load run on and check nothing was lost).
	total := func(end map[int32]int64) (n int) {
		for _, e := range end {
			n += int(e)
		}
		return n
	}
	load.mu.Lock()
	mark := total(load.end)
	load.mu.Unlock()
	waitFor(t, "consumption continues after the failover", func() bool { return seen.n() > mark })
	end := load.stop(t)
	waitFor(t, "every produced record consumed", func() bool { return seen.n() >= total(end) })
	if d := describe(); d.Err != nil || len(d.Members) != 3 {
		t.Fatalf("describe at the end: %+v", d)
	}
	for _, m := range ms {
		m.stop()
	}
	own.mu.Lock()
	if len(own.violations) > 0 || len(own.lost) > 0 {
		t.Errorf("ownership violations %v, lost partitions %v", own.violations, own.lost)
	}
	own.mu.Unlock()
	seen.mu.Lock()
	for p := range int32(partitions) {
		for o := range end[p] {
			if n := seen.count[[2]int64{int64(p), o}]; n != 1 {
				t.Errorf("partition %d offset %d consumed %d times", p, o, n)
			}
		}
	}
	seen.mu.Unlock()
	fresh := newClient(t, live[0], kgo.SeedBrokers(live...))
	checkCommittedEnds(t, kadm.NewClient(fresh), group, topic, end)
}

// TestConsumerProtocolRackAware: in a 3-zone cluster, members that send
// their zone as RackId get the partitions whose replica is in their zone
// (a topic with one replica per partition, spread over the zones).
func TestConsumerProtocolRackAware(t *testing.T) {
	const (
		partitions = 6
		group      = "cg848-racks"
		topic      = "events848-racks"
	)
	zones := []string{"a", "b", "c"}
	c := brokertest.StartCluster(t, zones, brokertest.WithSetting("group.consumer.heartbeat.interval.ms", "200"))
	addrs := c.Addrs()
	adm := kadm.NewClient(newClient(t, addrs[0], kgo.SeedBrokers(addrs...)))
	resp, err := adm.CreateTopics(testCtx(t), partitions, 1, nil, topic)
	if err != nil || resp[topic].Err != nil {
		t.Fatalf("CreateTopics: %v %v", err, resp[topic].Err)
	}
	// The broker asked may not have applied the new topic yet (its
	// metadata follows etcd's): wait for every partition with a leader.
	var md kadm.Metadata
	waitFor(t, "the new topic's partitions in Metadata", func() bool {
		md, err = adm.Metadata(testCtx(t), topic)
		if err != nil || len(md.Topics[topic].Partitions) != partitions {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
	brokerZone := map[int32]string{}
	for _, b := range md.Brokers {
		if b.Rack != nil {
			brokerZone[b.NodeID] = *b.Rack
		}
	}
	zoneOf := map[int32]string{} // partition → zone of its replica
	for _, p := range md.Topics[topic].Partitions {
		if len(p.Replicas) != 1 {
			t.Fatalf("partition %d replicas %v", p.Partition, p.Replicas)
		}
		zoneOf[p.Partition] = brokerZone[p.Replicas[0]]
	}
	seen := &seenLog{count: map[[2]int64]int{}}
	own := &ownership{owner: map[int32]string{}}
	for _, zone := range zones {
		startKIP848Member(t, addrs, group, topic, zone, seen, own, kgo.Rack(zone))
	}
	perZone := map[string]int{}
	for _, z := range zoneOf {
		perZone[z]++
	}
	t.Logf("replica zones by partition: %v", zoneOf)
	waitFor(t, "every member owning its zone's partitions", func() bool {
		own.mu.Lock()
		defer own.mu.Unlock()
		if len(own.violations) > 0 || len(own.lost) > 0 {
			t.Fatalf("ownership violations %v, lost partitions %v", own.violations, own.lost)
		}
		if len(own.owner) != partitions {
			return false
		}
		for p, member := range own.owner {
			// Members are named after their zone. With an uneven spread a
			// zone's surplus goes elsewhere (balance first).
			if zoneOf[p] != member && perZone[zoneOf[p]] <= partitions/len(zones) {
				return false
			}
		}
		return true
	})
}
