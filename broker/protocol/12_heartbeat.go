package protocol

// Heartbeat (key 12), versions 0-4.
//
// Keeps a group member's session alive; REBALANCE_IN_PROGRESS tells the
// member to rejoin, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
// FENCED_INSTANCE_ID that it is no longer part of the group.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.Heartbeat, 0, 4, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.HeartbeatRequest)
	if !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		resp := r.NewResponse().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	return r.Env.Groups.Heartbeat(ctx, req), nil
}
