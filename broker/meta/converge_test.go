package meta

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestDiff(t *testing.T) {
	idA, idB := TopicID{1}, TopicID{2}
	state := func(topics map[string]TopicID, parts map[TopicPartition]PartitionState) *ClusterState {
		k, _ := newKeys("c")
		b := newStateBuilder(k)
		for name, id := range topics {
			b.apply(logr.Discard(), &mvccpb.KeyValue{Key: []byte(k.topic(name)), Value: []byte(encode(TopicInfo{ID: id, Partitions: 2}))}, false)
		}
		for tp, st := range parts {
			b.apply(logr.Discard(), &mvccpb.KeyValue{Key: []byte(k.partition(tp)), Value: []byte(encode(st))}, false)
		}
		return b.snapshot()
	}
	tp0, tp1 := TopicPartition{"a", 0}, TopicPartition{"a", 1}
	r := []int32{1, 2, 3}
	base := state(map[string]TopicID{"a": idA}, map[TopicPartition]PartitionState{
		tp0: ps(r, 1, 0, r, 0),
		tp1: ps([]int32{2, 3, 4}, 2, 0, []int32{2, 3, 4}, 0),
	})
	tests := []struct {
		name string
		prev *ClusterState
		next *ClusterState
		want string
	}{
		{"from nothing", nil, base, "[BecomeLeader a-0 e0]"},
		{"no change", base, base, "[]"},
		{"ISR shrink only", base, state(map[string]TopicID{"a": idA}, map[TopicPartition]PartitionState{
			tp0: ps(r, 1, 0, []int32{1, 2}, 1), tp1: part(base, tp1),
		}), "[UpdateState a-0 e0]"},
		{"loses leadership", base, state(map[string]TopicID{"a": idA}, map[TopicPartition]PartitionState{
			tp0: ps(r, 2, 1, []int32{2, 3}, 1), tp1: part(base, tp1),
		}), "[BecomeFollower a-0 e1]"},
		{"offline", base, state(map[string]TopicID{"a": idA}, map[TopicPartition]PartitionState{
			tp0: ps(r, NoLeader, 1, []int32{1}, 1), tp1: part(base, tp1),
		}), "[BecomeFollower a-0 e1]"},
		{"reassigned onto broker 1", base, state(map[string]TopicID{"a": idA}, map[TopicPartition]PartitionState{
			tp0: part(base, tp0), tp1: reassigning(ps([]int32{2, 3, 1, 4}, 2, 0, []int32{2, 3, 4}, 1), []int32{1}, []int32{4}),
		}), "[BecomeFollower a-1 e0]"},
		{"reassigned away", base, state(map[string]TopicID{"a": idA}, map[TopicPartition]PartitionState{
			tp0: ps([]int32{4, 2, 3}, 2, 1, []int32{2, 3, 4}, 2), tp1: part(base, tp1),
		}), "[StopReplica a-0 e0]"},
		{"topic deleted", base, state(nil, map[TopicPartition]PartitionState{}), "[DeletePartition a-0 e0]"},
		{"topic recreated", base, state(map[string]TopicID{"a": idB}, map[TopicPartition]PartitionState{
			tp0: ps([]int32{3, 1}, 3, 0, []int32{3, 1}, 0),
		}), "[DeletePartition a-0 e0 BecomeFollower a-0 e0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range Diff(tt.prev, tt.next, 1) {
				got = append(got, fmt.Sprintf("%s %s e%d", c.Kind, c.Partition, c.State.LeaderEpoch))
			}
			if s := fmt.Sprintf("%v", got); s != tt.want && !(len(got) == 0 && tt.want == "[]") {
				t.Fatalf("got %s, want %s", s, tt.want)
			}
		})
	}
}
