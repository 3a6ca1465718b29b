package protocol

// InitProducerID (key 22), versions 0-4.
//
// Idempotent producers (no transactional ID) get a producer ID that was
// never handed out before (Env.ProducerIDs; on a single broker a block
// allocator persisted in the data directory), with epoch 0. KIP-360 (v3+): a
// producer that presents its current ID and epoch gets the epoch bumped
// (a fresh ID when the epoch would overflow).
//
// With a transactional ID the transaction coordinator (Env.Txns, package
// broker/txn) answers: TRANSACTIONAL_ID WRITE is required, the timeout must
// be within transaction.max.timeout.ms (else INVALID_TRANSACTION_TIMEOUT),
// the epoch is bumped (fencing older producers of the ID), an ongoing
// transaction is aborted first (CONCURRENT_TRANSACTIONS until its markers
// are written), and v3+ (KIP-360) checks the producer ID and epoch the
// request presents. v0-3 get INVALID_PRODUCER_EPOCH where v4 gets
// PRODUCER_FENCED.

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.InitProducerID, 0, 4, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	resp := r.NewResponse().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return initTransactionalProducerID(ctx, r, req, resp)
	}
	// Kafka 3 (KIP-679): an idempotent producer needs IDEMPOTENT_WRITE on
	// the cluster or WRITE on some topic.
	if !r.authorizedQuiet(kmsg.ACLOperationIdempotentWrite, kmsg.ACLResourceTypeCluster, auth.ClusterResourceName) &&
		!r.authorizedAnyResource(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.Version >= 3 && req.ProducerID >= 0 && req.ProducerEpoch >= 0 && req.ProducerEpoch < math.MaxInt16-1 {
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return resp, nil
	}
	id, err := r.Env.producerIDs().AllocateProducerID()
	if err != nil {
		r.Env.Log.Error(err, "allocating a producer ID")
		resp.ErrorCode = broker.ErrorCode(err)
		if resp.ErrorCode == kerr.UnknownServerError.Code {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code // retriable
		}
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

func initTransactionalProducerID(ctx context.Context, r *Request, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) (kmsg.Response, error) {
	id := *req.TransactionalID
	if !r.Authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, id) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	if r.Env.Txns == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	pid, epoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		pid, epoch = req.ProducerID, req.ProducerEpoch
	}
	gotPID, gotEpoch, err := r.Env.Txns.InitProducerID(ctx, id, req.TransactionTimeoutMillis, pid, epoch, req.Version < 4)
	if err != nil {
		resp.ErrorCode = err.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = gotPID, gotEpoch
	return resp, nil
}
