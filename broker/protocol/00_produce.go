package protocol

// Produce (key 0), versions 3-11.
//
// Every record set is validated with record.Validate (framing, magic 2,
// CRC-32C, record structure, max.message.bytes of the topic) and appended as
// received, with offsets and the leader epoch stamped by the log. The
// batches of all partitions share the request's decompression budget
// (Request.DecompressBudget): once it is spent, the remaining partitions
// answer MESSAGE_TOO_LARGE and append nothing. Only the
// partition leader accepts records (NOT_LEADER_OR_FOLLOWER elsewhere).
// acks=1 answers once the local append returned. acks=-1 (all) first checks
// the ISR against min.insync.replicas (NOT_ENOUGH_REPLICAS, nothing is
// appended), appends, then parks the request until the high watermark
// covers every appended partition (the followers in the ISR fetched it), up
// to the request's timeout (REQUEST_TIMED_OUT); if the ISR shrank below
// min.insync.replicas meanwhile the answer is
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, and a leader that loses its leadership
// while waiting answers NOT_LEADER_OR_FOLLOWER — in all three cases the
// records may still be committed later, as in Kafka. On a standalone broker
// the broker is the whole ISR. The log's flush policy (flush.ms /
// flush.messages) decides when the data is on disk. acks=0 sends no
// response; if any partition failed the connection is closed, as Kafka
// does, so that the producer notices. Other acks values:
// INVALID_REQUIRED_ACKS. Kafka's internal topics (__consumer_offsets,
// __transaction_state) answer INVALID_TOPIC_EXCEPTION, as Kafka refuses
// client writes to them (Strata keeps their state in etcd; only the
// brokers write __consumer_offsets, as a projection of the group store,
// broker/offsetstopic; broker.CheckNotInternalTopic). With ACLs, each topic needs WRITE
// (TOPIC_AUTHORIZATION_FAILED on its partitions, nothing appended);
// idempotent producers were authorized when they got their producer ID
// (InitProducerId), as in Kafka 3.
//
// Transactions (docs/transactions.md): a request carrying transactional
// batches must name its TransactionalID, and the principal needs WRITE on
// that TRANSACTIONAL_ID (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every
// partition otherwise, as Kafka answers). The log tracks the producer's
// transaction from its first transactional batch in the partition; a
// non-transactional batch during it is INVALID_TXN_STATE, an older
// producer epoch INVALID_PRODUCER_EPOCH. KIP-890 part 1: when Env.TxnVerifier
// is set, the first transactional batch of a producer's transaction in a
// partition is appended only after the verifier confirmed that the
// partition was added to that ongoing transaction (its error code answers
// the partition otherwise), and only if no marker for the producer reached
// the partition since the verification began (the log's verification
// guard, checked under the append lock: INVALID_TXN_STATE otherwise);
// later batches of the same transaction are not verified again.
//
// Zone-local produce (wal.zonelocal.produce.enable, zonelocal.go): for a
// zone-tagged client, partitions this broker does not lead are written
// into an object of its zone's WAL bucket and handed to their leader by
// a Produce whose partitions carry TagZoneLocalRecords instead of
// records; the leader's per-partition answer is relayed (a PUT that fails:
// KAFKA_STORAGE_ERROR; a leader that cannot be reached:
// NOT_LEADER_OR_FOLLOWER; no answer in time: REQUEST_TIMED_OUT). A
// partition carrying that tag (from a broker: CLUSTER_ACTION) is read from
// the named object (KAFKA_STORAGE_ERROR when it cannot be read,
// CORRUPT_MESSAGE on a CRC-32C mismatch) and appended as any produce.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/replica"
	"github.com/strata-dev/strata/broker/traffic"
)

func init() { register(kmsg.Produce, 3, 11, handleProduce) }

// pendingAck is an appended partition of an acks=all request waiting for
// the high watermark.
type pendingAck struct {
	p      *broker.Partition
	sp     *kmsg.ProduceResponseTopicPartition
	code   *int16 // WriteTxnMarkers: where the partition's error code goes
	offset int64  // the HWM that commits the append: last offset + 1
	epoch  int32
	// appended is when the batch was appended (the acks_all_wait stage).
	appended time.Time
}

func handleProduce(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ProduceRequest)
	resp := r.NewResponse().(*kmsg.ProduceResponse)
	b := r.Env.Broker
	r.SetTraffic(traffic.Produce, "")

	var reqErr error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = fmt.Errorf("%w: acks=%d", kerr.InvalidRequiredAcks, req.Acks)
	case req.TransactionID != nil && !r.Authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionID):
		reqErr = fmt.Errorf("%w: WRITE on transactional ID %q", kerr.TransactionalIDAuthorizationFailed, *req.TransactionID)
	case req.TransactionID == nil && hasTransactionalBatches(req):
		reqErr = fmt.Errorf("%w: transactional batches without a transactional ID", kerr.TransactionalIDAuthorizationFailed)
	}
	// Forwarded records (zone-local produce, zonelocal.go): read them
	// from the forwarding broker's bucket first.
	zlFailed, zlLoaded, zlSources := loadZoneLocalRecords(ctx, r, req)
	zlZone := zoneLocalClient(r)
	var forwarded []forwardedPart
	var firstErr error
	var pending []pendingAck
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
	}
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		topicErr := reqErr
		if topicErr == nil && !r.Authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, rt.Topic) {
			topicErr = kerr.TopicAuthorizationFailed
		}
		if topicErr == nil && !r.internal {
			// Only the brokers write internal topics (the offsets
			// projection, broker/offsetstopic), as in Kafka.
			topicErr = broker.CheckNotInternalTopic(rt.Topic)
		}
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			st.Partitions = append(st.Partitions, sp)
			spp := &st.Partitions[len(st.Partitions)-1]
			err := topicErr
			if err == nil {
				err = zlFailed[[2]int{ti, pi}]
			}
			if err == nil && zlZone != "" && !hasZoneLocalTag(&rp) && broker.ValidateTopicName(rt.Topic) == nil {
				leader := partitionLeader(b, rt.Topic, rp.Partition)
				switch {
				case leader < 0:
					// No leader known: the append below answers.
				case !r.Client.zoneLocal.admit(rt.Topic, rp.Partition, leader, rp.Records):
					// zonelocal_order.go: what the old leader answers
					// the requests in flight when its leadership moves.
					err = fmt.Errorf("%w: zone-local produce: the leader of %s-%d changed to broker %d while this producer's earlier batches were in flight; retry from the first unacknowledged one",
						kerr.NotLeaderForPartition, rt.Topic, rp.Partition, leader)
				case leader != b.Config().NodeID:
					forwarded = append(forwarded, forwardedPart{sp: spp, topic: rt.Topic, part: rp.Partition, leader: leader, recs: rp.Records})
					continue
				}
			}
			if err == nil {
				var w *pendingAck
				w, err = producePartition(ctx, r.Env, req.TransactionID, rt.Topic, req.Acks, rp, spp, r.DecompressBudget(), zlSources[[2]int{ti, pi}])
				if w != nil {
					pending = append(pending, *w)
				}
			}
			if err != nil {
				spp.BaseOffset, spp.LogAppendTime, spp.LogStartOffset = -1, -1, -1
				spp.ErrorCode = broker.ErrorCode(err)
				spp.ErrorMessage = broker.ErrorMessage(err)
				if firstErr == nil {
					firstErr = fmt.Errorf("%s-%d: %w", rt.Topic, rp.Partition, err)
				}
			}
		}
	}
	var nudgeOwn func()
	if rm := b.Replicas(); rm != nil {
		// WAL replication: the request's batches are all appended, cut
		// their object now if the upload rate allows. Forwarded records
		// that share the WAL objects are added to the pending object and
		// cut with this request's own batches by the forwarder's nudge
		// (one PUT for both): the nudge comes here only if they do not
		// go through it.
		if len(forwarded) > 0 && r.Env.ZoneLocal != nil && r.Env.ZoneLocal.SharesWAL() {
			nudgeOwn = rm.WALProduced
		} else {
			rm.WALProduced()
		}
	}
	if zlLoaded > 0 && r.Env.ZoneLocal != nil {
		r.Env.ZoneLocal.Appended(zlLoaded)
	}
	var waitForwarded func()
	if len(forwarded) > 0 {
		// The forwarded partitions' answers come from their leaders; they
		// are awaited (deferred) with the local acks=all waits.
		waitForwarded = forwardProduce(ctx, r, req, forwarded, nudgeOwn)
	}
	if len(pending) > 0 || waitForwarded != nil {
		// The acks=all purgatory: one deadline for the whole request,
		// from now. The wait runs after the handler returns, so that the
		// connection's next produce requests are appended meanwhile
		// (responses keep the request order).
		deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
		r.Defer(func() {
			if waitForwarded != nil {
				waitForwarded()
			}
			wctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			for _, w := range pending {
				if err := w.p.Replica.WaitHighWatermarkSince(wctx, w.offset, w.epoch, w.p.MinInsyncReplicas(), w.appended); err != nil {
					if ctx.Err() != nil {
						err = fmt.Errorf("%w: broker shutting down", kerr.RequestTimedOut)
					}
					w.sp.BaseOffset, w.sp.LogAppendTime = -1, -1
					w.sp.ErrorCode = broker.ErrorCode(err)
					w.sp.ErrorMessage = broker.ErrorMessage(err)
				}
			}
		})
	}
	if req.Acks == 0 {
		if firstErr != nil {
			return nil, fmt.Errorf("acks=0 produce failed, closing the connection to tell the producer: %w", firstErr)
		}
		return nil, nil
	}
	return resp, nil
}

func producePartition(ctx context.Context, env *Env, txnID *string, topic string, acks int16, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition, budget *record.Budget, fwd *replica.Forwarded) (*pendingAck, error) {
	b := env.Broker
	if err := broker.ValidateTopicName(topic); err != nil {
		return nil, err
	}
	p, err := b.Partition(topic, rp.Partition)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		if internal := broker.CheckNotInternalTopic(topic); internal != nil {
			// Not retriable, as Kafka refuses writes to internal topics
			// (a topic of that name made before the names were reserved
			// is still served).
			return nil, internal
		}
	}
	if err != nil {
		return nil, err
	}
	if acks == -1 {
		if err := p.CheckAcksAll(); err != nil {
			return nil, err
		}
	}
	verify, guard, err := verifyTxnPartition(ctx, env, txnID, p, rp.Records)
	if err != nil {
		return nil, err
	}
	var res log.AppendResult
	var epoch int32
	res, epoch, err = p.AppendForwarded(rp.Records, verify, guard, budget, fwd)
	if err != nil {
		return nil, err
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = res.LogStartOffset
	if acks == -1 && p.Replica != nil {
		return &pendingAck{p: p, sp: sp, offset: res.LastOffset + 1, epoch: epoch, appended: time.Now()}, nil
	}
	return nil, nil
}

// hasTransactionalBatches reports whether any batch of the request has the
// transactional bit (Kafka's ProduceRequest.hasTransactionalRecords). It
// reads only batch headers; framing is checked by record.Validate later.
func hasTransactionalBatches(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			for buf := rp.Records; len(buf) >= record.BatchHeaderSize; {
				h, _ := record.ParseHeader(buf)
				if h.IsTransactional() {
					return true
				}
				if h.Size() < record.BatchHeaderSize || h.Size() > len(buf) {
					break
				}
				buf = buf[h.Size():]
			}
		}
	}
	return false
}

// verifyTxnPartition asks Env.TxnVerifier (KIP-890 part 1) whether the
// partition was added to the producer's ongoing transaction, before the
// first transactional batch of that transaction is appended here. verify
// is true when the append must go through Partition.AppendVerified with
// guard: the guard is made before the coordinator is asked, and the
// append refuses the batch (INVALID_TXN_STATE) if a marker cleared it
// meanwhile — the coordinator's answer was about a transaction that has
// ended since — or, with a nil guard (the transaction was open, nothing
// asked), if the transaction is no longer open. The coordinator's
// positive answer is kept in the guard (Log.TxnVerified) only while the
// guard is current, for the next requests of the same transaction.
func verifyTxnPartition(ctx context.Context, env *Env, txnID *string, p *broker.Partition, records []byte) (verify bool, guard *log.VerificationGuard, err error) {
	if env.TxnVerifier == nil || txnID == nil || len(records) < record.BatchHeaderSize {
		return false, nil, nil
	}
	h, _ := record.ParseHeader(records)
	if !h.IsTransactional() || h.ProducerID < 0 {
		return false, nil, nil
	}
	guard = p.Log.StartTxnVerification(h.ProducerID, h.ProducerEpoch)
	if guard == nil || p.Log.IsTxnVerified(guard) {
		return true, guard, nil
	}
	if p.Replica != nil {
		// Only the leader asks: elsewhere the answer is NOT_LEADER.
		if err := p.Replica.CheckLeader(-1); err != nil {
			return false, nil, err
		}
	}
	if err := env.TxnVerifier.VerifyTxnPartition(ctx, *txnID, h.ProducerID, h.ProducerEpoch, p.Topic, p.Index); err != nil {
		return false, nil, fmt.Errorf("%s-%d: transaction of %q not verified: %w", p.Topic, p.Index, *txnID, err)
	}
	p.Log.TxnVerified(guard) // false: a marker came meanwhile, and the append refuses the batch
	return true, guard, nil
}
