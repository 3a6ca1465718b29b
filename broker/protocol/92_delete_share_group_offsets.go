package protocol

// DeleteShareGroupOffsets (key 92), version 0 (KIP-932).
//
// Deletes the share-partition state of whole topics for a share group
// with no members (NON_EMPTY_GROUP otherwise): the next fetch starts the
// partitions again per share.auto.offset.reset. A classic or consumer
// group answers GROUP_ID_NOT_FOUND, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION. Requires DELETE on the group (top level)
// and READ on each topic (TOPIC_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
)

func init() { register(kmsg.DeleteShareGroupOffsets, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := r.NewResponse().(*kmsg.DeleteShareGroupOffsetsResponse)
	sc, code := shareGroupAdmin(r, req.GroupID, kmsg.ACLOperationDelete)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		ti, known := r.Env.Broker.Topic(t.Topic)
		rt.TopicID = ti.ID
		switch {
		case !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !known:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			for p := range ti.Partitions {
				if err := sc.SetShareStartOffset(ctx, req.GroupID, t.Topic, p, -1); err != nil {
					rt.ErrorCode = group.ShareErrorCode(err)
					break
				}
			}
		}
		if rt.ErrorCode == kerr.NonEmptyGroup.Code {
			resp.ErrorCode = rt.ErrorCode
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
