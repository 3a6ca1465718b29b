package protocol_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupOffsetsAdmin: DescribeShareGroupOffsets shows the SPSO and
// lag; AlterShareGroupOffsets moves the SPSO of an empty share group
// (NON_EMPTY_GROUP while it has members) and DeleteShareGroupOffsets drops
// the state, so the partition starts again per share.auto.offset.reset.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	sc := startShareConn(t, 30*time.Second, 5)
	broker := sc.cl.Broker(0)
	describe := func() (int64, int64) {
		t.Helper()
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Version = 1
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "sg", Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "sq", Partitions: []int32{0}}}}}
		resp, err := req.RequestWith(sc.ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		g := resp.Groups[0]
		expectCode(t, "describe", g.ErrorCode, nil)
		p := g.Topics[0].Partitions[0]
		expectCode(t, "describe partition", p.ErrorCode, nil)
		return p.StartOffset, p.Lag
	}
	alter := func(start int64) int16 {
		t.Helper()
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = "sg"
		req.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "sq", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: start}}}}
		resp, err := req.RequestWith(sc.ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	heartbeat := func(epoch int32) {
		t.Helper()
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "sg", "member-1", epoch, []string{"sq"}
		resp, err := req.RequestWith(sc.ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		expectCode(t, "heartbeat", resp.ErrorCode, nil)
	}

	if start, _ := describe(); start != -1 {
		t.Fatalf("SPSO before any fetch: %d, want -1", start)
	}
	if got := acquired(sc.fetch(sc.fetchReq("m1", 0))); got != "0-4@1 " {
		t.Fatalf("acquired %q", got)
	}
	a := sc.ack("m1", 1, ackBatch(0, 1, 1))
	expectCode(t, "accept", a.Topics[0].Partitions[0].ErrorCode, nil)
	if start, lag := describe(); start != 2 || lag != 3 {
		t.Fatalf("after accepting 0-1: SPSO %d lag %d, want 2 and 3", start, lag)
	}

	heartbeat(0)
	expectCode(t, "alter with a member", alter(0), kerr.NonEmptyGroup)
	heartbeat(-1)
	expectCode(t, "alter to a negative offset", alter(-5), kerr.InvalidRequest)
	expectCode(t, "alter", alter(1), nil)
	if start, lag := describe(); start != 1 || lag != 4 {
		t.Fatalf("after altering to 1: SPSO %d lag %d, want 1 and 4", start, lag)
	}
	if got := acquired(sc.fetch(sc.fetchReq("m2", 0))); got != "1-4@1 " {
		t.Fatalf("after altering to 1 acquired %q, want 1-4@1", got)
	}

	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "sg"
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "sq"}, {Topic: "nope"}}
	resp, err := del.RequestWith(sc.ctx, broker)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "delete", resp.ErrorCode, nil)
	expectCode(t, "delete sq", resp.Topics[0].ErrorCode, nil)
	expectCode(t, "delete an unknown topic", resp.Topics[1].ErrorCode, kerr.UnknownTopicOrPartition)
	if start, _ := describe(); start != -1 {
		t.Fatalf("SPSO after delete: %d, want -1", start)
	}
	if got := acquired(sc.fetch(sc.fetchReq("m3", 0))); got != "0-4@1 " {
		t.Fatalf("after delete acquired %q, want 0-4@1 (earliest)", got)
	}
}
