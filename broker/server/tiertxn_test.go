package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/record"
)

// Transactions on tiered topics: raw transactional produce and
// WriteTxnMarkers (the coordinator's part), as broker/protocol's
// transaction tests send them.

// rawTxn is one transactional producer (one producer ID) of partition 0.
type rawTxn struct {
	t     *testing.T
	cl    *kgo.Client
	topic string
	id    string
	pid   int64
	epoch int16
	seq   int32
}

func newRawTxn(t *testing.T, cl *kgo.Client, topic, id string) *rawTxn {
	t.Helper()
	// The transactional ID's coordinator allocates the producer ID and
	// holds partition 0 in its transaction: KIP-890 verification refuses
	// transactional produces it does not know.
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 600_000
	resp, err := init.RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %+v", err, resp)
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, resp.ProducerID, resp.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	if ar, err := add.RequestWith(context.Background(), cl); err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, ar)
	}
	return &rawTxn{t: t, cl: cl, topic: topic, id: id, pid: resp.ProducerID, epoch: resp.ProducerEpoch}
}

// padded makes a value large enough that a few dozen batches fill a
// 4 KiB segment.
func padded(v string) []byte { return []byte(v + "|" + strings.Repeat("x", 200)) }

// produce appends one transactional batch of one record and returns its
// offset.
func (c *rawTxn) produce(value string) int64 {
	c.t.Helper()
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = c.pid, c.epoch, c.seq, true
	spec.BaseTimestamp = time.Now().UnixMilli() // not 0: tier retention (retention.ms) would drop the segments
	b, err := record.Build(spec, []record.Record{{Value: padded(value)}})
	if err != nil {
		c.t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 30000, &c.id
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: c.topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: b}}}}
	resp, err := req.RequestWith(context.Background(), c.cl)
	if err != nil {
		c.t.Fatal(err)
	}
	r := resp.Topics[0].Partitions[0]
	if r.ErrorCode != 0 {
		c.t.Fatalf("transactional produce of %s: %v", value, kerr.ErrorForCode(r.ErrorCode))
	}
	c.seq++
	return r.BaseOffset
}

// end writes the COMMIT or ABORT marker of the producer's transaction.
func (c *rawTxn) end(commit bool) {
	c.t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = c.pid, c.epoch, commit, 1
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: c.topic, Partitions: []int32{0}}}
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(context.Background(), c.cl)
	if err != nil {
		c.t.Fatal(err)
	}
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		c.t.Fatalf("WriteTxnMarkers (commit %v) for producer %d: %v", commit, c.pid, kerr.ErrorForCode(code))
	}
}

// createTieredTopic creates a one-partition tiered topic with 4 KiB
// segments that keeps only what is not in the tier yet locally.
func createTieredTopic(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	one, segBytes, remote := "1", "4096", "true"
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{"remote.storage.enable": &remote, "local.retention.ms": &one, "segment.bytes": &segBytes}, topic); err != nil {
		t.Fatal(err)
	}
}

// consumeIsolated reads topic from offset 0 with a fresh franz-go client at
// the given isolation level until it has n records, and returns their
// values (without the padding).
func consumeIsolated(t *testing.T, addr, topic string, level kgo.IsolationLevel, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go consumed %d of %d records: %v (so far %q)", len(out), n, ctx.Err(), out)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error (retried): %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			v, _, _ := strings.Cut(string(r.Value), "|")
			out = append(out, v)
		})
	}
	return out
}

// firstDiff is the first index where got and want differ, and what want
// has there; got has at least len(want) elements (consumeIsolated returns
// at least n).
func firstDiff(got, want []string) (int, string) {
	for i := range want {
		if got[i] != want[i] {
			return i, fmt.Sprintf("%q", want[i])
		}
	}
	return len(want), "no more records"
}

// fetchAt sends one consumer Fetch of partition 0 at offset.
func fetchAt(t *testing.T, cl *kgo.Client, topic string, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	ctx := context.Background()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.IsolationLevel = -1, 1<<20, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic) // v13+ names topics by ID
	if err != nil {
		t.Fatal(err)
	}
	rt.TopicID = details[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("fetch at %d (isolation %d): %v", offset, isolation, kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp
}

// TestTieredReadCommitted: committed and aborted transactions on a tiered
// topic whose local retention deleted what went to the tier; a franz-go
// read_committed consumer from offset 0 gets exactly the committed records
// (aborted transactions named from the tier's copies of the transaction
// indexes, also one whose data is in the tier and whose marker is still
// local only), a read_uncommitted one all of them; a fetch from the tier
// carries the partition's real LSO.
func TestTieredReadCommitted(t *testing.T) {
	s := startTiered(t, tierStore(t))
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "tiered-txn"
	createTieredTopic(t, cl, topic)

	var all, committed []string // record values in offset order
	plain := newRawTxn(t, cl, topic, "plain")
	write := func(c *rawTxn, v string, commits bool) int64 {
		t.Helper()
		off := c.produce(v)
		all = append(all, v)
		if commits {
			committed = append(committed, v)
		}
		return off
	}
	// Committed one record at a time.
	for i := range 5 {
		write(plain, fmt.Sprintf("plain-%d", i), true)
		plain.end(true)
	}
	// A is aborted and B committed after 20 rounds: their data spans
	// several segments and their markers are in a later one than most of
	// it. Short transactions C, committed and aborted, in between.
	a, b := newRawTxn(t, cl, topic, "a"), newRawTxn(t, cl, topic, "b")
	for i := range 20 {
		write(a, fmt.Sprintf("a-%d", i), false)
		c := newRawTxn(t, cl, topic, fmt.Sprintf("c%d", i))
		write(c, fmt.Sprintf("c%d-0", i), i%2 == 0)
		write(c, fmt.Sprintf("c%d-1", i), i%2 == 0)
		c.end(i%2 == 0)
		write(b, fmt.Sprintf("b-%d", i), true)
	}
	a.end(false)
	b.end(true)
	// T (aborted) interleaved with D (committed); T's ABORT marker is the
	// last batch, so it stays in the active segment: in the local log only
	// while T's data goes to the tier.
	tt, d := newRawTxn(t, cl, topic, "t"), newRawTxn(t, cl, topic, "d")
	tFirst := int64(-1)
	for i := range 40 {
		if off := write(tt, fmt.Sprintf("t-%d", i), false); tFirst < 0 {
			tFirst = off
		}
		write(d, fmt.Sprintf("d-%d", i), true)
	}
	d.end(true)
	tt.end(false)

	local := waitTiered(t, cl, topic, tFirst+1)
	end, code := listOffset(t, cl, topic, -1)
	if code != 0 {
		t.Fatalf("ListOffsets latest: %v", kerr.ErrorForCode(code))
	}
	tierLast, code := listOffset(t, cl, topic, -5)
	if code != 0 || tierLast >= end-1 {
		t.Fatalf("latest tiered offset %d (error %d): T's ABORT marker at %d should be in the local log only", tierLast, code, end-1)
	}
	t.Logf("log end %d, local log start %d, tier holds up to %d, T starts at %d", end, local, tierLast, tFirst)

	if got := consumeIsolated(t, s.Addr(), topic, kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		i, want := firstDiff(got, committed)
		t.Fatalf("read_committed consumer from 0: record %d is %q, want %s (the committed records only); got %d records %q", i, got[i], want, len(got), got)
	}
	if got := consumeIsolated(t, s.Addr(), topic, kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
		i, want := firstDiff(got, all)
		t.Fatalf("read_uncommitted consumer from 0: record %d is %q, want %s (every record); got %d records %q", i, got[i], want, len(got), got)
	}

	// An open transaction holds the LSO, also for fetches from the tier.
	e := newRawTxn(t, cl, topic, "e")
	eFirst := e.produce("e-0")
	for _, iso := range []int8{0, 1} {
		sp := fetchAt(t, cl, topic, 0, iso)
		if sp.LastStableOffset != eFirst || sp.HighWatermark != eFirst+1 {
			t.Fatalf("fetch from the tier (isolation %d): LSO %d, HWM %d, want LSO %d (the open transaction's first offset), HWM %d", iso, sp.LastStableOffset, sp.HighWatermark, eFirst, eFirst+1)
		}
		if len(sp.RecordBatches) == 0 {
			t.Fatalf("fetch from the tier (isolation %d) returned no records", iso)
		}
		hasA := false
		for _, at := range sp.AbortedTransactions {
			hasA = hasA || at.ProducerID == a.pid
		}
		switch {
		case iso == 0 && len(sp.AbortedTransactions) != 0:
			t.Fatalf("read_uncommitted fetch got aborted transactions %+v", sp.AbortedTransactions)
		case iso == 1 && !hasA:
			t.Fatalf("read_committed fetch at 0 got aborted transactions %+v, want A's (producer %d) among them", sp.AbortedTransactions, a.pid)
		}
	}
	e.end(true)
}

// TestTierUploadStopsAtOpenTransaction: the uploader copies segments below
// the last stable offset only (Kafka's bound), so an open transaction is
// never uploaded past its first offset (and local retention keeps it);
// once its marker is written the rest goes.
func TestTierUploadStopsAtOpenTransaction(t *testing.T) {
	s := startTiered(t, tierStore(t))
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "tiered-open-txn"
	createTieredTopic(t, cl, topic)
	ctx := context.Background()

	plain := newRawTxn(t, cl, topic, "plain")
	for i := range 40 {
		plain.produce(fmt.Sprintf("before-%d", i))
	}
	plain.end(true)
	open := newRawTxn(t, cl, topic, "open")
	first := open.produce("open-0")
	for i := range 60 { // several sealed segments after the open transaction's start
		plain.produce(fmt.Sprintf("after-%d", i))
	}
	plain.end(true)

	// A round after everything above: uploads what it may.
	if err := s.Tier().RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	tierLast, code := listOffset(t, cl, topic, -5)
	if code != 0 {
		t.Fatalf("ListOffsets latest-tiered: %v", kerr.ErrorForCode(code))
	}
	if tierLast < 0 || tierLast >= first {
		t.Fatalf("tier holds up to offset %d with a transaction open from %d: want segments below it uploaded, none past it", tierLast, first)
	}
	if localStart, code := listOffset(t, cl, topic, -4); code != 0 || localStart > first {
		t.Fatalf("local log start %d (error %d) past the open transaction's first offset %d", localStart, code, first)
	}

	open.end(false)
	if err := s.Tier().RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if after, code := listOffset(t, cl, topic, -5); code != 0 || after <= first {
		t.Fatalf("after the ABORT marker the tier holds up to %d (error %d), want past %d", after, code, first)
	}
	got := consumeIsolated(t, s.Addr(), topic, kgo.ReadCommitted(), 100)
	for _, v := range got {
		if strings.HasPrefix(v, "open-") {
			t.Fatalf("read_committed consumer got the aborted record %q", v)
		}
	}
}
