package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// killableDialer hands out connections that can all be cut at once, after
// which dialing fails: the client behaves like a killed process (it can
// neither heartbeat nor send LeaveGroup).
type killableDialer struct {
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

var errKilled = errors.New("client killed")

func (d *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.killed {
		return nil, errKilled
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.killed = true
	for _, c := range d.conns {
		c.Close()
	}
}

// groupMember is one kgo consumer-group member consuming in a goroutine.
type groupMember struct {
	name   string
	cl     *kgo.Client
	dialer *killableDialer
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	assigned map[int32]bool
	events   int // assignment callbacks that changed something
}

func (m *groupMember) eventCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events
}

func (m *groupMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// seenLog records every consumed (partition, offset) and by whom.
type seenLog struct {
	mu    sync.Mutex
	count map[[2]int64]int
	total int
}

func (s *seenLog) add(p int32, o int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count[[2]int64{int64(p), o}]++
	s.total++
}

func (s *seenLog) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func startMember(t *testing.T, addr, group, topic, name string, seen *seenLog, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, dialer: &killableDialer{}, done: make(chan struct{}), assigned: map[int32]bool{}}
	track := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(ps[topic]) > 0 {
				m.events++
			}
			for _, p := range ps[topic] {
				if add {
					m.assigned[p] = true
				} else {
					delete(m.assigned, p)
				}
			}
		}
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.Dialer(m.dialer.dial),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Long enough that a starved CI machine does not expire a live
		// member (which would make an eager rebalance redeliver).
		kgo.SessionTimeout(6 * time.Second),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.OnPartitionsAssigned(track(true)),
		kgo.OnPartitionsRevoked(track(false)),
		kgo.OnPartitionsLost(track(false)),
		kgo.RetryTimeout(5 * time.Second),
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

// stop ends the poll loop and closes the client (a graceful member sends
// LeaveGroup here; a killed one cannot).
func (m *groupMember) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// startGroupBroker starts a broker whose groups rebalance without the
// initial delay and accept short session timeouts.
func startGroupBroker(t *testing.T, opts ...brokertest.Option) *brokertest.Broker {
	return brokertest.Start(t, append([]brokertest.Option{
		brokertest.WithSetting("group.initial.rebalance.delay.ms", "0"),
		brokertest.WithSetting("group.min.session.timeout.ms", "100"),
	}, opts...)...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// owners reports whether the members together own every partition of the
// topic exactly once, each with want partitions.
func owners(ms []*groupMember, partitions int, want int) bool {
	all := map[int32]int{}
	for _, m := range ms {
		ps := m.partitions()
		if len(ps) != want {
			return false
		}
		for _, p := range ps {
			all[p]++
		}
	}
	if len(all) != partitions {
		return false
	}
	for _, n := range all {
		if n != 1 {
			return false
		}
	}
	return true
}

func produceEach(t *testing.T, cl *kgo.Client, topic string, partitions, perPartition int, round int) {
	t.Helper()
	var recs []*kgo.Record
	for p := range partitions {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p),
				Key: fmt.Appendf(nil, "k-%d-%d", p, i), Value: fmt.Appendf(nil, "round %d value %d", round, i)})
		}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestConsumerGroupKgo(t *testing.T) {
	for _, balancer := range []struct {
		name string
		opt  kgo.GroupBalancer
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
		{"range", kgo.RangeBalancer()},
	} {
		t.Run(balancer.name, func(t *testing.T) {
			const (
				partitions   = 6
				perPartition = 50
				group        = "cg"
				topic        = "events"
			)
			b := startGroupBroker(t)
			adm := newAdmin(t, b.Addr())
			createTopic(t, adm, topic, partitions, nil)
			producer := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			seen := &seenLog{count: map[[2]int64]int{}}

			var ms []*groupMember
			for i := range 3 {
				ms = append(ms, startMember(t, b.Addr(), group, topic, fmt.Sprintf("member-%d", i), seen, kgo.Balancers(balancer.opt)))
			}
			waitFor(t, "3 members with 2 partitions each", func() bool { return owners(ms, partitions, 2) })

			produceEach(t, producer, topic, partitions, perPartition, 1)
			waitFor(t, "first round consumed", func() bool { return seen.n() >= partitions*perPartition })
			for _, m := range ms {
				if err := m.cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
					t.Fatalf("%s commit: %v", m.name, err)
				}
			}
			checkCommitted(t, adm, group, topic, partitions, perPartition)
			described, err := adm.DescribeGroups(testCtx(t), group)
			if err != nil {
				t.Fatal(err)
			}
			if g := described[group]; g.State != "Stable" || len(g.Members) != 3 || g.Protocol != balancer.name {
				t.Fatalf("describe: state %s, %d members, protocol %s", g.State, len(g.Members), g.Protocol)
			}

			// Kill member 2: its connections die, it never sends
			// LeaveGroup; the group notices after the session timeout.
			ms[2].dialer.kill()
			waitFor(t, "survivors own all partitions", func() bool { return owners(ms[:2], partitions, 3) })
			produceEach(t, producer, topic, partitions, perPartition, 2)
			waitFor(t, "second round consumed", func() bool { return seen.n() >= 2*partitions*perPartition })

			// Member 1 leaves gracefully: member 0 takes over at once.
			// Both commit first; an eager (range) rebalance makes member 0
			// restart from the committed offsets of all its partitions.
			for _, m := range ms[:2] {
				if err := m.cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
					t.Fatalf("%s commit: %v", m.name, err)
				}
			}
			ms[1].stop()
			waitFor(t, "last member owns all partitions", func() bool { return owners(ms[:1], partitions, 6) })
			produceEach(t, producer, topic, partitions, perPartition, 3)
			waitFor(t, "third round consumed", func() bool { return seen.n() >= 3*partitions*perPartition })
			if err := ms[0].cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
				t.Fatalf("commit: %v", err)
			}
			checkCommitted(t, adm, group, topic, partitions, 3*perPartition)

			// Every record exactly once: no loss, and no duplicates
			// because every handover happened after a commit.
			seen.mu.Lock()
			defer seen.mu.Unlock()
			for p := range partitions {
				for o := range int64(3 * perPartition) {
					if n := seen.count[[2]int64{int64(p), o}]; n != 1 {
						t.Fatalf("partition %d offset %d consumed %d times", p, o, n)
					}
				}
			}
			if seen.total != 3*partitions*perPartition {
				t.Fatalf("consumed %d records, want %d", seen.total, 3*partitions*perPartition)
			}
		})
	}
}

func checkCommitted(t *testing.T, adm *kadm.Client, group, topic string, partitions, want int) {
	t.Helper()
	offsets, err := adm.FetchOffsets(testCtx(t), group)
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	for p := range partitions {
		o, ok := offsets.Lookup(topic, int32(p))
		if !ok || o.Err != nil || o.At != int64(want) {
			t.Fatalf("committed offset of %s-%d = %+v (found %v), want %d", topic, p, o, ok, want)
		}
	}
}

// TestStaticMemberRestartKgo restarts a static member (KIP-345) within its
// session timeout: it gets its partitions back and the other member sees
// no rebalance at all.
func TestStaticMemberRestartKgo(t *testing.T) {
	const partitions = 4
	b := startGroupBroker(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "static", partitions, nil)
	seen := &seenLog{count: map[[2]int64]int{}}
	// a joins alone first and so leads the group. The restarted member
	// is the follower b: a restarted static *leader* running kgo's
	// cooperative balancer recomputes the plan and rejoins by itself
	// when it differs from the stored one (kgo's KIP-814 handling), which
	// is a client-side rebalance this test does not want.
	a := startMember(t, b.Addr(), "sg", "static", "a", seen, kgo.InstanceID("instance-a"), kgo.SessionTimeout(20*time.Second))
	waitFor(t, "a owns every partition", func() bool { return owners([]*groupMember{a}, partitions, partitions) })
	m := startMember(t, b.Addr(), "sg", "static", "b", seen, kgo.InstanceID("instance-b"), kgo.SessionTimeout(20*time.Second))
	waitFor(t, "two static members with 2 partitions each", func() bool { return owners([]*groupMember{a, m}, partitions, 2) })
	before := m.partitions()
	aEvents := a.eventCount()
	_, genBefore := a.cl.GroupMetadata()

	// A static member does not send LeaveGroup on close: the group keeps
	// its place until the session timeout.
	m.stop()
	described, err := adm.DescribeGroups(testCtx(t), "sg")
	if err != nil {
		t.Fatal(err)
	}
	if g := described["sg"]; g.State != "Stable" || len(g.Members) != 2 {
		t.Fatalf("after static close: state %s with %d members", g.State, len(g.Members))
	}
	m2 := startMember(t, b.Addr(), "sg", "static", "b-restarted", seen, kgo.InstanceID("instance-b"), kgo.SessionTimeout(20*time.Second))
	waitFor(t, "restarted member owns its partitions again", func() bool { return len(m2.partitions()) == 2 })
	if after := m2.partitions(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("restarted static member got %v, had %v", after, before)
	}
	if n := a.eventCount(); n != aEvents {
		t.Fatalf("the other member saw %d assignment changes during the static restart", n-aEvents)
	}
	if _, gen := a.cl.GroupMetadata(); gen != genBefore {
		t.Fatalf("generation moved from %d to %d: the static restart rebalanced", genBefore, gen)
	}
	if _, gen := m2.cl.GroupMetadata(); gen != genBefore {
		t.Fatalf("restarted member is in generation %d, want %d", gen, genBefore)
	}
	described, err = adm.DescribeGroups(testCtx(t), "sg")
	if err != nil {
		t.Fatal(err)
	}
	g := described["sg"]
	if g.State != "Stable" || len(g.Members) != 2 {
		t.Fatalf("after restart: state %s with %d members", g.State, len(g.Members))
	}
	for _, mem := range g.Members {
		if mem.InstanceID == nil {
			t.Fatalf("member %s without instance id", mem.MemberID)
		}
	}
}

// TestConsumerGroupSurvivesBrokerRestart restarts the broker under a live
// kgo group. Committed offsets and the group's membership (generation,
// member ids, assignments) come back from disk, so the members carry on
// without rejoining: nothing is lost and nothing redelivered.
func TestConsumerGroupSurvivesBrokerRestart(t *testing.T) {
	const (
		partitions   = 4
		perPartition = 25
	)
	b := startGroupBroker(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "restart", partitions, nil)
	producer := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	seen := &seenLog{count: map[[2]int64]int{}}
	ms := []*groupMember{
		startMember(t, b.Addr(), "rg", "restart", "m0", seen),
		startMember(t, b.Addr(), "rg", "restart", "m1", seen),
	}
	waitFor(t, "two members with 2 partitions each", func() bool { return owners(ms, partitions, 2) })
	produceEach(t, producer, "restart", partitions, perPartition, 1)
	waitFor(t, "first round consumed", func() bool { return seen.n() >= partitions*perPartition })
	for _, m := range ms {
		if err := m.cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
			t.Fatalf("%s commit: %v", m.name, err)
		}
	}

	_, genBefore := ms[0].cl.GroupMetadata()
	b.Restart()
	produceEach(t, producer, "restart", partitions, perPartition, 2)
	waitFor(t, "group re-formed and second round committed", func() bool {
		for _, m := range ms {
			// Retried: the first attempt may meet the broker still
			// restarting.
			_ = m.cl.CommitUncommittedOffsets(testCtx(t))
		}
		offsets, err := adm.FetchOffsets(testCtx(t), "rg")
		if err != nil {
			return false
		}
		for p := range int32(partitions) {
			if o, ok := offsets.Lookup("restart", p); !ok || o.At != 2*perPartition {
				return false
			}
		}
		return owners(ms, partitions, 2)
	})
	seen.mu.Lock()
	defer seen.mu.Unlock()
	for p := range partitions {
		for o := range int64(2 * perPartition) {
			if n := seen.count[[2]int64{int64(p), o}]; n != 1 {
				t.Fatalf("partition %d offset %d consumed %d times", p, o, n)
			}
		}
	}
	for _, m := range ms {
		if _, gen := m.cl.GroupMetadata(); gen != genBefore {
			t.Fatalf("%s moved from generation %d to %d: the restart made the group rebalance", m.name, genBefore, gen)
		}
	}
}
