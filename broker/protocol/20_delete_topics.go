package protocol

// DeleteTopics (key 20), versions 0-6.
//
// Deletes topics by name (v0-5: TopicNames; v6: Topics by name or UUID).
// Deletion is synchronous: the topic is gone from the metadata file before
// the answer, its partition data is removed right after, and consumer
// groups' committed offsets of the topic are dropped.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.DeleteTopics, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DeleteTopicsRequest)
	resp := r.NewResponse().(*kmsg.DeleteTopicsResponse)
	b := r.Env.Broker

	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: &n})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	}
	budget := r.mutationBudget(req.Version >= 5, false) // KIP-599
	defer budget.finish(r, resp)
	for _, t := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = t.name, t.id
		if code, msg, refused := budget.refuse(); refused {
			st.ErrorCode, st.ErrorMessage = code, msg
			resp.Topics = append(resp.Topics, st)
			continue
		}
		name := ""
		switch {
		case t.name != nil:
			name = *t.name
			if info, ok := b.Topic(name); ok {
				st.TopicID = info.ID
			}
		default:
			info, ok := b.TopicByID(t.id)
			if !ok {
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			name = info.Name
			st.Topic = &info.Name
		}
		if !r.Authorized(kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, name) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		partitions := 0
		if info, ok := b.Topic(name); ok {
			partitions = int(info.Partitions)
		}
		if err := b.DeleteTopic(ctx, name); err != nil {
			st.ErrorCode = broker.ErrorCode(err)
			st.ErrorMessage = broker.ErrorMessage(err)
		} else if budget.record(partitions); r.Env.Groups != nil {
			// As Kafka: committed offsets of a deleted topic go too, so a
			// topic re-created under the name does not resume from them.
			if _, err := r.Env.Groups.DeleteTopicOffsets(ctx, name); err != nil {
				r.Env.Log.Error(err, "deleting committed offsets of a deleted topic", "topic", name)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
