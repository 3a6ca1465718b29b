package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestDescribeGroupsVersions: an unknown group is Dead without error below
// v6 and GROUP_ID_NOT_FOUND with a message from v6 (KIP-1043, Kafka 4.0);
// a group that exists is described without error at both.
func TestDescribeGroupsVersions(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("group.initial.rebalance.delay.ms", "0"))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "dg", 1, nil)
	member := newClient(t, b.Addr(), kgo.ConsumerGroup("dg-live"), kgo.ConsumeTopics("dg"), kgo.DisableClientMetrics())
	waitFor(t, "dg-live stable", func() bool {
		ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
		member.PollFetches(ctx) // joins
		cancel()
		ds, err := adm.DescribeGroups(testCtx(t), "dg-live")
		return err == nil && ds["dg-live"].State == "Stable"
	})
	for _, tc := range []struct {
		name    string
		opts    []kgo.Opt
		version int16
	}{
		{"v5 (Kafka 3.9)", []kgo.Opt{kgo.MaxVersions(kversion.V3_9_0())}, 5},
		{"v6", nil, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = []string{"dg-missing", "dg-live"}
			resp, err := req.RequestWith(testCtx(t), newClient(t, b.Addr(), tc.opts...))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Version != tc.version {
				t.Fatalf("answered v%d, want v%d", resp.Version, tc.version)
			}
			missing, live := resp.Groups[0], resp.Groups[1]
			wantCode := int16(0)
			if tc.version >= 6 {
				wantCode = kerr.GroupIDNotFound.Code
			}
			if missing.State != "Dead" || missing.ErrorCode != wantCode || (tc.version >= 6) != (missing.ErrorMessage != nil) {
				t.Fatalf("unknown group: state %s, error %v, message %v", missing.State, kerr.ErrorForCode(missing.ErrorCode), missing.ErrorMessage)
			}
			if live.ErrorCode != 0 || live.State != "Stable" || len(live.Members) != 1 {
				t.Fatalf("live group: state %s, error %v, %d members", live.State, kerr.ErrorForCode(live.ErrorCode), len(live.Members))
			}
		})
	}
}
