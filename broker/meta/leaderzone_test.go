package meta

import (
	"context"
	"slices"
	"testing"

	"github.com/strata-dev/strata/broker/placement"
)

// TestPinLeaderZone: the controller's leader-zone step writes a reorder as
// a new replica list (partition epoch +1, leader and ISR untouched, the
// election follows) and a missing zone as a reassignment; a partition
// already led from its zone is left alone.
func TestPinLeaderZone(t *testing.T) {
	st := &ClusterState{Brokers: map[int32]BrokerInfo{
		1: {ID: 1, Zone: "a", Epoch: 10}, 2: {ID: 2, Zone: "b", Epoch: 20}, 3: {ID: 3, Zone: "c", Epoch: 30},
	}}
	noLoad := func() map[int32]placement.Load { return nil }
	tp := TopicPartition{"t", 0}

	cur := PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}, PartitionEpoch: 7}
	next, changed := pinLeaderZone(context.Background(), tp, cur, st, "b", noLoad)
	if !changed || !slices.Equal(next.Replicas, []int32{2, 1, 3}) || next.PartitionEpoch != 8 ||
		next.Leader != 1 || next.LeaderEpoch != 4 || !slices.Equal(next.ISR, cur.ISR) || next.Reassigning() {
		t.Fatalf("reorder: %+v changed=%v", next, changed)
	}
	if !slices.Equal(cur.Replicas, []int32{1, 2, 3}) {
		t.Fatalf("input modified: %v", cur.Replicas)
	}
	elected, err := electPreferred(next, st.Brokers)
	if err != nil || elected.Leader != 2 || elected.LeaderEpoch != 5 {
		t.Fatalf("preferred election after the reorder: %+v %v", elected, err)
	}

	if _, changed := pinLeaderZone(context.Background(), tp, cur, st, "a", noLoad); changed {
		t.Fatal("a partition led from its zone changed")
	}

	rf2 := PartitionState{Replicas: []int32{1, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 3}, PartitionEpoch: 2}
	next, changed = pinLeaderZone(context.Background(), tp, rf2, st, "b", noLoad)
	if !changed || !next.Reassigning() || !slices.Equal(next.AddingReplicas, []int32{2}) || !slices.Equal(next.RemovingReplicas, []int32{3}) ||
		!slices.Equal(next.Replicas, []int32{2, 1, 3}) || next.Leader != 1 {
		t.Fatalf("reassignment into zone b: %+v changed=%v", next, changed)
	}
}
