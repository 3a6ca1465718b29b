package protocol_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestPartitionLimits: CreateTopics (also ValidateOnly) and
// CreatePartitions over max.partitions.per.topic get INVALID_PARTITIONS,
// over the cluster-wide max.partitions POLICY_VIOLATION, with a message
// naming the limit, on a standalone broker and in cluster mode, before
// anything is planned (NumPartitions=2147483647 made the cluster placement
// allocate ~48 GiB).
func TestPartitionLimits(t *testing.T) {
	limits := []brokertest.Option{
		brokertest.WithLogger(discardLogger()),
		brokertest.WithSetting("max.partitions.per.topic", "4"),
		brokertest.WithSetting("max.partitions", "6"),
	}
	for _, mode := range []string{"standalone", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			var addr string
			if mode == "cluster" {
				addr = brokertest.StartCluster(t, []string{"a"}, limits...).Addrs()[0]
			} else {
				addr = brokertest.Start(t, limits...).Addr()
			}
			cl := newClient(t, addr)
			create := func(topic string, partitions int32, validateOnly bool) (int16, string) {
				t.Helper()
				req := kmsg.NewPtrCreateTopicsRequest()
				req.ValidateOnly, req.TimeoutMillis = validateOnly, 30_000
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(testCtx(t), cl)
				if err != nil {
					t.Fatal(err)
				}
				st := resp.Topics[0]
				msg := ""
				if st.ErrorMessage != nil {
					msg = *st.ErrorMessage
				}
				return st.ErrorCode, msg
			}
			grow := func(topic string, count int32, validateOnly bool) (int16, string) {
				t.Helper()
				req := kmsg.NewPtrCreatePartitionsRequest()
				req.ValidateOnly, req.TimeoutMillis = validateOnly, 30_000
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = topic, count
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(testCtx(t), cl)
				if err != nil {
					t.Fatal(err)
				}
				st := resp.Topics[0]
				msg := ""
				if st.ErrorMessage != nil {
					msg = *st.ErrorMessage
				}
				return st.ErrorCode, msg
			}
			check := func(what string, code int16, msg string, want *kerr.Error, key string) {
				t.Helper()
				if code != want.Code || !strings.Contains(msg, key) {
					t.Errorf("%s: got %v %q, want %v naming %s", what, kerr.ErrorForCode(code), msg, want, key)
				}
			}
			for _, validateOnly := range []bool{true, false} {
				code, msg := create("huge", 2147483647, validateOnly)
				check("CreateTopics 2147483647 partitions", code, msg, kerr.InvalidPartitions, "max.partitions.per.topic=4")
				code, msg = create("five", 5, validateOnly)
				check("CreateTopics 5 partitions", code, msg, kerr.InvalidPartitions, "max.partitions.per.topic=4")
			}
			if code, msg := create("t1", 4, false); code != 0 {
				t.Fatalf("CreateTopics t1 with 4 partitions: %v %s", kerr.ErrorForCode(code), msg)
			}
			for _, validateOnly := range []bool{true, false} {
				code, msg := create("t2", 3, validateOnly)
				check("CreateTopics 3 more partitions (7 in all)", code, msg, kerr.PolicyViolation, "max.partitions=6")
				code, msg = grow("t1", 2147483647, validateOnly)
				check("CreatePartitions to 2147483647", code, msg, kerr.InvalidPartitions, "max.partitions.per.topic=4")
			}
			if code, msg := create("t2", 2, false); code != 0 {
				t.Fatalf("CreateTopics t2 with 2 partitions: %v %s", kerr.ErrorForCode(code), msg)
			}
			code, msg := grow("t2", 3, true)
			check("CreatePartitions t2 to 3 (7 in all)", code, msg, kerr.PolicyViolation, "max.partitions=6")
		})
	}
}

// TestFetchMaxBytesCap: the broker's fetch.max.bytes caps a Fetch whatever
// MaxBytes asks for; MaxBytes <= 0 gets the first batch only (it read up
// to 2 GiB before).
func TestFetchMaxBytesCap(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithLogger(discardLogger()), brokertest.WithSetting("fetch.max.bytes", "1048576"))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "capped", 3, nil)
	p := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const valueBytes = 600 << 10
	for part := range int32(3) {
		r := &kgo.Record{Topic: "capped", Partition: part, Value: bytes.Repeat([]byte{'v'}, valueBytes)}
		if err := p.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := newClient(t, b.Addr())
	id := topicID(t, adm, "capped")
	for _, maxBytes := range []int32{-1, 0, 2147483647} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, maxBytes, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "capped", id
		for part := range int32(3) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = part, 2147483647, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		total, withData := 0, 0
		for _, st := range resp.Topics {
			for _, sp := range st.Partitions {
				if sp.ErrorCode != 0 {
					t.Fatalf("MaxBytes %d: partition %d: %v", maxBytes, sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
				}
				total += len(sp.RecordBatches)
				if len(sp.RecordBatches) > 0 {
					withData++
				}
			}
		}
		if withData != 1 || total < valueBytes || total > 1<<20 {
			t.Errorf("MaxBytes %d: %d record bytes from %d partitions, want one batch of about %d bytes (fetch.max.bytes=1048576)", maxBytes, total, withData, valueBytes)
		}
	}
}
