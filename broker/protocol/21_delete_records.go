package protocol

// DeleteRecords (key 21), versions 0-2.
//
// Moves a partition's log start offset forward (offset -1 means the high
// watermark); segments wholly below it are removed by the log, and for a
// tiered topic from the slow tier too (its manifest is written first). An offset
// above the high watermark gets OFFSET_OUT_OF_RANGE. LowWatermark is the
// resulting log start offset. Kafka's internal topics (the brokers'
// __consumer_offsets projection) answer INVALID_TOPIC_EXCEPTION, as Kafka
// refuses to delete records of an internal topic.
//
// Zone-local produce (wal.zonelocal.produce.enable, zonelocal.go): a
// zone-tagged client's partitions this broker does not lead are forwarded
// to their leader over the inter-broker listener and its answer relayed
// (NOT_LEADER_OR_FOLLOWER when the leader cannot be reached).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.DeleteRecords, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DeleteRecordsRequest)
	resp := r.NewResponse().(*kmsg.DeleteRecordsResponse)
	remote := zoneLocalRemote(r)
	var remotes []zlRemote
	for ti, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		allowed := r.Authorized(kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, rt.Topic)
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			err := broker.CheckNotInternalTopic(rt.Topic) // Kafka: cannot delete records of an internal topic
			if leader := zlLeader(remote, rt.Topic, rp.Partition); err == nil && leader >= 0 {
				remotes = append(remotes, zlRemote{ti, pi, leader})
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			var low int64
			if err == nil {
				low, err = deleteRecords(r.Env.Broker, rt.Topic, rp.Partition, rp.Offset)
			}
			if err != nil {
				sp.ErrorCode = broker.ErrorCode(err)
			} else {
				sp.LowWatermark = low
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(remotes) > 0 {
		forwardDeleteRecords(ctx, r, req, resp, remotes)
	}
	return resp, nil
}

func deleteRecords(b *broker.Broker, topic string, partition int32, offset int64) (int64, error) {
	p, err := b.Partition(topic, partition)
	if err != nil {
		return -1, err
	}
	hw := p.Log.EndOffset()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, fmt.Errorf("%w: offset %d, high watermark %d", kerr.OffsetOutOfRange, offset, hw)
	}
	// Both tiers of a tiered topic (the slow tier's manifest first).
	if err := p.DeleteRecordsBefore(offset); err != nil {
		return -1, err
	}
	return p.StartOffset()
}
