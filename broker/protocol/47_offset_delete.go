package protocol

// OffsetDelete (key 47), version 0 (KIP-496).
//
// Deletes committed offsets of a group: any partition while the group is
// empty; in an active consumer group only partitions of topics no member
// subscribes to (others: GROUP_SUBSCRIBED_TO_TOPIC).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetDelete, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	if !r.Authorized(kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, req.Group) {
		resp := r.NewResponse().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	// Topics the principal may not READ are answered here, untouched.
	var allowed, denied []kmsg.OffsetDeleteRequestTopic
	for _, t := range req.Topics {
		if r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
			allowed = append(allowed, t)
		} else {
			denied = append(denied, t)
		}
	}
	req.Topics = allowed
	resp := r.Env.Groups.OffsetDelete(ctx, req)
	for _, t := range denied {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
