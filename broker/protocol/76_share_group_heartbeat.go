package protocol

// ShareGroupHeartbeat (key 76), version 1 (KIP-932, as Kafka 4.1; v0 was
// Kafka 4.0's early access and is not served).
//
// Share-group membership: a member joins with epoch 0 and its subscribed
// topics, heartbeats with its epoch, and leaves with epoch -1. The
// coordinator (broker/group, share.go) assigns server-side with the
// "simple" assignor: partitions spread over the subscribed members, shared
// when members outnumber partitions; an assignment takes effect with the
// heartbeat that carries it (no revocation: share partitions may have
// several consumers). Errors as Kafka: INVALID_REQUEST for a missing group
// or member id, an empty rack, an epoch below -1 or a first heartbeat
// without topics; UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
// GROUP_MAX_SIZE_REACHED (group.share.max.size, 200); GROUP_ID_NOT_FOUND
// when the id is a classic or consumer group. Requires READ on the group
// and DESCRIBE on each subscribed topic (TOPIC_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ShareGroupHeartbeat, 1, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ShareGroupHeartbeatRequest)
	fail := func(code int16) (kmsg.Response, error) {
		resp := r.NewResponse().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	if !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.GroupID) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	for _, t := range req.SubscribedTopicNames {
		if !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t) {
			return fail(kerr.TopicAuthorizationFailed.Code)
		}
	}
	sc := r.Env.ShareCoordinator()
	if sc == nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	return sc.ShareGroupHeartbeat(ctx, groupClient(r), req), nil
}
