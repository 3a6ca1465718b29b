package protocol

// CreateTopics (key 19), versions 0-7.
//
// Partitions -1 means num.partitions; the replication factor must be 1 or
// -1 on a single broker (INVALID_REPLICATION_FACTOR otherwise); a manual
// replica assignment must place every partition on this broker. Configs are
// validated (unknown names and bad values: INVALID_CONFIG). ValidateOnly
// (v1+) checks everything without creating. A topic named twice in one
// request gets INVALID_REQUEST. v5+ responses carry the partition count,
// replication factor and every config of the created topic; v7 the UUID.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.CreateTopics, 0, 7, handleCreateTopics) }

func handleCreateTopics(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.CreateTopicsRequest)
	resp := r.NewResponse().(*kmsg.CreateTopicsResponse)
	b := r.Env.Broker

	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	budget := r.mutationBudget(req.Version >= 6, req.ValidateOnly) // KIP-599
	defer budget.finish(r, resp)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		if code, msg, refused := budget.refuse(); refused {
			st.ErrorCode, st.ErrorMessage = code, msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if count[rt.Topic] > 1 {
			st.ErrorCode = kerr.InvalidRequest.Code
			msg := "topic named more than once in the request"
			st.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !r.authorizedQuiet(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, auth.ClusterResourceName) &&
			!r.Authorized(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			msg := "CREATE on the cluster or on the topic is needed"
			st.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		spec := broker.TopicSpec{Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor, Configs: map[string]*string{}}
		for _, a := range rt.ReplicaAssignment {
			for int(a.Partition) >= len(spec.Assignment) && a.Partition < 100000 {
				spec.Assignment = append(spec.Assignment, nil)
			}
			if a.Partition >= 0 && a.Partition < 100000 {
				spec.Assignment[a.Partition] = a.Replicas
			}
		}
		for _, c := range rt.Configs {
			spec.Configs[c.Name] = c.Value
		}
		info, err := b.CreateTopic(ctx, spec, req.ValidateOnly)
		if err != nil {
			st.ErrorCode = broker.ErrorCode(err)
			st.ErrorMessage = broker.ErrorMessage(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !req.ValidateOnly {
			budget.record(int(info.Partitions))
		}
		st.TopicID = info.ID
		st.NumPartitions = info.Partitions
		st.ReplicationFactor = 1
		var entries []broker.ConfigEntry
		if req.ValidateOnly || !r.authorizedQuiet(kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, rt.Topic) {
			// The topic does not exist, or its creator may not see its
			// configs (Kafka leaves them out then too): report none.
			entries = nil
		} else if entries, err = b.DescribeTopicConfigs(rt.Topic, nil); err != nil {
			entries = nil // deleted concurrently: the creation still succeeded
		}
		for _, e := range entries {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name = e.Name
			v := e.Value
			c.Value = &v
			c.ReadOnly = e.ReadOnly
			c.Source = e.Source
			c.IsSensitive = e.Sensitive
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
