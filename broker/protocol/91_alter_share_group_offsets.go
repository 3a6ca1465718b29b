package protocol

// AlterShareGroupOffsets (key 91), version 0 (KIP-932).
//
// Sets the start offset (SPSO) of share partitions of a share group with
// no members (NON_EMPTY_GROUP otherwise): records below it are treated as
// acknowledged, nothing is in flight afterwards. A classic or consumer
// group answers GROUP_ID_NOT_FOUND, a negative offset INVALID_REQUEST, an
// unknown partition UNKNOWN_TOPIC_OR_PARTITION. Requires READ on the group
// (top level) and on each topic (TOPIC_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
)

func init() { register(kmsg.AlterShareGroupOffsets, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := r.NewResponse().(*kmsg.AlterShareGroupOffsetsResponse)
	sc, code := shareGroupAdmin(r, req.GroupID, kmsg.ACLOperationRead)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		ti, known := r.Env.Broker.Topic(t.Topic)
		rt.TopicID = ti.ID
		allowed := r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !allowed:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known || p.Partition < 0 || p.Partition >= ti.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.StartOffset < 0:
				rp.ErrorCode = kerr.InvalidRequest.Code
			default:
				rp.ErrorCode = group.ShareErrorCode(sc.SetShareStartOffset(ctx, req.GroupID, t.Topic, p.Partition, p.StartOffset))
			}
			if rp.ErrorCode == kerr.NonEmptyGroup.Code {
				resp.ErrorCode = rp.ErrorCode
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// shareGroupAdmin checks the group of a share-group offsets admin request
// (AlterShareGroupOffsets, DeleteShareGroupOffsets): a name, op on the
// group, a share coordinator that may serve it. It returns the coordinator,
// or the request's error code.
func shareGroupAdmin(r *Request, groupID string, op kmsg.ACLOperation) (*group.ShareCoordinator, int16) {
	sc := r.Env.ShareCoordinator()
	switch {
	case groupID == "":
		return nil, kerr.InvalidGroupID.Code
	case !r.Authorized(op, kmsg.ACLResourceTypeGroup, groupID):
		return nil, kerr.GroupAuthorizationFailed.Code
	case sc == nil:
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	if code := sc.CheckShareGroupID(groupID); code != 0 {
		return nil, code
	}
	return sc, 0
}
