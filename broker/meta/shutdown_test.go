package meta

import (
	"errors"
	"slices"
	"testing"
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
