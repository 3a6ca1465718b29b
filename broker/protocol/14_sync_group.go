package protocol

// SyncGroup (key 14), versions 0-5.
//
// The leader sends every member's assignment; followers block until it
// arrives. v5 checks the protocol type and name against the group's
// (INCONSISTENT_GROUP_PROTOCOL) and returns them. When the connection
// closes or the broker shuts down while waiting it answers NOT_COORDINATOR.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.SyncGroup, 0, 5, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.SyncGroupRequest)
	fail := func(code int16) (kmsg.Response, error) {
		resp := r.NewResponse().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		resp.MemberAssignment = []byte{}
		return resp, nil
	}
	if !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	if r.Env.Groups == nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	// The call parks until the group's members have joined: it must not
	// hold the in-flight request budget meanwhile.
	r.ReleaseMemory()
	parkedAt := time.Now() // the coordinator's wait for the other members
	resp, err := r.Env.Groups.SyncGroup(ctx, req)
	r.addParked(time.Since(parkedAt))
	if err != nil {
		return fail(kerr.NotCoordinator.Code)
	}
	return resp, nil
}
