package protocol

// ShareAcknowledge (key 79), versions 1-2 (KIP-932 as Kafka 4.1; v2 adds
// renew acknowledgements, KIP-1222, and AcquisitionLockTimeoutMillis).
//
// Acknowledges records a share-group member acquired with ShareFetch:
// accept (done), release (available again to any member, delivery count
// kept; archived once it reached share.delivery.count.limit), reject
// (archived: never delivered again), gap (an offset without a record,
// archived) and, with IsRenewAck, renew (the acquisition lock starts
// again). Each partition's batches are applied all or nothing: a record
// not acquired by the member (lock expired, another member) answers
// INVALID_RECORD_STATE, a malformed batch INVALID_REQUEST. The share
// session must exist (SHARE_SESSION_NOT_FOUND) and the epoch follow it
// (INVALID_SHARE_SESSION_EPOCH; epoch 0 cannot open a session here); epoch
// -1 closes the session after applying the acknowledgements, releasing the
// records the member still holds. Requires READ on the group (top level)
// and on each topic (TOPIC_AUTHORIZATION_FAILED per partition).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
)

func init() { register(kmsg.ShareAcknowledge, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ShareAcknowledgeRequest)
	resp := r.NewResponse().(*kmsg.ShareAcknowledgeResponse)
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, nil
	}
	groupID, member, sc, e, msg := shareMember(r, req.GroupID, req.MemberID)
	if e != nil {
		return fail(e, msg)
	}
	if req.Version >= 2 {
		resp.AcquisitionLockTimeoutMillis = int32(sc.Config().RecordLockDuration / time.Millisecond)
	}
	if req.ShareSessionEpoch < group.ShareSessionFinal {
		return fail(kerr.InvalidShareSessionEpoch, "")
	}
	if _, err := sc.ShareSessionUpdate(groupID, member, req.ShareSessionEpoch, false, nil, nil); err != nil {
		resp.ErrorCode = group.ShareErrorCode(err)
		return resp, nil
	}
	topics := &shareTopics{b: r.Env.Broker}
	for _, t := range req.Topics {
		rt := kmsg.ShareAcknowledgeResponseTopic{TopicID: t.TopicID}
		name, known := topics.name(t.TopicID)
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if !known {
				rp.ErrorCode = kerr.UnknownTopicID.Code
			} else {
				acks := make([]shareAckBatch, 0, len(p.AcknowledgementBatches))
				for _, b := range p.AcknowledgementBatches {
					acks = append(acks, shareAckBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
				}
				rp.ErrorCode = shareAcknowledge(ctx, r, sc, groupID, member, name, p.Partition, acks, req.IsRenewAck)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == group.ShareSessionFinal {
		sc.CloseShareSession(groupID, member)
	}
	return resp, nil
}

// shareMember checks the group and member a ShareFetch or
// ShareAcknowledge names and READ on the group, as Kafka does; it returns
// them with the share coordinator, or the request's error and message.
func shareMember(r *Request, groupID, memberID *string) (string, string, *group.ShareCoordinator, *kerr.Error, string) {
	switch {
	case groupID == nil || *groupID == "":
		return "", "", nil, kerr.InvalidRequest, "GroupId can't be empty."
	case memberID == nil || *memberID == "":
		return "", "", nil, kerr.InvalidRequest, "MemberId can't be empty."
	case !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, *groupID):
		return "", "", nil, kerr.GroupAuthorizationFailed, ""
	}
	sc := r.Env.ShareCoordinator()
	if sc == nil {
		return "", "", nil, kerr.UnknownServerError, "no group coordinator"
	}
	return *groupID, *memberID, sc, nil, ""
}
