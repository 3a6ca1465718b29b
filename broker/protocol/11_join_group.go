package protocol

// JoinGroup (key 11), versions 0-9.
//
// Served by the classic group coordinator (broker/group): v4+ members
// joining with an empty member id get MEMBER_ID_REQUIRED and a generated
// id (KIP-394), v5+ static membership (KIP-345), v9 SkipAssignment for a
// rejoining static leader (KIP-814). The handler blocks until the group's
// join phase completes; when the connection closes or the broker shuts
// down meanwhile it answers NOT_COORDINATOR. A share group's id answers
// INCONSISTENT_GROUP_PROTOCOL, as Kafka's (broker/group, grouptype.go).

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
)

func init() { register(kmsg.JoinGroup, 0, 9, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.JoinGroupRequest)
	fail := func(code int16) (kmsg.Response, error) {
		resp := r.NewResponse().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
		if req.Version < 7 {
			empty := ""
			resp.Protocol = &empty
		}
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
	resp, err := r.Env.Groups.JoinGroup(ctx, groupClient(r), req)
	r.addParked(time.Since(parkedAt))
	if err != nil {
		return fail(kerr.NotCoordinator.Code)
	}
	return resp, nil
}

// groupClient describes the connection as Kafka shows it in
// DescribeGroups (client host "/1.2.3.4").
func groupClient(r *Request) group.Client {
	c := group.Client{ID: r.Client.ClientID}
	if r.Header.ClientID != nil {
		c.ID = *r.Header.ClientID
	}
	if r.Client.Remote != nil {
		host := r.Client.Remote.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		c.Host = "/" + host
	}
	return c
}
