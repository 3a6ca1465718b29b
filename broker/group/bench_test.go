package group

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func benchCoordinator(b *testing.B, store OffsetStore) *Coordinator {
	cfg := DefaultConfig()
	cfg.Store = store
	c, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

func commitRequest(group string, offset int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation = 8, group, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "topic"
	for p := range int32(6) {
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset = p, offset
		t.Partitions = append(t.Partitions, pp)
	}
	r.Topics = []kmsg.OffsetCommitRequestTopic{t}
	return r
}

// BenchmarkOffsetCommit measures a 6-partition commit through the
// coordinator, with the durable FileStore (one fsync per commit) and with
// the in-memory store (coordinator overhead alone), from one group and
// from many groups in parallel.
func BenchmarkOffsetCommit(b *testing.B) {
	for _, tc := range []struct {
		name     string
		store    func(b *testing.B) OffsetStore
		parallel bool
	}{
		{"memory/serial", func(*testing.B) OffsetStore { return NewMemoryStore() }, false},
		{"memory/parallel", func(*testing.B) OffsetStore { return NewMemoryStore() }, true},
		{"file/serial", fileStore, false},
		{"file/parallel", fileStore, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := benchCoordinator(b, tc.store(b))
			ctx := context.Background()
			if !tc.parallel {
				for i := 0; i < b.N; i++ {
					c.OffsetCommit(ctx, commitRequest("g", int64(i)))
				}
				return
			}
			var n atomic.Int64
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				group := fmt.Sprintf("g%d", n.Add(1))
				var i int64
				for pb.Next() {
					i++
					c.OffsetCommit(ctx, commitRequest(group, i))
				}
			})
		})
	}
}

func fileStore(b *testing.B) OffsetStore {
	s, err := OpenFileStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkHeartbeat measures a heartbeat of a stable group member.
func BenchmarkHeartbeat(b *testing.B) {
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 0
	c, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version, j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = 3, "g", 10000, 10000, "consumer"
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jr, err := c.JoinGroup(ctx, Client{ID: "bench"}, j)
	if err != nil || jr.ErrorCode != 0 {
		b.Fatalf("join: %v %v", err, jr)
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = "g", jr.MemberID, jr.Generation
	if sr, err := c.SyncGroup(ctx, s); err != nil || sr.ErrorCode != 0 {
		b.Fatalf("sync: %v %v", err, sr)
	}
	h := kmsg.NewPtrHeartbeatRequest()
	h.Version, h.Group, h.MemberID, h.Generation = 4, "g", jr.MemberID, jr.Generation
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := c.Heartbeat(ctx, h); r.ErrorCode != 0 {
			b.Fatalf("heartbeat error %d", r.ErrorCode)
		}
	}
}
