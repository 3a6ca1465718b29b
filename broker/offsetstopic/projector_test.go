package offsetstopic

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/internaltopic"
	"github.com/strata-dev/strata/broker/record"
)

// fakeBroker is the topic's metadata: partitions and their leaders.
type fakeBroker struct {
	mu      sync.Mutex
	exists  bool
	parts   int32
	leaders map[int32]int32
	created []broker.TopicSpec
}

func (f *fakeBroker) NodeID() int32 { return 1 }
func (f *fakeBroker) Topic(string) (broker.TopicInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return broker.TopicInfo{Name: Topic, Partitions: f.parts}, f.exists
}
func (f *fakeBroker) PartitionView(_ string, i int32) (broker.PartitionView, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leaders[i]
	return broker.PartitionView{Leader: l}, ok
}
func (f *fakeBroker) Brokers() []broker.BrokerInfo { return make([]broker.BrokerInfo, 2) }
func (f *fakeBroker) Clustered() bool              { return true }
func (f *fakeBroker) CreateInternalTopic(_ context.Context, spec broker.TopicSpec) (broker.TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, spec)
	f.exists, f.parts = true, spec.Partitions
	f.leaders = map[int32]int32{}
	for i := range spec.Partitions {
		f.leaders[i] = 1
	}
	return broker.TopicInfo{}, nil
}
func (f *fakeBroker) lead(p, leader int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaders[p] = leader
}

// fakeLog is the topic's partitions as a compacted reader sees them: the
// latest value per key ("" for a tombstone), and the number of appends.
type fakeLog struct {
	mu     sync.Mutex
	fail   map[int32]bool
	latest map[int32]map[string]string
	writes int
}

func (l *fakeLog) produce(_ context.Context, p int32, batch []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[p] {
		return errors.New("not enough replicas")
	}
	recs, err := record.Records(batch, 1<<20)
	if err != nil {
		return err
	}
	if l.latest[p] == nil {
		l.latest[p] = map[string]string{}
	}
	for _, r := range recs {
		l.latest[p][describeKey(r.Key)] = describeValue(r.Key, r.Value)
	}
	l.writes++
	return nil
}

func (l *fakeLog) state() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for _, kv := range l.latest {
		for k, v := range kv {
			if v != "" {
				out[k] = v
			}
		}
	}
	return out
}

func describeKey(k []byte) string {
	var ok kmsg.OffsetCommitKey
	if k[1] == 2 {
		var gk kmsg.GroupMetadataKey
		_ = gk.ReadFrom(k)
		return "group " + gk.Group
	}
	_ = ok.ReadFrom(k)
	return fmt.Sprintf("%s/%s/%d", ok.Group, ok.Topic, ok.Partition)
}

func describeValue(k, v []byte) string {
	if v == nil {
		return ""
	}
	if k[1] == 2 {
		var gv kmsg.GroupMetadataValue
		_ = gv.ReadFrom(v)
		return fmt.Sprintf("generation %d", gv.Generation)
	}
	var ov kmsg.OffsetCommitValue
	_ = ov.ReadFrom(v)
	return fmt.Sprint(ov.Offset)
}

// scriptedFeed hands the projector what the test sends.
type scriptedFeed struct {
	follows chan chan feedMsg
}

func (f *scriptedFeed) Follow(ctx context.Context, snapshot func(group.StoreSnapshot), changes func([]group.StoreChange)) error {
	ch := make(chan feedMsg)
	select {
	case f.follows <- ch:
	case <-ctx.Done():
		return nil
	}
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return errors.New("watch broke")
			}
			if m.snapshot != nil {
				snapshot(*m.snapshot)
			} else {
				changes(m.changes)
			}
		case <-ctx.Done():
			return nil
		}
	}
}

func commit(g, topic string, p int32, o int64) group.StoreChange {
	return group.StoreChange{Group: g, Offset: &group.OffsetCommit{Topic: topic, Partition: p, Offset: o, LeaderEpoch: -1}}
}

func waitState(t *testing.T, l *fakeLog, what string, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !maps.Equal(l.state(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: topic holds %v, want %v", what, l.state(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProjector: the projector creates the topic once the store has a
// group, writes every change to the partitions it leads, rewrites a
// partition's whole state when it gains its leadership, stops writing one
// it lost, writes what changed while its feed was broken (tombstones
// included), and keeps records a failed append could not write.
func TestProjector(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &fakeBroker{}
	l := &fakeLog{fail: map[int32]bool{}, latest: map[int32]map[string]string{}}
	feed := &scriptedFeed{follows: make(chan chan feedMsg)}
	p := New(Config{Feed: feed, Config: internaltopic.Config{Topic: internaltopic.Spec{Partitions: 2, ReplicationFactor: 3},
		Broker: b, Produce: l.produce, Interval: 5 * time.Millisecond, Log: logr.Discard()}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Java hash codes: "hello" and "my-group" are in partition 0 of 2,
	// "Aa" in partition 0 too; find one for partition 1.
	g0, g1 := "hello", ""
	for i := 0; g1 == ""; i++ {
		if g := fmt.Sprintf("g%d", i); PartitionFor(g, 2) == 1 {
			g1 = g
		}
	}
	watch := <-feed.follows
	watch <- feedMsg{snapshot: &group.StoreSnapshot{Offsets: map[string][]group.OffsetCommit{g0: {{Topic: "t", Partition: 0, Offset: 3}}}}}
	waitState(t, l, "created and written", map[string]string{g0 + "/t/0": "3"})
	if len(b.created) != 1 || b.created[0].ReplicationFactor != 2 || *b.created[0].Configs["cleanup.policy"] != "compact" {
		t.Fatalf("created %+v; want one compacted topic with the factor capped at 2 brokers", b.created)
	}

	md := group.GroupMetadata{Generation: 2, ProtocolType: "consumer", Protocol: "range"}
	watch <- feedMsg{changes: []group.StoreChange{commit(g0, "t", 0, 4), commit(g1, "t", 1, 10), {Group: g1, Membership: &md}}}
	waitState(t, l, "changes", map[string]string{g0 + "/t/0": "4", g1 + "/t/1": "10", "group " + g1: "generation 2"})

	// Partition 1 moves away: its changes are not written here.
	b.lead(1, 2)
	time.Sleep(50 * time.Millisecond) // several leadership checks; nothing to wait for
	watch <- feedMsg{changes: []group.StoreChange{commit(g1, "t", 1, 11), commit(g0, "t", 0, 5)}}
	waitState(t, l, "partition 1 led elsewhere", map[string]string{g0 + "/t/0": "5", g1 + "/t/1": "10", "group " + g1: "generation 2"})

	// It comes back: its whole state is written again.
	b.lead(1, 1)
	waitState(t, l, "partition 1 regained", map[string]string{g0 + "/t/0": "5", g1 + "/t/1": "11", "group " + g1: "generation 2"})

	// The feed breaks; meanwhile an offset and the membership were
	// deleted and another committed: the fresh snapshot's difference is
	// written.
	close(watch)
	watch = <-feed.follows
	watch <- feedMsg{snapshot: &group.StoreSnapshot{Offsets: map[string][]group.OffsetCommit{g0: {{Topic: "t", Partition: 0, Offset: 5}, {Topic: "t", Partition: 1, Offset: 8}}}}}
	waitState(t, l, "resync", map[string]string{g0 + "/t/0": "5", g0 + "/t/1": "8"})

	// Appends to partition 0 fail for a while: the records wait.
	l.mu.Lock()
	l.fail[0] = true
	l.mu.Unlock()
	watch <- feedMsg{changes: []group.StoreChange{commit(g0, "t", 0, 6), {Group: g0, OffsetDeleted: &group.TopicPartition{Topic: "t", Partition: 1}}}}
	time.Sleep(50 * time.Millisecond)
	l.mu.Lock()
	l.fail[0] = false
	l.mu.Unlock()
	waitState(t, l, "after failed appends", map[string]string{g0 + "/t/0": "6"})
}
