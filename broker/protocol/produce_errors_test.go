package protocol_test

import (
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/record"
)

func batch(t *testing.T, values ...string) []byte {
	t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	b, err := record.Build(record.DefaultSpec(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func txnBatch(t *testing.T) []byte {
	t.Helper()
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = 1, 0, 0, true
	b, err := record.Build(spec, []record.Record{{Value: []byte("t")}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProduceErrors sends raw Produce requests and checks the error code
// of each kind of bad input, and that nothing bad was appended.
func TestProduceErrors(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("auto.create.topics.enable", "false"))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "p", 1, map[string]*string{"max.message.bytes": sp("1000")})
	cl := newClient(t, b.Addr())

	good := batch(t, "a", "b")
	corrupt := append([]byte{}, good...)
	corrupt[len(corrupt)-1] ^= 0xff // payload no longer matches the CRC
	big := batch(t, string(make([]byte, 2000)))

	tests := []struct {
		name      string
		topic     string
		partition int32
		acks      int16
		txn       *string
		records   []byte
		want      error
	}{
		{"ok", "p", 0, 1, nil, good, nil},
		{"corrupt CRC", "p", 0, 1, nil, corrupt, kerr.CorruptMessage},
		{"garbage", "p", 0, 1, nil, []byte("not a record batch at all, just bytes in the way of it"), kerr.CorruptMessage},
		{"empty", "p", 0, -1, nil, []byte{}, kerr.InvalidRecord},
		{"over max.message.bytes", "p", 0, 1, nil, big, kerr.MessageTooLarge},
		{"unknown topic", "nope", 0, 1, nil, good, kerr.UnknownTopicOrPartition},
		{"unknown partition", "p", 7, 1, nil, good, kerr.UnknownTopicOrPartition},
		{"transactional batch without a transactional ID", "p", 0, -1, nil, txnBatch(t), kerr.TransactionalIDAuthorizationFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis, req.TransactionID = tt.acks, 30000, tt.txn
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = tt.topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = tt.partition, tt.records
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(testCtx(t), cl)
			if err != nil {
				t.Fatal(err)
			}
			got := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			if got != tt.want {
				t.Fatalf("error %v, want %v", got, tt.want)
			}
		})
	}
	// kgo sets acks from its own config, so a bad acks value goes raw.
	c := dial(t, b.Addr())
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 9, 2
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "p", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: good}}}}
	if _, err := c.Write(rawFrame(req, 3)); err != nil {
		t.Fatal(err)
	}
	_, body := readResponse(t, c)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if err := resp.ReadFrom(body[1:]); err != nil { // skip the header tag byte
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: error %d, want INVALID_REQUIRED_ACKS", code)
	}

	ends, err := adm.ListEndOffsets(testCtx(t), "p")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("p", 0); o.Offset != 2 {
		t.Fatalf("end offset %d, want 2 (only the good batch)", o.Offset)
	}
}

// TestProduceAcks0ErrorClosesConnection: with acks=0 there is no response
// to carry an error, so Kafka closes the connection; the producer notices.
func TestProduceAcks0ErrorClosesConnection(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("auto.create.topics.enable", "false"))
	createTopic(t, newAdmin(t, b.Addr()), "a0", 1, nil)
	send := func(topic string) net.Conn {
		c := dial(t, b.Addr())
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = 9, 0
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch(t, "x")}}}}
		if _, err := c.Write(rawFrame(req, 1)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	expectClosed(t, send("missing"))

	// A successful acks=0 produce gets no response; the connection stays
	// usable and the next response is for the next request.
	c := send("a0")
	apiv := kmsg.NewPtrApiVersionsRequest()
	apiv.Version = 2
	if _, err := c.Write(rawFrame(apiv, 2)); err != nil {
		t.Fatal(err)
	}
	if cid, _ := readResponse(t, c); cid != 2 {
		t.Fatalf("first response has correlation ID %d, want 2 (acks=0 must not answer)", cid)
	}
}

func TestInitProducerID(t *testing.T) {
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr())
	init := func(id int64, epoch int16, txn *string) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.ProducerID, req.ProducerEpoch, req.TransactionalID = id, epoch, txn
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a, c := init(-1, -1, nil), init(-1, -1, nil)
	if a.ErrorCode != 0 || c.ErrorCode != 0 || a.ProducerID == c.ProducerID || a.ProducerEpoch != 0 {
		t.Fatalf("two inits: %+v %+v", a, c)
	}
	if bumped := init(a.ProducerID, 0, nil); bumped.ProducerID != a.ProducerID || bumped.ProducerEpoch != 1 {
		t.Fatalf("epoch bump: %+v", bumped)
	}
	// Transactional IDs go to the transaction coordinator: a timeout
	// (transaction.timeout.ms) is required.
	if txn := init(-1, -1, sp("t")); txn.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("transactional init without a timeout: %+v", txn)
	}
	treq := kmsg.NewPtrInitProducerIDRequest()
	treq.TransactionalID, treq.TransactionTimeoutMillis = sp("t"), 60_000
	if txn, err := treq.RequestWith(testCtx(t), cl); err != nil || txn.ErrorCode != 0 || txn.ProducerEpoch != 0 || txn.ProducerID == c.ProducerID {
		t.Fatalf("transactional init: %v %+v", err, txn)
	}
	b.Restart()
	cl2 := newClient(t, b.Addr())
	req := kmsg.NewPtrInitProducerIDRequest()
	resp, err := req.RequestWith(testCtx(t), cl2)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProducerID <= c.ProducerID {
		t.Fatalf("producer ID %d after restart reuses IDs up to %d", resp.ProducerID, c.ProducerID)
	}
}

// TestMinInsyncReplicas: a single broker is an ISR of one, so acks=all on
// a topic with min.insync.replicas=2 is NOT_ENOUGH_REPLICAS (and appends
// nothing), while acks=1 still works, as in Kafka.
func TestMinInsyncReplicas(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "misr", 1, map[string]*string{"min.insync.replicas": sp("2")})
	produce := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.TimeoutMillis = 30000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "misr", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch(t, "x")}}}}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(newClient(t, b.Addr())); code != kerr.NotEnoughReplicas.Code { // kgo default: acks=all
		t.Fatalf("acks=all: error %d, want NOT_ENOUGH_REPLICAS", code)
	}
	if code := produce(newClient(t, b.Addr(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())); code != 0 {
		t.Fatalf("acks=1: error %d", code)
	}
	ends, err := adm.ListEndOffsets(testCtx(t), "misr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("misr", 0); o.Offset != 1 {
		t.Fatalf("end offset %d, want 1", o.Offset)
	}
}
