package protocol_test

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn sends kmsg requests at exactly the version set on them, so that
// every served version of the group APIs goes over the wire (clients such
// as librdkafka still use JoinGroup v0).
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func newRawConn(t *testing.T, addr string) *rawConn { return &rawConn{t: t, c: dial(t, addr)} }

func (r *rawConn) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(rawFrame(req, r.corr)); err != nil {
		r.t.Fatalf("write %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	corr, rest := readResponse(r.t, r.c)
	if corr != r.corr {
		r.t.Fatalf("correlation id %d, want %d", corr, r.corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		rest = rest[1:] // empty header tag section
	}
	if err := resp.ReadFrom(rest); err != nil {
		r.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func TestFindCoordinatorVersions(t *testing.T) {
	b := startGroupBroker(t)
	host, portStr, _ := net.SplitHostPort(b.Addr())
	port, _ := strconv.Atoi(portStr)
	c := newRawConn(t, b.Addr())
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		if v >= 4 {
			req.CoordinatorKeys = []string{"g1", "g2"}
		} else {
			req.CoordinatorKey = "g1"
		}
		resp := c.do(req).(*kmsg.FindCoordinatorResponse)
		if v >= 4 {
			if len(resp.Coordinators) != 2 {
				t.Fatalf("v%d: %d coordinators", v, len(resp.Coordinators))
			}
			for _, co := range resp.Coordinators {
				if co.ErrorCode != 0 || co.NodeID != 0 || co.Host != host || co.Port != int32(port) {
					t.Fatalf("v%d: coordinator %+v", v, co)
				}
			}
			continue
		}
		if resp.ErrorCode != 0 || resp.NodeID != 0 || resp.Host != host || resp.Port != int32(port) {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	share := kmsg.NewPtrFindCoordinatorRequest()
	share.Version, share.CoordinatorType, share.CoordinatorKeys = 5, 2, []string{"g"}
	if resp := c.do(share).(*kmsg.FindCoordinatorResponse); resp.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("share group key type: %+v", resp.Coordinators[0])
	}
}

// TestGroupAPIVersionsOverTheWire runs join → sync → heartbeat → commit →
// fetch → leave → describe → list → delete at every served version.
func TestGroupAPIVersionsOverTheWire(t *testing.T) {
	b := startGroupBroker(t)
	createTopic(t, newAdmin(t, b.Addr()), "t", 1, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for v := int16(0); v <= 9; v++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := groupRoundAt(t, b.Addr(), v); err != nil {
				errs <- fmt.Errorf("JoinGroup v%d round: %w", v, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func groupRoundAt(t *testing.T, addr string, v int16) error {
	c := newRawConn(t, addr)
	group := fmt.Sprintf("wire-v%d", v)
	expect := func(what string, got int16, want *kerr.Error) error {
		var w int16
		if want != nil {
			w = want.Code
		}
		if got != w {
			return fmt.Errorf("%s: error code %d (%v), want %d", what, got, kerr.ErrorForCode(got), w)
		}
		return nil
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = v, group, 10000, 10000
	join.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	jr := c.do(join).(*kmsg.JoinGroupResponse)
	if v >= 4 {
		if err := expect("first join", jr.ErrorCode, kerr.MemberIDRequired); err != nil {
			return err
		}
		join.MemberID = jr.MemberID
		jr = c.do(join).(*kmsg.JoinGroupResponse)
	}
	if err := expect("join", jr.ErrorCode, nil); err != nil {
		return err
	}
	if jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 || jr.Protocol == nil || *jr.Protocol != "range" {
		return fmt.Errorf("join response %+v", jr)
	}
	if v >= 7 && (jr.ProtocolType == nil || *jr.ProtocolType != "consumer") {
		return fmt.Errorf("v%d join lacks protocol type", v)
	}
	member := jr.MemberID

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.Generation, sync.MemberID = min(v, 5), group, 1, member
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("mine")}}
	sr := c.do(sync).(*kmsg.SyncGroupResponse)
	if err := expect("sync", sr.ErrorCode, nil); err != nil {
		return err
	}
	if string(sr.MemberAssignment) != "mine" {
		return fmt.Errorf("assignment %q", sr.MemberAssignment)
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.Generation, hb.MemberID = min(v, 4), group, 1, member
	if err := expect("heartbeat", c.do(hb).(*kmsg.HeartbeatResponse).ErrorCode, nil); err != nil {
		return err
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation, commit.MemberID = v, group, 1, member
	md := "meta"
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 10 + int64(v), LeaderEpoch: -1, Timestamp: -1, Metadata: &md}}}}
	want := (*kerr.Error)(nil)
	if v == 0 {
		want = kerr.UnknownMemberID // v0 commits are "simple": not while the group has members
	}
	if err := expect("commit", c.do(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, want); err != nil {
		return err
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = v
	if v >= 8 {
		fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
	} else {
		fetch.Group = group
		fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	}
	fr := c.do(fetch).(*kmsg.OffsetFetchResponse)
	var got int64
	if v >= 8 {
		got = fr.Groups[0].Topics[0].Partitions[0].Offset
	} else {
		got = fr.Topics[0].Partitions[0].Offset
	}
	wantOffset := 10 + int64(v)
	if v == 0 {
		wantOffset = -1
	}
	if got != wantOffset {
		return fmt.Errorf("fetched offset %d, want %d", got, wantOffset)
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = min(v, 5), group
	if leave.Version >= 3 {
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
	} else {
		leave.MemberID = member
	}
	lr := c.do(leave).(*kmsg.LeaveGroupResponse)
	if err := expect("leave", lr.ErrorCode, nil); err != nil {
		return err
	}
	if leave.Version >= 3 && (len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0) {
		return fmt.Errorf("leave members %+v", lr.Members)
	}

	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Version, desc.Groups = min(v, 5), []string{group}
	dr := c.do(desc).(*kmsg.DescribeGroupsResponse)
	if dr.Groups[0].ErrorCode != 0 || dr.Groups[0].State != "Empty" || len(dr.Groups[0].Members) != 0 {
		return fmt.Errorf("describe %+v", dr.Groups[0])
	}

	list := kmsg.NewPtrListGroupsRequest()
	list.Version = min(v, 5)
	found := false
	for _, g := range c.do(list).(*kmsg.ListGroupsResponse).Groups {
		found = found || g.Group == group
	}
	if !found {
		return fmt.Errorf("ListGroups v%d misses %s", list.Version, group)
	}

	if v >= 1 { // delete the offsets, then the group
		od := kmsg.NewPtrOffsetDeleteRequest()
		od.Group = group
		od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		odr := c.do(od).(*kmsg.OffsetDeleteResponse)
		if odr.ErrorCode != 0 || odr.Topics[0].Partitions[0].ErrorCode != 0 {
			return fmt.Errorf("offset delete %+v", odr)
		}
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = min(v, 2), []string{group}
	if err := expect("delete", c.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, nil); err != nil {
		return err
	}
	return nil
}
