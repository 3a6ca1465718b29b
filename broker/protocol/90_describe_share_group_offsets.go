package protocol

// DescribeShareGroupOffsets (key 90), versions 0-1 (KIP-932; v1 adds Lag,
// KIP-1226).
//
// Answers each share partition's start offset (SPSO: every record below
// it has been acknowledged or archived; -1 for a partition the group has
// no state for) and, v1, its lag: records at or above the SPSO below the
// high watermark that are not yet acknowledged or archived (-1 when
// unknown). Topics null means every share partition the group has state
// for (here or in the store). Requires DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED)
// and on each topic (TOPIC_AUTHORIZATION_FAILED per partition); a classic
// or consumer group answers GROUP_ID_NOT_FOUND, a group this broker does
// not coordinate NOT_COORDINATOR.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
)

func init() { register(kmsg.DescribeShareGroupOffsets, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := r.NewResponse().(*kmsg.DescribeShareGroupOffsetsResponse)
	sc := r.Env.ShareCoordinator()
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		switch {
		case rg.GroupID == "":
			g.ErrorCode = kerr.InvalidGroupID.Code
		case !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, rg.GroupID):
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case sc == nil:
			g.ErrorCode = kerr.CoordinatorNotAvailable.Code
		default:
			g.ErrorCode, g.Topics = describeShareOffsets(ctx, r, sc, rg, req.Version)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func describeShareOffsets(ctx context.Context, r *Request, sc *group.ShareCoordinator, rg kmsg.DescribeShareGroupOffsetsRequestGroup, version int16) (int16, []kmsg.DescribeShareGroupOffsetsResponseGroupTopic) {
	if code := sc.CheckShareGroupID(rg.GroupID); code != 0 {
		return code, nil
	}
	var tps []group.TopicPartition
	if rg.Topics == nil {
		var err error
		if tps, err = sc.ShareGroupPartitions(ctx, rg.GroupID); err != nil {
			return group.ShareErrorCode(err), nil
		}
	}
	for _, t := range rg.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	index := map[string]int{}
	for _, tp := range tps {
		i, ok := index[tp.Topic]
		if !ok {
			i = len(out)
			index[tp.Topic] = i
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = tp.Topic
			if ti, ok := r.Env.Broker.Topic(tp.Topic); ok {
				rt.TopicID = ti.ID
			}
			out = append(out, rt)
		}
		rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
		rp.Partition, rp.StartOffset, rp.LeaderEpoch = tp.Partition, -1, -1
		ti, known := r.Env.Broker.Topic(tp.Topic)
		switch {
		case !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, tp.Topic):
			rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !known || tp.Partition < 0 || tp.Partition >= ti.Partitions:
			rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			pl, leaderEpoch, _, notLeader := sharePartition(r.Env.Broker, tp.Topic, tp.Partition, sc.Config().ReadCommitted())
			if notLeader != nil {
				leaderEpoch = group.NotLeaderEpoch
			}
			start, done, err := sc.ShareOffsets(ctx, rg.GroupID, tp.Topic, tp.Partition, leaderEpoch)
			if err != nil {
				rp.ErrorCode = group.ShareErrorCode(err)
				break
			}
			rp.StartOffset = start
			if pv, ok := r.Env.Broker.PartitionView(tp.Topic, tp.Partition); ok {
				rp.LeaderEpoch = pv.LeaderEpoch
			}
			if version >= 1 && start >= 0 && notLeader == nil {
				rp.Lag = max(pl.end-start-done, 0)
			}
		}
		out[i].Partitions = append(out[i].Partitions, rp)
	}
	return 0, out
}
