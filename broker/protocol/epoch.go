package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker"
)

// checkLeaderEpoch applies Kafka's CurrentLeaderEpoch rule: -1 skips the
// check, an older epoch is fenced, a newer one is unknown to this broker.
func checkLeaderEpoch(current int32) int16 {
	switch {
	case current == -1 || current == broker.LeaderEpoch:
		return 0
	case current < broker.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}

// checkPartitionLeader returns NOT_LEADER_OR_FOLLOWER unless this broker
// leads p, then applies the CurrentLeaderEpoch rule (KIP-320) against the
// partition's leader epoch.
func checkPartitionLeader(p *broker.Partition, current int32) error {
	if p.Replica == nil {
		if code := checkLeaderEpoch(current); code != 0 {
			return kerr.ErrorForCode(code)
		}
		return nil
	}
	return p.Replica.CheckLeader(current)
}

// leaderEpoch is the leader epoch this broker serves p at.
func leaderEpoch(p *broker.Partition) int32 {
	if p.Replica == nil {
		return broker.LeaderEpoch
	}
	return p.Replica.LeaderEpoch()
}

// highWatermark is the offset below which consumers may read.
func highWatermark(p *broker.Partition) int64 {
	if p.Replica == nil {
		return p.Log.EndOffset()
	}
	return p.Replica.HighWatermark()
}
