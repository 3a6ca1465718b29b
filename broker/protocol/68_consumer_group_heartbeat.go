package protocol

// ConsumerGroupHeartbeat (key 68), versions 0-1 (KIP-848, as Kafka 4.0).
//
// The next-generation consumer group protocol: members join, heartbeat,
// report the partitions they own and leave (epoch -1, or -2 for a static
// member coming back) with this one request; the coordinator
// (broker/group, consumer.go) runs the server-side assignor ("uniform" by
// default, or "range") and reconciles members to the target assignment
// with member epochs, revoking before assigning. v0 lets the coordinator
// name the member; v1 requires a client-generated member id and adds
// SubscribedTopicRegex (matched against whole topic names with Go's RE2,
// Kafka uses RE2/J). Requires READ on the group. A share group's id
// answers GROUP_ID_NOT_FOUND (broker/group, grouptype.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ConsumerGroupHeartbeat, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ConsumerGroupHeartbeatRequest)
	fail := func(code int16) (kmsg.Response, error) {
		resp := r.NewResponse().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	if !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	if r.Env.Groups == nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	return r.Env.Groups.ConsumerGroupHeartbeat(ctx, groupClient(r), req), nil
}
