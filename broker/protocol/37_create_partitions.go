package protocol

// CreatePartitions (key 37), versions 0-3.
//
// Raises a topic's partition count (never lowers it: INVALID_PARTITIONS). A
// manual assignment must place every new partition on this broker.
// ValidateOnly checks without creating.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.CreatePartitions, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.CreatePartitionsRequest)
	resp := r.NewResponse().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	budget := r.mutationBudget(req.Version >= 3, req.ValidateOnly) // KIP-599
	defer budget.finish(r, resp)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if code, msg, refused := budget.refuse(); refused {
			st.ErrorCode, st.ErrorMessage = code, msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if count[rt.Topic] > 1 {
			st.ErrorCode = kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !r.Authorized(kmsg.ACLOperationAlter, kmsg.ACLResourceTypeTopic, rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		var assignment [][]int32
		if rt.Assignment != nil {
			assignment = make([][]int32, 0, len(rt.Assignment))
			for _, a := range rt.Assignment {
				assignment = append(assignment, a.Replicas)
			}
		}
		before := int32(0)
		if info, ok := r.Env.Broker.Topic(rt.Topic); ok {
			before = info.Partitions
		}
		if err := r.Env.Broker.CreatePartitions(ctx, rt.Topic, rt.Count, assignment, req.ValidateOnly); err != nil {
			st.ErrorCode = broker.ErrorCode(err)
			st.ErrorMessage = broker.ErrorMessage(err)
		} else {
			budget.record(int(rt.Count - before))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
