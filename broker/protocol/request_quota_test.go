package protocol_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestRequestPercentageQuota: request_percentage (KIP-124) set with
// AlterClientQuotas for a client ID is shown by DescribeClientQuotas and
// enforced: that client's requests (Metadata here) are answered with a
// throttle time once their handler time is over the quota, while another
// client ID sending the same requests is never throttled. A value of 0
// is refused with INVALID_CONFIG.
func TestRequestPercentageQuota(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a"}, brokertest.WithSetting("quota.window.num", "3"))
	ctx := testCtx(t)
	adm := newAdmin(t, c.Addrs()[0])
	createTopic(t, adm, "rq", 4, nil)

	busy := "busy-app"
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: &busy}}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0}}}})
	if err != nil || res[0].Err == nil {
		t.Fatalf("request_percentage 0 accepted: %v %+v", err, res)
	}
	// 1e-9 % of a thread: 10 ps of handler time per second, over a 2 s
	// minimum span: any request's handling is more.
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1e-9}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	described, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &busy}})
	if err != nil || len(described) != 1 || len(described[0].Values) != 1 ||
		described[0].Values[0].Key != "request_percentage" || described[0].Values[0].Value != 1e-9 {
		t.Fatalf("describe: %v %+v", err, described)
	}

	throttles := func(clientID string, n int) (throttled int) {
		cl := newClient(t, c.Addrs()[0], kgo.ClientID(clientID))
		for range n {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("rq")
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("%s: metadata: %v", clientID, err)
			}
			if resp.ThrottleMillis > 0 {
				throttled++
			}
		}
		return throttled
	}
	if n := throttles("calm-app", 5); n != 0 {
		t.Fatalf("a client without a request quota was throttled %d times", n)
	}
	if n := throttles(busy, 2); n == 0 {
		t.Fatal("no answer to a client over its request_percentage carried a throttle time")
	}

	// A long poll is waiting, not handling: a consumer whose Fetch parks
	// for a second on an empty partition is not throttled by a quota of
	// 1 % of a thread (the second would be 50 % over the 2 s span).
	poller := "long-poller"
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &poller}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	td, err := adm.ListTopics(ctx, "rq")
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c.Addrs()[0], kgo.ClientID(poller))
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes, fetch.SessionEpoch = 1000, 1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "rq", td["rq"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = 0, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	resp, err := fetch.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ThrottleMillis > 0 {
		t.Fatalf("a long poll parked for its MaxWait was throttled %d ms by a 1 %% request quota: its wait was counted as handler time", resp.ThrottleMillis)
	}
}
