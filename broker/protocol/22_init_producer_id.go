package protocol

// InitProducerID (key 22), versions 0-4.
//
// Idempotent producers (no transactional ID) get a producer ID that was
// never handed out before (Env.ProducerIDs; on a single broker a block
// allocator persisted in the data directory), with epoch 0. KIP-360 (v3+): a
// producer that presents its current ID and epoch gets the epoch bumped
// (a fresh ID when the epoch would overflow). Transactional IDs are not
// supported: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a fatal error that
// clients report plainly instead of retrying.

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.InitProducerID, 0, 4, handleInitProducerID) }

func handleInitProducerID(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	resp := r.NewResponse().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
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
