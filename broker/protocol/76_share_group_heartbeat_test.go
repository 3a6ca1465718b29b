package protocol_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (sc *shareConn) heartbeat(member string, epoch int32) *kmsg.ShareGroupHeartbeatResponse {
	sc.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = "sg", member, epoch
	if epoch == 0 {
		req.SubscribedTopicNames = []string{"sq"}
	}
	resp, err := req.RequestWith(sc.ctx, sc.cl)
	if err != nil {
		sc.t.Fatal(err)
	}
	return resp
}

// TestShareGroupAmongGroupTypes: through the broker, the classic and
// consumer group requests answer for a share group's id as Kafka's do, and
// DeleteGroups deletes the share group once its last member left, with
// its share-partition state: a share group of that id made afterwards
// starts over.
func TestShareGroupAmongGroupTypes(t *testing.T) {
	sc := startShareConn(t, 30*time.Second, 3)
	adm := kadm.NewClient(sc.cl)
	expectCode(t, "share join", sc.heartbeat("m1", 0).ErrorCode, nil)
	if got := acquired(sc.fetch(sc.fetchReq("m1", 0))); got != "0-2@1 " {
		t.Fatalf("acquired %q", got)
	}
	expectCode(t, "accept", sc.ack("m1", 1, ackBatch(0, 2, 1)).Topics[0].Partitions[0].ErrorCode, nil)

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "sg", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
	jr, err := join.RequestWith(sc.ctx, sc.cl)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "JoinGroup", jr.ErrorCode, kerr.InconsistentGroupProtocol)
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberID, cgh.RebalanceTimeoutMillis, cgh.SubscribedTopicNames = "sg", "c1", 10000, []string{"sq"}
	cgh.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	cr, err := cgh.RequestWith(sc.ctx, sc.cl)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "ConsumerGroupHeartbeat", cr.ErrorCode, kerr.GroupIDNotFound)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "sq", Partition: 0, At: 1, LeaderEpoch: -1})
	committed, err := adm.CommitOffsets(sc.ctx, "sg", os)
	if err != nil {
		t.Fatal(err)
	}
	if err := committed.Error(); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("OffsetCommit: %v, want GROUP_ID_NOT_FOUND", err)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"sg"}
	dr, err := dg.RequestWith(sc.ctx, sc.cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := dr.Groups[0]; g.State != "Dead" || (dr.Version < 6 && g.ErrorCode != 0) {
		t.Fatalf("DescribeGroups v%d: %v %s, want Dead", dr.Version, kerr.ErrorForCode(g.ErrorCode), g.State)
	}

	deleteCode := func() error {
		t.Helper()
		resp, err := adm.DeleteGroups(sc.ctx, "sg")
		if err != nil {
			t.Fatal(err)
		}
		return resp["sg"].Err
	}
	if err := deleteCode(); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("DeleteGroups with a member: %v, want NON_EMPTY_GROUP", err)
	}
	expectCode(t, "share leave", sc.heartbeat("m1", -1).ErrorCode, nil)
	if err := deleteCode(); err != nil {
		t.Fatalf("DeleteGroups of the empty share group: %v", err)
	}
	if err := deleteCode(); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("DeleteGroups again: %v, want GROUP_ID_NOT_FOUND", err)
	}
	listed, err := adm.ListGroups(sc.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["sg"]; ok {
		t.Fatalf("the deleted share group is listed: %v", listed)
	}
	offsets, err := adm.DescribeShareGroupOffsets(sc.ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	if len(offsets["sg"].Offsets) != 0 {
		t.Fatalf("the deleted share group has state: %+v", offsets["sg"].Offsets)
	}

	// A share group of that id starts over: the records come again.
	expectCode(t, "share join again", sc.heartbeat("m2", 0).ErrorCode, nil)
	if got := acquired(sc.fetch(sc.fetchReq("m2", 0))); got != "0-2@1 " {
		t.Fatalf("after the delete acquired %q, want 0-2@1", got)
	}
}
