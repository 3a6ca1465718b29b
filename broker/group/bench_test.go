package group

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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

// BenchmarkRebalance measures one full generation of a 3-member group in
// the coordinator: every member rejoins (with new metadata, so the group
// must rebalance), the leader assigns, followers sync (in-memory store; no
// network).
func BenchmarkRebalance(b *testing.B) {
	cfg := DefaultConfig()
	// Only the first generation waits: it collects the three members.
	cfg.InitialRebalanceDelay = 100 * time.Millisecond
	c, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	round := 0
	join := func(member string) *kmsg.JoinGroupRequest {
		j := kmsg.NewPtrJoinGroupRequest()
		j.Version, j.Group, j.MemberID = 3, "g", member
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = 30000, 30000, "consumer"
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, byte(round)}}}
		return j
	}
	type res struct {
		i    int
		resp *kmsg.JoinGroupResponse
	}
	rejoin := func(members []string) []*kmsg.JoinGroupResponse {
		ch := make(chan res, len(members))
		for i, id := range members {
			go func() {
				r, err := c.JoinGroup(ctx, Client{ID: "m"}, join(id))
				if err != nil || r.ErrorCode != 0 {
					b.Errorf("join: %v %v", err, r)
				}
				ch <- res{i, r}
			}()
		}
		out := make([]*kmsg.JoinGroupResponse, len(members))
		for range members {
			r := <-ch
			out[r.i] = r.resp
		}
		return out
	}
	sync := func(rs []*kmsg.JoinGroupResponse) {
		done := make(chan struct{}, len(rs))
		for _, r := range rs {
			go func() {
				s := kmsg.NewPtrSyncGroupRequest()
				s.Group, s.MemberID, s.Generation = "g", r.MemberID, r.Generation
				for _, m := range r.Members { // leader only
					s.GroupAssignment = append(s.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte{1}})
				}
				if sr, err := c.SyncGroup(ctx, s); err != nil || sr.ErrorCode != 0 {
					b.Errorf("sync: %v %v", err, sr)
				}
				done <- struct{}{}
			}()
		}
		for range rs {
			<-done
		}
	}
	rs := rejoin([]string{"", "", ""})
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.MemberID
	}
	sync(rs)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round++
		sync(rejoin(ids))
	}
}
