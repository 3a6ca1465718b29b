package protocol_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/server"
)

// shareConn sends raw share-group requests to a one-broker cluster.
type shareConn struct {
	t       *testing.T
	ctx     context.Context
	cl      *kgo.Client
	topicID [16]byte
}

func startShareConn(t *testing.T, lock time.Duration, records int) *shareConn {
	t.Helper()
	b := brokertest.Start(t, brokertest.WithConfig(func(c *server.Config) {
		c.Share.RecordLockDuration, c.Share.AutoOffsetReset = lock, "earliest"
	}))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "sq", 1, nil)
	ctx := testCtx(t)
	topics, err := adm.ListTopics(ctx, "sq")
	if err != nil {
		t.Fatal(err)
	}
	sc := &shareConn{t: t, ctx: ctx, cl: newClient(t, b.Addr(), kgo.DefaultProduceTopic("sq")), topicID: topics["sq"].ID}
	sc.produce(records)
	return sc
}

func (sc *shareConn) produce(n int) {
	sc.t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint(i))})
	}
	if n > 0 {
		if err := sc.cl.ProduceSync(sc.ctx, recs...).FirstErr(); err != nil {
			sc.t.Fatal(err)
		}
	}
}

func (sc *shareConn) fetchReq(member string, epoch int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	g := "sg"
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &member, epoch
	req.MaxRecords, req.BatchSize, req.MaxWaitMillis = 100, 100, 0
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: sc.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20, AcknowledgementBatches: acks}}}}
	return req
}

func (sc *shareConn) fetch(req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	sc.t.Helper()
	resp, err := req.RequestWith(sc.ctx, sc.cl.Broker(0))
	if err != nil {
		sc.t.Fatal(err)
	}
	return resp
}

func (sc *shareConn) ack(member string, epoch int32, acks ...kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareAcknowledgeResponse {
	sc.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	g := "sg"
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &g, &member, epoch
	req.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: sc.topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
	resp, err := req.RequestWith(sc.ctx, sc.cl.Broker(0))
	if err != nil {
		sc.t.Fatal(err)
	}
	return resp
}

// acquired renders a response's acquired ranges: "first-last@count ...".
func acquired(resp *kmsg.ShareFetchResponse) string {
	out := ""
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			for _, a := range rp.AcquiredRecords {
				out += fmt.Sprintf("%d-%d@%d ", a.FirstOffset, a.LastOffset, a.DeliveryCount)
			}
		}
	}
	return out
}

func partCodes(resp *kmsg.ShareFetchResponse) (fetch, ack int16) {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			return rp.ErrorCode, rp.AcknowledgeErrorCode
		}
	}
	return 0, 0
}

func expectCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if (want == nil && got != 0) || (want != nil && got != want.Code) {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func fetchAck(first, last int64, types ...int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: types}
}

func ackBatch(first, last int64, types ...int8) kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: types}
}

// TestShareFetchSessionsAndErrors walks the share session rules and the
// protocol errors Kafka answers for bad input.
func TestShareFetchSessionsAndErrors(t *testing.T) {
	sc := startShareConn(t, 30*time.Second, 5)

	expectCode(t, "incremental fetch without a session", sc.fetch(sc.fetchReq("m1", 1)).ErrorCode, kerr.ShareSessionNotFound)
	expectCode(t, "acknowledgements on the initial epoch", sc.fetch(sc.fetchReq("m1", 0, fetchAck(0, 0, 1))).ErrorCode, kerr.InvalidRequest)
	noMember := sc.fetchReq("", 0)
	expectCode(t, "no member id", sc.fetch(noMember).ErrorCode, kerr.InvalidRequest)
	expectCode(t, "ShareAcknowledge on epoch 0", sc.ack("m1", 0, ackBatch(0, 0, 1)).ErrorCode, kerr.InvalidShareSessionEpoch)

	resp := sc.fetch(sc.fetchReq("m1", 0))
	if resp.ErrorCode != 0 || acquired(resp) != "0-4@1 " || resp.AcquisitionLockTimeoutMillis != 30000 {
		t.Fatalf("first fetch: %v, acquired %q, lock %d", kerr.ErrorForCode(resp.ErrorCode), acquired(resp), resp.AcquisitionLockTimeoutMillis)
	}
	expectCode(t, "epoch ahead of the session", sc.fetch(sc.fetchReq("m1", 5)).ErrorCode, kerr.InvalidShareSessionEpoch)

	// Another member cannot acknowledge m1's records.
	sc.fetch(sc.fetchReq("m2", 0))
	a := sc.ack("m2", 1, ackBatch(0, 1, 1))
	expectCode(t, "m2 acknowledging m1's records", a.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRecordState)
	a = sc.ack("m1", 1, ackBatch(0, 1, 7))
	expectCode(t, "unknown acknowledge type", a.Topics[0].Partitions[0].ErrorCode, kerr.InvalidRequest)

	// m1 accepts 0, releases 1 and rejects 2 on a fetch (epoch 2), and gets 1
	// back with delivery count 2.
	req := sc.fetchReq("m1", 2, fetchAck(0, 2, 1, 2, 3))
	req.Topics[0].Partitions[0].PartitionMaxBytes = 0
	resp = sc.fetch(req)
	if f, ack := partCodes(resp); resp.ErrorCode != 0 || f != 0 || ack != 0 || acquired(resp) != "1-1@2 " {
		t.Fatalf("fetch with acknowledgements: %v/%v/%v, acquired %q", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(f), kerr.ErrorForCode(ack), acquired(resp))
	}

	// Unknown topic ids are UNKNOWN_TOPIC_ID.
	req = sc.fetchReq("m1", 3)
	req.Topics[0].TopicID = [16]byte{1, 2, 3}
	resp = sc.fetch(req)
	if f, _ := partCodes(resp); resp.ErrorCode != 0 || f != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %v/%v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(f))
	}

	// The final epoch acknowledges and closes the session: m1's other
	// records (1, 3, 4) are released for m2, with their counts.
	a = sc.ack("m1", -1, ackBatch(1, 1, 1))
	expectCode(t, "final acknowledgement", a.Topics[0].Partitions[0].ErrorCode, nil)
	expectCode(t, "fetch after the session closed", sc.fetch(sc.fetchReq("m1", 4)).ErrorCode, kerr.ShareSessionNotFound)
	resp = sc.fetch(sc.fetchReq("m2", 0))
	if acquired(resp) != "3-4@2 " {
		t.Fatalf("m2 after m1 closed its session acquired %q, want 3-4@2", acquired(resp))
	}
}

// TestShareFetchLockExpiryAndLongPoll: a parked ShareFetch answers when its
// records' locks expire (redelivery with count 2) and when records arrive.
func TestShareFetchLockExpiryAndLongPoll(t *testing.T) {
	sc := startShareConn(t, 1500*time.Millisecond, 2)
	if got := acquired(sc.fetch(sc.fetchReq("m1", 0))); got != "0-1@1 " {
		t.Fatalf("m1 acquired %q", got)
	}
	req := sc.fetchReq("m2", 0)
	req.MaxWaitMillis = 20_000
	if got := acquired(sc.fetch(req)); got != "0-1@2 " {
		t.Fatalf("m2, parked until m1's locks expired, acquired %q, want 0-1@2", got)
	}
	req = sc.fetchReq("m2", 1, fetchAck(0, 1, 1)) // accepts 0-1: nothing else in flight
	req.MaxWaitMillis = 20_000
	done := make(chan *kmsg.ShareFetchResponse, 1)
	go func() {
		resp, err := req.RequestWith(sc.ctx, sc.cl.Broker(0))
		if err != nil {
			resp = nil
		}
		done <- resp
	}()
	sc.produce(1)
	resp := <-done
	if resp == nil {
		t.Fatal("parked fetch failed")
	}
	if _, ack := partCodes(resp); ack != 0 || acquired(resp) != "2-2@1 " {
		t.Fatalf("parked fetch: acknowledgement %v, acquired %q, want 2-2@1", kerr.ErrorForCode(ack), acquired(resp))
	}
}

// TestShareSessionEndsWithConnection: as in Kafka, the records a member
// holds are released when the connection that opened its share session
// closes; they go to the next member with their delivery count.
func TestShareSessionEndsWithConnection(t *testing.T) {
	sc := startShareConn(t, 5*time.Minute, 3)
	seeds := sc.cl.OptValue(kgo.SeedBrokers).([]string)
	other, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	req := sc.fetchReq("m1", 0)
	resp, err := req.RequestWith(sc.ctx, other.Broker(0))
	if err != nil {
		t.Fatal(err)
	}
	if got := acquired(resp); got != "0-2@1 " {
		t.Fatalf("m1 acquired %q", got)
	}
	if got := acquired(sc.fetch(sc.fetchReq("m2", 0))); got != "" {
		t.Fatalf("m2 acquired %q while m1 holds everything", got)
	}
	other.Close() // m1's connection ends
	req = sc.fetchReq("m2", 1)
	req.MaxWaitMillis = 30_000 // answered as soon as the records are released
	if got := acquired(sc.fetch(req)); got != "0-2@2 " {
		t.Fatalf("m2 after m1's connection closed acquired %q, want 0-2@2", got)
	}
}

// TestShareFetchReadCommitted: with share.isolation.level=read_committed
// the records of an aborted transaction and the transaction markers are
// never delivered, committed ones and plain ones are.
func TestShareFetchReadCommitted(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *server.Config) {
		c.Share.AutoOffsetReset, c.Share.IsolationLevel = "earliest", "read_committed"
	}))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "sq", 1, nil)
	ctx := testCtx(t)
	topics, err := adm.ListTopics(ctx, "sq")
	if err != nil {
		t.Fatal(err)
	}
	txn := newClient(t, b.Addr(), kgo.DefaultProduceTopic("sq"), kgo.TransactionalID("share-txn"))
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		n := 2
		if commit == kgo.TryAbort {
			n = 1
		}
		for range n {
			if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("t")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	sc := &shareConn{t: t, ctx: ctx, cl: newClient(t, b.Addr(), kgo.DefaultProduceTopic("sq")), topicID: topics["sq"].ID}
	sc.produce(1)
	// 0-1 committed, 2 its marker, 3 aborted, 4 its marker, 5 plain.
	if got := acquired(sc.fetch(sc.fetchReq("m1", 0))); got != "0-1@1 5-5@1 " {
		t.Fatalf("acquired %q, want 0-1@1 5-5@1", got)
	}
}

// TestListGroupsWithShareGroups: ListGroups lists share groups beside
// classic ones (type and protocol type "share", state Stable while it has
// members, Empty after), and its state and type filters apply to them.
func TestListGroupsWithShareGroups(t *testing.T) {
	sc := startShareConn(t, 30*time.Second, 1)
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "sg", "member-1", 0, []string{"sq"}
	hb, err := req.RequestWith(sc.ctx, sc.cl)
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "heartbeat", hb.ErrorCode, nil)
	adm := kadm.NewClient(sc.cl)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "sq", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(sc.ctx, "classic-1", os); err != nil {
		t.Fatal(err)
	}
	list := func(states, types []string) map[string]string {
		t.Helper()
		lr := kmsg.NewPtrListGroupsRequest() // the client sends v5
		lr.StatesFilter, lr.TypesFilter = states, types
		resp, err := lr.RequestWith(sc.ctx, sc.cl)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, g := range resp.Groups {
			out[g.Group] = g.ProtocolType + "/" + g.GroupType + "/" + g.GroupState
		}
		return out
	}
	for _, tc := range []struct {
		states, types []string
		want          map[string]string
	}{
		// A group that only stores offsets has no protocol type.
		{nil, nil, map[string]string{"sg": "share/share/Stable", "classic-1": "/classic/Empty"}},
		{nil, []string{"Share"}, map[string]string{"sg": "share/share/Stable"}},
		{nil, []string{"classic"}, map[string]string{"classic-1": "/classic/Empty"}},
		{[]string{"stable"}, nil, map[string]string{"sg": "share/share/Stable"}},
		{[]string{"Empty"}, []string{"share"}, map[string]string{}},
		{nil, []string{"streams"}, map[string]string{}},
	} {
		if got := list(tc.states, tc.types); !maps.Equal(got, tc.want) {
			t.Errorf("ListGroups states %v types %v: %v, want %v", tc.states, tc.types, got, tc.want)
		}
	}
	// The member leaves: the share group stays, Empty, until deleted.
	req.MemberEpoch = -1
	if hb, err = req.RequestWith(sc.ctx, sc.cl); err != nil {
		t.Fatal(err)
	}
	expectCode(t, "leave", hb.ErrorCode, nil)
	for _, tc := range []struct {
		states, types []string
		want          map[string]string
	}{
		{[]string{"Empty"}, []string{"share"}, map[string]string{"sg": "share/share/Empty"}},
		{[]string{"empty"}, nil, map[string]string{"sg": "share/share/Empty", "classic-1": "/classic/Empty"}},
		{[]string{"Stable"}, nil, map[string]string{}},
	} {
		if got := list(tc.states, tc.types); !maps.Equal(got, tc.want) {
			t.Errorf("after the member left: ListGroups states %v types %v: %v, want %v", tc.states, tc.types, got, tc.want)
		}
	}
	if _, err := adm.DeleteGroups(sc.ctx, "sg"); err != nil {
		t.Fatal(err)
	}
	if got := list(nil, nil); !maps.Equal(got, map[string]string{"classic-1": "/classic/Empty"}) {
		t.Errorf("after DeleteGroups: ListGroups %v", got)
	}
}
