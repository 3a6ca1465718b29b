package protocol

// ListPartitionReassignments (key 46), version 0.
//
// Lists the reassignments in progress (KIP-455) from the cluster metadata:
// per partition the replicas (target followed by those being removed), the
// adding and the removing replicas. A null topic list lists all; named
// partitions without a reassignment are left out, as in Kafka. Answered by
// the controller only (NOT_CONTROLLER elsewhere); a standalone broker has
// none.

import (
	"context"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta"
)

func init() { register(kmsg.ListPartitionReassignments, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ListPartitionReassignmentsRequest)
	resp := r.NewResponse().(*kmsg.ListPartitionReassignmentsResponse)
	b := r.Env.Broker
	if !r.authorizedCluster(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	st := b.ClusterState()
	if st == nil {
		return resp, nil
	}
	if c := b.Controller(); c == nil || !c.IsController() {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	want := func(tp meta.TopicPartition) bool {
		if req.Topics == nil {
			return true
		}
		for _, rt := range req.Topics {
			if rt.Topic == tp.Topic && slices.Contains(rt.Partitions, tp.Partition) {
				return true
			}
		}
		return false
	}
	byTopic := map[string][]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for tp, ps := range st.Reassignments() {
		if !want(tp) {
			continue
		}
		p := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		p.Partition = tp.Partition
		p.Replicas = slices.Clone(ps.Replicas)
		p.AddingReplicas = slices.Clone(ps.AddingReplicas)
		p.RemovingReplicas = slices.Clone(ps.RemovingReplicas)
		if p.AddingReplicas == nil {
			p.AddingReplicas = []int32{}
		}
		if p.RemovingReplicas == nil {
			p.RemovingReplicas = []int32{}
		}
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	names := make([]string, 0, len(byTopic))
	for n := range byTopic {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := kmsg.NewListPartitionReassignmentsResponseTopic()
		t.Topic = n
		t.Partitions = byTopic[n]
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
