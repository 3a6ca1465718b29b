package protocol

// DescribeTransactions (key 65), version 0 (KIP-664).
//
// The state of each transactional ID this broker coordinates (others get
// NOT_COORDINATOR, unknown IDs TRANSACTIONAL_ID_NOT_FOUND). Requires
// TRANSACTIONAL_ID DESCRIBE; the transaction's partitions are listed only
// for topics the principal may DESCRIBE, as Kafka filters them.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeTransactions, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeTransactionsRequest)
	resp := r.NewResponse().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID = id
		ts.ProducerID, ts.ProducerEpoch, ts.StartTimestamp = -1, -1, -1
		switch {
		case !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, id):
			ts.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case r.Env.Txns == nil:
			ts.ErrorCode = kerr.CoordinatorNotAvailable.Code
		default:
			md, err := r.Env.Txns.Describe(ctx, id)
			if err != nil {
				ts.ErrorCode = err.Code
				break
			}
			ts.State, ts.TimeoutMillis, ts.StartTimestamp = md.State.String(), md.TimeoutMillis, md.StartMillis
			ts.ProducerID, ts.ProducerEpoch = md.ProducerID, md.ProducerEpoch
			for _, tp := range md.Partitions {
				if !r.authorizedQuiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, tp.Topic) {
					continue
				}
				if n := len(ts.Topics); n > 0 && ts.Topics[n-1].Topic == tp.Topic {
					ts.Topics[n-1].Partitions = append(ts.Topics[n-1].Partitions, tp.Partition)
					continue
				}
				tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
				ts.Topics = append(ts.Topics, tt)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}
