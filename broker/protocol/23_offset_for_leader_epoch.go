package protocol

// OffsetForLeaderEpoch (key 23), versions 0-4.
//
// Answers the end offset of the requested leader epoch (the start offset of
// the next larger epoch, or the log end offset for the latest epoch) from
// the log's epoch checkpoint; -1/-1 (UNDEFINED) for an epoch the log never
// had. CurrentLeaderEpoch (v2+) is checked. Clients use it to detect log
// truncation after a leader change (KIP-320).
//
// Zone-local produce (wal.zonelocal.produce.enable, zonelocal.go): a
// zone-tagged client's partitions this broker does not lead are forwarded
// to their leader over the inter-broker listener and its answer relayed
// (NOT_LEADER_OR_FOLLOWER when the leader cannot be reached).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.OffsetForLeaderEpoch, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.NewResponse().(*kmsg.OffsetForLeaderEpochResponse)
	b := r.Env.Broker
	// As Kafka: CLUSTER_ACTION (followers) or DESCRIBE on the topic
	// (consumers since KIP-320, librdkafka at v2 too), whatever the
	// ReplicaID says.
	clusterOK := r.authorizedQuiet(kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, auth.ClusterResourceName)
	remote := zoneLocalRemote(r)
	var remotes []zlRemote
	for ti, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		allowed := clusterOK || r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, rt.Topic)
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p, err := b.Partition(rt.Topic, rp.Partition)
			leader := int32(-1)
			if allowed && req.ReplicaID < 0 {
				leader = zlLeader(remote, rt.Topic, rp.Partition)
			}
			switch {
			case !allowed:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case leader >= 0:
				remotes = append(remotes, zlRemote{ti, pi, leader})
			case err != nil:
				sp.ErrorCode = broker.ErrorCode(err)
			case req.Version >= 2 && checkPartitionLeader(p, rp.CurrentLeaderEpoch) != nil:
				sp.ErrorCode = broker.ErrorCode(checkPartitionLeader(p, rp.CurrentLeaderEpoch))
			case req.Version < 2 && checkPartitionLeader(p, -1) != nil:
				sp.ErrorCode = broker.ErrorCode(checkPartitionLeader(p, -1))
			default:
				sp.LeaderEpoch, sp.EndOffset = p.Log.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(remotes) > 0 {
		forwardOffsetForLeaderEpoch(ctx, r, req, resp, remotes)
	}
	return resp, nil
}
