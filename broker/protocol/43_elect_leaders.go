package protocol

// ElectLeaders (key 43), versions 0-2.
//
// Served by the controller only (others answer NOT_CONTROLLER, and clients
// such as kadm retry against the controller named in Metadata). Election
// type 0 (preferred, the only one in v0) moves each partition's leadership
// to its first replica when it is alive and in the ISR, with a new leader
// epoch (meta.Controller.PreferredLeaderElection); type 1 (unclean) elects a
// live out-of-sync replica for partitions without a live ISR member. Per
// partition: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. A null topic
// list means every partition; its answer leaves out partitions that needed
// no election, as Kafka does. Standalone brokers lead everything already:
// every partition is ELECTION_NOT_NEEDED.

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/meta"
)

func init() { register(kmsg.ElectLeaders, 0, 2, handleElectLeaders) }

func handleElectLeaders(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ElectLeadersRequest)
	resp := r.NewResponse().(*kmsg.ElectLeadersResponse)
	b := r.Env.Broker

	var tps []meta.TopicPartition
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			tps = append(tps, meta.TopicPartition{Topic: rt.Topic, Partition: p})
		}
	}
	all := req.Topics == nil
	fail := func(code int16) kmsg.Response {
		if req.Version >= 1 {
			resp.ErrorCode = code
		}
		for _, rt := range req.Topics {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, code
				t.Partitions = append(t.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	if !r.authorizedCluster(kmsg.ACLOperationAlter) {
		return fail(kerr.ClusterAuthorizationFailed.Code), nil
	}
	if !b.Clustered() {
		results := map[meta.TopicPartition]error{}
		for _, tp := range tps {
			if _, ok := b.PartitionView(tp.Topic, tp.Partition); ok {
				results[tp] = meta.ErrElectionNotNeeded
			} else {
				results[tp] = meta.ErrUnknownTopic
			}
		}
		return electResults(resp, results, all), nil
	}
	c := b.Controller()
	if c == nil || !c.IsController() {
		return fail(kerr.NotController.Code), nil
	}
	timeout := time.Duration(max(req.TimeoutMillis, 1)) * time.Millisecond
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var results map[meta.TopicPartition]error
	var err error
	if req.Version >= 1 && req.ElectionType == 1 {
		results, err = c.UncleanLeaderElection(ectx, tps)
	} else {
		if req.Version >= 1 && req.ElectionType != 0 {
			return fail(kerr.InvalidRequest.Code), nil
		}
		results, err = c.PreferredLeaderElection(ectx, tps)
	}
	if err != nil {
		return fail(broker.ErrorCode(broker.MetaError(err))), nil
	}
	return electResults(resp, results, all), nil
}

func electResults(resp *kmsg.ElectLeadersResponse, results map[meta.TopicPartition]error, all bool) kmsg.Response {
	byTopic := map[string][]kmsg.ElectLeadersResponseTopicPartition{}
	for tp, err := range results {
		if all && errors.Is(err, meta.ErrElectionNotNeeded) {
			continue
		}
		sp := kmsg.NewElectLeadersResponseTopicPartition()
		sp.Partition = tp.Partition
		if err != nil {
			err = broker.MetaError(err)
			sp.ErrorCode = broker.ErrorCode(err)
			sp.ErrorMessage = broker.ErrorMessage(err)
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], sp)
	}
	names := make([]string, 0, len(byTopic))
	for n := range byTopic {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = n
		t.Partitions = byTopic[n]
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
