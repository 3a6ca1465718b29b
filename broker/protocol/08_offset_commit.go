package protocol

// OffsetCommit (key 8), versions 0-9.
//
// Simple commits (v0, or generation -1 with an empty member id) are
// accepted while the group has no members; otherwise the member and
// generation must match the group's. Commits to partitions that do not
// exist get UNKNOWN_TOPIC_OR_PARTITION, metadata over
// offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE. The commit is
// answered after it is durable in the offset store. v10 (topic ids,
// KIP-848) is not served. A share group's id answers GROUP_ID_NOT_FOUND
// (broker/group, grouptype.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetCommit, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.OffsetCommitRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.CoordinatorNotAvailable.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	// As Kafka: READ on the group (else every partition answers
	// GROUP_AUTHORIZATION_FAILED), then READ on each topic
	// (TOPIC_AUTHORIZATION_FAILED on its partitions, nothing committed).
	groupOK := r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group)
	var allowed, denied []kmsg.OffsetCommitRequestTopic
	for _, t := range req.Topics {
		if groupOK && r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
			allowed = append(allowed, t)
		} else {
			denied = append(denied, t)
		}
	}
	resp := r.NewResponse().(*kmsg.OffsetCommitResponse)
	if groupOK && (len(allowed) > 0 || len(req.Topics) == 0) {
		req.Topics = allowed
		resp = r.Env.Groups.OffsetCommit(ctx, req)
	}
	code := kerr.TopicAuthorizationFailed.Code
	if !groupOK {
		code = kerr.GroupAuthorizationFailed.Code
	}
	for _, t := range denied {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
