package protocol

// ShareGroupDescribe (key 77), version 1 (KIP-932, as Kafka 4.1).
//
// Describes share groups: state (Empty, Stable), group and assignment
// epochs, assignor ("simple") and each member's epoch, client, rack,
// subscription and assignment (topic id, name, partitions). A group that
// is not a share group known to this coordinator answers
// GROUP_ID_NOT_FOUND, an empty id INVALID_GROUP_ID. Requires DESCRIBE on
// each group; authorized operations are computed when asked for.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ShareGroupDescribe, 1, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ShareGroupDescribeRequest)
	all := req.GroupIDs
	var allowed []string
	for _, id := range all {
		if r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			allowed = append(allowed, id)
		}
	}
	sc := r.Env.ShareCoordinator()
	described := map[string]kmsg.ShareGroupDescribeResponseGroup{}
	if len(allowed) > 0 && sc != nil {
		req.GroupIDs = allowed
		for _, g := range sc.ShareGroupDescribe(ctx, req).Groups {
			described[g.GroupID] = g
		}
	}
	resp := r.NewResponse().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range all {
		g, ok := described[id]
		switch {
		case ok:
			if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = r.authorizedOps(kmsg.ACLResourceTypeGroup, id)
			}
		case sc == nil:
			g = kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
		default:
			g = kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
