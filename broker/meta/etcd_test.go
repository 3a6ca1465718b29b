package meta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/strata-dev/strata/broker/placement"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startEtcd is metatest.Start, repeated here because metatest imports this
// package and internal tests cannot import it back.
func startEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(e.Close)
	c, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testCtx returns a context that logs to t when STRATA_TEST_LOG is set and
// ends with the test.
func testCtx(t testing.TB) context.Context {
	log := logr.Discard()
	if os.Getenv("STRATA_TEST_LOG") != "" {
		if tt, ok := t.(*testing.T); ok {
			log = testr.New(tt)
		}
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	t.Cleanup(cancel)
	return ctx
}

// testCluster is one etcd, a store, brokers that each run a controller, and
// a watch used to wait for states (no sleeps: every wait is on a snapshot).
type testCluster struct {
	t       *testing.T
	ctx     context.Context
	client  *clientv3.Client
	store   *Store
	brokers map[int32]*testBroker
	watch   <-chan *ClusterState
	last    *ClusterState
	seen    []*ClusterState // every snapshot waitFor read, in order
}

type testBroker struct {
	reg    *Registration
	ctrl   *Controller
	cancel context.CancelFunc
	done   chan error
}

func newTestCluster(t *testing.T, opts ...Option) *testCluster {
	t.Helper()
	client := startEtcd(t)
	store, err := New(client, "test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	wctx, cancel := context.WithCancel(ctx)
	c := &testCluster{t: t, ctx: ctx, client: client, store: store, brokers: map[int32]*testBroker{}, watch: store.Watch(wctx)}
	t.Cleanup(func() {
		for id := range c.brokers {
			c.stop(id)
		}
		cancel()
		for range c.watch { // wait for the watch goroutine to end
		}
	})
	return c
}

// start registers a broker and runs its controller.
func (c *testCluster) start(id int32, zone string) *testBroker {
	c.t.Helper()
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: id, Zone: zone,
		Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092 + id, SecurityProtocol: "PLAINTEXT"}}}, 10*time.Second)
	if err != nil {
		c.t.Fatalf("register broker %d: %v", id, err)
	}
	return c.runController(reg, ControllerOptions{})
}

func (c *testCluster) runController(reg *Registration, opts ControllerOptions) *testBroker {
	ctx, cancel := context.WithCancel(c.ctx)
	b := &testBroker{reg: reg, ctrl: c.store.NewController(reg, opts), cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- b.ctrl.Run(ctx) }()
	c.brokers[reg.Info().ID] = b
	return b
}

// kill simulates a crash: the broker's lease is revoked, exactly what etcd
// does when it expires. Its controller must stop with ErrSessionLost.
func (c *testCluster) kill(id int32) {
	c.t.Helper()
	b := c.brokers[id]
	if _, err := c.client.Revoke(c.ctx, b.reg.Lease()); err != nil {
		c.t.Fatalf("revoke lease of broker %d: %v", id, err)
	}
	select {
	case err := <-b.done:
		if !errors.Is(err, ErrSessionLost) {
			c.t.Errorf("controller of killed broker %d returned %v, want ErrSessionLost", id, err)
		}
	case <-time.After(30 * time.Second):
		c.t.Fatalf("controller of killed broker %d still running", id)
	}
	b.cancel()
	_ = b.reg.session.Close()
	delete(c.brokers, id)
}

// stop shuts a broker down cleanly.
func (c *testCluster) stop(id int32) {
	b := c.brokers[id]
	b.cancel()
	if err := <-b.done; err != nil && !errors.Is(err, ErrSessionLost) {
		c.t.Errorf("controller of broker %d: %v", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.reg.Close(ctx)
	delete(c.brokers, id)
}

// waitFor reads snapshots until pred holds.
func (c *testCluster) waitFor(what string, pred func(*ClusterState) bool) *ClusterState {
	c.t.Helper()
	if c.last != nil && pred(c.last) {
		return c.last
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case st, ok := <-c.watch:
			if !ok {
				c.t.Fatalf("watch closed while waiting for %s", what)
			}
			c.last = st
			c.seen = append(c.seen, st)
			if pred(st) {
				return st
			}
		case <-deadline:
			c.t.Fatalf("timed out waiting for %s; last state: %s", what, dump(c.last))
		}
	}
}

func dump(st *ClusterState) string {
	if st == nil {
		return "<none>"
	}
	s := fmt.Sprintf("rev %d version %d controller %d brokers %v", st.Revision, st.Version, st.ControllerID, slices.Sorted(mapsKeys(st.Brokers)))
	for _, tp := range st.SortedPartitions() {
		p := part(st, tp)
		s += fmt.Sprintf("\n  %s replicas %v leader %d epoch %d isr %v pe %d", tp, p.Replicas, p.Leader, p.LeaderEpoch, p.ISR, p.PartitionEpoch)
	}
	return s
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (c *testCluster) createTopic(spec TopicSpec) TopicInfo {
	c.t.Helper()
	info, err := c.store.CreateTopic(c.ctx, spec)
	if err != nil {
		c.t.Fatalf("create topic %s: %v", spec.Name, err)
	}
	return info
}

// threeZones starts brokers 1, 2, 3 in zones a, b, c and waits until a
// controller is elected.
func threeZones(t *testing.T, opts ...Option) *testCluster {
	c := newTestCluster(t, opts...)
	for i, zone := range []string{"a", "b", "c"} {
		c.start(int32(i+1), zone)
	}
	c.waitFor("3 brokers and a controller", func(st *ClusterState) bool {
		return len(st.Brokers) == 3 && st.ControllerID > 0
	})
	return c
}

func TestCreateTopicPlacesOneReplicaPerZoneAndBalancesLeaders(t *testing.T) {
	c := threeZones(t)
	before, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := c.createTopic(TopicSpec{Name: "orders", Partitions: 6, ReplicationFactor: 3, Config: map[string]string{"retention.ms": "3600000"}})
	st, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != before.Version+1 {
		t.Errorf("version %d -> %d, want +1 for one topic creation", before.Version, st.Version)
	}
	if got := st.Topics["orders"]; got.ID != info.ID || got.Partitions != 6 || got.ReplicationFactor != 3 || got.Config["retention.ms"] != "3600000" {
		t.Errorf("topic record %+v, want %+v", got, info)
	}
	leaders := map[int32]int{}
	for p, ps := range st.TopicPartitions("orders") {
		zones := map[string]bool{}
		for _, id := range ps.Replicas {
			zones[st.Brokers[id].Zone] = true
		}
		if len(zones) != 3 {
			t.Errorf("partition %d replicas %v span zones %v, want a, b and c", p, ps.Replicas, zones)
		}
		if ps.Leader != ps.Replicas[0] || !slices.Equal(ps.ISR, ps.Replicas) || ps.LeaderEpoch != 0 || ps.PartitionEpoch != 0 {
			t.Errorf("partition %d initial state %+v: want preferred leader, full ISR, epochs 0", p, ps)
		}
		leaders[ps.Leader]++
	}
	if leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Errorf("leaders per broker %v, want 2/2/2", leaders)
	}

	// Errors the broker maps to Kafka codes; none of them writes anything.
	for _, tt := range []struct {
		spec TopicSpec
		want error
	}{
		{TopicSpec{Name: "orders", Partitions: 1, ReplicationFactor: 1}, ErrTopicExists},
		{TopicSpec{Name: "big", Partitions: 1, ReplicationFactor: 4}, ErrInvalidReplicationFactor},
		{TopicSpec{Name: "none", Partitions: 0, ReplicationFactor: 1}, ErrInvalidPartitions},
		{TopicSpec{Name: "bad/name", Partitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{TopicSpec{Name: "pinned", Partitions: 1, ReplicationFactor: 1, LeaderZone: "z"}, ErrInvalidReplicaAssignment},
		{TopicSpec{Name: "manual", Assignment: [][]int32{{1, 9}}}, ErrInvalidReplicaAssignment},
		{TopicSpec{Name: "manual", Assignment: [][]int32{{1, 1}}}, ErrInvalidReplicaAssignment},
	} {
		if _, err := c.store.CreateTopic(c.ctx, tt.spec); !errors.Is(err, tt.want) {
			t.Errorf("CreateTopic(%+v) = %v, want %v", tt.spec, err, tt.want)
		}
	}
	after, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != st.Version || len(after.Topics) != 1 {
		t.Errorf("rejected creates wrote: version %d -> %d, topics %v", st.Version, after.Version, after.Topics)
	}

	// A manual assignment is taken as given.
	if _, err := c.store.CreateTopic(c.ctx, TopicSpec{Name: "manual", Assignment: [][]int32{{3, 1}, {3, 2}}}); err != nil {
		t.Fatal(err)
	}
	m, _ := c.store.Snapshot(c.ctx)
	if got := m.TopicPartitions("manual"); len(got) != 2 || !slices.Equal(got[1].Replicas, []int32{3, 2}) || m.Topics["manual"].ReplicationFactor != 2 {
		t.Errorf("manual topic: %+v %+v", m.Topics["manual"], got)
	}
}

func TestBrokerLossMovesLeadershipToISR(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3})
	before := c.waitFor("topic t", func(st *ClusterState) bool { return len(st.TopicPartitions("t")) == 6 })

	// Kill a broker that is not the controller, so this test is about the
	// reaction and not the failover.
	victim := int32(1)
	if before.ControllerID == victim {
		victim = 2
	}
	c.kill(victim)
	after := c.waitFor("no partition led by or in sync on the dead broker", func(st *ClusterState) bool {
		for _, ps := range st.TopicPartitions("t") {
			if ps.Leader == victim || slices.Contains(ps.ISR, victim) {
				return false
			}
		}
		return !st.Live(victim)
	})
	for tp, old := range before.Partitions() {
		now := part(after, tp)
		if !slices.Equal(now.Replicas, old.Replicas) {
			t.Errorf("%s: replicas changed %v -> %v", tp, old.Replicas, now.Replicas)
		}
		wantISR := slices.DeleteFunc(slices.Clone(old.ISR), func(id int32) bool { return id == victim })
		if !slices.Equal(now.ISR, wantISR) {
			t.Errorf("%s: ISR %v, want %v", tp, now.ISR, wantISR)
		}
		if old.Leader == victim {
			if now.LeaderEpoch != old.LeaderEpoch+1 || !slices.Contains(wantISR, now.Leader) {
				t.Errorf("%s: was led by %d at epoch %d, now %+v; want an ISR member at epoch %d", tp, victim, old.LeaderEpoch, now, old.LeaderEpoch+1)
			}
			// The first surviving replica in preferred order leads.
			if want := slices.DeleteFunc(slices.Clone(old.Replicas), func(id int32) bool { return id == victim })[0]; now.Leader != want {
				t.Errorf("%s: leader %d, want %d (next in replica order)", tp, now.Leader, want)
			}
		} else if now.Leader != old.Leader || now.LeaderEpoch != old.LeaderEpoch {
			t.Errorf("%s: leader %d epoch %d changed to %d epoch %d though its leader lived", tp, old.Leader, old.LeaderEpoch, now.Leader, now.LeaderEpoch)
		}
		if now.PartitionEpoch != old.PartitionEpoch+1 {
			t.Errorf("%s: partition epoch %d -> %d, want one change", tp, old.PartitionEpoch, now.PartitionEpoch)
		}
	}
	c.checkConvergence(1, 2, 3)
}

func TestControllerFailover(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 3})
	st := c.waitFor("topic t", func(st *ClusterState) bool { return len(st.TopicPartitions("t")) == 3 })
	first := st.ControllerID
	if !c.brokers[first].ctrl.IsController() {
		t.Fatalf("broker %d is ControllerID but does not think so", first)
	}
	c.kill(first)
	st = c.waitFor("a new controller", func(st *ClusterState) bool {
		return st.ControllerID > 0 && st.ControllerID != first
	})
	second := st.ControllerID
	c.waitFor("the new controller to handle the first one's partitions", func(st *ClusterState) bool {
		for _, ps := range st.TopicPartitions("t") {
			if ps.Leader == first || slices.Contains(ps.ISR, first) {
				return false
			}
		}
		return true
	})
	if !c.brokers[second].ctrl.IsController() {
		t.Errorf("broker %d elected but IsController false", second)
	}
	for id, b := range c.brokers {
		if id != second && b.ctrl.IsController() {
			t.Errorf("broker %d also thinks it is controller", id)
		}
	}
	// The new controller keeps reacting: kill another broker and the last
	// one must lead everything.
	var last int32
	for id := range c.brokers {
		if id != second {
			last = id
		}
	}
	c.kill(second)
	c.waitFor(fmt.Sprintf("broker %d as controller leading every partition alone", last), func(st *ClusterState) bool {
		if st.ControllerID != last {
			return false
		}
		for _, ps := range st.TopicPartitions("t") {
			if ps.Leader != last || !slices.Equal(ps.ISR, []int32{last}) {
				return false
			}
		}
		return true
	})
}

func TestOfflinePartitionComesBackWithItsISR(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "solo", Partitions: 3, ReplicationFactor: 1})
	st := c.waitFor("topic", func(st *ClusterState) bool { return len(st.TopicPartitions("solo")) == 3 })
	// Kill a non-controller broker leading one of them.
	var victim int32
	var tp TopicPartition
	for _, p := range st.SortedPartitions() {
		if l := part(st, p).Leader; l != st.ControllerID {
			victim, tp = l, p
			break
		}
	}
	old := part(st, tp)
	c.kill(victim)
	c.waitFor("offline partition", func(st *ClusterState) bool {
		ps := part(st, tp)
		return ps.Leader == NoLeader && ps.LeaderEpoch == old.LeaderEpoch+1 && slices.Equal(ps.ISR, []int32{victim})
	})
	// Nothing else may lead it (no unclean election), and when the broker
	// registers again it leads again with a new epoch.
	c.start(victim, "x")
	c.waitFor("partition back on its only replica", func(st *ClusterState) bool {
		ps := part(st, tp)
		return ps.Leader == victim && ps.LeaderEpoch == old.LeaderEpoch+2
	})
}

func TestUncleanElectionWhenConfigured(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 3, Config: map[string]string{ConfigUncleanLeaderElection: "true"}})
	st := c.waitFor("topic", func(st *ClusterState) bool { return len(st.TopicPartitions("u")) == 1 })
	tp := TopicPartition{"u", 0}
	ps := part(st, tp)
	// The leader shrinks the ISR to itself (followers fell behind) ...
	leader := ps.Leader
	shrunk := ps.Clone()
	shrunk.ISR = []int32{leader}
	if _, err := c.store.AlterPartition(c.ctx, tp, ps, shrunk); err != nil {
		t.Fatal(err)
	}
	// ... and dies. If it was the controller, another takes over.
	c.kill(leader)
	c.waitFor("an out-of-sync replica elected", func(st *ClusterState) bool {
		ps := part(st, tp)
		return ps.Leader != NoLeader && ps.Leader != leader && slices.Equal(ps.ISR, []int32{ps.Leader})
	})
}

func TestAlterPartitionCompareAndSwap(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 3})
	tp := TopicPartition{"t", 0}
	cur, err := c.store.PartitionState(c.ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	leader := cur.Leader
	follower := cur.Replicas[1]

	// Two concurrent proposals from the same state: exactly one wins.
	proposals := [][]int32{{leader, cur.Replicas[1]}, {leader, cur.Replicas[2]}}
	type result struct {
		st  PartitionState
		err error
	}
	results := make(chan result, len(proposals))
	for _, isr := range proposals {
		go func() {
			p := cur.Clone()
			p.ISR = isr
			st, err := c.store.AlterPartition(c.ctx, tp, cur, p)
			results <- result{st, err}
		}()
	}
	var won PartitionState
	wins, stale := 0, 0
	for range proposals {
		r := <-results
		switch {
		case r.err == nil:
			wins++
			won = r.st
		case errors.Is(r.err, ErrStaleState):
			stale++
		default:
			t.Errorf("unexpected error %v", r.err)
		}
	}
	if wins != 1 || stale != 1 {
		t.Fatalf("%d proposals won and %d were stale, want 1 and 1", wins, stale)
	}
	if won.PartitionEpoch != cur.PartitionEpoch+1 || won.LeaderEpoch != cur.LeaderEpoch {
		t.Errorf("winner %+v: want partition epoch +1, same leader epoch", won)
	}
	stored, _ := c.store.PartitionState(c.ctx, tp)
	if !stored.Equal(won) {
		t.Errorf("stored %+v, winner returned %+v", stored, won)
	}

	// A proposal from the old state is stale and returns the current one.
	p := cur.Clone()
	p.ISR = []int32{leader}
	got, err := c.store.AlterPartition(c.ctx, tp, cur, p)
	if !errors.Is(err, ErrStaleState) || !got.Equal(stored) {
		t.Errorf("stale proposal: %+v %v, want ErrStaleState and %+v", got, err, stored)
	}

	// Rule violations are rejected without writing.
	bad := stored.Clone()
	bad.ISR = []int32{follower}
	if _, err := c.store.AlterPartition(c.ctx, tp, stored, bad); !errors.Is(err, ErrInvalidAlterPartition) {
		t.Errorf("ISR without the leader: %v, want ErrInvalidAlterPartition", err)
	}

	// Growing the ISR with a dead broker is refused.
	shrunk := stored.Clone()
	shrunk.ISR = []int32{leader}
	stored, err = c.store.AlterPartition(c.ctx, tp, stored, shrunk)
	if err != nil {
		t.Fatal(err)
	}
	st := c.waitFor("shrunk ISR", func(st *ClusterState) bool { return part(st, tp).Equal(stored) })
	dead := cur.Replicas[2]
	if dead == st.ControllerID {
		dead = cur.Replicas[1]
	}
	c.kill(dead)
	c.waitFor("dead broker gone", func(st *ClusterState) bool { return !st.Live(dead) })
	grow := stored.Clone()
	grow.ISR = []int32{leader, dead}
	if _, err := c.store.AlterPartition(c.ctx, tp, stored, grow); !errors.Is(err, ErrIneligibleReplica) {
		t.Errorf("adding dead broker %d: %v, want ErrIneligibleReplica", dead, err)
	}

	// KIP-903: a member joins under the broker epoch the leader saw in its
	// fetches; a broker registered under another one (it restarted since)
	// is refused, and the stored ISR records the epoch.
	alive := cur.Replicas[1]
	if alive == dead {
		alive = cur.Replicas[2]
	}
	epoch := st.Brokers[alive].Epoch
	grow = stored.Clone()
	grow.ISR = []int32{leader, alive}
	slices.SortFunc(grow.ISR, func(a, b int32) int { return slices.Index(stored.Replicas, a) - slices.Index(stored.Replicas, b) })
	grow.ISREpochs = map[int32]int64{alive: epoch - 1}
	if _, err := c.store.AlterPartition(c.ctx, tp, stored, grow); !errors.Is(err, ErrIneligibleReplica) {
		t.Errorf("adding broker %d under a stale epoch: %v, want ErrIneligibleReplica", alive, err)
	}
	grow.ISREpochs = map[int32]int64{alive: epoch}
	if grown, err := c.store.AlterPartition(c.ctx, tp, stored, grow); err != nil || grown.ISREpoch(alive) != epoch {
		t.Errorf("adding broker %d under its epoch %d: %+v, %v", alive, epoch, grown, err)
	}

	// After the controller moves leadership, the deposed leader's proposal
	// with its old leader epoch is stale.
	st = c.waitFor("leader and ISR settled", func(st *ClusterState) bool { return !slices.Contains(part(st, tp).ISR, dead) })
	before := part(st, tp)
	c.kill(leader)
	c.waitFor("leader moved off the dead leader", func(st *ClusterState) bool {
		ps := part(st, tp)
		return ps.Leader != leader && ps.LeaderEpoch > before.LeaderEpoch
	})
	zombie := before.Clone()
	zombie.ISR = []int32{leader}
	if _, err := c.store.AlterPartition(c.ctx, tp, before, zombie); !errors.Is(err, ErrStaleState) {
		t.Errorf("deposed leader's proposal: %v, want ErrStaleState", err)
	}
}

func TestWatcherSeesEveryChangeInVersionOrder(t *testing.T) {
	c := newTestCluster(t)
	// One broker without a controller: only this test's writes happen.
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 1, Zone: "a"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(c.ctx)
	start := c.waitFor("broker", func(st *ClusterState) bool { return st.Live(1) })

	tp := TopicPartition{"w", 0}
	c.createTopic(TopicSpec{Name: "w", Partitions: 1, ReplicationFactor: 1})
	const changes = 20
	go func() {
		// The writer works from the store, not from the watch.
		for i := range changes {
			cur, err := c.store.PartitionState(c.ctx, tp)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.store.AlterPartition(c.ctx, tp, cur, cur); err != nil {
				t.Errorf("change %d: %v", i, err)
				return
			}
		}
		if _, err := c.store.UpdateTopicConfig(c.ctx, "w", func(cfg map[string]string) error {
			cfg["cleanup.policy"] = "compact"
			return nil
		}); err != nil {
			t.Error(err)
		}
		if err := c.store.DeleteTopic(c.ctx, "w"); err != nil {
			t.Error(err)
		}
	}()
	// Expect: create, 20 ISR writes, config, delete: 23 versions, each seen
	// once and in order, each partition epoch in turn.
	prev := start
	wantEpoch := int32(0)
	for prev.Version < start.Version+changes+3 {
		st := c.waitFor("next change", func(st *ClusterState) bool { return st.Revision > prev.Revision })
		if st.Version != prev.Version+1 {
			t.Fatalf("version %d after %d: a change was skipped or repeated", st.Version, prev.Version)
		}
		switch v := st.Version - start.Version; {
		case v <= changes+1:
			ps, ok := st.Partition(tp)
			if !ok || ps.PartitionEpoch != wantEpoch {
				t.Fatalf("version +%d: partition %+v (present %v), want partition epoch %d", v, ps, ok, wantEpoch)
			}
			wantEpoch++
		case v == changes+2:
			if st.Topics["w"].Config["cleanup.policy"] != "compact" {
				t.Fatalf("config change not visible: %+v", st.Topics["w"])
			}
		default:
			if _, ok := st.Topics["w"]; ok || st.NumPartitions() != 0 {
				t.Fatalf("deleted topic still visible: %v %s", st.Topics, dump(st))
			}
		}
		prev = st
	}
}

func TestPreferredLeaderElection(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3})
	st := c.waitFor("topic", func(st *ClusterState) bool { return len(st.TopicPartitions("t")) == 6 })
	ctrl := st.ControllerID
	var other int32
	for id := range c.brokers {
		if id != ctrl {
			other = id
			break
		}
	}
	if _, err := c.brokers[other].ctrl.PreferredLeaderElection(c.ctx, nil); !errors.Is(err, ErrNotController) {
		t.Errorf("non-controller: %v, want ErrNotController", err)
	}
	// Everything is on its preferred leader already.
	res, err := c.brokers[ctrl].ctrl.PreferredLeaderElection(c.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for tp, err := range res {
		if !errors.Is(err, ErrElectionNotNeeded) {
			t.Errorf("%s: %v, want ErrElectionNotNeeded", tp, err)
		}
	}

	// Broker `other` dies; its partitions move away.
	c.kill(other)
	st = c.waitFor("leadership off the dead broker", func(st *ClusterState) bool {
		for _, ps := range st.TopicPartitions("t") {
			if ps.Leader == other || slices.Contains(ps.ISR, other) {
				return false
			}
		}
		return true
	})
	var moved []TopicPartition
	for _, tp := range st.SortedPartitions() {
		if part(st, tp).Replicas[0] == other {
			moved = append(moved, tp)
		}
	}
	if len(moved) != 2 {
		t.Fatalf("broker %d preferred-led %d partitions, want 2: %s", other, len(moved), dump(st))
	}
	// While it is dead (or back but out of sync) it cannot be elected.
	res, err = c.brokers[ctrl].ctrl.PreferredLeaderElection(c.ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range moved {
		if !errors.Is(res[tp], ErrPreferredLeaderNotAvailable) {
			t.Errorf("%s with preferred leader dead: %v, want ErrPreferredLeaderNotAvailable", tp, res[tp])
		}
	}
	// It comes back; the current leaders add it back to the ISR (what a
	// leader does once the follower caught up).
	c.start(other, "b")
	for _, tp := range moved {
		cur, err := c.store.PartitionState(c.ctx, tp)
		if err != nil {
			t.Fatal(err)
		}
		grown := cur.Clone()
		grown.ISR = append(grown.ISR, other)
		if _, err := c.store.AlterPartition(c.ctx, tp, cur, grown); err != nil {
			t.Fatalf("%s: re-add %d to ISR: %v", tp, other, err)
		}
	}
	before, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	missing := TopicPartition{"nope", 0}
	res, err = c.brokers[ctrl].ctrl.PreferredLeaderElection(c.ctx, append(slices.Clone(moved), missing))
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[missing], ErrUnknownTopic) {
		t.Errorf("unknown partition: %v", res[missing])
	}
	after, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range moved {
		if res[tp] != nil {
			t.Errorf("%s: %v", tp, res[tp])
		}
		b, a := part(before, tp), part(after, tp)
		if a.Leader != other || a.LeaderEpoch != b.LeaderEpoch+1 {
			t.Errorf("%s: %+v -> %+v, want leader %d at epoch %d", tp, b, a, other, b.LeaderEpoch+1)
		}
	}
}

func TestCreatePartitionsAndBigTopicsAcrossTransactions(t *testing.T) {
	// A tiny transaction limit forces the multi-transaction path.
	c := threeZones(t, WithMaxTxnOps(8))
	c.createTopic(TopicSpec{Name: "big", Partitions: 20, ReplicationFactor: 2})
	st, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(st.TopicPartitions("big")); got != 20 {
		t.Fatalf("%d partitions visible, want 20", got)
	}
	id := st.Topics["big"].ID
	info, err := c.store.CreatePartitions(c.ctx, "big", 30, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if info.Partitions != 30 || info.ID != id {
		t.Errorf("after growing: %+v", info)
	}
	st, _ = c.store.Snapshot(c.ctx)
	replicas, leaders := map[int32]int{}, map[int32]int{}
	for _, ps := range st.TopicPartitions("big") {
		leaders[ps.Leader]++
		for _, r := range ps.Replicas {
			replicas[r]++
		}
	}
	for _, b := range []int32{1, 2, 3} {
		if leaders[b] != 10 || replicas[b] != 20 {
			t.Errorf("broker %d: %d leaders %d replicas, want 10 and 20 (balanced after growing)", b, leaders[b], replicas[b])
		}
	}
	for _, tt := range []struct {
		total int32
		asg   [][]int32
		name  string
		want  error
	}{
		{30, nil, "big", ErrInvalidPartitions},
		{31, [][]int32{{1}}, "big", ErrInvalidReplicaAssignment},
		{31, [][]int32{{1, 2}, {2, 3}}, "big", ErrInvalidReplicaAssignment},
		{5, nil, "nope", ErrUnknownTopic},
	} {
		if _, err := c.store.CreatePartitions(c.ctx, tt.name, tt.total, tt.asg, ""); !errors.Is(err, tt.want) {
			t.Errorf("CreatePartitions(%s, %d, %v) = %v, want %v", tt.name, tt.total, tt.asg, err, tt.want)
		}
	}
	if _, err := c.store.CreatePartitions(c.ctx, "big", 31, [][]int32{{3, 1}}, ""); err != nil {
		t.Fatal(err)
	}
	// Delete and recreate smaller: a new topic ID, no leftovers.
	if err := c.store.DeleteTopic(c.ctx, "big"); err != nil {
		t.Fatal(err)
	}
	if err := c.store.DeleteTopic(c.ctx, "big"); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("second delete: %v, want ErrUnknownTopic", err)
	}
	again := c.createTopic(TopicSpec{Name: "big", Partitions: 2, ReplicationFactor: 1})
	if again.ID == id {
		t.Error("recreated topic reused the old topic ID")
	}
	resp, err := c.client.Get(c.ctx, c.store.keys.partitionsOf("big"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 2 {
		t.Errorf("%d partition records after recreate, want 2", resp.Count)
	}
}

func TestUpdateTopicConfig(t *testing.T) {
	c := newTestCluster(t)
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 1, Zone: "a"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(c.ctx)
	c.createTopic(TopicSpec{Name: "cfg", Partitions: 1, ReplicationFactor: 1, Config: map[string]string{"a": "1", "b": "2"}})
	info, err := c.store.UpdateTopicConfig(c.ctx, "cfg", func(cfg map[string]string) error {
		delete(cfg, "a")
		cfg["c"] = "3"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := c.store.Snapshot(c.ctx)
	got := st.Topics["cfg"].Config
	if len(got) != 2 || got["b"] != "2" || got["c"] != "3" || info.Config["c"] != "3" {
		t.Errorf("config %v", got)
	}
	boom := errors.New("invalid value")
	if _, err := c.store.UpdateTopicConfig(c.ctx, "cfg", func(map[string]string) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("mutate error: %v", err)
	}
	if _, err := c.store.UpdateTopicConfig(c.ctx, "nope", func(map[string]string) error { return nil }); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("unknown topic: %v", err)
	}
}

func TestRegisterBroker(t *testing.T) {
	c := newTestCluster(t)
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 4, Zone: "b", Listeners: []Listener{{Name: "INTERNAL", Host: "h", Port: 1}}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 4, Zone: "b"}, 10*time.Second); !errors.Is(err, ErrBrokerIDInUse) {
		t.Errorf("second registration of 4: %v, want ErrBrokerIDInUse", err)
	}
	st := c.waitFor("broker 4", func(st *ClusterState) bool { return st.Live(4) })
	got := st.Brokers[4]
	if got.Zone != "b" || len(got.Listeners) != 1 || got.Listeners[0].Host != "h" || got.Epoch != reg.Info().Epoch || got.Epoch == 0 {
		t.Errorf("registered %+v, registration says %+v", got, reg.Info())
	}
	v := st.Version
	if err := reg.Close(c.ctx); err != nil {
		t.Fatal(err)
	}
	st = c.waitFor("broker 4 gone", func(st *ClusterState) bool { return !st.Live(4) })
	if st.Version != v+1 {
		t.Errorf("clean deregistration: version %d -> %d, want +1", v, st.Version)
	}
	select {
	case <-reg.Done():
	default:
		t.Error("Done not closed after Close")
	}
	// The ID is free again, with a higher epoch.
	again, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 4, Zone: "b"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(c.ctx)
	if again.Info().Epoch <= got.Epoch {
		t.Errorf("new epoch %d not above %d", again.Info().Epoch, got.Epoch)
	}
}

// The operator's scale-down: drain broker 1 with placement.Drain, apply the
// moves as reassignments, let leaders add the new replicas to the ISR, and
// the controller completes the moves.
func TestDrainBrokerThroughReassignment(t *testing.T) {
	c := threeZones(t)
	c.start(4, "a")
	c.createTopic(TopicSpec{Name: "t", Partitions: 8, ReplicationFactor: 3})
	st := c.waitFor("4 brokers and topic", func(st *ClusterState) bool {
		return len(st.Brokers) == 4 && len(st.TopicPartitions("t")) == 8
	})
	var brokers []placement.Broker
	for _, b := range st.Brokers {
		brokers = append(brokers, placement.Broker{ID: b.ID, Zone: b.Zone})
	}
	var parts []placement.Partition
	for _, tp := range st.SortedPartitions() {
		parts = append(parts, placement.Partition{Topic: tp.Topic, Partition: tp.Partition, Replicas: part(st, tp).Replicas})
	}
	moves, err := placement.Drain(brokers, parts, []int32{1})
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) == 0 {
		t.Fatalf("broker 1 hosts nothing: %s", dump(st))
	}
	targets := map[TopicPartition][]int32{}
	for _, m := range moves {
		targets[TopicPartition{m.Topic, m.Partition}] = m.To
	}
	ctrl := c.brokers[st.ControllerID].ctrl
	if _, err := c.brokers[otherThan(st, st.ControllerID)].ctrl.AlterPartitionReassignments(c.ctx, targets); !errors.Is(err, ErrNotController) {
		t.Errorf("reassignment on a non-controller: %v, want ErrNotController", err)
	}
	res, err := ctrl.AlterPartitionReassignments(c.ctx, targets)
	if err != nil {
		t.Fatal(err)
	}
	for tp, err := range res {
		if err != nil {
			t.Fatalf("%s: %v", tp, err)
		}
	}
	st, err = c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(st.Reassignments()); got != len(targets) {
		t.Fatalf("%d reassignments in progress, want %d: %s", got, len(targets), dump(st))
	}
	before := st
	// Each leader adds the new replica to the ISR once it caught up.
	for tp := range targets {
		cur := part(st, tp)
		if !slices.Equal(cur.AddingReplicas, []int32{4}) || !slices.Equal(cur.RemovingReplicas, []int32{1}) {
			t.Fatalf("%s: adding %v removing %v, want [4] and [1]", tp, cur.AddingReplicas, cur.RemovingReplicas)
		}
		grown := cur.Clone()
		grown.ISR = append(grown.ISR, 4)
		if _, err := c.store.AlterPartition(c.ctx, tp, cur, grown); err != nil {
			t.Fatalf("%s: %v", tp, err)
		}
	}
	after := c.waitFor("reassignments completed", func(st *ClusterState) bool {
		for tp, target := range targets {
			if !slices.Equal(part(st, tp).Replicas, target) {
				return false
			}
		}
		return len(st.Reassignments()) == 0
	})
	for tp, target := range targets {
		old, now := part(before, tp), part(after, tp)
		if !slices.Equal(now.Replicas, target) || slices.Contains(now.ISR, 1) || len(now.ISR) != 3 {
			t.Errorf("%s: %+v, want replicas %v and a full ISR without 1", tp, now, target)
		}
		if old.Leader == 1 && (now.Leader == 1 || now.LeaderEpoch != old.LeaderEpoch+1) {
			t.Errorf("%s: leader %d epoch %d after moving off leader 1 at epoch %d", tp, now.Leader, now.LeaderEpoch, old.LeaderEpoch)
		}
		zones := map[string]bool{}
		for _, id := range now.Replicas {
			zones[after.Brokers[id].Zone] = true
		}
		if len(zones) != 3 {
			t.Errorf("%s: replicas %v lost zone spread", tp, now.Replicas)
		}
	}
	c.checkConvergence(1, 2, 3, 4)
	// Cancelling with nothing in progress is an error per partition.
	for tp := range targets {
		res, err := ctrl.AlterPartitionReassignments(c.ctx, map[TopicPartition][]int32{tp: nil})
		if err != nil || !errors.Is(res[tp], ErrNoReassignmentInProgress) {
			t.Errorf("cancel %s: %v %v", tp, res, err)
		}
		break
	}
}

func otherThan(st *ClusterState, id int32) int32 {
	for b := range st.Brokers {
		if b != id {
			return b
		}
	}
	return -1
}

// benchCluster is an etcd and a store for benchmarks.
type benchCluster struct {
	ctx   context.Context
	store *Store
}

func newBenchCluster(b *testing.B) *benchCluster {
	client := startEtcd(b)
	store, err := New(client, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return &benchCluster{ctx: testCtx(b), store: store}
}

// part returns a partition's state, zero if absent.
func part(st *ClusterState, tp TopicPartition) PartitionState {
	p, _ := st.Partition(tp)
	return p
}

// A leader restarts (new registration epoch) while no controller runs, so
// nobody saw its lease go. The controller elected afterwards still notices,
// from the leader's registration epoch, and moves leadership with a new
// leader epoch; the old incarnation's ISR change is refused.
func TestLeaderRestartWithoutController(t *testing.T) {
	c := newTestCluster(t)
	regs := map[int32]*Registration{}
	for i, zone := range []string{"a", "b", "c"} {
		reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: int32(i + 1), Zone: zone}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		regs[reg.Info().ID] = reg
	}
	c.createTopic(TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 3})
	before, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"t", 0}
	old := part(before, tp)
	restarted := old.Leader
	if old.LeaderBrokerEpoch != regs[restarted].Info().Epoch {
		t.Fatalf("initial leader epoch stamp %d, want the leader's registration epoch %d", old.LeaderBrokerEpoch, regs[restarted].Info().Epoch)
	}
	// The restart: the old lease goes, a new registration comes.
	if _, err := c.client.Revoke(c.ctx, regs[restarted].Lease()); err != nil {
		t.Fatal(err)
	}
	_ = regs[restarted].session.Close()
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: restarted, Zone: "x"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	regs[restarted] = reg
	// The old incarnation's proposal, made from the state it knew, fails.
	shrink := old.Clone()
	shrink.ISR = []int32{restarted}
	if _, err := c.store.AlterPartition(c.ctx, tp, old, shrink); !errors.Is(err, ErrStaleState) {
		t.Errorf("ISR change by the pre-restart leader: %v, want ErrStaleState", err)
	}
	// Now a controller starts (on another broker).
	var host int32 = 1
	if host == restarted {
		host = 2
	}
	c.runController(regs[host], ControllerOptions{})
	for id, r := range regs {
		if id != host {
			defer r.Close(c.ctx)
		}
	}
	c.waitFor("leadership moved off the restarted incarnation", func(st *ClusterState) bool {
		if len(st.TopicPartitions("t")) != 3 || st.Brokers[restarted].Epoch != reg.Info().Epoch {
			return false
		}
		// Partitions it led lose it as leader and ISR member (it may have
		// lost unflushed writes); where it follows, its leader decides.
		for p, was := range before.TopicPartitions("t") {
			now := st.TopicPartitions("t")[p]
			if was.Leader == restarted && (now.Leader == restarted || slices.Contains(now.ISR, restarted)) {
				return false
			}
		}
		return true
	})
	after, _ := c.store.Snapshot(c.ctx)
	for p, was := range before.TopicPartitions("t") {
		now := after.TopicPartitions("t")[p]
		if was.Leader == restarted && (now.LeaderEpoch != was.LeaderEpoch+1 || now.LeaderBrokerEpoch != after.Brokers[now.Leader].Epoch) {
			t.Errorf("partition %d: %+v -> %+v, want leader epoch +1 stamped with the new leader's registration", p, was, now)
		}
	}
}

// checkConvergence replays every snapshot the test saw through Diff, as a
// broker does, for each broker ID, and checks that the roles it ends with
// are those of the last snapshot (Diff from nothing).
func (c *testCluster) checkConvergence(ids ...int32) {
	c.t.Helper()
	if len(c.seen) < 2 {
		c.t.Fatalf("only %d snapshots seen", len(c.seen))
	}
	last := c.seen[len(c.seen)-1]
	for _, id := range ids {
		roles := map[TopicPartition]string{}
		var prev *ClusterState
		for _, st := range c.seen {
			for _, ch := range Diff(prev, st, id) {
				switch ch.Kind {
				case StopReplica, DeletePartition:
					if _, ok := roles[ch.Partition]; !ok {
						c.t.Errorf("broker %d: %s of %s it did not host", id, ch.Kind, ch.Partition)
					}
					delete(roles, ch.Partition)
				case UpdateState:
					if _, ok := roles[ch.Partition]; !ok {
						c.t.Errorf("broker %d: update of %s it did not host", id, ch.Partition)
					}
					roles[ch.Partition] = roleOf(ch.State, id)
				default:
					roles[ch.Partition] = roleOf(ch.State, id)
				}
			}
			prev = st
		}
		want := map[TopicPartition]string{}
		for _, ch := range Diff(nil, last, id) {
			want[ch.Partition] = roleOf(ch.State, id)
		}
		if fmt.Sprint(roles) != fmt.Sprint(want) {
			c.t.Errorf("broker %d converged to %v, want %v", id, roles, want)
		}
	}
}

func roleOf(st PartitionState, id int32) string {
	if st.Leader == id {
		return fmt.Sprintf("leader@%d", st.LeaderEpoch)
	}
	return fmt.Sprintf("follower(%d)@%d", st.Leader, st.LeaderEpoch)
}

// With AutoLeaderRebalance a restarted preferred leader gets its partitions
// back as soon as it is in the ISR again.
func TestAutoLeaderRebalance(t *testing.T) {
	c := newTestCluster(t)
	for i, zone := range []string{"a", "b", "c"} {
		reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: int32(i + 1), Zone: zone}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.runController(reg, ControllerOptions{AutoLeaderRebalance: true})
	}
	c.createTopic(TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 3})
	st := c.waitFor("topic and controller", func(st *ClusterState) bool {
		return len(st.TopicPartitions("t")) == 3 && st.ControllerID > 0
	})
	victim := int32(1)
	if st.ControllerID == victim {
		victim = 2
	}
	var led TopicPartition
	for tp, p := range st.Partitions() {
		if p.Replicas[0] == victim {
			led = tp
		}
	}
	before := part(st, led)
	c.kill(victim)
	c.waitFor("leadership moved away", func(st *ClusterState) bool { return part(st, led).Leader != victim && !st.Live(victim) })
	c.start(victim, "x")
	// Back, but out of the ISR: not yet the leader.
	st = c.waitFor("victim registered", func(st *ClusterState) bool { return st.Live(victim) })
	if part(st, led).Leader == victim {
		t.Fatal("preferred leader re-elected before it rejoined the ISR")
	}
	cur, err := c.store.PartitionState(c.ctx, led)
	if err != nil {
		t.Fatal(err)
	}
	grown := cur.Clone()
	grown.ISR = append(grown.ISR, victim)
	if _, err := c.store.AlterPartition(c.ctx, led, cur, grown); err != nil {
		t.Fatal(err)
	}
	c.waitFor("preferred leader back", func(st *ClusterState) bool {
		p := part(st, led)
		return p.Leader == victim && p.LeaderEpoch == before.LeaderEpoch+2 && p.LeaderBrokerEpoch == st.Brokers[victim].Epoch
	})
}

// A broker loss touching hundreds of partitions is applied in batched
// transactions: every partition is handled, with one metadata version per
// batch rather than per partition.
func TestBrokerLossBatchesControllerWrites(t *testing.T) {
	c := threeZones(t)
	const partitions = 600
	c.createTopic(TopicSpec{Name: "many", Partitions: partitions, ReplicationFactor: 3})
	st := c.waitFor("topic", func(st *ClusterState) bool { return len(st.TopicPartitions("many")) == partitions })
	victim := int32(1)
	if st.ControllerID == victim {
		victim = 2
	}
	c.kill(victim)
	after := c.waitFor("every partition off the dead broker", func(st *ClusterState) bool {
		if st.Live(victim) {
			return false
		}
		for _, p := range st.TopicPartitions("many") {
			if p.Leader == victim || slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	})
	batches := (partitions + DefaultMaxTxnOps - 3) / (DefaultMaxTxnOps - 2)
	if got := after.Version - st.Version; got > int64(batches) {
		t.Errorf("%d metadata versions for %d partition changes, want at most %d batches", got, partitions, batches)
	}
}

// Turning unclean election on for an offline partition's topic brings it
// back: the controller re-examines a topic whose config changed.
func TestUncleanElectionEnabledLater(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 3})
	tp := TopicPartition{"u", 0}
	st := c.waitFor("topic", func(st *ClusterState) bool { _, ok := st.Partition(tp); return ok })
	ps := part(st, tp)
	leader := ps.Leader
	shrunk := ps.Clone()
	shrunk.ISR = []int32{leader}
	if _, err := c.store.AlterPartition(c.ctx, tp, ps, shrunk); err != nil {
		t.Fatal(err)
	}
	c.kill(leader)
	c.waitFor("offline", func(st *ClusterState) bool { return part(st, tp).Leader == NoLeader })
	if _, err := c.store.UpdateTopicConfig(c.ctx, "u", func(cfg map[string]string) error {
		cfg[ConfigUncleanLeaderElection] = "true"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.waitFor("unclean leader elected after the config change", func(st *ClusterState) bool {
		p := part(st, tp)
		return p.Leader != NoLeader && p.Leader != leader && slices.Equal(p.ISR, []int32{p.Leader})
	})
}

// The same with the cluster-wide dynamic default (kafka-configs
// --entity-type brokers --entity-default): every offline partition of a
// topic without its own value is re-examined, without a controller
// restart; a topic that says false stays offline.
func TestUncleanElectionEnabledClusterWide(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 3})
	c.createTopic(TopicSpec{Name: "own", Partitions: 1, ReplicationFactor: 3, Config: map[string]string{ConfigUncleanLeaderElection: "false"}})
	tp, own := TopicPartition{"u", 0}, TopicPartition{"own", 0}
	st := c.waitFor("topics", func(st *ClusterState) bool {
		_, ok1 := st.Partition(tp)
		_, ok2 := st.Partition(own)
		return ok1 && ok2
	})
	// Each led by a broker alone in its ISR; both leaders die.
	leader, ownLeader := part(st, tp).Leader, part(st, own).Leader
	for _, p := range []TopicPartition{tp, own} {
		ps := part(st, p)
		shrunk := ps.Clone()
		shrunk.ISR = []int32{ps.Leader}
		if _, err := c.store.AlterPartition(c.ctx, p, ps, shrunk); err != nil {
			t.Fatal(err)
		}
	}
	c.kill(leader)
	if ownLeader != leader {
		c.kill(ownLeader)
	}
	c.waitFor("offline", func(st *ClusterState) bool {
		return part(st, tp).Leader == NoLeader && part(st, own).Leader == NoLeader
	})
	if _, err := c.store.UpdateBrokerConfig(c.ctx, "", func(cfg map[string]string) error {
		cfg[ConfigUncleanLeaderElection] = "true"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.waitFor("unclean leader elected after the cluster-wide config change", func(st *ClusterState) bool {
		p := part(st, tp)
		return p.Leader != NoLeader && p.Leader != leader && p.Leader != ownLeader && slices.Equal(p.ISR, []int32{p.Leader})
	})
	if p := part(c.waitFor("state", func(*ClusterState) bool { return true }), own); p.Leader != NoLeader {
		t.Fatalf("topic with unclean.leader.election.enable=false got leader %d from the cluster-wide default", p.Leader)
	}
}

// TestRestartedFollowerLeavesISRUnseen (issue #10 item 7, KIP-903): a
// follower re-registers (it restarted, maybe without an unflushed tail)
// while no controller watches, so no controller ever sees it deregistered.
// The next controller must still take it out of the ISR: it joined the ISR
// under its previous registration epoch.
func TestRestartedFollowerLeavesISRUnseen(t *testing.T) {
	c := newTestCluster(t)
	leader := c.start(1, "a")
	info := func(id int32, zone string) BrokerInfo {
		return BrokerInfo{ID: id, Zone: zone, Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092 + id, SecurityProtocol: "PLAINTEXT"}}}
	}
	var regs []*Registration
	for id, zone := range map[int32]string{2: "b", 3: "c"} {
		reg, err := c.store.RegisterBroker(c.ctx, info(id, zone), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
	}
	defer func() {
		for _, r := range regs {
			_ = r.Close(context.Background())
		}
	}()
	c.waitFor("3 brokers and a controller", func(st *ClusterState) bool { return len(st.Brokers) == 3 && st.ControllerID == 1 })
	c.createTopic(TopicSpec{Name: "k", Assignment: [][]int32{{1, 2, 3}}})
	tp := TopicPartition{"k", 0}
	before := part(c.waitFor("topic", func(st *ClusterState) bool { return len(st.TopicPartitions("k")) == 1 }), tp)
	if !slices.Equal(before.ISR, []int32{1, 2, 3}) {
		t.Fatalf("ISR %v, want [1 2 3]", before.ISR)
	}
	// No controller while broker 3 re-registers.
	leader.cancel()
	if err := <-leader.done; err != nil {
		t.Fatalf("controller: %v", err)
	}
	var old *Registration
	for i, r := range regs {
		if r.Info().ID == 3 {
			old, regs = r, append(regs[:i:i], regs[i+1:]...)
			break
		}
	}
	if err := old.Close(c.ctx); err != nil {
		t.Fatal(err)
	}
	again, err := c.store.RegisterBroker(c.ctx, info(3, "c"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	regs = append(regs, again)
	c.runController(leader.reg, ControllerOptions{})
	st := c.waitFor("the restarted follower out of the ISR", func(st *ClusterState) bool {
		return slices.Equal(part(st, tp).ISR, []int32{1, 2})
	})
	if ps := part(st, tp); ps.Leader != 1 || ps.LeaderEpoch != before.LeaderEpoch {
		t.Fatalf("leader %d epoch %d, want the leader kept: %+v", ps.Leader, ps.LeaderEpoch, ps)
	}
}
