package protocol_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestProduceConsumeRoundTrip produces with every acks level and every
// compression codec and reads the records back byte-identical: keys,
// values, headers, timestamps, offsets.
func TestProduceConsumeRoundTrip(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())

	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	acks := []struct {
		name string
		acks kgo.Acks
		opts []kgo.Opt
	}{
		{"acks0", kgo.NoAck(), []kgo.Opt{kgo.DisableIdempotentWrite()}},
		{"acks1", kgo.LeaderAck(), []kgo.Opt{kgo.DisableIdempotentWrite()}},
		{"acksall", kgo.AllISRAcks(), nil}, // idempotent, the kgo default
	}
	base := time.UnixMilli(1_700_000_000_000)
	for _, a := range acks {
		for _, c := range codecs {
			t.Run(a.name+"/"+c.name, func(t *testing.T) {
				topic := fmt.Sprintf("roundtrip-%s-%s", a.name, c.name)
				createTopic(t, adm, topic, 1, nil)
				opts := append([]kgo.Opt{kgo.RequiredAcks(a.acks), kgo.ProducerBatchCompression(c.codec),
					kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0)}, a.opts...)
				p := newClient(t, b.Addr(), opts...)
				const n = 300
				var want []*kgo.Record
				for i := range n {
					r := &kgo.Record{
						Key:       []byte(fmt.Sprintf("key-%d", i)),
						Value:     bytes.Repeat([]byte{byte(i)}, i%97+1),
						Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}, {Key: "empty"}},
						Timestamp: base.Add(time.Duration(i) * time.Millisecond),
					}
					if i%10 == 0 {
						r.Key = nil // null key
					}
					want = append(want, r)
					p.Produce(testCtx(t), r, func(r *kgo.Record, err error) {
						if err != nil {
							t.Errorf("produce: %v", err)
						}
					})
				}
				if err := p.Flush(testCtx(t)); err != nil {
					t.Fatal(err)
				}
				got := consume(t, b.Addr(), topic, n)
				for i, r := range got {
					w := want[i]
					if r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) ||
						!bytes.Equal(r.Value, w.Value) || !r.Timestamp.Equal(w.Timestamp) || len(r.Headers) != 2 ||
						r.Headers[0].Key != "h" || string(r.Headers[0].Value) != fmt.Sprint(i) || r.Headers[1].Key != "empty" {
						t.Fatalf("record %d = %+v, want %+v", i, r, w)
					}
				}
			})
		}
	}
}

// TestLongPollWakesOnProduce parks a fetch with a long MaxWait and checks
// that a produce completes it with the record. If the wake-up did not
// work, the fetch would end at MaxWait with no records and the test fails.
func TestLongPollWakesOnProduce(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "longpoll", 1, nil)
	cl := newClient(t, b.Addr())

	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxWaitMillis = 120_000
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "longpoll", topicID(t, adm, "longpoll") // kgo picks v16: by ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = 0
	fp.FetchOffset = 0
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = []kmsg.FetchRequestTopicPartition{fp}
	req.Topics = []kmsg.FetchRequestTopic{ft}

	type result struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := req.RequestWith(testCtx(t), cl)
		done <- result{resp, err}
	}()
	// Produce on a separate client (and connection) once the fetch is
	// parked; producing earlier is fine too: the fetch then returns at once.
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("longpoll"))
	if err := p.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("wake up")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	part := res.resp.Topics[0].Partitions[0]
	if part.ErrorCode != 0 || len(part.RecordBatches) == 0 || part.HighWatermark != 1 {
		t.Fatalf("fetch answered %+v; want the produced record", part)
	}
}

// TestFetchOffsetOutOfRange checks the error for a fetch past the end and
// that an empty record set is empty bytes, not null.
func TestFetchOffsetOutOfRange(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "oor", 1, nil)
	id := topicID(t, adm, "oor")
	cl := newClient(t, b.Addr())
	fetch := func(offset int64) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes = 1 << 20 // kgo sends the highest version both sides serve (16)
		req.SessionEpoch = -1
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "oor", TopicID: id, Partitions: []kmsg.FetchRequestTopicPartition{
			{Partition: 0, FetchOffset: offset, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1},
		}}}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := fetch(5); p.ErrorCode != 1 { // OFFSET_OUT_OF_RANGE
		t.Fatalf("fetch at 5 of an empty log: error %d, want 1", p.ErrorCode)
	}
	id = [16]byte{1}
	if p := fetch(0); p.ErrorCode != 100 { // UNKNOWN_TOPIC_ID
		t.Fatalf("fetch of an unknown topic ID: error %d, want 100", p.ErrorCode)
	}
	id = topicID(t, adm, "oor")
	if p := fetch(0); p.ErrorCode != 0 || p.RecordBatches == nil || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("fetch at the end: %+v, want empty non-null records", p)
	}
}

// TestFetchErrorEndsLongPoll: a long poll naming a partition without new
// records and one answered with an error is answered at once, as Kafka
// does, not at MaxWaitMillis: the client has an error to act on.
func TestFetchErrorEndsLongPoll(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "lp-err", 1, nil)
	id := topicID(t, adm, "lp-err")
	cl := newClient(t, b.Addr())
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 1, 30_000
	req.SessionEpoch = -1
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "lp-err", TopicID: id, Partitions: []kmsg.FetchRequestTopicPartition{
		{Partition: 0, FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1},
		{Partition: 7, FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}, // no such partition
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("the fetch was not answered before its 30 s wait ended (20 s): %v", err)
	}
	var codes []int16
	for _, p := range resp.Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	if len(codes) != 2 || codes[0] != 0 || codes[1] == 0 {
		t.Fatalf("error codes %v, want [0, an error]", codes)
	}
}

func topicID(t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	md, err := adm.ListTopics(testCtx(t), topic)
	if err != nil || md[topic].Err != nil {
		t.Fatalf("metadata of %s: %v %v", topic, err, md[topic].Err)
	}
	return md[topic].ID
}
