package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestFetchByteLimits checks MaxBytes and PartitionMaxBytes with KIP-74:
// the first partition with data returns a whole batch even when it is
// larger than the limits; later partitions only return what fits.
func TestFetchByteLimits(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "limits", 3, nil)
	id := topicID(t, adm, "limits")
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("limits"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	for part := range int32(3) {
		// One batch of ~10 KiB per partition.
		if err := p.ProduceSync(testCtx(t), &kgo.Record{Partition: part, Value: bytes.Repeat([]byte{byte(part)}, 10<<10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := newClient(t, b.Addr())
	fetch := func(maxBytes, partMax int32) []int {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.SessionEpoch = maxBytes, -1
		ft := kmsg.FetchRequestTopic{Topic: "limits", TopicID: id}
		for part := range int32(3) {
			ft.Partitions = append(ft.Partitions, kmsg.FetchRequestTopicPartition{Partition: part, PartitionMaxBytes: partMax, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1})
		}
		req.Topics = []kmsg.FetchRequestTopic{ft}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", rp.Partition, rp.ErrorCode)
			}
			sizes = append(sizes, len(rp.RecordBatches))
		}
		return sizes
	}
	tests := []struct {
		name              string
		maxBytes, partMax int32
		wantNonEmpty      []bool
	}{
		{"everything fits", 1 << 20, 1 << 20, []bool{true, true, true}},
		{"request limit fits one", 15 << 10, 1 << 20, []bool{true, false, false}},
		{"first batch over every limit", 1, 1, []bool{true, false, false}},
		{"request limit fits two", 25 << 10, 1 << 20, []bool{true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sizes := fetch(tt.maxBytes, tt.partMax)
			for i, want := range tt.wantNonEmpty {
				if (sizes[i] > 0) != want {
					t.Fatalf("record bytes per partition %v, want non-empty %v", sizes, tt.wantNonEmpty)
				}
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("auto.create.topics.enable", "false"), brokertest.WithSetting("broker.rack", "zone-a"))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "m1", 2, nil)
	createTopic(t, adm, "m2", 1, nil)
	cl := newClient(t, b.Addr())
	meta := func(version int16, topics []kmsg.MetadataRequestTopic) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = topics
		req.AllowAutoTopicCreation = true
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	all := meta(12, nil)
	if len(all.Topics) != 2 || len(all.Brokers) != 1 || all.Brokers[0].Rack == nil || *all.Brokers[0].Rack != "zone-a" ||
		all.ClusterID == nil || all.ControllerID != all.Brokers[0].NodeID {
		t.Fatalf("metadata for all topics: %+v", all)
	}
	if none := meta(12, []kmsg.MetadataRequestTopic{}); len(none.Topics) != 0 {
		t.Fatalf("empty topic list answered %d topics", len(none.Topics))
	}
	m1ID := all.Topics[0].TopicID
	byID := meta(12, []kmsg.MetadataRequestTopic{{TopicID: m1ID}, {TopicID: [16]byte{9}}})
	if *byID.Topics[0].Topic != "m1" || len(byID.Topics[0].Partitions) != 2 || byID.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("metadata by topic ID: %+v", byID.Topics)
	}
	// auto.create.topics.enable=false wins over the request's permission.
	missing := meta(12, []kmsg.MetadataRequestTopic{{Topic: sp("missing")}, {Topic: sp("bad/name")}})
	if missing.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || missing.Topics[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("missing topics: %+v", missing.Topics)
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("num.partitions", "3"))
	// kgo asks for auto-creation only when told to.
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("auto"), kgo.AllowAutoTopicCreation())
	if err := p.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	md, err := newAdmin(t, b.Addr()).ListTopics(testCtx(t), "auto")
	if err != nil || len(md["auto"].Partitions) != 3 {
		t.Fatalf("auto-created topic: %v %+v", err, md["auto"])
	}
}

func TestDeleteRecordsAndOffsetForLeaderEpoch(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "dr", 1, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("dr"), kgo.ProducerLinger(0))
	for range 10 {
		if err := p.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 4})
	dr, err := adm.DeleteRecords(testCtx(t), offs)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("DeleteRecords: %+v", r)
	}
	starts, err := adm.ListStartOffsets(testCtx(t), "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 4 {
		t.Fatalf("start offset %d after DeleteRecords(4)", o.Offset)
	}
	var past kadm.Offsets
	past.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 11})
	dr, err = adm.DeleteRecords(testCtx(t), past)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("dr", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the end: %+v, want OFFSET_OUT_OF_RANGE", r)
	}
	// A consumer at offset 2 now gets OFFSET_OUT_OF_RANGE and resets.
	got := consume(t, b.Addr(), "dr", 6)
	if got[0].Offset != 4 {
		t.Fatalf("first consumed offset %d, want 4", got[0].Offset)
	}

	ofe, err := adm.OffsetForLeaderEpoch(testCtx(t), kadm.OffsetForLeaderEpochRequest{"dr": {0: 0}})
	if err != nil {
		t.Fatal(err)
	}
	r := ofe["dr"][0]
	if r.Err != nil || r.LeaderEpoch != 0 || r.EndOffset != 10 {
		t.Fatalf("OffsetForLeaderEpoch(0) = %+v, want epoch 0 end 10", r)
	}
}

func TestDescribeLogDirs(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "ld", 2, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("ld"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := p.ProduceSync(testCtx(t), &kgo.Record{Partition: 1, Value: bytes.Repeat([]byte("x"), 1000)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dirs, err := adm.DescribeAllLogDirs(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sizes [2]int64
	n := 0
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil || d.Dir != b.Dir() {
			t.Fatalf("log dir %+v, want %s", d, b.Dir())
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "ld" {
				sizes[p.Partition] = p.Size
				n++
			}
		})
	})
	if n != 2 || sizes[0] != 0 || sizes[1] < 1000 {
		t.Fatalf("partition sizes %v (%d partitions), want [0, >=1000]", sizes, n)
	}
}
