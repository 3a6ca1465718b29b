package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup handles LeaveGroup v0-v5: one member by id (v0-v2) or a batch
// of members by id and/or group instance id (v3+, KIP-345).
func (c *Coordinator) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	leaving := req.Members
	if req.Version < 3 {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = req.MemberID
		leaving = []kmsg.LeaveGroupRequestMember{lm}
	}
	top, codes := c.leave(req.Group, leaving)
	if req.Version < 3 {
		resp.ErrorCode = top
		if top == 0 && len(codes) == 1 {
			resp.ErrorCode = codes[0]
		}
		return resp
	}
	resp.ErrorCode = top
	if top != 0 {
		return resp
	}
	for i, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = lm.MemberID
		rm.InstanceID = lm.InstanceID
		rm.ErrorCode = codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// leave returns a top-level error code or one code per leaving member.
func (c *Coordinator) leave(groupID string, leaving []kmsg.LeaveGroupRequestMember) (int16, []int16) {
	if groupID == "" {
		return kerr.InvalidGroupID.Code, nil
	}
	if !c.owns(groupID) {
		return kerr.NotCoordinator.Code, nil
	}
	codes := make([]int16, len(leaving))
	g := c.lockGroup(groupID, false)
	if g == nil {
		if c.isClosed() {
			return kerr.NotCoordinator.Code, nil
		}
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
		return 0, codes
	}
	defer g.mu.Unlock()
	for i, lm := range leaving {
		codes[i] = g.leaveOne(lm)
	}
	return 0, codes
}

func (g *group) leaveOne(lm kmsg.LeaveGroupRequestMember) int16 {
	var instanceID string
	if lm.InstanceID != nil {
		instanceID = *lm.InstanceID
	}
	memberID := lm.MemberID
	if memberID == "" && instanceID != "" {
		// Admin removal of a static member by instance id.
		id, ok := g.static[instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		memberID = id
	} else if g.isFenced(instanceID, memberID) {
		return kerr.FencedInstanceID.Code
	}
	if slot, ok := g.pending[memberID]; ok {
		g.stop(slot)
		delete(g.pending, memberID)
		g.tryCompleteJoin()
		return 0
	}
	m := g.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	g.removeMember(m, "member left the group")
	return 0
}
