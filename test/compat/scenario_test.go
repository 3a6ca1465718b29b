package compat

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

const (
	partitions = 4
	perRound   = 5000
	topic      = "compat"
	group      = "compat-group"
)

// record is one keyed record of the scenario.
type record struct{ key, value string }

func roundRecords(round int) []record {
	out := make([]record, perRound)
	for i := range out {
		n := round*perRound + i
		out[i] = record{fmt.Sprintf("key-%05d", n), fmt.Sprintf("value-%05d", n)}
	}
	return out
}

// consumed is one record a member delivered.
type consumed struct {
	member    string
	partition int32
	offset    int64
	key       string
}

// client is one Kafka client library or tool under test.
type client interface {
	// version describes the client build that ran.
	version(t *testing.T) string
	// produce writes recs with acks=all, stated explicitly (client
	// defaults differ: kafka-go's Writer acks=0, Sarama and kafka-python
	// acks=1), and the client's defaults otherwise; it returns once every
	// record is acknowledged.
	produce(t *testing.T, addr string, recs []record)
	// startMember starts a group member with client id name that reports
	// every record it consumes to out; stop commits, leaves the group and
	// returns.
	startMember(t *testing.T, addr, name string, out chan<- consumed) member
}

// member is a running group member; stop is idempotent and is also
// registered as a test cleanup by startMember.
type member interface{ stop(t *testing.T) }

// tally collects what the members consumed.
type tally struct {
	mu     sync.Mutex
	byPos  map[[2]int64]int
	keys   map[string]bool
	total  int
	offKey map[[2]int64]string
	member map[string]int
}

func (ta *tally) run(ch <-chan consumed, done chan<- struct{}) {
	for c := range ch {
		ta.mu.Lock()
		pos := [2]int64{int64(c.partition), c.offset}
		ta.byPos[pos]++
		ta.offKey[pos] = c.key
		ta.keys[c.key] = true
		ta.member[c.member]++
		ta.total++
		ta.mu.Unlock()
	}
	close(done)
}

func (ta *tally) distinctKeys() int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return len(ta.keys)
}

func waitUntil(t *testing.T, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(limit)
	for {
		ok, state := cond()
		if ok {
			t.Logf("%s after %v", what, time.Since(start).Round(10*time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%s)", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func runScenario(t *testing.T, c client) { runScenarioWith(t, c, false) }

// runScenarioWith runs the scenario; with restartBroker the broker is
// restarted (same data directory and port) instead of member b: the group
// must come back with its membership and carry on without redelivery.
func runScenarioWith(t *testing.T, c client, restartBroker bool) {
	t.Logf("client: %s", c.version(t))
	b := brokertest.Start(t, brokertest.WithSetting("group.initial.rebalance.delay.ms", "0"))
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("create topic: %v %v", err, resp[topic].Err)
	}

	ch := make(chan consumed, 1024)
	ta := &tally{byPos: map[[2]int64]int{}, keys: map[string]bool{}, offKey: map[[2]int64]string{}, member: map[string]int{}}
	tallied := make(chan struct{})
	go ta.run(ch, tallied)
	var closeOnce sync.Once
	finishTally := func() {
		closeOnce.Do(func() { close(ch) })
		<-tallied
	}
	// Registered before any member: runs after the members' own
	// cleanups, once nothing sends any more.
	t.Cleanup(finishTally)

	// committedAtEnd reports whether the group's commits reached the end
	// of every partition.
	committedAtEnd := func() (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		var state []string
		ok := true
		ends.Each(func(e kadm.ListedOffset) {
			o, found := offs.Lookup(e.Topic, e.Partition)
			state = append(state, fmt.Sprintf("p%d %d/%d", e.Partition, o.At, e.Offset))
			if !found || o.Err != nil || o.At != e.Offset {
				ok = false
			}
		})
		sort.Strings(state)
		return ok, fmt.Sprint(state)
	}
	consumedAll := func(n int) func() (bool, string) {
		return func() (bool, string) {
			got := ta.distinctKeys()
			return got >= n, fmt.Sprintf("%d of %d keys", got, n)
		}
	}

	produce := func(round int) {
		start := time.Now()
		c.produce(t, b.Addr(), roundRecords(round))
		t.Logf("produced %d records in %v", perRound, time.Since(start).Round(10*time.Millisecond))
	}
	// stable: the group is Stable with exactly the named members (by
	// client id), each assigned partitions.
	stable := func(names ...string) func() (bool, string) {
		return func() (bool, string) {
			ds, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return false, err.Error()
			}
			g := ds[group]
			assigned := 0
			var clients []string
			for _, mem := range g.Members {
				clients = append(clients, mem.ClientID)
				if ca, ok := mem.Assigned.AsConsumer(); ok && len(ca.Topics) > 0 {
					assigned++
				}
			}
			sort.Strings(clients)
			return g.State == "Stable" && fmt.Sprint(clients) == fmt.Sprint(names) && assigned == len(names),
				fmt.Sprintf("state %s, members %v, %d assigned", g.State, clients, assigned)
		}
	}

	a := c.startMember(t, b.Addr(), "member-a", ch)
	m := c.startMember(t, b.Addr(), "member-b", ch)
	waitUntil(t, "group stable with two assigned members", 3*time.Minute, stable("member-a", "member-b"))
	produce(0)
	waitUntil(t, "first half consumed", 3*time.Minute, consumedAll(perRound))
	waitUntil(t, "first half committed", 2*time.Minute, committedAtEnd)

	members := []string{"member-a", "member-b", "member-b2"}
	if restartBroker {
		b.Restart()
		members = members[:2]
	} else {
		// Restart member b: graceful close, a new instance joins.
		m.stop(t)
		m = c.startMember(t, b.Addr(), "member-b2", ch)
	}
	waitUntil(t, "group stable again after the restart", 3*time.Minute, stable(members[0], members[len(members)-1]))

	produce(1)
	waitUntil(t, "second half consumed", 3*time.Minute, consumedAll(2*perRound))
	waitUntil(t, "second half committed", 2*time.Minute, committedAtEnd)
	a.stop(t)
	m.stop(t)
	finishTally()

	// No loss, no duplicates, offsets and keys consistent.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(e kadm.ListedOffset) {
		total += e.Offset
		for o := int64(0); o < e.Offset; o++ {
			if n := ta.byPos[[2]int64{int64(e.Partition), o}]; n != 1 {
				t.Errorf("partition %d offset %d consumed %d times", e.Partition, o, n)
			}
		}
	})
	if total != 2*perRound {
		t.Fatalf("topic holds %d records, want %d", total, 2*perRound)
	}
	if len(ta.keys) != 2*perRound || ta.total != 2*perRound {
		t.Fatalf("consumed %d records with %d distinct keys, want %d", ta.total, len(ta.keys), 2*perRound)
	}
	if ok, state := committedAtEnd(); !ok {
		t.Fatalf("final committed offsets: %s", state)
	}
	for _, name := range members {
		if ta.member[name] == 0 {
			t.Errorf("%s consumed nothing (per member: %v)", name, ta.member)
		}
	}
	t.Logf("per member: %v", ta.member)
	t.Logf("consumed %d records exactly once; committed offsets at the end of all %d partitions", ta.total, partitions)
}
