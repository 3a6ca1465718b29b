package server

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/internaltopic"
	"github.com/strata-dev/strata/broker/meta/offsets"
	"github.com/strata-dev/strata/broker/meta/txnstate"
	"github.com/strata-dev/strata/broker/offsetstopic"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/txn"
	"github.com/strata-dev/strata/broker/txntopic"
)

// InternalTopicConfig configures one of the brokers' internal topic
// projections: __consumer_offsets (broker/offsetstopic; offsets.topic.*)
// or __transaction_state (broker/txntopic; transaction.state.log.*):
// <prefix>.enable (default true), <prefix>.num.partitions (default 10)
// and <prefix>.replication.factor (default 3, capped at the live
// brokers).
type InternalTopicConfig struct {
	Disabled          bool
	Partitions        int32
	ReplicationFactor int16
}

// internalTopicCreator is Env.CreateInternalTopic: it creates the internal
// topic named (a Metadata request naming it) when its projection is on,
// and answers UNKNOWN_TOPIC_OR_PARTITION when it is off.
func (s *Server) internalTopicCreator() func(ctx context.Context, name string) error {
	if s.cluster == nil && s.offsets == nil {
		return nil
	}
	return func(ctx context.Context, name string) error {
		var spec internaltopic.Spec
		switch c := s.cfg; name {
		case offsetstopic.Topic:
			if c.OffsetsTopic.Disabled {
				return errProjectionOff(name, "offsets.topic.enable")
			}
			spec = offsetstopic.Spec(c.OffsetsTopic.Partitions, c.OffsetsTopic.ReplicationFactor)
		case txntopic.Topic:
			if c.TxnStateTopic.Disabled {
				return errProjectionOff(name, "transaction.state.log.enable")
			}
			spec = txntopic.Spec(c.TxnStateTopic.Partitions, c.TxnStateTopic.ReplicationFactor)
		default:
			return nil
		}
		return internaltopic.CreateTopic(ctx, s.broker, spec)
	}
}

func errProjectionOff(topic, setting string) error {
	return fmt.Errorf("%w: %s is not written on this cluster (%s=false)", kerr.UnknownTopicOrPartition, topic, setting)
}

// startInternalTopics starts the projectors that write the group store to
// __consumer_offsets and the transaction store to __transaction_state,
// for the partitions of them this broker leads.
func (s *Server) startInternalTopics(ctx context.Context, env *protocol.Env) {
	log := logr.FromContextOrDiscard(ctx)
	produce := func(topic string) internaltopic.Produce {
		return func(ctx context.Context, partition int32, batch []byte) error {
			return produceInternal(ctx, env, topic, partition, batch)
		}
	}
	if oc := s.cfg.OffsetsTopic; !oc.Disabled && (s.cluster != nil || s.offsets != nil) {
		var feed offsetstopic.Feed
		if s.cluster != nil {
			feed = offsets.New(s.cluster.store)
		} else {
			feed = &offsetstopic.PollFeed{Store: s.offsets, Version: s.offsets.Size}
		}
		l := log.WithName("offsets-topic")
		s.runInternalTopic(l, offsetstopic.New(offsetstopic.Config{Feed: feed, Config: internaltopic.Config{
			Topic:  internaltopic.Spec{Partitions: oc.Partitions, ReplicationFactor: oc.ReplicationFactor},
			Broker: s.broker, Produce: produce(offsetstopic.Topic), Log: l,
		}}).Run)
	}
	if tc := s.cfg.TxnStateTopic; !tc.Disabled && s.txns != nil {
		var feed txntopic.Feed
		switch st := s.txnStore.(type) {
		case *txnstate.Store:
			feed = st
		case *txn.FileStore:
			feed = &txntopic.PollFeed{Store: st, Version: st.Version}
		default:
			return
		}
		l := log.WithName("txn-state-topic")
		s.runInternalTopic(l, txntopic.New(txntopic.Config{Feed: feed,
			OffsetsPartitions: offsetstopic.Spec(s.cfg.OffsetsTopic.Partitions, 0).Partitions,
			Config: internaltopic.Config{
				Topic:  internaltopic.Spec{Partitions: tc.Partitions, ReplicationFactor: tc.ReplicationFactor},
				Broker: s.broker, Produce: produce(txntopic.Topic), Log: l,
			}}).Run)
	}
}

// runInternalTopic runs a projector until the server stops.
func (s *Server) runInternalTopic(log logr.Logger, run func(context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
		go func() { <-s.stop; cancel() }()
		run(ctx)
	}()
}

// produceInternal appends batch to a partition this broker leads, acks=all,
// as a request the broker serves itself (no ACLs, internal topics allowed).
func produceInternal(ctx context.Context, env *protocol.Env, topic string, partition int32, batch []byte) error {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := env.Internal(ctx, req)
	if err != nil {
		return err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return fmt.Errorf("produce to %s-%d: malformed answer", topic, partition)
	}
	if err := kerr.ErrorForCode(pr.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("produce to %s-%d: %w", topic, partition, err)
	}
	return nil
}
