package protocol

// AlterPartitionReassignments (key 45), versions 0-1.
//
// Served by the controller only (NOT_CONTROLLER elsewhere; a standalone
// broker has nothing to move: INVALID_REPLICA_ASSIGNMENT per partition
// unless the target is the broker itself). Each partition with a replica
// list starts (or replaces) a KIP-455 reassignment: the new replicas start
// following, the leader adds them to the ISR once caught up, and then the
// controller drops the removed replicas (electing a new leader if the
// leader was one of them). A null replica list cancels a reassignment
// (NO_REASSIGNMENT_IN_PROGRESS if none). Per partition:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT. v1's
// AllowReplicationFactorChange=false refuses targets that change the
// replica count (INVALID_REPLICATION_FACTOR). The answer comes once the
// reassignment is recorded, not when it completes
// (ListPartitionReassignments follows it).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/meta"
)

func init() { register(kmsg.AlterPartitionAssignments, 0, 1, handleAlterPartitionReassignments) }

func handleAlterPartitionReassignments(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := r.NewResponse().(*kmsg.AlterPartitionAssignmentsResponse)
	b := r.Env.Broker
	if req.Version >= 1 {
		resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	}

	if !r.authorizedCluster(kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	results := map[meta.TopicPartition]error{}
	targets := map[meta.TopicPartition][]int32{}
	st := b.ClusterState()
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tp := meta.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if req.Version >= 1 && !req.AllowReplicationFactorChange && rp.Replicas != nil && st != nil {
				if cur, ok := st.Partition(tp); ok && len(rp.Replicas) != len(originalReplicas(cur)) {
					results[tp] = fmt.Errorf("%w: %d replicas requested, the partition has %d", kerr.InvalidReplicationFactor, len(rp.Replicas), len(originalReplicas(cur)))
					continue
				}
			}
			targets[tp] = rp.Replicas
		}
	}
	c := b.Controller()
	switch {
	case !b.Clustered():
		for tp, target := range targets {
			v, ok := b.PartitionView(tp.Topic, tp.Partition)
			switch {
			case !ok:
				results[tp] = fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, tp)
			case target == nil:
				results[tp] = meta.ErrNoReassignmentInProgress
			case len(target) != 1 || target[0] != v.Leader:
				results[tp] = fmt.Errorf("%w: a standalone broker hosts every replica", kerr.InvalidReplicaAssignment)
			default:
				results[tp] = nil
			}
		}
	case c == nil || !c.IsController():
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	case len(targets) > 0:
		actx, cancel := context.WithTimeout(ctx, time.Duration(max(req.TimeoutMillis, 1000))*time.Millisecond)
		defer cancel()
		got, err := c.AlterPartitionReassignments(actx, targets)
		if err != nil {
			resp.ErrorCode = broker.ErrorCode(broker.MetaError(err))
			resp.ErrorMessage = broker.ErrorMessage(err)
			return resp, nil
		}
		for tp, err := range got {
			results[tp] = err
		}
	}
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			if err := results[meta.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]; err != nil {
				if errors.Is(err, meta.ErrNoReassignmentInProgress) {
					err = fmt.Errorf("%w: %w", kerr.NoReassignmentInProgress, err)
				} else {
					err = broker.MetaError(err)
				}
				p.ErrorCode = broker.ErrorCode(err)
				p.ErrorMessage = broker.ErrorMessage(err)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// originalReplicas is the replica list before a reassignment in progress
// (the target replicas when none is).
func originalReplicas(s meta.PartitionState) []int32 {
	var out []int32
	for _, r := range s.Replicas {
		adding := false
		for _, a := range s.AddingReplicas {
			adding = adding || a == r
		}
		if !adding {
			out = append(out, r)
		}
	}
	return out
}
