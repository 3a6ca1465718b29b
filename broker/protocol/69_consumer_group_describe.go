package protocol

// ConsumerGroupDescribe (key 69), versions 0-1 (KIP-848).
//
// Describes consumer-protocol groups: state (Empty, Assigning,
// Reconciling, Stable), group epoch, target assignment epoch, assignor and
// each member's epoch, subscription, current and target assignment (v1:
// member type 1, consumer). A classic group or an unknown one answers
// GROUP_ID_NOT_FOUND, as Kafka does. Requires DESCRIBE on each group;
// authorized operations are computed when asked for.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ConsumerGroupDescribe, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ConsumerGroupDescribeRequest)
	all := req.Groups
	var allowed []string
	for _, id := range all {
		if r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			allowed = append(allowed, id)
		}
	}
	described := map[string]kmsg.ConsumerGroupDescribeResponseGroup{}
	if len(allowed) > 0 && r.Env.Groups != nil {
		req.Groups = allowed
		for _, g := range r.Env.Groups.ConsumerGroupDescribe(ctx, req).Groups {
			described[g.Group] = g
		}
	}
	resp := r.NewResponse().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range all {
		g, ok := described[id]
		switch {
		case ok:
			if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = r.authorizedOps(kmsg.ACLResourceTypeGroup, id)
			}
		case r.Env.Groups == nil:
			g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
		default:
			g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
