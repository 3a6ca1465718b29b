package meta

import (
	"testing"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Published snapshots are immutable although they share unchanged topics'
// partition lists with later ones; records beyond a topic's partition count
// or without a topic are hidden; bad records are skipped.
func TestStateBuilderSnapshots(t *testing.T) {
	k, _ := newKeys("c")
	b := newStateBuilder(k)
	put := func(key string, v any, rev int64) {
		b.apply(logr.Discard(), &mvccpb.KeyValue{Key: []byte(key), Value: []byte(encode(v)), ModRevision: rev, CreateRevision: rev}, false)
	}
	del := func(key string) { b.apply(logr.Discard(), &mvccpb.KeyValue{Key: []byte(key)}, true) }
	a0, a1, a2, b0 := TopicPartition{"a", 0}, TopicPartition{"a", 1}, TopicPartition{"a", 2}, TopicPartition{"b", 0}
	put(k.topic("a"), TopicInfo{Partitions: 2}, 1)
	put(k.topic("b"), TopicInfo{Partitions: 1}, 1)
	put(k.partition(a0), ps([]int32{1}, 1, 0, []int32{1}, 0), 2)
	put(k.partition(a1), ps([]int32{2}, 2, 0, []int32{2}, 0), 2)
	put(k.partition(a2), ps([]int32{3}, 3, 0, []int32{3}, 0), 2) // beyond the count: hidden
	put(k.partition(b0), ps([]int32{1}, 1, 0, []int32{1}, 0), 2)
	put(k.partition(TopicPartition{"orphan", 0}), ps([]int32{1}, 1, 0, []int32{1}, 0), 2)
	b.apply(logr.Discard(), &mvccpb.KeyValue{Key: []byte(k.partition(TopicPartition{"b", 5})), Value: []byte("{not json")}, false)
	put(k.broker(1), BrokerInfo{Zone: "z"}, 3)
	s1 := b.snapshot()
	if s1.NumPartitions() != 3 || len(s1.SortedPartitions()) != 3 {
		t.Fatalf("s1 shows %v, want a-0 a-1 b-0", s1.SortedPartitions())
	}
	if _, ok := s1.Partition(a2); ok {
		t.Error("a-2 beyond the partition count is visible")
	}
	if got := s1.Brokers[1]; got.ID != 1 || got.Epoch != 3 {
		t.Errorf("broker 1: %+v, want ID from key and epoch 3", got)
	}

	put(k.partition(a0), ps([]int32{1}, 1, 1, []int32{1}, 1), 4)
	put(k.topic("a"), TopicInfo{Partitions: 3}, 4) // a-2 becomes visible
	del(k.partition(b0))
	s2 := b.snapshot()
	if p, _ := s1.Partition(a0); p.LeaderEpoch != 0 {
		t.Errorf("s1 changed after a later snapshot: a-0 %+v", p)
	}
	if _, ok := s1.Partition(b0); !ok {
		t.Error("s1 lost b-0 after a later delete")
	}
	if p, _ := s2.Partition(a0); p.LeaderEpoch != 1 {
		t.Errorf("s2 a-0 %+v, want leader epoch 1", p)
	}
	if _, ok := s2.Partition(a2); !ok || s2.NumPartitions() != 3 {
		t.Errorf("s2: a-2 visible %v, %d partitions; want true and 3 (a-0..2)", ok, s2.NumPartitions())
	}
	if _, rev, _ := s2.partition(a1); rev != 2 {
		t.Errorf("a-1 revision %d, want 2", rev)
	}
	del(k.topic("a"))
	s3 := b.snapshot()
	if len(s3.TopicPartitions("a")) != 0 || len(s2.TopicPartitions("a")) != 3 {
		t.Errorf("after deleting topic a: s3 %v s2 %v", s3.TopicPartitions("a"), s2.TopicPartitions("a"))
	}
}
