package replication

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestLeaderAndEpochChecks: requests to a non-leader get
// NOT_LEADER_OR_FOLLOWER, requests carrying an older / newer leader epoch
// get FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (KIP-320) in Fetch,
// ListOffsets and OffsetForLeaderEpoch, and OffsetForLeaderEpoch answers
// from the leader's epoch cache.
func TestLeaderAndEpochChecks(t *testing.T) {
	c := brokertest.StartCluster(t, zones)
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	createTopic(t, adm, "epochs", 1, nil)
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := context.Background()
	for range 5 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "epochs", Value: []byte("epoch 0")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A leader change: epoch 1 on another broker.
	first := state(t, c, "epochs", 0)
	brokerByID(c, first.Leader).Restart()
	waitFor(t, "a new leader epoch with a full ISR", 30*time.Second, func() bool {
		s := state(t, c, "epochs", 0)
		return s.LeaderEpoch > first.LeaderEpoch && s.Leader > 0 && len(s.ISR) == 3
	})
	st := state(t, c, "epochs", 0)
	for range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "epochs", Value: []byte("new epoch")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var follower int32
	for _, r := range st.Replicas {
		if r != st.Leader {
			follower = r
		}
	}

	topicID := brokerByID(c, st.Leader).Server().Broker().ClusterState().Topics["epochs"].ID
	// kgo sends the highest version both sides support; an old client
	// (Kafka 2.2: Fetch v10) checks the pre-KIP-392 behaviour.
	oldCl := newClient(t, c.Addrs(), kgo.MaxVersions(kversion.V2_2_0()))
	fetch := func(broker, epoch int32, old bool) int16 {
		req := kmsg.NewPtrFetchRequest()
		via := cl
		if old {
			via = oldCl
		}
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "epochs", topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.PartitionMaxBytes, rp.LastFetchedEpoch, rp.LogStartOffset = epoch, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, via.Broker(int(broker)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	listOffsets := func(broker, epoch int32) int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.Timestamp = epoch, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(broker)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	offsetForEpoch := func(broker, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(broker)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	e := st.LeaderEpoch
	tests := []struct {
		name string
		got  int16
		want *kerr.Error
	}{
		{"fetch, current epoch", fetch(st.Leader, e, false), nil},
		{"fetch, older epoch", fetch(st.Leader, e-1, false), kerr.FencedLeaderEpoch},
		{"fetch, newer epoch", fetch(st.Leader, e+1, false), kerr.UnknownLeaderEpoch},
		{"fetch v11 from a follower (KIP-392)", fetch(follower, e, false), nil},
		{"fetch v10 from a follower", fetch(follower, -1, true), kerr.NotLeaderForPartition},
		{"list offsets, older epoch", listOffsets(st.Leader, e-1), kerr.FencedLeaderEpoch},
		{"list offsets, newer epoch", listOffsets(st.Leader, e+1), kerr.UnknownLeaderEpoch},
		{"list offsets from a follower", listOffsets(follower, -1), kerr.NotLeaderForPartition},
		{"offset for epoch, older current epoch", offsetForEpoch(st.Leader, e-1, 0).ErrorCode, kerr.FencedLeaderEpoch},
		{"offset for epoch from a follower", offsetForEpoch(follower, e, 0).ErrorCode, kerr.NotLeaderForPartition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := int16(0)
			if tt.want != nil {
				want = tt.want.Code
			}
			if tt.got != want {
				t.Fatalf("error %v, want %v", kerr.ErrorForCode(tt.got), tt.want)
			}
		})
	}
	// The end of the first epoch is where the second began: offset 5.
	if r := offsetForEpoch(st.Leader, e, first.LeaderEpoch); r.ErrorCode != 0 || r.EndOffset != 5 || r.LeaderEpoch != first.LeaderEpoch {
		t.Fatalf("OffsetForLeaderEpoch(%d) = epoch %d end %d (%v), want epoch %d end 5", first.LeaderEpoch, r.LeaderEpoch, r.EndOffset,
			kerr.ErrorForCode(r.ErrorCode), first.LeaderEpoch)
	}
	if r := offsetForEpoch(st.Leader, e, e); r.ErrorCode != 0 || r.EndOffset != 8 {
		t.Fatalf("OffsetForLeaderEpoch(current) = end %d (%v), want the log end 8", r.EndOffset, kerr.ErrorForCode(r.ErrorCode))
	}
}
