package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat handles Heartbeat v0-v4. During a rebalance it answers
// REBALANCE_IN_PROGRESS, which tells the member to rejoin.
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
	resp.ErrorCode = c.heartbeat(req)
	return resp
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	if !c.owns(req.Group) {
		return kerr.NotCoordinator.Code
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		if c.isClosed() {
			return kerr.NotCoordinator.Code
		}
		return kerr.UnknownMemberID.Code
	}
	defer g.mu.Unlock()
	var instanceID string
	if req.Version >= 3 && req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	if g.isFenced(instanceID, req.MemberID) {
		return kerr.FencedInstanceID.Code
	}
	m := g.members[req.MemberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	switch g.state {
	case statePreparingRebalance:
		g.resetSession(m, m.sessionTimeout)
		return kerr.RebalanceInProgress.Code
	case stateCompletingRebalance, stateStable:
		g.resetSession(m, m.sessionTimeout)
		return 0
	default:
		return kerr.UnknownMemberID.Code
	}
}
