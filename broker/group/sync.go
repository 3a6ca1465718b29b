package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup handles SyncGroup v0-v5. A follower's SyncGroup blocks until
// the leader's SyncGroup brings the assignment (or a rebalance restarts).
// The error is non-nil only when ctx ended first.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	fail := func(code int16) (*kmsg.SyncGroupResponse, error) {
		return syncResponse(req.Version, syncResult{err: code}), nil
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	if !c.owns(req.Group) {
		return fail(kerr.NotCoordinator.Code)
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		if c.isClosed() {
			return fail(kerr.NotCoordinator.Code)
		}
		return fail(kerr.UnknownMemberID.Code)
	}
	ch := make(chan syncResult, 1)
	r, wait := g.syncGroup(req, ch)
	g.mu.Unlock()
	if !wait {
		return syncResponse(req.Version, r), nil
	}
	select {
	case r := <-ch:
		return syncResponse(req.Version, r), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *group) syncGroup(req *kmsg.SyncGroupRequest, ch chan syncResult) (syncResult, bool) {
	fail := func(code int16) (syncResult, bool) { return syncResult{err: code}, false }
	var instanceID string
	if req.Version >= 3 && req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	if g.isFenced(instanceID, req.MemberID) {
		return fail(kerr.FencedInstanceID.Code)
	}
	m := g.members[req.MemberID]
	if m == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	if req.Generation != g.generation {
		return fail(kerr.IllegalGeneration.Code)
	}
	if req.Version >= 5 {
		if req.ProtocolType != nil && *req.ProtocolType != g.protocolType {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		if req.Protocol != nil && *req.Protocol != g.protocol {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
	}
	switch g.state {
	case statePreparingRebalance:
		return fail(kerr.RebalanceInProgress.Code)
	case stateCompletingRebalance:
		delete(g.pendingSync, m.id)
		if m.syncCh != nil && m.syncCh != ch {
			g.deliverSync(m, syncResult{err: kerr.RebalanceInProgress.Code})
		}
		m.syncCh = ch
		if m.id == g.leader {
			assignments := make(map[string][]byte, len(req.GroupAssignment))
			for _, a := range req.GroupAssignment {
				assignments[a.MemberID] = a.MemberAssignment
			}
			for _, x := range g.members {
				x.assignment = assignments[x.id] // missing → empty
			}
			g.state = stateStable
			// Persist before anyone learns the assignment, as Kafka
			// does, so a restart cannot hand out a different one.
			g.saveMembership()
			for _, x := range g.members {
				g.deliverSync(x, g.syncOK(x))
			}
			if len(g.pendingSync) == 0 {
				g.stop(&g.syncTimer)
			}
		}
		return syncResult{}, true
	case stateStable:
		delete(g.pendingSync, m.id)
		if len(g.pendingSync) == 0 {
			g.stop(&g.syncTimer)
		}
		g.resetSession(m, m.sessionTimeout)
		return g.syncOK(m), false
	default:
		return fail(kerr.UnknownMemberID.Code)
	}
}

func (g *group) syncOK(m *member) syncResult {
	a := m.assignment
	if a == nil {
		a = []byte{}
	}
	return syncResult{protocolType: g.protocolType, protocol: g.protocol, assignment: a}
}

func syncResponse(v int16, r syncResult) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = v
	resp.ErrorCode = r.err
	resp.MemberAssignment = r.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	if v >= 5 && r.err == 0 {
		pt, p := r.protocolType, r.protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
	}
	return resp
}
