package protocol

// OffsetFetch (key 9), versions 0-9.
//
// Returns committed offsets, leader epochs (v5+) and metadata; -1 for
// partitions without a commit and for unknown groups. v2+ with a null
// topic list returns every committed partition of the group; v8+ fetches
// several groups in one request. RequireStable (v7+) never has pending
// transactional offsets to wait for. v9's member id / epoch belong to the
// KIP-848 protocol and are ignored for classic groups, as in Kafka. v10
// (topic ids) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetFetch, 0, 9, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.OffsetFetchRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	if !r.authzOn() {
		return r.Env.Groups.OffsetFetch(ctx, req), nil
	}
	return authorizedOffsetFetch(ctx, r, req), nil
}

// authorizedOffsetFetch is OffsetFetch under ACLs, as Kafka answers it: a
// group the principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED
// (its offsets are not read); of a group it may, the topics it may not
// DESCRIBE are left out of an all-topics answer and answer
// TOPIC_AUTHORIZATION_FAILED when named.
func authorizedOffsetFetch(ctx context.Context, r *Request, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	topicOK := func(topic string) bool {
		return r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
	}
	if req.Version < 8 {
		if !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, req.Group) {
			resp := r.NewResponse().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, kerr.GroupAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		}
		named := req.Topics != nil
		resp := r.Env.Groups.OffsetFetch(ctx, req)
		kept := resp.Topics[:0]
		for _, t := range resp.Topics {
			switch {
			case topicOK(t.Topic):
			case named:
				for i := range t.Partitions {
					t.Partitions[i].Offset, t.Partitions[i].Metadata = -1, nil
					t.Partitions[i].ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
			default:
				continue
			}
			kept = append(kept, t)
		}
		resp.Topics = kept
		return resp
	}
	var allowed []kmsg.OffsetFetchRequestGroup
	named := map[string]bool{}
	for _, g := range req.Groups {
		if r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
			allowed = append(allowed, g)
			named[g.Group] = g.Topics != nil
		}
	}
	all := req.Groups
	resp := r.NewResponse().(*kmsg.OffsetFetchResponse)
	if len(allowed) > 0 {
		req.Groups = allowed
		resp = r.Env.Groups.OffsetFetch(ctx, req)
	}
	byGroup := map[string]kmsg.OffsetFetchResponseGroup{}
	for _, g := range resp.Groups {
		kept := g.Topics[:0]
		for _, t := range g.Topics {
			switch {
			case topicOK(t.Topic):
			case named[g.Group]:
				for i := range t.Partitions {
					t.Partitions[i].Offset, t.Partitions[i].Metadata = -1, nil
					t.Partitions[i].ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
			default:
				continue
			}
			kept = append(kept, t)
		}
		g.Topics = kept
		byGroup[g.Group] = g
	}
	resp.Groups = nil
	for _, g := range all {
		if rg, ok := byGroup[g.Group]; ok {
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
