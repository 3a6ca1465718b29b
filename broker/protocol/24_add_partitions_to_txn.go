package protocol

// AddPartitionsToTxn (key 24), versions 0-4.
//
// v0-3 come from transactional producers: the partitions join the
// producer's ongoing transaction at its coordinator (Env.Txns). The
// principal needs TRANSACTIONAL_ID WRITE on the ID and WRITE on every
// topic; a refused or unknown partition gets its error and the others
// OPERATION_NOT_ATTEMPTED, as in Kafka. v0-1 get INVALID_PRODUCER_EPOCH
// where v2+ get PRODUCER_FENCED.
//
// v4 (KIP-890) comes from brokers: a batch of transactions, each either
// added or only verified (VerifyOnly: is the partition part of the
// ongoing transaction of this producer ID and epoch? — what a partition
// leader asks before accepting a transactional produce). It requires
// CLUSTER_ACTION.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/txn"
)

func init() { register(kmsg.AddPartitionsToTxn, 0, 4, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.NewResponse().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		if !r.authorizedCluster(kmsg.ACLOperationClusterAction) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
		for _, t := range req.Transactions {
			topics := make([]kmsg.AddPartitionsToTxnRequestTopic, 0, len(t.Topics))
			for _, tt := range t.Topics {
				topics = append(topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: tt.Topic, Partitions: tt.Partitions})
			}
			codes := addPartitionsToTxn(ctx, r, t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly, topics, false)
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = t.TransactionalID
			for i, tt := range t.Topics {
				rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rtt.Topic = tt.Topic
				for j, p := range tt.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, codes[i][j]
					rtt.Partitions = append(rtt.Partitions, rp)
				}
				rt.Topics = append(rt.Topics, rtt)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp, nil
	}
	codes := addPartitionsToTxn(ctx, r, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, req.Topics, true)
	for i, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// addPartitionsToTxn returns the error code of every requested partition.
// fromClient enables the client-side checks (ACLs on the ID and topics).
func addPartitionsToTxn(ctx context.Context, r *Request, id string, pid int64, epoch int16, verifyOnly bool, topics []kmsg.AddPartitionsToTxnRequestTopic, fromClient bool) [][]int16 {
	codes := make([][]int16, len(topics))
	for i, t := range topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	setAll := func(code int16) [][]int16 {
		for i := range codes {
			for j := range codes[i] {
				codes[i][j] = code
			}
		}
		return codes
	}
	if fromClient && !r.Authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, id) {
		return setAll(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	if r.Env.Txns == nil {
		return setAll(kerr.CoordinatorNotAvailable.Code)
	}
	var tps []txn.TopicPartition
	failed := false
	for i, t := range topics {
		topicOK := !fromClient || r.Authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, t.Topic)
		info, exists := r.Env.Broker.Topic(t.Topic)
		for j, p := range t.Partitions {
			switch {
			case !topicOK:
				codes[i][j], failed = kerr.TopicAuthorizationFailed.Code, true
			case !exists || p < 0 || p >= info.Partitions:
				codes[i][j], failed = kerr.UnknownTopicOrPartition.Code, true
			default:
				tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	if failed {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = kerr.OperationNotAttempted.Code
				}
			}
		}
		return codes
	}
	if verifyOnly {
		res, err := r.Env.Txns.Verify(ctx, id, pid, epoch, tps)
		if err != nil {
			return setAll(err.Code)
		}
		for i, t := range topics {
			for j, p := range t.Partitions {
				if e := res[txn.TopicPartition{Topic: t.Topic, Partition: p}]; e != nil {
					codes[i][j] = e.Code
				}
			}
		}
		return codes
	}
	if err := r.Env.Txns.AddPartitions(ctx, id, pid, epoch, tps, r.Header.Version < 2); err != nil {
		return setAll(err.Code)
	}
	return codes
}
