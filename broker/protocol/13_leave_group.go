package protocol

// LeaveGroup (key 13), versions 0-5.
//
// v0-v2 remove one member by id; v3+ remove a batch of members by member
// id and/or group instance id (KIP-345), each with its own error code.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.LeaveGroup, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.LeaveGroupRequest)
	if !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		resp := r.NewResponse().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	return r.Env.Groups.LeaveGroup(ctx, req), nil
}
