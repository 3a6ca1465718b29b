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
