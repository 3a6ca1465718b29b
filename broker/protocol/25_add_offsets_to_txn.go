package protocol

// AddOffsetsToTxn (key 25), versions 0-4.
//
// The group's offsets join the producer's ongoing transaction at its
// coordinator (Env.Txns): the TxnOffsetCommit that follows goes to the
// group's coordinator, and EndTxn completes those offsets there. Requires
// TRANSACTIONAL_ID WRITE and GROUP READ. v0-1 get INVALID_PRODUCER_EPOCH
// where v2+ get PRODUCER_FENCED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AddOffsetsToTxn, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.NewResponse().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !r.Authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
	case r.Env.Txns == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		if err := r.Env.Txns.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Version < 2); err != nil {
			resp.ErrorCode = err.Code
		}
	}
	return resp, nil
}
