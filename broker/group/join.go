package group

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup handles JoinGroup v0-v9. It blocks until the group's join
// phase completes (or answers at once when no rebalance is needed). The
// error is non-nil only when ctx ended first or the coordinator closed;
// the member then still counts as joined, as in Kafka.
func (c *Coordinator) JoinGroup(ctx context.Context, client Client, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	fail := func(code int16, memberID string) (*kmsg.JoinGroupResponse, error) {
		return joinResponse(req.Version, joinResult{err: code, memberID: memberID, generation: -1}), nil
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code, req.MemberID)
	}
	if !c.owns(req.Group) {
		return fail(kerr.NotCoordinator.Code, req.MemberID)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout.Code, req.MemberID)
	}
	rebalance := session // v0 has no rebalance timeout
	if req.Version >= 1 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	var instanceID string
	if req.Version >= 5 && req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	unknown := req.MemberID == ""
	g, share := c.lockGroupNotShare(req.Group, unknown)
	if share {
		return fail(kerr.InconsistentGroupProtocol.Code, "")
	}
	if g == nil {
		if c.isClosed() {
			return fail(kerr.NotCoordinator.Code, req.MemberID)
		}
		return fail(kerr.UnknownMemberID.Code, req.MemberID)
	}
	j := &joining{
		client:       client,
		version:      req.Version,
		memberID:     req.MemberID,
		instanceID:   instanceID,
		session:      session,
		rebalance:    rebalance,
		protocolType: req.ProtocolType,
		protocols:    req.Protocols,
		ch:           make(chan joinResult, 1),
	}
	immediate, wait := g.join(j)
	g.mu.Unlock()
	if !wait {
		if immediate.err != 0 && unknown {
			c.dropIfUnused(req.Group)
		}
		return joinResponse(req.Version, immediate), nil
	}
	select {
	case r := <-j.ch:
		return joinResponse(req.Version, r), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// joining is one JoinGroup request being processed.
type joining struct {
	client       Client
	version      int16
	memberID     string
	instanceID   string
	session      time.Duration
	rebalance    time.Duration
	protocolType string
	protocols    []kmsg.JoinGroupRequestProtocol
	ch           chan joinResult
}

// join runs Kafka's doJoinGroup under g.mu. It returns either an immediate
// result (wait false) or wait true, meaning j.ch will receive the result.
func (g *group) join(j *joining) (joinResult, bool) {
	fail := func(code int16) (joinResult, bool) {
		return joinResult{err: code, memberID: j.memberID, generation: -1}, false
	}
	if max := g.c.cfg.MaxGroupSize; max > 0 && g.members[j.memberID] == nil && len(g.members)+len(g.pending) >= max &&
		!(j.instanceID != "" && g.static[j.instanceID] != "") && g.pending[j.memberID] == nil {
		return fail(kerr.GroupMaxSizeReached.Code)
	}
	if g.consumer != nil {
		if len(g.consumer.members) > 0 {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		// An empty consumer-protocol group becomes classic again (Kafka's
		// downgrade of an empty group); it keeps its offsets.
		g.dropConsumerState()
		g.protocolType = ""
		g.generation = 0
	}
	if !g.supportsProtocols(j.protocolType, j.protocols) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if j.memberID == "" {
		return g.joinUnknown(j)
	}
	return g.joinKnown(j)
}

// joinUnknown is Kafka's doUnknownJoinGroup (empty member id).
func (g *group) joinUnknown(j *joining) (joinResult, bool) {
	if j.instanceID != "" {
		newID := newMemberID(j.instanceID)
		if oldID, ok := g.static[j.instanceID]; ok {
			return g.replaceStatic(g.members[oldID], newID, j)
		}
		j.memberID = newID
		return g.addMember(j), true
	}
	newID := newMemberID(j.client.ID)
	if j.version >= 4 {
		// KIP-394: hand out the id; the member must rejoin with it.
		slot := &timerSlot{}
		g.pending[newID] = slot
		g.schedule(slot, j.session, func() {
			delete(g.pending, newID)
			g.tryCompleteJoin()
		})
		return joinResult{err: kerr.MemberIDRequired.Code, memberID: newID, generation: -1}, false
	}
	j.memberID = newID
	return g.addMember(j), true
}

// joinKnown is Kafka's doCurrentMemberJoinGroup (member id given).
func (g *group) joinKnown(j *joining) (joinResult, bool) {
	fail := func(code int16) (joinResult, bool) {
		return joinResult{err: code, memberID: j.memberID, generation: -1}, false
	}
	if slot, ok := g.pending[j.memberID]; ok {
		g.stop(slot)
		delete(g.pending, j.memberID)
		return g.addMember(j), true
	}
	if g.isFenced(j.instanceID, j.memberID) {
		return fail(kerr.FencedInstanceID.Code)
	}
	m := g.members[j.memberID]
	if m == nil || (j.instanceID != "" && g.static[j.instanceID] == "") {
		return fail(kerr.UnknownMemberID.Code)
	}
	switch g.state {
	case statePreparingRebalance:
		g.updateMember(m, j)
		g.tryCompleteJoin()
		return joinResult{}, true
	case stateCompletingRebalance:
		if m.matches(j.protocols) {
			// The member missed our JoinGroup response; repeat it.
			return g.currentJoinResult(m, m.id == g.leader, false), false
		}
		g.updateMember(m, j)
		g.prepareRebalance("member " + m.id + " rejoined with new protocols")
		return joinResult{}, true
	case stateStable:
		if m.id == g.leader || !m.matches(j.protocols) {
			// The leader rejoining, or changed metadata (e.g. a new
			// subscription), means the assignment must be redone.
			g.updateMember(m, j)
			g.prepareRebalance("member " + m.id + " rejoined")
			return joinResult{}, true
		}
		return g.currentJoinResult(m, false, false), false
	default:
		return fail(kerr.UnknownMemberID.Code)
	}
}

// addMember is Kafka's addMemberAndRebalance.
func (g *group) addMember(j *joining) joinResult {
	m := &member{
		id:         j.memberID,
		instanceID: j.instanceID,
		isNew:      true,
	}
	g.setMember(m, j)
	g.add(m)
	// A new member cannot heartbeat until it has its id and generation;
	// give it NewMemberJoinTimeout instead of its session timeout.
	g.resetSession(m, g.c.cfg.NewMemberJoinTimeout)
	g.maybePrepareRebalance("new member " + m.id + " joined")
	g.tryCompleteJoin()
	return joinResult{}
}

func (g *group) setMember(m *member, j *joining) {
	m.clientID = j.client.ID
	m.clientHost = j.client.Host
	m.sessionTimeout = j.session
	m.rebalanceTimeout = j.rebalance
	m.protocolType = j.protocolType
	m.protocols = j.protocols
	m.joinCh = j.ch
}

// updateMember records a rejoin of an existing member.
func (g *group) updateMember(m *member, j *joining) {
	if m.joinCh != nil && m.joinCh != j.ch {
		// A previous JoinGroup of this member is still parked (its
		// connection is gone or the client retried); it loses.
		g.deliverJoin(m, joinResult{err: kerr.UnknownMemberID.Code, memberID: m.id, generation: -1})
	}
	g.setMember(m, j)
}

// replaceStatic is Kafka's updateStaticMemberAndRebalance: a static member
// restarted and joins with a new member id under its old instance id. The
// old member id is fenced; the member keeps its place and assignment.
func (g *group) replaceStatic(m *member, newID string, j *joining) (joinResult, bool) {
	oldID := m.id
	g.deliverJoin(m, joinResult{err: kerr.FencedInstanceID.Code, memberID: oldID, generation: -1})
	g.deliverSync(m, syncResult{err: kerr.FencedInstanceID.Code})
	unchanged := g.sameSubscription(m, j.protocols)
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	g.static[m.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	j.memberID = newID
	g.setMember(m, j)
	g.resetSession(m, m.sessionTimeout)
	g.c.log.V(1).Info("static member rejoined", "group", g.id, "instance", m.instanceID, "old", oldID, "new", newID)

	switch g.state {
	case stateStable:
		// Kafka rebalances only if the selected protocol would change;
		// we also do when the member's subscribed topics changed (the
		// rest of a consumer's metadata, e.g. the owned partitions of
		// cooperative assignors, legitimately differs after a restart).
		if unchanged && g.selectProtocol() == g.protocol {
			m.joinCh = nil
			g.saveMembership() // the old member id must stay fenced after a restart
			leader := newID == g.leader
			return g.currentJoinResult(m, leader, leader), false
		}
		g.prepareRebalance("static member " + m.instanceID + " rejoined with new protocols")
		return joinResult{}, true
	case stateCompletingRebalance:
		// The leader may be assigning to the old member id: redo it.
		g.prepareRebalance("static member " + m.instanceID + " rejoined during sync")
		return joinResult{}, true
	default: // PreparingRebalance: wait with everyone else.
		g.tryCompleteJoin()
		return joinResult{}, true
	}
}

// currentJoinResult repeats the current generation to m. withMembers gives
// the leader the member list; skip sets KIP-814 SkipAssignment.
func (g *group) currentJoinResult(m *member, withMembers, skip bool) joinResult {
	r := joinResult{
		memberID:       m.id,
		generation:     g.generation,
		protocolType:   g.protocolType,
		protocol:       g.protocol,
		leader:         g.leader,
		skipAssignment: skip,
	}
	if withMembers {
		r.members = g.memberList()
	}
	return r
}

// joinResponse builds the response for version v.
func joinResponse(v int16, r joinResult) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = v
	resp.ErrorCode = r.err
	resp.Generation = r.generation
	resp.MemberID = r.memberID
	resp.LeaderID = r.leader
	protocol := r.protocol
	resp.Protocol = &protocol
	if v >= 7 && r.err == 0 {
		pt := r.protocolType
		resp.ProtocolType = &pt
	} else if v >= 7 {
		resp.Protocol = nil // nullable from v7; Kafka sends null on errors
	}
	resp.Members = r.members
	if r.skipAssignment {
		if v >= 9 {
			resp.SkipAssignment = true
		} else {
			// Before KIP-814 a rejoining static leader got no member
			// list and its (ignored) assignment did no harm.
			resp.Members = nil
		}
	}
	if resp.Members == nil {
		resp.Members = []kmsg.JoinGroupResponseMember{}
	}
	return resp
}

// sameSubscription reports whether a restarting static member's new
// protocols subscribe to the same thing as before for the group's selected
// protocol: the same topics for the consumer protocol, identical metadata
// for other protocol types.
func (g *group) sameSubscription(m *member, protocols []kmsg.JoinGroupRequestProtocol) bool {
	var newMeta []byte
	found := false
	for _, p := range protocols {
		if p.Name == g.protocol {
			newMeta, found = p.Metadata, true
		}
	}
	if !found {
		return false
	}
	oldMeta := m.metadata(g.protocol)
	if g.protocolType != "consumer" {
		return bytes.Equal(oldMeta, newMeta)
	}
	var o, n kmsg.ConsumerMemberMetadata
	if o.ReadFrom(oldMeta) != nil || n.ReadFrom(newMeta) != nil {
		return bytes.Equal(oldMeta, newMeta)
	}
	ot, nt := append([]string(nil), o.Topics...), append([]string(nil), n.Topics...)
	sort.Strings(ot)
	sort.Strings(nt)
	return slices.Equal(ot, nt)
}
