package protocol

// Produce (key 0), versions 3-11.
//
// Every record set is validated with record.Validate (framing, magic 2,
// CRC-32C, record structure, max.message.bytes of the topic) and appended as
// received, with offsets and the leader epoch stamped by the log.
// acks=1 and acks=-1 answer once the append returned (a single broker is
// the whole ISR, so -1 completes on append; with min.insync.replicas above
// 1, acks=-1 gets NOT_ENOUGH_REPLICAS and nothing is appended, as in Kafka); the log's flush policy
// (flush.ms / flush.messages, 0 = fsync before answering) decides when the
// data is on disk. acks=0 sends no response; if any partition failed the
// connection is closed, as Kafka does, so that the producer notices.
// Other acks values: INVALID_REQUIRED_ACKS. Transactional produce is not
// supported (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.Produce, 3, 11, handleProduce) }

func handleProduce(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ProduceRequest)
	resp := r.NewResponse().(*kmsg.ProduceResponse)
	b := r.Env.Broker

	var reqErr error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = fmt.Errorf("%w: acks=%d", kerr.InvalidRequiredAcks, req.Acks)
	case req.TransactionID != nil:
		reqErr = fmt.Errorf("%w: transactions are not supported", kerr.TransactionalIDAuthorizationFailed)
	}
	var firstErr error
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			err := reqErr
			if err == nil {
				err = producePartition(b, rt.Topic, req.Acks, rp, &sp)
			}
			if err != nil {
				sp.ErrorCode = broker.ErrorCode(err)
				sp.ErrorMessage = broker.ErrorMessage(err)
				if firstErr == nil {
					firstErr = fmt.Errorf("%s-%d: %w", rt.Topic, rp.Partition, err)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		if firstErr != nil {
			return nil, fmt.Errorf("acks=0 produce failed, closing the connection to tell the producer: %w", firstErr)
		}
		return nil, nil
	}
	return resp, nil
}

func producePartition(b *broker.Broker, topic string, acks int16, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) error {
	if err := broker.ValidateTopicName(topic); err != nil {
		return err
	}
	p, err := b.Partition(topic, rp.Partition)
	if err != nil {
		return err
	}
	if acks == -1 {
		if err := p.CheckAcksAll(); err != nil {
			return err
		}
	}
	res, err := p.Append(rp.Records)
	if err != nil {
		return err
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = res.LogStartOffset
	return nil
}
