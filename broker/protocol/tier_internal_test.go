package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/tier"
)

// The slow tier's "never a silent skip" promise (DESIGN.md §3) at the
// protocol level: a standalone broker whose tier is an in-memory bucket
// behind a fault wrapper, rounds of the tier manager run by the test.

// tierBroker is a standalone broker serving the protocol with a slow tier.
type tierBroker struct {
	b    *broker.Broker
	addr string
	cl   *kgo.Client
	stop func()
}

func startTierBroker(t *testing.T, dir string, store objstore.Store) *tierBroker {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := broker.DefaultConfig()
	cfg.DataDir, cfg.Port, cfg.RemoteStorageSystem = dir, int32(l.Addr().(*net.TCPAddr).Port), true
	b, err := broker.Open(context.Background(), cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	b.SetTier(tier.New(store, tier.Config{Cluster: "c"}, logr.Discard()))
	s := NewServer(Config{Env: &Env{Broker: b, Log: logr.Discard()}, Log: logr.Discard()})
	go func() { _ = s.Serve(l) }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.Addr().String()), kgo.ProducerBatchMaxBytes(2048), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	tb := &tierBroker{b: b, addr: l.Addr().String(), cl: cl}
	var stopped atomic.Bool
	tb.stop = func() {
		if stopped.Swap(true) {
			return
		}
		cl.Close()
		s.Close()
		_ = b.Close()
	}
	t.Cleanup(tb.stop)
	return tb
}

// createTiered creates a one-partition tiered topic of small segments
// whose local retention deletes every segment once the tier holds it.
func (tb *tierBroker) createTiered(t *testing.T, topic string) {
	t.Helper()
	one, segBytes, remote := "1", "4096", "true"
	resp, err := kadm.NewClient(tb.cl).CreateTopic(context.Background(), 1, 1, map[string]*string{
		"remote.storage.enable": &remote, "local.retention.ms": &one, "segment.bytes": &segBytes,
	}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}

// produce appends n records of about 100 bytes (several segments).
func (tb *tierBroker) produce(t *testing.T, topic string, n int) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%05d-%090d", i, i)}
	}
	if err := tb.cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// tierRounds runs tier manager rounds until the local log of partition 0
// starts at or above atLeast (uploaded segments deleted locally).
func (tb *tierBroker) tierRounds(t *testing.T, topic string, atLeast int64) *broker.Partition {
	t.Helper()
	p, err := tb.b.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := broker.NewTierManager(tb.b, time.Hour)
	deadline := time.Now().Add(30 * time.Second)
	for p.Log.StartOffset() < atLeast {
		if err := m.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("local log start %d, want >= %d", p.Log.StartOffset(), atLeast)
		}
		time.Sleep(2 * time.Millisecond) // local.retention.ms=1 must pass
	}
	return p
}

func (tb *tierBroker) listOffset(t *testing.T, topic string, ts int64) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), tb.cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.Offset, sp.ErrorCode
}

// fetch sends one consumer Fetch v12 of partition 0 at offset.
func (tb *tierBroker) fetch(t *testing.T, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MaxBytes = 10, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	// The client picks the version (v13+ names topics by ID).
	details, err := kadm.NewClient(tb.cl).ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt.TopicID = details[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), tb.cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// firstOffset is the base offset of the first batch of a fetch answer.
func firstOffset(t *testing.T, sp kmsg.FetchResponseTopicPartition) int64 {
	t.Helper()
	if sp.ErrorCode != 0 || len(sp.RecordBatches) == 0 {
		t.Fatalf("fetch: error %d (%v), %d bytes", sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode), len(sp.RecordBatches))
	}
	var b kmsg.RecordBatch
	if err := b.ReadFrom(sp.RecordBatches); err != nil {
		t.Fatal(err)
	}
	return b.FirstOffset
}

// TestListOffsetsEarliestBeforeManifestLoaded (issue 25, window 2a): after
// a restart the tier's manifest is not known until read; ListOffsets must
// not answer the local log's start meanwhile. While the bucket fails the
// answers that need the tier (earliest, latest-tiered, by timestamp) are
// KAFKA_STORAGE_ERROR (retriable); once it answers, earliest is the tier's
// start although no tier manager round has run since the restart.
func TestListOffsetsEarliestBeforeManifestLoaded(t *testing.T) {
	store := objstore.NewFaulty(objstore.NewMem("tier"))
	dir := t.TempDir()
	const topic = "tiered"
	tb := startTierBroker(t, dir, store)
	tb.createTiered(t, topic)
	tb.produce(t, topic, 300)
	local := tb.tierRounds(t, topic, 1).Log.StartOffset()
	tb.stop()

	store.SetFailAll(true)
	tb = startTierBroker(t, dir, store)
	if got := tb.b.AllPartitions()[0].Log.StartOffset(); got != local {
		t.Fatalf("local log start after the restart %d, want %d", got, local)
	}
	for _, ts := range []int64{-2, -5, 0} {
		if off, code := tb.listOffset(t, topic, ts); code != kerr.KafkaStorageError.Code {
			t.Errorf("ListOffsets %d while the manifest cannot be read = %d (error %d), want KAFKA_STORAGE_ERROR (the local log start is %d)", ts, off, code, local)
		}
	}
	store.SetFailAll(false)
	if off, code := tb.listOffset(t, topic, -2); code != 0 || off != 0 {
		t.Fatalf("ListOffsets earliest once the bucket answers = %d (error %d), want 0 (the tier's start; the local log starts at %d)", off, code, local)
	}
	if off, code := tb.listOffset(t, topic, 0); code != 0 || off != 0 {
		t.Fatalf("ListOffsets by timestamp 0 = %d (error %d), want 0 (in the tier)", off, code)
	}
	if got := firstOffset(t, tb.fetch(t, topic, 0)); got != 0 {
		t.Fatalf("fetch at 0 starts at %d", got)
	}
}

// TestFetchLocalRetentionRace (issue 25, window 2b): local retention
// deleting the fetched offset between the fetch's check of the local log
// start and its read must not answer OFFSET_OUT_OF_RANGE: the tier holds
// the offset (local retention deletes only what it holds) and serves it.
func TestFetchLocalRetentionRace(t *testing.T) {
	store := objstore.NewFaulty(objstore.NewMem("tier"))
	const topic = "race"
	tb := startTierBroker(t, t.TempDir(), store)
	tb.createTiered(t, topic)
	tb.produce(t, topic, 300)
	p, err := tb.b.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Log.StartOffset() != 0 {
		t.Fatalf("local log start %d before any upload", p.Log.StartOffset())
	}
	var fired atomic.Bool
	var roundErr error
	m := broker.NewTierManager(tb.b, time.Hour)
	testHookBeforeLocalRead = func(hp *broker.Partition) {
		if hp != p || fired.Swap(true) {
			return
		}
		// Upload, then local retention (local.retention.ms=1 must pass).
		for deadline := time.Now().Add(30 * time.Second); p.Log.StartOffset() == 0 && roundErr == nil && time.Now().Before(deadline); {
			roundErr = m.RunOnce(context.Background())
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Cleanup(func() { testHookBeforeLocalRead = nil })
	sp := tb.fetch(t, topic, 0)
	if !fired.Load() || roundErr != nil {
		t.Fatalf("the hook ran: %v; tier round: %v", fired.Load(), roundErr)
	}
	if p.Log.StartOffset() == 0 {
		t.Fatal("local retention deleted nothing")
	}
	if got := firstOffset(t, sp); got != 0 {
		t.Fatalf("fetch at 0 starts at %d", got)
	}
}

// TestFetchGapAfterSupersededManifest (issue 25, window 2c): a deposed
// leader trimmed its local log against the manifest it wrote last, which
// the new leader's (based on an older one) superseded; its view, reloaded,
// ends below its local log start. An offset in between exists (on the new
// leader, soon in the tier): the fetch is KAFKA_STORAGE_ERROR (retriable),
// not OFFSET_OUT_OF_RANGE, and reads once the new leader's manifest holds
// it; earliest stays the tier's start.
func TestFetchGapAfterSupersededManifest(t *testing.T) {
	store := objstore.NewFaulty(objstore.NewMem("tier"))
	const topic = "deposed"
	tb := startTierBroker(t, t.TempDir(), store)
	tb.createTiered(t, topic)
	tb.produce(t, topic, 300)
	p := tb.tierRounds(t, topic, 1)
	tp := p.Tiered()
	mine, _ := tp.Manifest()
	local := p.Log.StartOffset()
	if len(mine.Segments) < 2 || mine.EndOffset < local {
		t.Fatalf("tier holds %d segments up to %d, local log starts at %d", len(mine.Segments), mine.EndOffset, local)
	}

	// The new leader (epoch 1) wrote its first manifest from the version
	// before this broker's last one: it names half the segments.
	theirs := mine
	theirs.Segments = mine.Segments[:len(mine.Segments)/2]
	theirs.EndOffset = theirs.Segments[len(theirs.Segments)-1].LastOffset + 1
	writeManifest := func(m tier.Manifest, epoch int32, seq int64) {
		t.Helper()
		m.LeaderEpoch, m.Seq = epoch, seq
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(context.Background(), tp.Prefix()+fmt.Sprintf("manifest/%010d-%020d.json", epoch, seq), raw); err != nil {
			t.Fatal(err)
		}
	}
	writeManifest(theirs, 1, 0)
	if m, err := tp.Load(context.Background()); err != nil || m.LeaderEpoch != 1 {
		t.Fatalf("reload: epoch %d, %v", m.LeaderEpoch, err)
	}
	gap := theirs.EndOffset
	if gap >= local {
		t.Fatalf("no gap: the new leader's manifest ends at %d, the local log starts at %d", gap, local)
	}

	if off, code := tb.listOffset(t, topic, -2); code != 0 || off != 0 {
		t.Fatalf("ListOffsets earliest = %d (error %d), want 0 (the tier's start)", off, code)
	}
	if sp := tb.fetch(t, topic, gap); sp.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch at %d, between the tier's end and the local log start %d: error %d (%v), want KAFKA_STORAGE_ERROR", gap, local, sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode))
	}
	if got := firstOffset(t, tb.fetch(t, topic, 0)); got != 0 {
		t.Fatalf("fetch at 0 starts at %d", got)
	}
	// The new leader uploads the rest: the same fetch reads it.
	writeManifest(mine, 1, 1)
	if got := firstOffset(t, tb.fetch(t, topic, gap)); got > gap {
		t.Fatalf("fetch at %d starts at %d", gap, got)
	}
	// An offset below the tier's start is gone: out of range, as Kafka.
	theirs = mine
	theirs.StartOffset = gap
	theirs.Segments = mine.Segments[len(mine.Segments)/2:]
	writeManifest(theirs, 1, 2)
	if _, err := tp.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sp := tb.fetch(t, topic, 0); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 0 below the tier's start %d: error %d, want OFFSET_OUT_OF_RANGE", gap, sp.ErrorCode)
	}
}
