package protocol_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/record"
)

// testVerifier is a KIP-890 verifier that records its calls and refuses
// the transactional IDs in refuse.
type testVerifier struct {
	mu     sync.Mutex
	calls  []string
	refuse map[string]error
}

func (v *testVerifier) VerifyTxnPartition(_ context.Context, id string, pid int64, epoch int16, topic string, partition int32) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, fmt.Sprintf("%s/%d/%d %s-%d", id, pid, epoch, topic, partition))
	return v.refuse[id]
}

func (v *testVerifier) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.calls)
}

// fetchStarts is an Observer that reports each Fetch handler start.
type fetchStarts chan struct{}

func (fetchStarts) ConnOpened() {}
func (fetchStarts) ConnClosed() {}
func (f fetchStarts) RequestStarted(key int16) {
	if key == kmsg.Fetch.Int16() {
		select {
		case f <- struct{}{}:
		default:
		}
	}
}
func (fetchStarts) Request(int16, int16, int, int, time.Duration, bool) {}

// startTxnBroker serves a standalone broker with env's TxnVerifier set
// (broker/server wires the coordinator's in a real broker).
func startTxnBroker(t *testing.T, v protocol.TxnVerifier, obs ...protocol.Observer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := broker.DefaultConfig()
	cfg.DataDir, cfg.Port = t.TempDir(), int32(l.Addr().(*net.TCPAddr).Port)
	b, err := broker.Open(context.Background(), cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	pcfg := protocol.Config{Env: &protocol.Env{Broker: b, TxnVerifier: v, Log: discardLogger()}, Log: discardLogger()}
	if len(obs) > 0 {
		pcfg.Observer = obs[0]
	}
	s := protocol.NewServer(pcfg)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		b.Close()
	})
	return l.Addr().String()
}

// txnClient sends raw transactional requests for one producer ID.
type txnClient struct {
	t     *testing.T
	cl    *kgo.Client
	topic string
	pid   int64
	epoch int16
	seq   int32
}

func (c *txnClient) produce(txnID *string, transactional bool, values ...string) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = c.pid, c.epoch, c.seq, transactional
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	b, err := record.Build(spec, recs)
	if err != nil {
		c.t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 30000, txnID
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: c.topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: b}}}}
	resp, err := req.RequestWith(testCtx(c.t), c.cl)
	if err != nil {
		c.t.Fatal(err)
	}
	r := resp.Topics[0].Partitions[0]
	if r.ErrorCode == 0 {
		c.seq += int32(len(values))
	}
	return r
}

func (c *txnClient) mustProduce(txnID string, values ...string) int64 {
	c.t.Helper()
	r := c.produce(&txnID, true, values...)
	if r.ErrorCode != 0 {
		c.t.Fatalf("transactional produce %v: %v", values, kerr.ErrorForCode(r.ErrorCode))
	}
	return r.BaseOffset
}

// writeMarker sends WriteTxnMarkers v1 for the partitions of topic on
// its own connection (kgo would route it by partition, and refuse an
// unknown one itself) and returns each partition's error code.
func writeMarker(t *testing.T, addr, topic string, pid int64, epoch int16, commit bool, partitions ...int32) []int16 {
	t.Helper()
	return writeMarkerAt(t, addr, topic, pid, epoch, 1, commit, partitions...)
}

// writeMarkerAt is writeMarker with a coordinator epoch.
func writeMarkerAt(t *testing.T, addr, topic string, pid int64, epoch int16, coordinatorEpoch int32, commit bool, partitions ...int32) []int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordinatorEpoch
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: topic, Partitions: partitions}}
	req.Markers = append(req.Markers, m)
	c := dial(t, addr)
	defer c.Close()
	if _, err := c.Write(rawFrame(req, 1)); err != nil {
		t.Fatal(err)
	}
	_, body := readResponse(t, c)
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body[1:]); err != nil { // skip the header tag byte
		t.Fatal(err)
	}
	var codes []int16
	for _, p := range resp.Markers[0].Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	return codes
}

func latestOffset(t *testing.T, cl *kgo.Client, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

func rawFetch(t *testing.T, cl *kgo.Client, topic string, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.IsolationLevel = -1, 1<<20, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	// kgo sends the highest version both sides speak: v13+ names topics by ID.
	details, err := kadm.NewClient(cl).ListTopics(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt.TopicID = details[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// consumeValues reads topic from the start up to its end with the given
// isolation level and returns the record values.
func consumeValues(t *testing.T, addr, topic string, level kgo.IsolationLevel, n int) []string {
	t.Helper()
	var out []string
	for _, r := range consume(t, addr, topic, n, kgo.FetchIsolationLevel(level)) {
		out = append(out, string(r.Value))
	}
	return out
}

// describeProducer returns pid's entry in DescribeProducers of partition 0.
func describeProducer(t *testing.T, cl *kgo.Client, topic string, pid int64) kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("DescribeProducers: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	for _, ap := range p.ActiveProducers {
		if ap.ProducerID == pid {
			return ap
		}
	}
	t.Fatalf("DescribeProducers does not list producer %d: %+v", pid, p.ActiveProducers)
	return kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
}

// Transactional produce and WriteTxnMarkers with raw requests: the LSO
// holds read_committed readers (Fetch, ListOffsets) below an open
// transaction, an aborted transaction is named in AbortedTransactions and
// franz-go's read_committed consumer drops it, the KIP-890 verifier is
// asked once per transaction and partition, DescribeProducers shows the
// open transaction, and a stale-epoch marker is refused.
func TestTransactionalProduceAndMarkers(t *testing.T) {
	v := &testVerifier{refuse: map[string]error{"late": kerr.InvalidTxnState}}
	addr := startTxnBroker(t, v)
	createTopic(t, newAdmin(t, addr), "tx", 1, nil)
	cl := newClient(t, addr)
	initResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(testCtx(t), cl)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %+v", err, initResp)
	}
	pid := initResp.ProducerID
	c := &txnClient{t: t, cl: cl, topic: "tx", pid: pid}

	// Transaction 1: two batches, one verification, then aborted.
	c.mustProduce("t1", "a1", "a2")
	c.mustProduce("t1", "a3")
	if n := v.count(); n != 1 {
		t.Fatalf("verifier asked %d times for one transaction, want 1: %v", n, v.calls)
	}
	if lso, hwm := latestOffset(t, cl, "tx", 1), latestOffset(t, cl, "tx", 0); lso != 0 || hwm != 3 {
		t.Fatalf("latest offsets with the transaction open: read_committed %d (want 0), read_uncommitted %d (want 3)", lso, hwm)
	}
	if p := rawFetch(t, cl, "tx", 0, 1); p.LastStableOffset != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("read_committed fetch with the transaction open: LSO %d, %d bytes, error %v", p.LastStableOffset, len(p.RecordBatches), kerr.ErrorForCode(p.ErrorCode))
	}
	if ap := describeProducer(t, cl, "tx", pid); ap.CurrentTxnStartOffset != 0 || ap.LastSequence != 2 || ap.CoordinatorEpoch != -1 {
		t.Fatalf("DescribeProducers with the transaction open: %+v", ap)
	}
	if codes := writeMarker(t, addr, "tx", pid, 0, false, 0); codes[0] != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(codes[0]))
	}
	if ap := describeProducer(t, cl, "tx", pid); ap.CurrentTxnStartOffset != -1 || ap.CoordinatorEpoch != 1 {
		t.Fatalf("DescribeProducers after the abort: %+v", ap)
	}
	// Transaction 2: committed.
	c.mustProduce("t1", "c1", "c2")
	if n := v.count(); n != 2 {
		t.Fatalf("verifier asked %d times for two transactions, want 2", n)
	}
	if codes := writeMarker(t, addr, "tx", pid, 0, true, 0); codes[0] != 0 {
		t.Fatalf("commit marker: %v", kerr.ErrorForCode(codes[0]))
	}
	plainC := &txnClient{t: t, cl: cl, topic: "tx", pid: -1, epoch: -1, seq: -1}
	if r := plainC.produce(nil, false, "p1"); r.ErrorCode != 0 {
		t.Fatalf("plain produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	end := latestOffset(t, cl, "tx", 0)
	if lso := latestOffset(t, cl, "tx", 1); lso != end {
		t.Fatalf("read_committed latest %d, want the end %d", lso, end)
	}
	p := rawFetch(t, cl, "tx", 0, 1)
	if p.LastStableOffset != end || p.HighWatermark != end {
		t.Fatalf("LSO %d, HWM %d, want %d", p.LastStableOffset, p.HighWatermark, end)
	}
	if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != pid || p.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted transactions %+v, want producer %d from 0", p.AbortedTransactions, pid)
	}
	if p := rawFetch(t, cl, "tx", 4, 1); len(p.AbortedTransactions) != 0 {
		t.Fatalf("aborted transactions of a fetch after the abort marker: %+v", p.AbortedTransactions)
	}
	if got, want := consumeValues(t, addr, "tx", kgo.ReadCommitted(), 3), []string{"c1", "c2", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer got %v, want %v", got, want)
	}
	if got, want := consumeValues(t, addr, "tx", kgo.ReadUncommitted(), 6), []string{"a1", "a2", "a3", "c1", "c2", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted consumer got %v, want %v", got, want)
	}

	// The coordinator bumped the epoch: a marker at the old one is a
	// zombie's.
	c.epoch, c.seq = 1, 0
	c.mustProduce("t1", "d1")
	if codes := writeMarker(t, addr, "tx", pid, 0, true, 0); codes[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale-epoch marker: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(codes[0]))
	}
	if lso := latestOffset(t, cl, "tx", 1); lso != end {
		t.Fatalf("a refused marker moved the LSO to %d", lso)
	}
	if codes := writeMarker(t, addr, "tx", pid, 1, true, 0, 7); codes[0] != 0 || codes[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit at epoch 1 on partitions 0 and 7: %v", codes)
	}
	if got := consumeValues(t, addr, "tx", kgo.ReadCommitted(), 4); got[3] != "d1" {
		t.Fatalf("read_committed after the second commit: %v", got)
	}

	// The verifier refuses: the batch is not appended.
	before := latestOffset(t, cl, "tx", 0)
	late := &txnClient{t: t, cl: cl, topic: "tx", pid: pid + 100}
	lateID := "late"
	if r := late.produce(&lateID, true, "x"); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("unverified transactional produce: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
	// Transactional batches need a transactional ID (Kafka's answer).
	if r := late.produce(nil, true, "x"); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional batch without an ID: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if after := latestOffset(t, cl, "tx", 0); after != before {
		t.Fatalf("refused produces appended: end %d -> %d", before, after)
	}

	// ApiVersions advertises WriteTxnMarkers v0-1.
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range av.ApiKeys {
		if k.ApiKey == kmsg.WriteTxnMarkers.Int16() {
			found = k.MinVersion == 0 && k.MaxVersion == 1
		}
	}
	if !found {
		t.Fatal("WriteTxnMarkers v0-1 not advertised")
	}
}

// A read_committed fetch parked on an open transaction (no data below the
// LSO, MaxWait far beyond the test's deadline) answers when the commit
// marker moves the LSO.
func TestReadCommittedFetchWakesOnMarker(t *testing.T) {
	starts := make(fetchStarts, 1)
	addr := startTxnBroker(t, nil, starts)
	createTopic(t, newAdmin(t, addr), "park", 1, nil)
	cl := newClient(t, addr)
	c := &txnClient{t: t, cl: cl, topic: "park", pid: 5}
	c.mustProduce("t", "v1", "v2")
	details, err := kadm.NewClient(cl).ListTopics(testCtx(t), "park")
	if err != nil {
		t.Fatal(err)
	}
	select { // no fetch before ours

	case <-starts:
	default:
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.IsolationLevel, req.MinBytes, req.MaxWaitMillis = -1, 1<<20, 1, 1, 300_000
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "park", details["park"].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	type result struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := req.RequestWith(testCtx(t), cl)
		done <- result{resp, err}
	}()
	<-starts // the fetch is being served (and parks: nothing below the LSO)
	if codes := writeMarker(t, addr, "park", 5, 0, true, 0); codes[0] != 0 {
		t.Fatalf("commit marker: %v", kerr.ErrorForCode(codes[0]))
	}
	r := <-done // the test context (60 s) ends long before MaxWait (300 s)
	if r.err != nil {
		t.Fatalf("parked read_committed fetch: %v", r.err)
	}
	p := r.resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LastStableOffset != 3 || len(p.RecordBatches) == 0 {
		t.Fatalf("woken fetch: error %v, LSO %d, %d bytes", kerr.ErrorForCode(p.ErrorCode), p.LastStableOffset, len(p.RecordBatches))
	}
}

// markerDuringVerify is a KIP-890 verifier that answers its first call
// "verified", but only after the transaction ended: the coordinator
// aborted it (its timeout) and the abort marker reached the partition
// while the leader was waiting for the answer (up to 30 s in a cluster).
// Later calls refuse, as the coordinator then does.
type markerDuringVerify struct {
	testVerifier
	marker func()
}

func (v *markerDuringVerify) VerifyTxnPartition(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) error {
	first := v.count() == 0
	_ = v.testVerifier.VerifyTxnPartition(ctx, id, pid, epoch, topic, partition)
	if first {
		v.marker()
		return nil
	}
	return kerr.InvalidTxnState
}

// Window 3a of issue #25: a late first batch of a transaction, verified
// before the abort marker reached the partition and appended after it,
// is refused (INVALID_TXN_STATE) instead of opening a hanging transaction
// that pins the LSO, and the stale answer is not remembered: the retry
// asks the coordinator again.
func TestTxnVerificationRacingMarker(t *testing.T) {
	v := &markerDuringVerify{}
	addr := startTxnBroker(t, v)
	createTopic(t, newAdmin(t, addr), "race", 1, nil)
	cl := newClient(t, addr)
	c := &txnClient{t: t, cl: cl, topic: "race", pid: 42}
	v.marker = func() {
		if codes := writeMarker(t, addr, "race", 42, 0, false, 0); codes[0] != 0 {
			t.Errorf("abort marker: %v", kerr.ErrorForCode(codes[0]))
		}
	}
	id := "app"
	if r := c.produce(&id, true, "late"); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("first batch verified before the abort marker and appended after it: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
	end := latestOffset(t, cl, "race", 0)
	if lso := latestOffset(t, cl, "race", 1); lso != end {
		t.Fatalf("LSO %d pinned below the end %d by a hanging transaction", lso, end)
	}
	if ap := describeProducer(t, cl, "race", 42); ap.CurrentTxnStartOffset != -1 {
		t.Fatalf("the late batch opened a transaction: %+v", ap)
	}
	if r := c.produce(&id, true, "late"); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("retried late batch: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
	if n := v.count(); n != 2 {
		t.Fatalf("verifier asked %d times, want 2 (the stale answer must not be remembered)", n)
	}
}

// Window 3b of issue #25: a coordinator that lost the transactional ID
// retries its marker of the producer's previous transaction after the new
// coordinator (a higher coordinator epoch) ended that transaction and the
// producer began its next one at the same producer epoch: the partition
// answers TRANSACTION_COORDINATOR_FENCED and the next transaction stays
// open.
func TestStaleCoordinatorMarkerFenced(t *testing.T) {
	addr := startTxnBroker(t, nil)
	createTopic(t, newAdmin(t, addr), "fence", 1, nil)
	cl := newClient(t, addr)
	c := &txnClient{t: t, cl: cl, topic: "fence", pid: 77}
	c.mustProduce("app", "t1")
	if codes := writeMarkerAt(t, addr, "fence", 77, 0, 5, true, 0); codes[0] != 0 {
		t.Fatalf("the new coordinator's commit: %v", kerr.ErrorForCode(codes[0]))
	}
	c.mustProduce("app", "t2") // the next transaction, same producer epoch
	if codes := writeMarkerAt(t, addr, "fence", 77, 0, 4, true, 0); codes[0] != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("the old coordinator's late commit: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(codes[0]))
	}
	if ap := describeProducer(t, cl, "fence", 77); ap.CurrentTxnStartOffset < 0 || ap.CoordinatorEpoch != 5 {
		t.Fatalf("after the stale marker: %+v, want the second transaction open and coordinator epoch 5", ap)
	}
	if codes := writeMarkerAt(t, addr, "fence", 77, 0, 5, false, 0); codes[0] != 0 {
		t.Fatalf("the current coordinator's abort: %v", kerr.ErrorForCode(codes[0]))
	}
	if got, want := consumeValues(t, addr, "fence", kgo.ReadCommitted(), 1), []string{"t1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed got %v, want %v", got, want)
	}
}
