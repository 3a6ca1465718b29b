package protocol

// ListGroups (key 16), versions 0-5.
//
// Lists the groups this broker coordinates, including groups that only
// store offsets: classic and KIP-848 consumer groups, and KIP-932 share
// groups (protocol type and group type "share", state Empty or Stable),
// as Kafka 4.1 lists them at every version. v4 filters by state
// (case-insensitive), v5 by type ("classic", "consumer", "share").

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.ListGroups, 0, 5, handleListGroups) }

func handleListGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ListGroupsRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp := r.Env.Groups.ListGroups(ctx, req)
	if sc := r.Env.ShareCoordinator(); sc != nil && resp.ErrorCode == 0 {
		for _, sg := range sc.ListShareGroups() {
			if req.Version >= 4 && len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, sg.State) {
				continue
			}
			if req.Version >= 5 && len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, "share") {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType = sg.ID, "share"
			if req.Version >= 4 {
				lg.GroupState = sg.State
			}
			if req.Version >= 5 {
				lg.GroupType = "share"
			}
			resp.Groups = append(resp.Groups, lg)
		}
	}
	// As Kafka: DESCRIBE on the cluster lists every group, else the
	// groups the principal may DESCRIBE.
	if r.authorizedQuiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, auth.ClusterResourceName) {
		return resp, nil
	}
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if r.authorizedQuiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return resp, nil
}

func containsFold(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
