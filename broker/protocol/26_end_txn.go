package protocol

// EndTxn (key 26), versions 0-4.
//
// Commits or aborts the producer's ongoing transaction: the coordinator
// (Env.Txns) persists PrepareCommit/PrepareAbort and answers; the markers
// are written to every partition and group of the transaction after the
// answer. A retried EndTxn of a completed transaction succeeds; one of a
// transaction still completing gets CONCURRENT_TRANSACTIONS. Requires
// TRANSACTIONAL_ID WRITE. v0-1 get INVALID_PRODUCER_EPOCH where v2+ get
// PRODUCER_FENCED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.EndTxn, 0, 4, handleEndTxn) }

func handleEndTxn(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.EndTxnRequest)
	resp := r.NewResponse().(*kmsg.EndTxnResponse)
	switch {
	case !r.Authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case r.Env.Txns == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		if err := r.Env.Txns.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version < 2); err != nil {
			resp.ErrorCode = err.Code
		}
	}
	return resp, nil
}
