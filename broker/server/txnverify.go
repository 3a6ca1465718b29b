package server

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/txn"
)

// txnVerifier is the KIP-890 (part 1) check a partition leader makes
// before it appends a transactional batch: is the partition part of the
// ongoing transaction of that transactional ID, producer ID and epoch?
// The transaction's coordinator answers — this broker's coordinator
// directly, another broker's through AddPartitionsToTxn v4 VerifyOnly
// sent to the broker placement names (not through kgo's coordinator
// cache, which keeps a dead coordinator until it answers NOT_COORDINATOR).
// Positive answers are not cached here: the partition's verification
// guard keeps them (broker/log, Log.TxnVerified) for as long as no marker
// ended the transaction, and a late produce is asked about again.
type txnVerifier struct {
	txns   *txn.Coordinator
	owns   func(id string) bool
	remote func(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error)
	// coordinatorOf names the broker coordinating a transactional ID
	// (group.CoordinatorFor over the live brokers; -1: none).
	coordinatorOf func(id string) int32
}

type verifiedKey struct {
	id        string
	pid       int64
	epoch     int16
	topic     string
	partition int32
}

// VerifyTxnPartition returns nil when topic/partition is in the ongoing
// transaction, else the error for the produce response.
func (v *txnVerifier) VerifyTxnPartition(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32) error {
	return v.ask(ctx, verifiedKey{transactionalID, producerID, producerEpoch, topic, partition})
}

func (v *txnVerifier) ask(ctx context.Context, key verifiedKey) error {
	tp := txn.TopicPartition{Topic: key.topic, Partition: key.partition}
	if v.owns == nil || v.owns(key.id) {
		res, kerrr := v.txns.Verify(ctx, key.id, key.pid, key.epoch, []txn.TopicPartition{tp})
		if kerrr != nil {
			return produceCode(kerrr)
		}
		if e := res[tp]; e != nil {
			return produceCode(e)
		}
		return nil
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = key.id, key.pid, key.epoch, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = key.topic, []int32{key.partition}
	t.Topics = append(t.Topics, tt)
	req.Transactions = append(req.Transactions, t)
	node := int32(-1)
	if v.coordinatorOf != nil {
		node = v.coordinatorOf(key.id)
	}
	if node < 0 {
		return kerr.NotEnoughReplicas
	}
	ctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	kresp, err := v.remote(ctx, node, req)
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return produceCode(ke)
		}
		return kerr.NotEnoughReplicas // retriable for the producer
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return produceCodeOf(resp.ErrorCode)
	}
	for _, rt := range resp.Transactions {
		for _, rtt := range rt.Topics {
			for _, rp := range rtt.Partitions {
				if rtt.Topic == key.topic && rp.Partition == key.partition {
					if rp.ErrorCode != 0 {
						return produceCodeOf(rp.ErrorCode)
					}
					return nil
				}
			}
		}
	}
	return kerr.NotEnoughReplicas
}

// produceCode maps a coordinator's answer to the produce error: problems
// of reaching the coordinator become NOT_ENOUGH_REPLICAS, which every
// producer retries (as Kafka's AddPartitionsToTxnManager does).
func produceCode(e *kerr.Error) error {
	switch e {
	case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.ConcurrentTransactions, kerr.RequestTimedOut:
		return kerr.NotEnoughReplicas
	}
	return e
}

func produceCodeOf(code int16) error {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return produceCode(ke)
	}
	return kerr.UnknownServerError
}
