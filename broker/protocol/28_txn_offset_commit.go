package protocol

// TxnOffsetCommit (key 28), versions 0-4.
//
// A transactional producer commits a group's offsets as part of its
// transaction (after AddOffsetsToTxn): the group coordinator (Env.Groups)
// keeps them pending, persisted, and makes them the group's committed
// offsets when the transaction commits (dropping them when it aborts);
// meanwhile OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT
// for those partitions. v3+ (KIP-447) carries the consumer's generation
// and member ID, checked like OffsetCommit's. Requires TRANSACTIONAL_ID
// WRITE, GROUP READ and READ on each topic, as Kafka. v5+ (KIP-890 part 2)
// is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.TxnOffsetCommit, 0, 4, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.TxnOffsetCommitRequest)
	code := int16(0)
	switch {
	case !r.Authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	case r.Env.Groups == nil:
		code = kerr.CoordinatorNotAvailable.Code
	}
	var allowed, denied []kmsg.TxnOffsetCommitRequestTopic
	for _, t := range req.Topics {
		if code == 0 && r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
			allowed = append(allowed, t)
		} else {
			denied = append(denied, t)
		}
	}
	resp := r.NewResponse().(*kmsg.TxnOffsetCommitResponse)
	if code == 0 && len(allowed) > 0 {
		req.Topics = allowed
		resp = r.Env.Groups.TxnOffsetCommit(ctx, req)
	}
	if code == 0 {
		code = kerr.TopicAuthorizationFailed.Code
	}
	for _, t := range denied {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
