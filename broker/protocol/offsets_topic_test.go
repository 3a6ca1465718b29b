package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/offsetstopic"
)

// offsetsTopicState reads __consumer_offsets from the start up to its end
// and decodes it as Kafka's tools do: the latest offset commit per
// (group, topic, partition), tombstones removing them, and the groups
// with a membership record. It checks each record sits in its group's
// partition.
type offsetsTopicState struct {
	offsets map[string]int64 // "group/topic/partition" -> offset
	members map[string]int   // group -> members in its latest record
}

func readOffsetsTopic(t *testing.T, addr string) offsetsTopicState {
	t.Helper()
	st := offsetsTopicState{offsets: map[string]int64{}, members: map[string]int{}}
	readInternalTopic(t, addr, offsetstopic.Topic, func(partitions int32, r *kgo.Record) {
		var version int16
		if len(r.Key) >= 2 {
			version = int16(r.Key[0])<<8 | int16(r.Key[1])
		}
		switch version {
		case 0, 1:
			var k kmsg.OffsetCommitKey
			if err := k.ReadFrom(r.Key); err != nil {
				t.Fatalf("offset key at %d-%d: %v", r.Partition, r.Offset, err)
			}
			if p := offsetstopic.PartitionFor(k.Group, partitions); p != r.Partition {
				t.Fatalf("group %q's commit in partition %d, want %d", k.Group, r.Partition, p)
			}
			id := fmt.Sprintf("%s/%s/%d", k.Group, k.Topic, k.Partition)
			if r.Value == nil {
				delete(st.offsets, id)
				return
			}
			var v kmsg.OffsetCommitValue
			if err := v.ReadFrom(r.Value); err != nil {
				t.Fatalf("offset value at %d-%d: %v", r.Partition, r.Offset, err)
			}
			if v.Version != 3 {
				t.Fatalf("offset value version %d, want 3", v.Version)
			}
			st.offsets[id] = v.Offset
		case 2:
			var k kmsg.GroupMetadataKey
			if err := k.ReadFrom(r.Key); err != nil {
				t.Fatalf("group key at %d-%d: %v", r.Partition, r.Offset, err)
			}
			if r.Value == nil {
				delete(st.members, k.Group)
				return
			}
			var v kmsg.GroupMetadataValue
			if err := v.ReadFrom(r.Value); err != nil {
				t.Fatalf("group value at %d-%d: %v", r.Partition, r.Offset, err)
			}
			st.members[k.Group] = len(v.Members)
		default:
			t.Fatalf("record key version %d at %d-%d", version, r.Partition, r.Offset)
		}
	})
	return st
}

// readInternalTopic reads topic from the start up to its end (and what is
// appended meanwhile), calling each with the topic's partition count and
// every record.
func readInternalTopic(t *testing.T, addr, topic string, each func(partitions int32, r *kgo.Record)) {
	t.Helper()
	ctx := testCtx(t)
	ends, err := newAdmin(t, addr).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	partitions := int32(0)
	ends.Each(func(o kadm.ListedOffset) {
		partitions = max(partitions, o.Partition+1)
		if o.Err == nil && o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return
	}
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32]int64{}
	reached := func() bool {
		for p, end := range want {
			if got[p] < end {
				return false
			}
		}
		return true
	}
	for !reached() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v of %v", got, want)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = r.Offset + 1
			each(partitions, r)
		})
	}
}

// waitOffsetsTopic polls the topic until check accepts its state.
func waitOffsetsTopic(t *testing.T, addr string, what string, check func(offsetsTopicState) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := readOffsetsTopic(t, addr)
		if check(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: __consumer_offsets holds %v, members %v", what, st.offsets, st.members)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsumerOffsetsTopic: committed offsets and group membership
// appear in __consumer_offsets in Kafka's record formats, in the group's
// partition; deleted offsets become tombstones; the topic is listed as
// internal; clients may not write, delete, grow or truncate it; after a
// restart the projection still holds the state.
func TestConsumerOffsetsTopic(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.Start(t, brokertest.WithDir(dir), brokertest.WithStableAddr())
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "orders", 3, nil)
	ctx := testCtx(t)

	commit := func(g string, offsets map[int32]int64) {
		t.Helper()
		os := kadm.Offsets{}
		for p, o := range offsets {
			os.Add(kadm.Offset{Topic: "orders", Partition: p, At: o, LeaderEpoch: -1, Metadata: "m"})
		}
		resp, err := adm.CommitOffsets(ctx, g, os)
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Error(); err != nil {
			t.Fatal(err)
		}
	}
	commit("billing", map[int32]int64{0: 5, 1: 7, 2: 9})
	commit("audit", map[int32]int64{0: 1})
	want := map[string]int64{"billing/orders/0": 5, "billing/orders/1": 7, "billing/orders/2": 9, "audit/orders/0": 1}
	waitOffsetsTopic(t, b.Addr(), "first commits", func(st offsetsTopicState) bool { return maps.Equal(st.offsets, want) })

	// Listed, and flagged internal.
	md := kmsg.NewPtrMetadataRequest()
	mresp, err := md.RequestWith(ctx, newClient(t, b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mt := range mresp.Topics {
		if mt.Topic != nil && *mt.Topic == offsetstopic.Topic {
			found = true
			if !mt.IsInternal {
				t.Fatalf("Metadata lists %s without is_internal", offsetstopic.Topic)
			}
			if len(mt.Partitions) != offsetstopic.DefaultPartitions {
				t.Fatalf("%s has %d partitions, want %d", offsetstopic.Topic, len(mt.Partitions), offsetstopic.DefaultPartitions)
			}
		}
		if mt.Topic != nil && *mt.Topic == "orders" && mt.IsInternal {
			t.Fatal("orders flagged internal")
		}
	}
	if !found {
		t.Fatalf("Metadata does not list %s", offsetstopic.Topic)
	}

	// A later commit, a deleted offset, a live group's membership.
	commit("billing", map[int32]int64{1: 70})
	dresp, err := adm.DeleteOffsets(ctx, "audit", kadm.TopicsSet{"orders": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dresp.Error(); err != nil {
		t.Fatal(err)
	}
	member := newClient(t, b.Addr(), kgo.ConsumerGroup("live"), kgo.ConsumeTopics("orders"), kgo.DisableClientMetrics())
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	member.PollFetches(pctx) // joins
	cancel()
	want = map[string]int64{"billing/orders/0": 5, "billing/orders/1": 70, "billing/orders/2": 9}
	waitOffsetsTopic(t, b.Addr(), "later changes", func(st offsetsTopicState) bool {
		return maps.Equal(st.offsets, want) && st.members["live"] == 1
	})

	// Clients may not write, delete, grow or truncate it.
	cl := newClient(t, b.Addr())
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: offsetstopic.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch(t, "x")}}}}
	presp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("Produce to %s: error %d, want INVALID_TOPIC_EXCEPTION", offsetstopic.Topic, code)
	}
	delResp, err := adm.DeleteTopics(ctx, offsetstopic.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := delResp[offsetstopic.Topic].Err; !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("DeleteTopics %s: %v, want INVALID_TOPIC_EXCEPTION", offsetstopic.Topic, err)
	}
	cpResp, err := adm.CreatePartitions(ctx, 5, offsetstopic.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := cpResp[offsetstopic.Topic].Err; !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("CreatePartitions %s: %v, want INVALID_TOPIC_EXCEPTION", offsetstopic.Topic, err)
	}
	drResp, err := adm.DeleteRecords(ctx, kadm.Offsets{offsetstopic.Topic: {0: {Topic: offsetstopic.Topic, Partition: 0, At: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	drResp.Each(func(r kadm.DeleteRecordsResponse) {
		if !errors.Is(r.Err, kerr.InvalidTopicException) {
			t.Fatalf("DeleteRecords %s-%d: %v, want INVALID_TOPIC_EXCEPTION", r.Topic, r.Partition, r.Err)
		}
	})

	// After a restart the projection is rewritten from the store: the
	// same state, the membership of a group that has none now removed
	// only once the group's store record goes.
	member.Close()
	b.Restart()
	waitOffsetsTopic(t, b.Addr(), "after restart", func(st offsetsTopicState) bool { return maps.Equal(st.offsets, want) })
}

// TestConsumerOffsetsTopicCluster: in a cluster the offsets (in etcd,
// committed at each group's coordinator) reach __consumer_offsets through
// every partition's leader, replicated; when a broker stops, the new
// leaders of its partitions write their groups' state and the commits
// that follow.
func TestConsumerOffsetsTopicCluster(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a", "b", "c"})
	addr := c.Addrs()[1]
	adm := newAdmin(t, addr)
	resp, err := adm.CreateTopics(testCtx(t), 2, 3, nil, "orders")
	if err != nil || resp["orders"].Err != nil {
		t.Fatalf("CreateTopics: %v %v", err, resp["orders"].Err)
	}
	want := map[string]int64{}
	commitAll := func(base int64) {
		t.Helper()
		for i := range 8 {
			g := fmt.Sprintf("group-%d", i)
			os := kadm.Offsets{}
			os.Add(kadm.Offset{Topic: "orders", Partition: int32(i % 2), At: base + int64(i), LeaderEpoch: -1})
			// A retriable error (the coordinator has not seen the new
			// topic yet, or the group's coordinator just moved) is
			// retried, as clients do.
			var err error
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var r kadm.OffsetResponses
				r, err = adm.CommitOffsets(testCtx(t), g, os)
				if err == nil {
					err = r.Error()
				}
				if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatalf("commit %s: %v", g, err)
			}
			want[fmt.Sprintf("%s/orders/%d", g, i%2)] = base + int64(i)
		}
	}
	commitAll(100)
	waitOffsetsTopic(t, addr, "commits", func(st offsetsTopicState) bool { return maps.Equal(st.offsets, want) })
	tresp, err := adm.ListTopicsWithInternal(testCtx(t), offsetstopic.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if d := tresp[offsetstopic.Topic]; !d.IsInternal || len(d.Partitions) != offsetstopic.DefaultPartitions || len(d.Partitions[0].Replicas) != 3 {
		t.Fatalf("%s: internal %v, %d partitions, replicas %v", offsetstopic.Topic, d.IsInternal, len(d.Partitions), d.Partitions[0].Replicas)
	}

	c.Brokers[0].Stop()
	commitAll(200)
	waitOffsetsTopic(t, addr, "commits after broker 1 stopped", func(st offsetsTopicState) bool { return maps.Equal(st.offsets, want) })
}
