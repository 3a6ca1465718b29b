package protocol

// DescribeTopicPartitions (key 75), version 0 (KIP-966; what Kafka 3.8+
// admin clients and kafka-topics.sh --describe call when a broker
// advertises it).
//
// The topics come from the same applied metadata snapshot as Metadata's
// (broker.MetadataView), and each partition's leader, leader epoch,
// replicas, ISR and offline replicas are Metadata's (metadataPartition).
// Eligible leader replicas and the last known ELR are always empty:
// Strata's controller keeps no ELR set (it elects from the ISR, see
// docs/replication.md). An empty topic list asks for every topic.
//
// Paging is Kafka's: topics are answered in name order, starting at the
// request's Cursor (its topic from its partition index, later topics from
// partition 0); at most ResponsePartitionLimit partitions (clamped to
// 1..2000, Kafka's max.request.partition.size.limit default) are
// answered, and when the limit stops the answer before the end
// NextCursor names the first partition not answered. With named topics
// the cursor's topic must be one of them, and its partition must not be
// negative (INVALID_REQUEST for every named topic otherwise).
//
// ACLs as Metadata: a listing of every topic shows the topics the
// principal may DESCRIBE; a named topic it may not answers
// TOPIC_AUTHORIZATION_FAILED (without its topic ID, whether it exists or
// not). A named topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION
// (INVALID_TOPIC_EXCEPTION for an invalid name). Each answered topic
// carries the principal's authorized operations (the request has no flag
// for them: Kafka always fills them).

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.DescribeTopicPartitions, 0, 0, handleDescribeTopicPartitions) }

// describeTopicPartitionsMaxLimit is Kafka's max.request.partition.size.limit
// default: no answer holds more partitions.
const describeTopicPartitionsMaxLimit = 2000

func handleDescribeTopicPartitions(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeTopicPartitionsRequest)
	resp := r.NewResponse().(*kmsg.DescribeTopicPartitionsResponse)
	view := r.Env.Broker.MetadataView()

	cursorTopic, cursorPartition := "", int32(0)
	if req.Cursor != nil {
		cursorTopic, cursorPartition = req.Cursor.Topic, req.Cursor.Partition
	}
	all := len(req.Topics) == 0
	var names []string
	if all {
		for _, t := range view.Topics() {
			if t.Name >= cursorTopic {
				names = append(names, t.Name)
			}
		}
	} else {
		seen := map[string]bool{}
		for _, rt := range req.Topics {
			if rt.Topic >= cursorTopic && !seen[rt.Topic] {
				seen[rt.Topic] = true
				names = append(names, rt.Topic)
			}
		}
		sort.Strings(names)
		if req.Cursor != nil && !seen[cursorTopic] {
			return invalidDescribeTopicPartitions(req, resp), nil
		}
	}
	if cursorPartition < 0 {
		return invalidDescribeTopicPartitions(req, resp), nil
	}

	remaining := min(max(req.ResponsePartitionLimit, 1), describeTopicPartitionsMaxLimit)
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	for _, name := range names {
		if !r.authorizedQuiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
			if !all {
				r.denied(kmsg.ACLResourceTypeTopic)
				rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				rt.Topic = &name
				rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
				denied = append(denied, rt)
			}
			continue
		}
		if remaining == 0 {
			// The previous topic ended exactly at the limit: continue
			// with this one (which may not exist: Kafka's cursor too).
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		t, ok := view.Topic(name)
		if !ok {
			if all {
				continue // deleted since the listing
			}
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic = &name
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if broker.ValidateTopicName(name) != nil {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		first := int32(0)
		if name == cursorTopic {
			first = cursorPartition
		}
		end := t.Partitions
		if int64(end)-int64(first) > int64(remaining) {
			end = first + remaining
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = &name
		rt.TopicID = t.ID
		rt.IsInternal = broker.IsInternalTopic(name)
		rt.AuthorizedOperations = r.authorizedOps(kmsg.ACLResourceTypeTopic, name)
		rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		for i := first; i < end; i++ {
			mp := metadataPartition(view, name, i)
			p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			p.ErrorCode, p.Partition = mp.ErrorCode, i
			p.LeaderID, p.LeaderEpoch = mp.Leader, mp.LeaderEpoch
			p.Replicas, p.ISR, p.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
			p.EligibleLeaderReplicas, p.LastKnownELR = []int32{}, []int32{}
			rt.Partitions = append(rt.Partitions, p)
		}
		resp.Topics = append(resp.Topics, rt)
		if end < t.Partitions {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: end}
			break
		}
		if end > first {
			remaining -= end - first
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

// invalidDescribeTopicPartitions is Kafka's answer to a request it
// refuses as a whole: INVALID_REQUEST for every named topic.
func invalidDescribeTopicPartitions(req *kmsg.DescribeTopicPartitionsRequest, resp *kmsg.DescribeTopicPartitionsResponse) *kmsg.DescribeTopicPartitionsResponse {
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		name := t.Topic
		rt.Topic = &name
		rt.ErrorCode = kerr.InvalidRequest.Code
		rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
