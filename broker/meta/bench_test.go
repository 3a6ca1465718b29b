package meta

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/go-logr/logr"
)

// BenchmarkSnapshotPublish measures what the watcher pays per etcd revision
// to publish an immutable ClusterState, by cluster size (topics of 100
// partitions), when one partition changed.
func BenchmarkSnapshotPublish(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			k, _ := newKeys("bench")
			sb := newStateBuilder(k)
			topics := n / 100
			for t := range topics {
				name := fmt.Sprintf("t%d", t)
				sb.apply(logr.Discard(), &mvccpb.KeyValue{Key: []byte(k.topic(name)), Value: []byte(encode(TopicInfo{Name: name, Partitions: 100}))}, false)
				for p := range int32(100) {
					st := PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 2, 3}}
					sb.apply(logr.Discard(), &mvccpb.KeyValue{Key: []byte(k.partition(TopicPartition{name, p})), Value: []byte(encode(st)), ModRevision: 1}, false)
				}
			}
			changed := &mvccpb.KeyValue{Key: []byte(k.partition(TopicPartition{"t0", 7})),
				Value: []byte(encode(PartitionState{Replicas: []int32{1, 2, 3}, Leader: 2, ISR: []int32{2, 3}})), ModRevision: 2}
			b.ReportAllocs()
			for b.Loop() {
				sb.apply(logr.Discard(), changed, false)
				_ = sb.snapshot()
			}
		})
	}
}

// BenchmarkAlterPartition measures the leader's ISR compare-and-swap against
// a real embedded etcd (one member, fsync on: the cost is mostly etcd's
// commit).
func BenchmarkAlterPartition(b *testing.B) {
	c := newBenchCluster(b)
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 1, Zone: "a"}, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close(c.ctx)
	if _, err := c.store.CreateTopic(c.ctx, TopicSpec{Name: "b", Partitions: 1, ReplicationFactor: 1}); err != nil {
		b.Fatal(err)
	}
	tp := TopicPartition{"b", 0}
	cur, err := c.store.PartitionState(c.ctx, tp)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if cur, err = c.store.AlterPartition(c.ctx, tp, cur, cur); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBrokerLossReaction measures, per broker loss, the time from the
// lease revocation to a snapshot where every partition of the dead broker
// has a new leader and no ISR names it (3 brokers, RF 3, one topic; the dead
// broker leads a third of the partitions and follows the rest).
func BenchmarkBrokerLossReaction(b *testing.B) {
	for _, partitions := range []int{300, 3000} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c := newBenchCluster(b)
				regs := map[int32]*Registration{}
				for id := int32(1); id <= 3; id++ {
					reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: id, Zone: string(rune('a' + id - 1))}, 10*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					regs[id] = reg
				}
				ctx, cancel := context.WithCancel(c.ctx)
				ctrlDone := make(chan error, 1)
				go func() { ctrlDone <- c.store.NewController(regs[3], ControllerOptions{}).Run(ctx) }()
				if _, err := c.store.CreateTopic(c.ctx, TopicSpec{Name: "t", Partitions: int32(partitions), ReplicationFactor: 3}); err != nil {
					b.Fatal(err)
				}
				watch := c.store.Watch(ctx)
				for st := range watch {
					if st.ControllerID == 3 && st.NumPartitions() == partitions {
						break
					}
				}
				b.StartTimer()
				if _, err := c.store.client.Revoke(c.ctx, regs[1].Lease()); err != nil {
					b.Fatal(err)
				}
				for st := range watch {
					done := !st.Live(1)
					for _, p := range st.TopicPartitions("t") {
						if p.Leader == 1 || slices.Contains(p.ISR, 1) {
							done = false
							break
						}
					}
					if done {
						break
					}
				}
				b.StopTimer()
				cancel()
				<-ctrlDone
				for range watch {
				}
				for _, r := range regs {
					_ = r.session.Close()
				}
			}
		})
	}
}
