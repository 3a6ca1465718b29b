package protocol

// DescribeGroups (key 15), versions 0-6.
//
// State, protocol type, selected protocol and members (client id and
// host; member metadata and assignment only while the group is Stable, as
// Kafka does). An unknown group is reported as state "Dead", without
// error below v6 and with GROUP_ID_NOT_FOUND and a message from v6
// (KIP-1043), as is a share group (it is not a classic group; a KIP-848
// consumer group is described in its classic view).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeGroups, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeGroupsRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.DescribeGroupsResponse)
		for _, id := range req.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	// Groups the principal may not DESCRIBE are answered here and not
	// looked up; the others keep the request order.
	all := req.Groups
	var allowed []string
	for _, id := range all {
		if r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			allowed = append(allowed, id)
		}
	}
	described := map[string]kmsg.DescribeGroupsResponseGroup{}
	resp := r.NewResponse().(*kmsg.DescribeGroupsResponse)
	if len(allowed) > 0 {
		req.Groups = allowed
		resp = r.Env.Groups.DescribeGroups(ctx, req)
		for _, g := range resp.Groups {
			described[g.Group] = g
		}
	}
	resp.Groups = nil
	for _, id := range all {
		if g, ok := described[id]; ok {
			if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = r.authorizedOps(kmsg.ACLResourceTypeGroup, id)
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		g.AuthorizedOperations = authorizedOpsNotRequested
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
