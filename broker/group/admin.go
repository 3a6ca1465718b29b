package group

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups handles ListGroups v0-v5: v4 filters by state, v5 by group
// type ("classic", or "consumer" for KIP-848 groups, whose states are
// Empty, Assigning, Reconciling and Stable).
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	if c.isClosed() {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		state, stateName, protocolType, groupType := g.state, g.stateName(), g.protocolType, g.groupType()
		g.mu.Unlock()
		if state == stateDead || !c.owns(g.id) {
			continue
		}
		if req.Version >= 4 && len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, stateName) {
			continue
		}
		if req.Version >= 5 && len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, groupType) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = g.id
		lg.ProtocolType = protocolType
		if req.Version >= 4 {
			lg.GroupState = stateName
		}
		if req.Version >= 5 {
			lg.GroupType = groupType
		}
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

func containsFold(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// DescribeGroups handles DescribeGroups v0-v6. Member metadata and
// assignments are shown only while the group is Stable, as in Kafka. An
// unknown group is described as Dead; v6+ also sets GROUP_ID_NOT_FOUND
// (KIP-1043).
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		dg.State = stateDead.String()
		dg.AuthorizedOperations = -2147483648 // not requested / not computed
		switch {
		case id == "":
			dg.ErrorCode = kerr.InvalidGroupID.Code
		case !c.owns(id):
			dg.ErrorCode = kerr.NotCoordinator.Code
		default:
			g := c.lockGroup(id, false)
			if g == nil {
				if c.isClosed() {
					dg.ErrorCode = kerr.NotCoordinator.Code
				} else if req.Version >= 6 {
					dg.ErrorCode = kerr.GroupIDNotFound.Code
					msg := "group " + id + " not found"
					if c.isShareGroup(id) {
						msg = "group " + id + " is not a classic group"
					}
					dg.ErrorMessage = &msg
				}
				break
			}
			g.describe(&dg)
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (g *group) describe(dg *kmsg.DescribeGroupsResponseGroup) {
	if g.consumer != nil {
		g.describeConsumerClassic(dg)
		return
	}
	dg.State = g.state.String()
	dg.ProtocolType = g.protocolType
	stable := g.state == stateStable
	if stable {
		dg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		if m.instanceID != "" {
			id := m.instanceID
			dm.InstanceID = &id
		}
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.ProtocolMetadata = []byte{}
		dm.MemberAssignment = []byte{}
		if stable {
			if md := m.metadata(g.protocol); md != nil {
				dm.ProtocolMetadata = md
			}
			if m.assignment != nil {
				dm.MemberAssignment = m.assignment
			}
		}
		dg.Members = append(dg.Members, dm)
	}
}

// DeleteGroups handles DeleteGroups v0-v3: groups without members are
// deleted with their committed offsets, share groups with their
// share-partition state; others get NON_EMPTY_GROUP.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		rg.ErrorCode = c.deleteGroup(ctx, id)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, id string) int16 {
	if id == "" {
		return kerr.InvalidGroupID.Code
	}
	if !c.owns(id) {
		return kerr.NotCoordinator.Code
	}
	if c.isShareGroup(id) {
		if code, found := c.deleteShareGroup(ctx, id); found {
			return code
		}
	}
	code := c.deleteClassicGroup(ctx, id)
	if code == kerr.GroupIDNotFound.Code {
		// A share group this broker knows by its stored state only.
		if shareCode, found := c.deleteShareGroup(ctx, id); found {
			return shareCode
		}
	}
	return code
}

// deleteClassicGroup deletes a classic or consumer group.
func (c *Coordinator) deleteClassicGroup(ctx context.Context, id string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kerr.NotCoordinator.Code
	}
	g := c.groups[id]
	if g == nil {
		return kerr.GroupIDNotFound.Code
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case stateDead:
		return kerr.GroupIDNotFound.Code
	case stateEmpty:
	default:
		return kerr.NonEmptyGroup.Code
	}
	if err := c.store.DeleteGroup(ctx, id); err != nil {
		c.log.Error(err, "persisting group deletion failed", "group", id)
		return g.storeFailed(err)
	}
	g.shutdown()
	delete(c.groups, id)
	return 0
}

// Stats is a point-in-time summary of the coordinator, for metrics.
type Stats struct {
	// GroupsByState counts groups by state name (Empty, Stable, ...).
	GroupsByState map[string]int
	// Members counts members over all groups.
	Members int
	// CommittedPartitions counts partitions with a committed offset.
	CommittedPartitions int
}

// Stats returns the current Stats.
func (c *Coordinator) Stats() Stats {
	st := Stats{GroupsByState: map[string]int{}}
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		if g.state != stateDead {
			st.GroupsByState[g.state.String()]++
			st.Members += len(g.members)
			if g.consumer != nil {
				st.Members += len(g.consumer.members)
			}
			st.CommittedPartitions += len(g.offsets)
		}
		g.mu.Unlock()
	}
	return st
}
