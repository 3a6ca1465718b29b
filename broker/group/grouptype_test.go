package group

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupTypesShareOneID: the requests of classic and consumer groups
// answer for a share group's id as Kafka's GroupMetadataManager does (and
// create no group of their type), and the share-group requests answer
// GROUP_ID_NOT_FOUND for a classic or consumer group's id.
func TestGroupTypesShareOneID(t *testing.T) {
	ctx := context.Background()
	h, _, s := newShareHarness(t, ShareConfig{})
	wantCode(t, "share join", shareHB(s, "sg", "a", 0, "t").ErrorCode, nil)
	wantCode(t, "share join", shareHB(s, "sg-empty", "a", 0, "t").ErrorCode, nil)
	wantCode(t, "share leave", shareHB(s, "sg-empty", "a", -1).ErrorCode, nil)
	wantCode(t, "classic commit", h.commit(2, "classic", "", "", -1, "t", 0, 5), nil)
	h.member("consumer", "m1", "t").join()

	joinCode := func(id, member string) int16 {
		resp := h.join(joinReq(9, id, member, ""))
		if resp.MemberID != "" { // as Kafka, whatever the request's
			t.Errorf("%s: JoinGroup member id %q, want none", id, resp.MemberID)
		}
		return resp.ErrorCode
	}
	txnCommit := func(id string) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.Group, req.ProducerID, req.Generation = 3, id, 7, -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
		return h.c.TxnOffsetCommit(ctx, req).Topics[0].Partitions[0].ErrorCode
	}
	offsetDelete := func(id string) int16 {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = id
		req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return h.c.OffsetDelete(ctx, req).ErrorCode
	}
	describe := func(v int16, id string) (int16, string) {
		g := h.c.DescribeGroups(ctx, &kmsg.DescribeGroupsRequest{Version: v, Groups: []string{id}}).Groups[0]
		return g.ErrorCode, g.State
	}
	leave := func(id string) int16 {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group = 3, id
		req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "a"}}
		resp := h.c.LeaveGroup(ctx, req)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Members[0].ErrorCode
	}
	syncCode := func(id string) int16 {
		out := recv(t, h.syncAsync(ctx, syncReq(3, id, "a", "", 1, nil)))
		if out.err != nil {
			t.Fatal(out.err)
		}
		return out.resp.ErrorCode
	}
	consumerDescribe := func(id string) int16 {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{id}
		return h.c.ConsumerGroupDescribe(ctx, req).Groups[0].ErrorCode
	}
	shareDescribe := func(id string) int16 {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.Version, req.GroupIDs = 1, []string{id}
		return s.ShareGroupDescribe(ctx, req).Groups[0].ErrorCode
	}

	for _, id := range []string{"sg", "sg-empty"} {
		t.Run(id, func(t *testing.T) {
			for _, tc := range []struct {
				what string
				got  int16
				want *kerr.Error
			}{
				{"JoinGroup, new member", joinCode(id, ""), kerr.InconsistentGroupProtocol},
				{"JoinGroup, known member", joinCode(id, "a"), kerr.InconsistentGroupProtocol},
				{"SyncGroup", syncCode(id), kerr.UnknownMemberID},
				{"Heartbeat", h.heartbeat(3, id, "a", "", 1), kerr.UnknownMemberID},
				{"LeaveGroup", leave(id), kerr.UnknownMemberID},
				{"ConsumerGroupHeartbeat join", h.member(id, "m", "t").send(h.member(id, "m", "t").request(0)).ErrorCode, kerr.GroupIDNotFound},
				{"ConsumerGroupHeartbeat", h.member(id, "a", "t").send(h.member(id, "a", "t").request(1)).ErrorCode, kerr.GroupIDNotFound},
				{"ConsumerGroupDescribe", consumerDescribe(id), kerr.GroupIDNotFound},
				{"OffsetCommit, simple", h.commit(8, id, "", "", -1, "t", 0, 5), kerr.GroupIDNotFound},
				{"OffsetCommit, member", h.commit(9, id, "a", "", 1, "t", 0, 5), kerr.GroupIDNotFound},
				{"TxnOffsetCommit", txnCommit(id), kerr.GroupIDNotFound},
				{"OffsetDelete", offsetDelete(id), kerr.GroupIDNotFound},
				{"ShareGroupDescribe", shareDescribe(id), nil},
			} {
				if tc.got != errCode(tc.want) {
					t.Errorf("%s: %s, want %s", tc.what, errName(tc.got), errName(errCode(tc.want)))
				}
			}
			if code, state := describe(5, id); code != 0 || state != "Dead" {
				t.Errorf("DescribeGroups v5: %s %s, want Dead", errName(code), state)
			}
			if code, state := describe(6, id); code != kerr.GroupIDNotFound.Code || state != "Dead" {
				t.Errorf("DescribeGroups v6: %s %s, want GROUP_ID_NOT_FOUND Dead", errName(code), state)
			}
			if code, got := h.fetch(id, "t", 0); code != 0 || got[0].offset != -1 {
				t.Errorf("OffsetFetch: %s %+v, want no offset", errName(code), got)
			}
			h.c.mu.Lock()
			_, created := h.c.groups[id]
			h.c.mu.Unlock()
			if created {
				t.Errorf("a classic group %q was created beside the share group", id)
			}
			if !s.IsShareGroup(id) {
				t.Errorf("share group %q is gone", id)
			}
		})
	}
	for _, id := range []string{"classic", "consumer"} {
		t.Run(id, func(t *testing.T) {
			wantCode(t, "ShareGroupHeartbeat join", shareHB(s, id, "b", 0, "t").ErrorCode, kerr.GroupIDNotFound)
			wantCode(t, "ShareGroupHeartbeat", shareHB(s, id, "b", 3, "t").ErrorCode, kerr.GroupIDNotFound)
			wantCode(t, "ShareGroupDescribe", shareDescribe(id), kerr.GroupIDNotFound)
			wantCode(t, "share offsets admin", s.CheckShareGroupID(id), kerr.GroupIDNotFound)
			if s.IsShareGroup(id) {
				t.Errorf("a share group %q was created", id)
			}
		})
	}
	lg := h.c.ListGroups(ctx, &kmsg.ListGroupsRequest{Version: 5})
	var listed []string
	for _, g := range lg.Groups {
		listed = append(listed, g.Group+"/"+g.GroupType)
	}
	if want := []string{"classic/classic", "consumer/consumer"}; !reflect.DeepEqual(listed, want) {
		t.Errorf("classic and consumer groups listed: %v, want %v", listed, want)
	}
}

func errCode(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// TestGroupTypeRace: a share group and a classic group created at the same
// time under one id: one of them is refused.
func TestGroupTypeRace(t *testing.T) {
	h, _, s := newShareHarness(t, ShareConfig{})
	for i := range 300 {
		id := fmt.Sprintf("g%d", i)
		var wg sync.WaitGroup
		var share, commit int16
		wg.Add(2)
		go func() { defer wg.Done(); share = shareHB(s, id, "a", 0, "t").ErrorCode }()
		go func() { defer wg.Done(); commit = h.commit(8, id, "", "", -1, "t", 0, 1) }()
		wg.Wait()
		if share == 0 && commit == 0 {
			t.Fatalf("%s: both a share group and a classic group were created", id)
		}
		if share != 0 && commit != 0 {
			t.Fatalf("%s: both refused: %s, %s", id, errName(share), errName(commit))
		}
	}
}
