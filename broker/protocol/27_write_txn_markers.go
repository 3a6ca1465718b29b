package protocol

// WriteTxnMarkers (key 27), versions 0-1.
//
// The transaction coordinator (broker/txn, any broker) sends it to the
// leaders of a transaction's partitions to end the transaction: for each
// marker (producer ID and epoch, committed or not, coordinator epoch) and
// each named partition this broker leads, a COMMIT or ABORT control batch
// (record.BuildMarker, Kafka's control record format) is appended as
// leader, and the partition answers once the marker is replicated as an
// acks=all produce would be: NOT_ENOUGH_REPLICAS when the ISR is below
// min.insync.replicas before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
// REQUEST_TIMED_OUT after markerTimeout, NOT_LEADER_OR_FOLLOWER when the
// leadership ends meanwhile. Other partition errors:
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH
// (a marker with an epoch older than the producer's in that partition: a
// zombie coordinator or a fenced producer), and, with ACLs, every
// partition of a principal without CLUSTER_ACTION on the cluster (brokers
// and super users only) is CLUSTER_AUTHORIZATION_FAILED, before anything
// is appended. The marker ends the producer's transaction in the log
// (LSO, aborted-transaction index; docs/transactions.md); a partition
// where the producer had no open transaction still gets the marker, as in
// Kafka. v2 (KIP-1228, TransactionVersion) is not served.

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/record"
)

func init() { register(kmsg.WriteTxnMarkers, 0, 1, handleWriteTxnMarkers) }

// markerTimeout bounds the wait for a marker's replication (Kafka uses
// request.timeout.ms, 30 s, for these appends).
const markerTimeout = 30 * time.Second

func handleWriteTxnMarkers(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.WriteTxnMarkersRequest)
	resp := r.NewResponse().(*kmsg.WriteTxnMarkersResponse)
	b := r.Env.Broker
	var reqErr error
	if !r.authorizedCluster(kmsg.ACLOperationClusterAction) {
		reqErr = kerr.ClusterAuthorizationFailed
	}
	var pending []pendingAck
	var stats []*atomic.Int64 // the counter each pending marker adds to once replicated
	for _, m := range req.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = m.ProducerID
		for _, mt := range m.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = mt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, 0, len(mt.Partitions))
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	for mi, m := range req.Markers {
		marker := record.Marker{Type: record.ControlAbort, CoordinatorEpoch: m.CoordinatorEpoch}
		if m.Committed {
			marker.Type = record.ControlCommit
		}
		for ti, mt := range m.Topics {
			st := &resp.Markers[mi].Topics[ti]
			for _, part := range mt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = part
				st.Partitions = append(st.Partitions, sp)
				spp := &st.Partitions[len(st.Partitions)-1]
				err := reqErr
				var w *pendingAck
				if err == nil {
					w, err = writeMarker(b, mt.Topic, part, m.ProducerID, m.ProducerEpoch, marker)
				}
				if err != nil {
					spp.ErrorCode = broker.ErrorCode(err)
					b.TxnMarkers().Failed.Add(1)
					r.Env.Log.V(1).Info("transaction marker refused", "topic", mt.Topic, "partition", part,
						"producerID", m.ProducerID, "producerEpoch", m.ProducerEpoch, "committed", m.Committed, "error", err.Error())
					continue
				}
				ok := &b.TxnMarkers().Aborted
				if m.Committed {
					ok = &b.TxnMarkers().Committed
				}
				if w == nil {
					ok.Add(1)
					continue
				}
				w.code = &spp.ErrorCode
				pending = append(pending, *w)
				stats = append(stats, ok)
			}
		}
	}
	if rm := b.Replicas(); rm != nil && len(pending) > 0 {
		rm.WALProduced()
	}
	if len(pending) > 0 {
		// Answer once every marker is replicated (acks=all), after the
		// handler returned so that the connection's next requests are
		// read meanwhile (responses keep their order).
		deadline := time.Now().Add(markerTimeout)
		r.Defer(func() {
			wctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			for i, w := range pending {
				err := w.p.Replica.WaitHighWatermark(wctx, w.offset, w.epoch, w.p.MinInsyncReplicas())
				if err != nil {
					if ctx.Err() != nil {
						err = fmt.Errorf("%w: broker shutting down", kerr.RequestTimedOut)
					}
					*w.code = broker.ErrorCode(err)
					b.TxnMarkers().Failed.Add(1)
					continue
				}
				stats[i].Add(1)
			}
		})
	}
	return resp, nil
}

// writeMarker appends one marker on a partition this broker leads.
func writeMarker(b *broker.Broker, topic string, partition int32, producerID int64, producerEpoch int16, m record.Marker) (*pendingAck, error) {
	p, err := b.Partition(topic, partition)
	if err != nil {
		return nil, err
	}
	if p.Replica != nil {
		if err := p.Replica.CheckLeader(-1); err != nil {
			return nil, err
		}
	}
	if err := p.CheckAcksAll(); err != nil {
		return nil, err
	}
	res, epoch, err := p.AppendMarker(producerID, producerEpoch, m)
	if err != nil {
		return nil, err
	}
	if p.Replica == nil {
		return nil, nil
	}
	return &pendingAck{p: p, offset: res.LastOffset + 1, epoch: epoch}, nil
}
