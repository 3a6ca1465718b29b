package protocol

// Transaction markers for group offsets.
//
// Kafka's transaction coordinator completes a transaction's consumer
// offsets by writing a marker to the __consumer_offsets partition of the
// group, i.e. at the group's coordinator. Strata keeps offsets in the
// group coordinator's store, not in a partition, so a WriteTxnMarkers
// entry naming group.OffsetsTopic is served here, by the group
// coordinator (Env.Groups.CompleteTxn: the producer's pending offsets
// become committed, or are dropped), and the rest of the request goes on
// to the WriteTxnMarkers handler of the partitions (27_write_txn_markers.go).
// The partition number is ignored: the producer's pending offsets in every
// group this broker coordinates are completed. Requires CLUSTER_ACTION.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
)

func init() { intercept(kmsg.WriteTxnMarkers, groupTxnMarkers) }

func groupTxnMarkers(next Handler) Handler {
	return func(ctx context.Context, r *Request) (kmsg.Response, error) {
		req, ok := r.Msg.(*kmsg.WriteTxnMarkersRequest)
		if !ok {
			return next(ctx, r)
		}
		var partitionMarkers []kmsg.WriteTxnMarkersRequestMarker
		groupTopics := make([][]kmsg.WriteTxnMarkersResponseMarkerTopic, len(req.Markers))
		hasGroups := false
		for i, m := range req.Markers {
			rest := m
			rest.Topics = nil
			for _, t := range m.Topics {
				if t.Topic != group.OffsetsTopic {
					rest.Topics = append(rest.Topics, t)
					continue
				}
				hasGroups = true
				groupTopics[i] = append(groupTopics[i], completeGroupMarker(ctx, r, m, t))
			}
			if len(rest.Topics) > 0 {
				partitionMarkers = append(partitionMarkers, rest)
			}
		}
		if !hasGroups {
			return next(ctx, r)
		}
		inner := map[int64][]kmsg.WriteTxnMarkersResponseMarkerTopic{}
		if len(partitionMarkers) > 0 {
			sub := *req
			sub.Markers = partitionMarkers
			r2 := *r
			r2.Msg = &sub
			resp, err := next(ctx, &r2)
			if err != nil {
				return nil, err
			}
			r.finish = r2.finish
			for _, m := range resp.(*kmsg.WriteTxnMarkersResponse).Markers {
				inner[m.ProducerID] = append(inner[m.ProducerID], m.Topics...)
			}
		}
		resp := r.NewResponse().(*kmsg.WriteTxnMarkersResponse)
		for i, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			rm.Topics = append(inner[m.ProducerID], groupTopics[i]...)
			delete(inner, m.ProducerID)
			resp.Markers = append(resp.Markers, rm)
		}
		return resp, nil
	}
}

// completeGroupMarker completes the marker's producer's pending group
// offsets and returns the topic's result.
func completeGroupMarker(ctx context.Context, r *Request, m kmsg.WriteTxnMarkersRequestMarker, t kmsg.WriteTxnMarkersRequestMarkerTopic) kmsg.WriteTxnMarkersResponseMarkerTopic {
	code := int16(0)
	switch {
	case !r.authorizedCluster(kmsg.ACLOperationClusterAction):
		code = kerr.ClusterAuthorizationFailed.Code
	case r.Env.Groups == nil:
		code = kerr.CoordinatorNotAvailable.Code
	default:
		if err := r.Env.Groups.CompleteTxn(ctx, m.ProducerID, m.Committed); err != nil {
			r.Env.Log.Error(err, "completing transactional offsets", "producerID", m.ProducerID, "commit", m.Committed)
			code = kerr.CoordinatorNotAvailable.Code
		}
	}
	rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
	rt.Topic = group.OffsetsTopic
	for _, p := range t.Partitions {
		rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
		rp.Partition, rp.ErrorCode = p, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}
