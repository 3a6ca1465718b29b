package server

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta/offsets"
	"github.com/strata-dev/strata/broker/offsetstopic"
	"github.com/strata-dev/strata/broker/protocol"
)

// OffsetsTopicConfig configures the brokers' __consumer_offsets projection
// (broker/offsetstopic): offsets.topic.enable (default true),
// offsets.topic.num.partitions (default 10) and
// offsets.topic.replication.factor (default 3, capped at the live
// brokers).
type OffsetsTopicConfig struct {
	Disabled          bool
	Partitions        int32
	ReplicationFactor int16
}

// offsetsTopicCreator is Env.CreateOffsetsTopic: nil when the projection
// is off.
func (s *Server) offsetsTopicCreator() func(context.Context) error {
	oc := s.cfg.OffsetsTopic
	if oc.Disabled || (s.cluster == nil && s.offsets == nil) {
		return nil
	}
	return func(ctx context.Context) error {
		return offsetstopic.CreateTopic(ctx, s.broker, oc.Partitions, oc.ReplicationFactor)
	}
}

// startOffsetsTopic starts the projector that writes the group store to
// __consumer_offsets for the partitions of it this broker leads.
func (s *Server) startOffsetsTopic(ctx context.Context, env *protocol.Env) {
	oc := s.cfg.OffsetsTopic
	if oc.Disabled {
		return
	}
	var feed offsetstopic.Feed
	switch {
	case s.cluster != nil:
		feed = offsets.New(s.cluster.store)
	case s.offsets != nil:
		feed = &offsetstopic.PollFeed{Store: s.offsets, Version: s.offsets.Size}
	default:
		return
	}
	log := logr.FromContextOrDiscard(ctx).WithName("offsets-topic")
	p := offsetstopic.New(offsetstopic.Config{
		Feed: feed, Broker: s.broker,
		Produce: func(ctx context.Context, partition int32, batch []byte) error {
			return produceInternal(ctx, env, offsetstopic.Topic, partition, batch)
		},
		Partitions: oc.Partitions, ReplicationFactor: oc.ReplicationFactor,
		Log: log,
	})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
		go func() { <-s.stop; cancel() }()
		p.Run(ctx)
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
