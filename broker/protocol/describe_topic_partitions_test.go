package protocol_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestDescribeTopicPartitions sends KIP-966 DescribeTopicPartitions
// through a real broker: every topic, named topics, an unknown and an
// invalid name, a cursor naming a topic outside the list, and paging
// with a partition limit that must continue exactly where it stopped.
func TestDescribeTopicPartitions(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("auto.create.topics.enable", "false"))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "dtp-a", 3, nil)
	createTopic(t, adm, "dtp-b", 2, nil)
	createTopic(t, adm, "dtp-c", 1, nil)
	cl := newClient(t, b.Addr())
	describe := func(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit = limit
		req.Cursor = cursor
		for _, name := range topics {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: name})
		}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	self := b.Server().Broker().NodeID()

	t.Run("all topics", func(t *testing.T) {
		resp := describe(2000, nil)
		var got []string
		for _, rt := range resp.Topics {
			got = append(got, fmt.Sprintf("%s:%d", *rt.Topic, len(rt.Partitions)))
			if rt.ErrorCode != 0 || rt.TopicID == [16]byte{} || rt.IsInternal || rt.AuthorizedOperations == -2147483648 {
				t.Fatalf("topic %s: %+v", *rt.Topic, rt)
			}
			for i, p := range rt.Partitions {
				if p.ErrorCode != 0 || p.Partition != int32(i) || p.LeaderID != self || p.LeaderEpoch < 0 ||
					!slices.Equal(p.Replicas, []int32{self}) || !slices.Equal(p.ISR, []int32{self}) ||
					p.EligibleLeaderReplicas == nil || len(p.EligibleLeaderReplicas) != 0 || len(p.LastKnownELR) != 0 || len(p.OfflineReplicas) != 0 {
					t.Fatalf("%s-%d: %+v", *rt.Topic, i, p)
				}
			}
		}
		if want := []string{"dtp-a:3", "dtp-b:2", "dtp-c:1"}; !slices.Equal(got, want) || resp.NextCursor != nil {
			t.Fatalf("all topics: %v (cursor %+v), want %v", got, resp.NextCursor, want)
		}
		if id := topicID(t, adm, "dtp-a"); resp.Topics[0].TopicID != id {
			t.Fatalf("dtp-a topic ID %x, Metadata says %x", resp.Topics[0].TopicID, id)
		}
	})

	t.Run("named and unknown topics", func(t *testing.T) {
		resp := describe(2000, nil, "dtp-c", "missing", "bad/name")
		codes := map[string]int16{}
		for _, rt := range resp.Topics {
			codes[*rt.Topic] = rt.ErrorCode
		}
		want := map[string]int16{"dtp-c": 0, "missing": kerr.UnknownTopicOrPartition.Code, "bad/name": kerr.InvalidTopicException.Code}
		if len(codes) != len(want) || len(resp.Topics) != len(want) {
			t.Fatalf("named topics: %+v", resp.Topics)
		}
		for name, code := range want {
			if codes[name] != code {
				t.Fatalf("%s: error %d, want %d (%+v)", name, codes[name], code, resp.Topics)
			}
		}
	})

	t.Run("cursor topic not named", func(t *testing.T) {
		resp := describe(2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-a"}, "dtp-b")
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("cursor outside the named topics: %+v", resp.Topics)
		}
	})

	// Pages with a limit of l partitions, all topics or the named ones:
	// together they must be every partition once, in order.
	page := func(t *testing.T, limit int32, topics ...string) (got []string, pages int) {
		var cursor *kmsg.DescribeTopicPartitionsRequestCursor
		for pages = 1; ; pages++ {
			resp := describe(limit, cursor, topics...)
			n := 0
			for _, rt := range resp.Topics {
				if rt.ErrorCode != 0 {
					t.Fatalf("page %d: %s: error %d", pages, *rt.Topic, rt.ErrorCode)
				}
				for _, p := range rt.Partitions {
					got = append(got, fmt.Sprintf("%s-%d", *rt.Topic, p.Partition))
					n++
				}
			}
			if n > int(limit) {
				t.Fatalf("page %d: %d partitions over the limit %d", pages, n, limit)
			}
			if resp.NextCursor == nil {
				return got, pages
			}
			cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
			if pages > 10 {
				t.Fatalf("no end after %d pages: %v", pages, got)
			}
		}
	}
	every := []string{"dtp-a-0", "dtp-a-1", "dtp-a-2", "dtp-b-0", "dtp-b-1", "dtp-c-0"}
	for _, tt := range []struct {
		limit     int32
		topics    []string
		want      []string
		wantPages int
	}{
		{2, nil, every, 3},
		{3, nil, every, 2}, // the first page ends exactly with dtp-a: the cursor is dtp-b, 0
		{4, nil, every, 2},
		{1, nil, every, 6},
		{2, []string{"dtp-b", "dtp-a"}, every[:5], 3},
	} {
		t.Run(fmt.Sprintf("paging limit %d topics %v", tt.limit, tt.topics), func(t *testing.T) {
			got, pages := page(t, tt.limit, tt.topics...)
			if !slices.Equal(got, tt.want) || pages != tt.wantPages {
				t.Fatalf("pages: %d with %v, want %d with %v", pages, got, tt.wantPages, tt.want)
			}
		})
	}
}

// TestDescribeTopicPartitionsCluster: in a 3-broker cluster with a
// broker down, DescribeTopicPartitions reports what Metadata reports for
// every partition (leader, epoch, replicas, ISR, the offline replica).
func TestDescribeTopicPartitionsCluster(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a", "b", "c"})
	adm := newAdmin(t, c.Addrs()[0])
	resp, err := adm.CreateTopics(testCtx(t), 3, 3, nil, "dtp-rf3")
	if err != nil || resp["dtp-rf3"].Err != nil {
		t.Fatalf("CreateTopics: %v %v", err, resp["dtp-rf3"].Err)
	}
	c.Brokers[2].Stop() // broker 3
	cl := newClient(t, c.Addrs()[0])
	type state struct {
		code                   int16
		leader, epoch          int32
		replicas, isr, offline []int32
	}
	ctx := testCtx(t)
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		md := kmsg.NewPtrMetadataRequest()
		md.Topics = []kmsg.MetadataRequestTopic{{Topic: sp("dtp-rf3")}}
		mresp, err := md.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dreq.ResponsePartitionLimit = 2000
		dreq.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "dtp-rf3"}}
		dresp, err := dreq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		var fromMetadata, fromDescribe []state
		for _, p := range mresp.Topics[0].Partitions {
			fromMetadata = append(fromMetadata, state{p.ErrorCode, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas})
		}
		offlineSeen := len(dresp.Topics[0].Partitions) == 3
		for _, p := range dresp.Topics[0].Partitions {
			fromDescribe = append(fromDescribe, state{p.ErrorCode, p.LeaderID, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas})
			offlineSeen = offlineSeen && slices.Equal(p.OfflineReplicas, []int32{3}) && len(p.Replicas) == 3 && p.LeaderID != 3
		}
		last = fmt.Sprintf("Metadata %+v, DescribeTopicPartitions %+v", fromMetadata, fromDescribe)
		if offlineSeen && fmt.Sprint(fromMetadata) == fmt.Sprint(fromDescribe) {
			return
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronization
	}
	t.Fatalf("no agreement with broker 3 offline: %s", last)
}
