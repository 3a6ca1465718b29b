package protocol

// DescribeProducers (key 61), version 0 (KIP-664).
//
// For each named partition this broker leads: the producers its log
// tracks (idempotent and transactional), with epoch, last sequence, last
// timestamp (the broker's clock at the producer's last append; the batch's
// timestamp for state replayed from the log), the coordinator epoch of the
// producer's last transaction marker (-1 before any) and the first offset
// of its ongoing transaction in the partition (-1 when none): what
// kafka-transactions.sh describe-producers and find-hanging show. Errors
// per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, and
// with ACLs TOPIC_AUTHORIZATION_FAILED without READ on the topic (Kafka's
// rule).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.DescribeProducers, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeProducersRequest)
	resp := r.NewResponse().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		allowed := r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, rt.Topic)
		for _, part := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = part
			var err error
			if !allowed {
				err = kerr.TopicAuthorizationFailed
			} else {
				sp.ActiveProducers, err = describeProducers(r.Env.Broker, rt.Topic, part)
			}
			if err != nil {
				sp.ErrorCode = broker.ErrorCode(err)
				sp.ErrorMessage = broker.ErrorMessage(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func describeProducers(b *broker.Broker, topic string, partition int32) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, error) {
	p, err := b.Partition(topic, partition)
	if err != nil {
		return nil, err
	}
	if err := checkPartitionLeader(p, -1); err != nil {
		return nil, err
	}
	out := []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
	for _, pi := range p.Log.Producers() {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ID, int32(pi.Epoch), pi.LastSequence
		ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.LastTimestamp, pi.CoordinatorEpoch, pi.TxnStartOffset
		out = append(out, ap)
	}
	return out, nil
}
