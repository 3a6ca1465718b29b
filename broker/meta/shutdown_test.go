package meta

import (
	"errors"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestControlledShutdownMovesLeaders: a broker entering controlled
// shutdown stays registered and in its ISRs while the controller moves
// every leadership it holds that another ISR member can take; a partition
// it alone replicates stays with it (LeaderHandoff reports it). The mark
// is fenced by the registration's lease.
func TestControlledShutdownMovesLeaders(t *testing.T) {
	c := threeZones(t)
	c.createTopic(TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3})
	c.createTopic(TopicSpec{Name: "solo", Partitions: 3, ReplicationFactor: 1})
	st := c.waitFor("topics", func(st *ClusterState) bool {
		return len(st.TopicPartitions("t")) == 6 && len(st.TopicPartitions("solo")) == 3
	})
	// A broker leading partitions of both topics.
	var x int32
	for id := range int32(3) {
		if leadsIn(st, "t", id+1) > 0 && leadsIn(st, "solo", id+1) > 0 {
			x = id + 1
		}
	}
	if x == 0 {
		t.Fatal("no broker leads partitions of both topics")
	}
	soloLed := leadsIn(st, "solo", x)
	if err := c.brokers[x].reg.EnterControlledShutdown(c.ctx); err != nil {
		t.Fatal(err)
	}
	st = c.waitFor("broker's movable leaderships moved", func(st *ClusterState) bool {
		return st.Brokers[x].ShuttingDown && leadsIn(st, "t", x) == 0
	})
	for _, ps := range st.TopicPartitions("t") {
		if !slices.Contains(ps.ISR, x) {
			t.Errorf("broker %d left the ISR %v: it still replicates until it stops", x, ps.ISR)
		}
	}
	moving, staying := LeaderHandoff(st, x)
	if len(moving) != 0 || len(staying) != soloLed || leadsIn(st, "solo", x) != soloLed {
		t.Errorf("LeaderHandoff: moving %v, staying %v; want nothing moving and the %d solo partitions staying", moving, staying, soloLed)
	}
	if err := c.brokers[x].reg.Close(c.ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.brokers[x].reg.EnterControlledShutdown(c.ctx); !errors.Is(err, ErrSessionLost) {
		t.Errorf("controlled shutdown after deregistering: %v, want ErrSessionLost", err)
	}
}

func leadsIn(st *ClusterState, topic string, id int32) int {
	n := 0
	for _, ps := range st.TopicPartitions(topic) {
		if ps.Leader == id {
			n++
		}
	}
	return n
}

// TestHandoffDone: a broker in controlled shutdown waits while it leads a
// partition another ISR member can take, not for one it alone can lead,
// and not at all under a controller of a version that does not hand
// leaderships over (a rolling upgrade).
func TestHandoffDone(t *testing.T) {
	k, _ := newKeys("c")
	state := func(controllerHandsOver bool, parts ...PartitionState) *ClusterState {
		b := newStateBuilder(k)
		put := func(key string, v []byte, rev int64) {
			b.apply(logr.Discard(), &mvccpb.KeyValue{Key: []byte(key), Value: v, ModRevision: rev, CreateRevision: rev}, false)
		}
		put(k.broker(1), []byte(encode(BrokerInfo{Zone: "a", ShuttingDown: true, ControlledShutdown: true})), 1)
		put(k.broker(2), []byte(encode(BrokerInfo{Zone: "b", ControlledShutdown: controllerHandsOver})), 2)
		put(k.controller()+"/7", []byte("2"), 3)
		put(k.topic("t"), []byte(encode(TopicInfo{Partitions: int32(len(parts))})), 4)
		for i, p := range parts {
			put(k.partition(TopicPartition{"t", int32(i)}), []byte(encode(p)), 5)
		}
		return b.snapshot()
	}
	r := []int32{1, 2}
	tests := []struct {
		name  string
		st    *ClusterState
		done  bool
		older int32
	}{
		{"leads a partition another ISR member can take: wait", state(true, ps(r, 1, 1, r, 1)), false, -1},
		{"leads nothing: done", state(true, ps(r, 2, 2, r, 2)), true, -1},
		{"sole ISR member: nothing to wait for", state(true, ps(r, 1, 1, []int32{1}, 1)), true, -1},
		{"the controller does not hand over: done", state(false, ps(r, 1, 1, r, 1)), true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.st.ControllerID != 2 {
				t.Fatalf("controller %d, want 2", tt.st.ControllerID)
			}
			done, older := HandoffDone(tt.st, 1)
			if done != tt.done || older != tt.older {
				t.Fatalf("HandoffDone = %v, %d; want %v, %d", done, older, tt.done, tt.older)
			}
		})
	}
}
