package replication

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/broker/traffic"
)

// Zone-local produce (wal.zonelocal.produce.enable, docs/wal.md
// "Zone-local produce"): a producer tagged strata_az=b sends every record
// to the zone-b broker, which hands each batch to the partition's leader
// through an object of bucket wal-b.

const zlPartitions = 6

// zoneLocalProduce produces n records of 1 KiB per partition with cl
// (records keyed by partition and index) and returns the offsets the
// producer got back, by partition, in produce order.
func zoneLocalProduce(t *testing.T, cl *kgo.Client, topic, prefix string, n int, txn bool) map[int32][]int64 {
	t.Helper()
	offsets, err := produceRecords(cl, topic, prefix, n, txn)
	if err != nil {
		t.Fatal(err)
	}
	return offsets
}

// produceRecords is zoneLocalProduce for any goroutine.
func produceRecords(cl *kgo.Client, topic, prefix string, n int, txn bool) (map[int32][]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if txn {
		if err := cl.BeginTransaction(); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	offsets := map[int32][]int64{}
	var wg sync.WaitGroup
	var firstErr error
	for i := range n {
		for p := range int32(zlPartitions) {
			// Incompressible values: the byte counts below are the payload's.
			value := make([]byte, 1000)
			_, _ = rand.Read(value)
			r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("%s-%d-%d", prefix, p, i)), Value: value}
			wg.Add(1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("produce: %w", firstErr)
	}
	if txn {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return nil, err
		}
	}
	return offsets, nil
}

// checkRecords reads every partition of topic from the start (untagged,
// read_committed) and checks that the records with prefix are exactly
// at the offsets the producer got, in produce order, once each.
func checkRecords(t *testing.T, addrs []string, topic, prefix string, n int, offsets map[int32][]int64) {
	t.Helper()
	for p := range int32(zlPartitions) {
		if len(offsets[p]) != n {
			t.Fatalf("partition %d: %d acknowledged offsets, want %d", p, len(offsets[p]), n)
		}
	}
	cl := newClient(t, addrs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: func() map[int32]kgo.Offset {
		m := map[int32]kgo.Offset{}
		for p := range int32(zlPartitions) {
			m[p] = kgo.NewOffset().AtStart()
		}
		return m
	}()}), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[int32]map[string]int64{}
	count := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for count < n*zlPartitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", count, n*zlPartitions)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			key := string(r.Key)
			if len(key) <= len(prefix) || key[:len(prefix)+1] != prefix+"-" {
				return
			}
			if got[r.Partition] == nil {
				got[r.Partition] = map[string]int64{}
			}
			if o, dup := got[r.Partition][key]; dup {
				t.Fatalf("partition %d: %s at offsets %d and %d", r.Partition, key, o, r.Offset)
			}
			got[r.Partition][key] = r.Offset
			count++
		})
	}
	for p := range int32(zlPartitions) {
		// Promises run in produce order per partition: the i-th offset
		// acknowledged is record i's. An offset of -1 is an implicit
		// acknowledgement (deliveredOffsets): the record is checked at
		// the offset it was read at.
		prev := int64(-1)
		for i, want := range offsets[p] {
			key := fmt.Sprintf("%s-%d-%d", prefix, p, i)
			o, ok := got[p][key]
			if !ok {
				t.Fatalf("partition %d: %s not read", p, key)
			}
			if want >= 0 && o != want {
				t.Fatalf("partition %d: %s at offset %d, acknowledged at %d", p, key, o, want)
			}
			if i > 0 && o <= prev {
				t.Fatalf("partition %d: %s at %d, not after the previous record (%d)", p, key, o, prev)
			}
			prev = o
		}
	}
}

func listInput(bucket, prefix string) *s3.ListObjectsV2Input {
	return &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
}

// zoneBytesIn returns the produce bytes each broker received from clients
// of zone.
func zoneBytesIn(c *brokertest.Cluster, zone string) []float64 {
	out := make([]float64, len(c.Brokers))
	for i, b := range c.Brokers {
		if b.Server() != nil {
			out[i] = b.Server().Traffic().Bytes(zone, traffic.Produce, traffic.In)
		}
	}
	return out
}

func zoneLocalStats(c *brokertest.Cluster) (forwarded, appended []int64) {
	for _, b := range c.Brokers {
		var f, a int64
		if b.Server() != nil {
			f, a = b.Server().ZoneLocalStats()
		}
		forwarded, appended = append(forwarded, f), append(appended, a)
	}
	return forwarded, appended
}

// zlSnapshot is what checkForwardedFromB compares against: the produce
// bytes each broker received from zone b and the zone-local counters.
type zlSnapshot struct {
	in            []float64
	fwd, appended []int64
}

func zoneLocalSnapshot(c *brokertest.Cluster) zlSnapshot {
	fwd, app := zoneLocalStats(c)
	return zlSnapshot{in: zoneBytesIn(c, "b"), fwd: fwd, appended: app}
}

// checkForwardedFromB checks that a zone-b producer's payload bytes since
// before went to broker 2 (zone b) only, that broker 2 forwarded
// partitions and that brokers 1 and 3 appended from its objects: the
// records took the zone-local path, not the leaders' listeners.
func checkForwardedFromB(t *testing.T, c *brokertest.Cluster, before zlSnapshot, payload float64) {
	t.Helper()
	// A request's bytes are counted after its response is written: the
	// producer may see its acks first.
	var in []float64
	waitUntil(time.Now().Add(5*time.Second), func() bool {
		in = zoneBytesIn(c, "b")
		return in[1]-before.in[1] >= payload
	})
	fwd, app := zoneLocalStats(c)
	t.Logf("zone-b produce bytes in by broker: %.0f %.0f %.0f (payload %.0f); forwarded partitions %v, appended from objects %v",
		in[0]-before.in[0], in[1]-before.in[1], in[2]-before.in[2], payload, fwd, app)
	if got := in[1] - before.in[1]; got < payload {
		t.Fatalf("broker 2 (zone b) received %.0f produce bytes from zone b, want at least the payload %.0f", got, payload)
	}
	// Brokers 1 and 3 get the forwarded requests (pointers, not
	// records): a small fraction of the payload.
	for _, i := range []int{0, 2} {
		if got := in[i] - before.in[i]; got > payload/10 {
			t.Fatalf("broker %d (zone %s) received %.0f produce bytes from zone b (payload %.0f): records crossed zones", i+1, zones[i], got, payload)
		}
	}
	if fwd[1] == before.fwd[1] {
		t.Fatal("broker 2 forwarded nothing")
	}
	if app[0]+app[2] == before.appended[0]+before.appended[2] {
		t.Fatal("no leader appended from a forwarded object")
	}
}

// ledElsewhere waits until the topic's partitions have leaders and
// returns the partitions led outside broker id (by the untagged view).
func ledElsewhere(t *testing.T, adm *kadm.Client, topic string, id int32) int {
	t.Helper()
	var n int
	waitFor(t, "leaders", 30*time.Second, func() bool {
		ls := leaders(adm, topic)
		if len(ls) != zlPartitions {
			return false
		}
		n = 0
		for _, l := range ls {
			if l[0] < 0 {
				return false
			}
			if l[0] != id {
				n++
			}
		}
		return true
	})
	return n
}

// waitZoneBLeaders waits until the zone-b client zcl's metadata shows
// broker 2 (zone b) leading every partition of topic.
func waitZoneBLeaders(t *testing.T, zcl *kgo.Client, topic string) {
	t.Helper()
	zadm := kadm.NewClient(zcl)
	waitFor(t, "zone-b leaders in metadata", 10*time.Second, func() bool {
		ls := leaders(zadm, topic)
		for _, l := range ls {
			if l[0] != 2 {
				return false
			}
		}
		return len(ls) == zlPartitions
	})
}

// producer is a client that sends each record to the partition it names.
func producer(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addrs, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

func TestZoneLocalProduce(t *testing.T) {
	// Forwarded objects kept 1 s after the answer (default 30 s), for
	// the object-deleted case below.
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"),
		brokertest.WithSetting("wal.zonelocal.object.keep.ms", "1000"))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	const n = 20

	cases := []struct {
		name string
		opts []kgo.Opt
		txn  bool
	}{
		{"plain", []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())}, false},
		{"idempotent", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, false},
		{"transactional", []kgo.Opt{kgo.TransactionalID("zl-txn")}, true},
		// Many small requests, several in flight (kgo: up to 5 with
		// idempotence): the forwarding broker's
		// PUTs overlap and its sends to the leaders must keep the order.
		{"pipelined", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(4096)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := "zl-" + tc.name
			createTopic(t, adm, topic, zlPartitions, nil)
			if ledElsewhere(t, adm, topic, 2) == 0 {
				t.Fatal("every partition is led by broker 2: nothing to forward")
			}
			// The tagged client's metadata: broker 2 (zone b) leads all.
			zcl := producer(t, addrs, append([]kgo.Opt{kgo.ClientID("orders-svc,strata_az=b"), kgo.ProducerLinger(5 * time.Millisecond)}, tc.opts...)...)
			n := n
			if tc.name == "pipelined" {
				n = 200
			}
			waitZoneBLeaders(t, zcl, topic)
			before := zoneLocalSnapshot(wc.Cluster)
			offsets := zoneLocalProduce(t, zcl, topic, tc.name, n, tc.txn)
			checkForwardedFromB(t, wc.Cluster, before, float64(n*zlPartitions*1000))
			checkRecords(t, addrs, topic, tc.name, n, offsets)
		})
	}

	t.Run("untagged", func(t *testing.T) {
		topic := "zl-untagged"
		createTopic(t, adm, topic, zlPartitions, nil)
		ledElsewhere(t, adm, topic, 2)
		cl := producer(t, addrs, kgo.ClientID("orders-svc"))
		for p, l := range leaders(kadm.NewClient(cl), topic) {
			if real := leaders(adm, topic)[p][0]; l[0] != real {
				t.Fatalf("partition %d: untagged client told leader %d, the leader is %d", p, l[0], real)
			}
		}
		_, before := zoneLocalStats(wc.Cluster)
		offsets := zoneLocalProduce(t, cl, topic, "untagged", 5, false)
		_, after := zoneLocalStats(wc.Cluster)
		for i := range after {
			if after[i] != before[i] {
				t.Fatalf("broker %d appended forwarded records for an untagged client", i+1)
			}
		}
		checkRecords(t, addrs, topic, "untagged", 5, offsets)
	})

	t.Run("object-deleted", func(t *testing.T) {
		// Every object is deleted: a forwarder's once the leaders
		// answered, the keep time passed and (a WAL object it shared
		// with its own uploads) the followers have its own chunks; the
		// others once the followers have their chunks.
		waitFor(t, "every object deleted", 20*time.Second, func() bool { return bucketsEmpty(wc) })
	})
}

// TestZoneLocalProduceOff: with the setting off a zone-tagged client sees
// the real leaders and nothing is forwarded.
func TestZoneLocalProduceOff(t *testing.T) {
	wc := startWALCluster(t)
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	createTopic(t, adm, "zl-off", zlPartitions, nil)
	if ledElsewhere(t, adm, "zl-off", 2) == 0 {
		t.Fatal("every partition is led by broker 2")
	}
	cl := producer(t, addrs, kgo.ClientID("strata_az=b"))
	real := leaders(adm, "zl-off")
	for p, l := range leaders(kadm.NewClient(cl), "zl-off") {
		if l[0] != real[p][0] {
			t.Fatalf("partition %d: told leader %d, the leader is %d", p, l[0], real[p][0])
		}
	}
	offsets := zoneLocalProduce(t, cl, "zl-off", "off", 5, false)
	fwd, app := zoneLocalStats(wc.Cluster)
	for i := range fwd {
		if fwd[i] != 0 || app[i] != 0 {
			t.Fatalf("broker %d: forwarded %d, appended %d with zone-local produce off", i+1, fwd[i], app[i])
		}
	}
	checkRecords(t, addrs, "zl-off", "off", 5, offsets)
}

// TestZoneLocalProduceLeaderMoves: the leader of partitions the zone-b
// broker forwards to stops while an idempotent producer runs; the
// producer retries through the zone-b broker to the new leaders and
// every record is there once.
func TestZoneLocalProduceLeaderMoves(t *testing.T) {
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	two := "2"
	createTopic(t, adm, "zl-move", zlPartitions, map[string]*string{"min.insync.replicas": &two})
	ledElsewhere(t, adm, "zl-move", 2)
	ledBy3 := 0
	for _, l := range leaders(adm, "zl-move") {
		if l[0] == 3 {
			ledBy3++
		}
	}
	if ledBy3 == 0 {
		t.Fatal("broker 3 leads nothing")
	}
	cl := producer(t, []string{wc.Brokers[1].Addr()}, kgo.ClientID("strata_az=b"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(60*time.Second))
	first := zoneLocalProduce(t, cl, "zl-move", "move", 10, false)

	// Produce in the background while broker 3 stops.
	done := make(chan map[int32][]int64)
	go func() {
		var mu sync.Mutex
		offsets := map[int32][]int64{}
		var wg sync.WaitGroup
		ctx := context.Background()
		for i := range 40 {
			for p := range int32(zlPartitions) {
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Topic: "zl-move", Partition: p, Key: []byte("move2-" + strconv.Itoa(int(p)) + "-" + strconv.Itoa(i)), Value: make([]byte, 100)},
					func(r *kgo.Record, err error) {
						defer wg.Done()
						if err != nil {
							t.Errorf("produce during the move: %v", err)
							return
						}
						mu.Lock()
						offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
						mu.Unlock()
					})
			}
			time.Sleep(20 * time.Millisecond)
		}
		wg.Wait()
		done <- offsets
	}()
	time.Sleep(200 * time.Millisecond)
	wc.Brokers[2].Stop()
	second := <-done
	if t.Failed() {
		return
	}
	live := addrs[:2]
	checkRecords(t, live, "zl-move", "move", 10, first)
	for p := range int32(zlPartitions) {
		if len(second[p]) != 40 {
			t.Fatalf("partition %d: %d of 40 records acknowledged", p, len(second[p]))
		}
	}
	checkRecords(t, live, "zl-move", "move2", 40, second)
}

// TestZoneLocalLeaderRequests: a zone-a client's ListOffsets,
// OffsetForLeaderEpoch and DeleteRecords go to broker 1 (zone a), which
// forwards the partitions it does not lead; a zone-a consumer fetches from
// broker 1 (a follower serves v11+ consumers) with the real leader epochs.
func TestZoneLocalLeaderRequests(t *testing.T) {
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	const topic = "zl-requests"
	createTopic(t, adm, topic, zlPartitions, nil)
	if ledElsewhere(t, adm, topic, 1) == 0 {
		t.Fatal("broker 1 leads every partition")
	}
	zoneLocalProduce(t, producer(t, addrs), topic, "req", 10, false)

	zcl := newClient(t, addrs, kgo.ClientID("strata_az=a"))
	zadm := kadm.NewClient(zcl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// ListOffsets straight to broker 1, as the client's metadata directs.
	// Polled: on a loaded machine a leadership may move meanwhile (a lost
	// etcd session), and a new leader's high watermark lags a moment.
	listEnds := func() string {
		lo := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		for p := range int32(zlPartitions) {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.Timestamp = p, -1
			lt.Partitions = append(lt.Partitions, lp)
		}
		lo.Topics = append(lo.Topics, lt)
		kresp, err := zcl.Broker(1).Request(ctx, lo)
		if err != nil {
			return err.Error()
		}
		for _, rp := range kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions {
			if rp.ErrorCode != 0 || rp.Offset != 10 {
				return fmt.Sprintf("partition %d: end offset %d (error %d) from broker 1, want 10", rp.Partition, rp.Offset, rp.ErrorCode)
			}
		}
		return ""
	}
	var problem string
	if !waitUntil(time.Now().Add(20*time.Second), func() bool { problem = listEnds(); return problem == "" }) {
		t.Fatal(problem)
	}
	if ends, err := zadm.ListEndOffsets(ctx, topic); err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}

	epochsFromBroker1 := func() string {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err.Error()
		}
		var epochReq kadm.OffsetForLeaderEpochRequest
		for p, pd := range md.Topics[topic].Partitions {
			epochReq.Add(topic, p, pd.LeaderEpoch)
		}
		epochs, err := zadm.OffsetForLeaderEpoch(ctx, epochReq)
		if err != nil {
			return err.Error()
		}
		for p, e := range epochs[topic] {
			if e.Err != nil || e.EndOffset != 10 || e.NodeID != 1 {
				return fmt.Sprintf("partition %d (leader %d): end offset %d from broker %d (%v), want 10 from broker 1", p, md.Topics[topic].Partitions[p].Leader, e.EndOffset, e.NodeID, e.Err)
			}
		}
		return ""
	}
	if !waitUntil(time.Now().Add(20*time.Second), func() bool { problem = epochsFromBroker1(); return problem == "" }) {
		t.Fatal(problem)
	}

	var del kadm.Offsets
	for p := range int32(zlPartitions) {
		del.Add(kadm.Offset{Topic: topic, Partition: p, At: 4})
	}
	dr, err := zadm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range dr[topic] {
		if r.Err != nil || r.LowWatermark != 4 {
			t.Errorf("partition %d: delete records: low watermark %d (%v), want 4", p, r.LowWatermark, r.Err)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset != 4 {
			t.Errorf("partition %d: log start %d at the leader, want 4", o.Partition, o.Offset)
		}
	})
	if t.Failed() {
		return
	}

	// A zone-a consumer group reads everything left from broker 1.
	before := zoneConsumeOut(wc.Cluster, "a")
	cons := newClient(t, addrs, kgo.ClientID("strata_az=a"), kgo.Rack("a"), kgo.ConsumerGroup("zl-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < 6*zlPartitions {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", n, 6*zlPartitions)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < 4 {
				t.Errorf("partition %d: record at %d, below the log start", r.Partition, r.Offset)
			}
			n++
		})
	}
	after := zoneConsumeOut(wc.Cluster, "a")
	t.Logf("consume bytes to zone a by broker: %.0f %.0f %.0f", after[0]-before[0], after[1]-before[1], after[2]-before[2])
	if after[0]-before[0] < 6*zlPartitions*1000 {
		t.Fatalf("broker 1 sent zone a %.0f bytes, less than the records", after[0]-before[0])
	}
	for _, i := range []int{1, 2} {
		if got := after[i] - before[i]; got > 6*zlPartitions*1000/10 {
			t.Fatalf("broker %d sent zone a %.0f consume bytes: records crossed zones", i+1, got)
		}
	}
}

func zoneConsumeOut(c *brokertest.Cluster, zone string) []float64 {
	out := make([]float64, len(c.Brokers))
	for i, b := range c.Brokers {
		out[i] = b.Server().Traffic().Bytes(zone, traffic.Consume, traffic.Out)
	}
	return out
}

// forwarderObject says whether key is an object of broker 2's, the
// forwarder of zone-b producers (keys wal/<cluster>/<zone>/<broker>/...):
// its WAL objects, which carry the records it forwards beside its own
// chunks, or the objects of their own forwarded records get when its WAL
// uploader refuses them (.../zl-<incarnation>/...).
func forwarderObject(key string) bool {
	parts := strings.Split(key, "/")
	return len(parts) > 3 && parts[3] == "2"
}

// zlFaultStore fails PUTs or GETs of the forwarder's objects
// (forwarderObject), or damages what GETs read, while its switches are
// on, counting the calls it failed or damaged.
type zlFaultStore struct {
	objstore.Store
	f *zlFaults
}

type zlFaults struct {
	failPut, failGet, corruptGet atomic.Bool
	failedPut                    atomic.Int64
	failedGet                    atomic.Int64
	corruptedGet                 atomic.Int64
}

var errInjected = errors.New("injected bucket failure")

// zlFaultCase is one kind of bucket fault: its switch and its count.
type zlFaultCase struct {
	name   string
	on     *atomic.Bool
	failed *atomic.Int64
}

func (f *zlFaults) cases() []zlFaultCase {
	return []zlFaultCase{
		{"put", &f.failPut, &f.failedPut},
		{"get", &f.failGet, &f.failedGet},
		{"corrupt", &f.corruptGet, &f.corruptedGet},
	}
}

// zlFaultProducer creates topic with partitions led outside zone b and
// returns a zone-b producer that already has its metadata (so that the
// faults hit produce requests).
func zlFaultProducer(t *testing.T, adm *kadm.Client, addrs []string, topic string) *kgo.Client {
	t.Helper()
	createTopic(t, adm, topic, zlPartitions, nil)
	if ledElsewhere(t, adm, topic, 2) == 0 {
		t.Fatal("broker 2 leads every partition")
	}
	cl := producer(t, addrs, kgo.ClientID("strata_az=b"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if _, err := kadm.NewClient(cl).Metadata(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	return cl
}

func (s zlFaultStore) Put(ctx context.Context, key string, data []byte) error {
	if forwarderObject(key) && s.f.failPut.Load() {
		s.f.failedPut.Add(1)
		return errInjected
	}
	return s.Store.Put(ctx, key, data)
}

func (s zlFaultStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if forwarderObject(key) && s.f.failGet.Load() {
		s.f.failedGet.Add(1)
		return nil, errInjected
	}
	data, err := s.Store.Get(ctx, key, offset, length)
	if err == nil && len(data) > 0 && forwarderObject(key) && s.f.corruptGet.Load() {
		// A byte flipped in the bucket (strata chaos's corrupt-object),
		// the first of the range: the GET covers this leader's record
		// sets and the gaps between them, which are other leaders'.
		data = append([]byte(nil), data...)
		data[0] ^= 0xff
		s.f.corruptedGet.Add(1)
	}
	return data, err
}

// TestZoneLocalProduceBucketFails: the forwarder's PUT failing, the
// leader's GET failing, and the leader's GET reading a damaged object
// (the range's CRC-32C does not match) answer KAFKA_STORAGE_ERROR, which
// the producer retries; once the bucket answers again every record is
// there once. The damaged object was answered CORRUPT_MESSAGE before
// (strata chaos --zone-local-producers, seed 41: franz-go fails a batch
// answered CORRUPT_MESSAGE at once, taking it for the client's fault, so
// records a direct produce would have had acknowledged failed).
func TestZoneLocalProduceBucketFails(t *testing.T) {
	faults := &zlFaults{}
	// The inline fallback off: each failure reaches the client as an
	// error it retries (TestZoneLocalProduceBucketOut has it on).
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"),
		brokertest.WithSetting("wal.zonelocal.produce.inline.ms", "0"),
		brokertest.WithConfig(func(c *server.Config) {
			wrap := c.Cluster.WAL.WrapStore
			c.Cluster.WAL.WrapStore = func(st objstore.Store) objstore.Store { return zlFaultStore{Store: wrap(st), f: faults} }
		}))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	for _, tc := range faults.cases() {
		t.Run(tc.name, func(t *testing.T) {
			topic := "zl-fail-" + tc.name
			cl := zlFaultProducer(t, adm, addrs, topic)
			tc.on.Store(true)
			before := tc.failed.Load()
			type result struct {
				offsets map[int32][]int64
				err     error
			}
			done := make(chan result, 1)
			go func() {
				o, err := produceRecords(cl, topic, tc.name, 5, false)
				done <- result{o, err}
			}()
			waitFor(t, "a failed "+tc.name, 20*time.Second, func() bool { return tc.failed.Load() > before })
			time.Sleep(300 * time.Millisecond) // a few retries fail too
			tc.on.Store(false)
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			offsets := res.offsets
			t.Logf("%d %ss of forwarded objects failed", tc.failed.Load()-before, tc.name)
			checkRecords(t, addrs, topic, tc.name, 5, offsets)
		})
	}
}

// TestZoneLocalProduceBucketOut checks that zone-local produce keeps
// going while the bucket path stays broken (the forwarder's PUTs fail,
// or the leader cannot read or check the objects): the forwarder sends
// the records to their leaders inline, every record is acknowledged and
// read back once at its offset, and once the bucket is back (after
// wal.zonelocal.produce.inline.ms) records go through it again.
func TestZoneLocalProduceBucketOut(t *testing.T) {
	faults := &zlFaults{}
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"),
		brokertest.WithSetting("wal.zonelocal.produce.inline.ms", "1000"),
		brokertest.WithConfig(func(c *server.Config) {
			wrap := c.Cluster.WAL.WrapStore
			c.Cluster.WAL.WrapStore = func(st objstore.Store) objstore.Store { return zlFaultStore{Store: wrap(st), f: faults} }
		}))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	zoneB := wc.Brokers[1].Server() // broker 2, zone b
	for _, tc := range faults.cases() {
		t.Run(tc.name, func(t *testing.T) {
			topic := "zl-out-" + tc.name
			cl := zlFaultProducer(t, adm, addrs, topic)
			tc.on.Store(true)
			failedBefore, inlineBefore := tc.failed.Load(), zoneB.ZoneLocalInline()
			// The bucket stays broken for the whole run, which spans
			// more than one inline period (the bucket is tried again
			// and fails again).
			var rounds []map[int32][]int64
			deadline := time.Now().Add(2500 * time.Millisecond)
			for len(rounds) == 0 || time.Now().Before(deadline) {
				o, err := produceRecords(cl, topic, fmt.Sprintf("%s-%d", tc.name, len(rounds)), 2, false)
				if err != nil {
					t.Fatalf("round %d with the bucket out: %v", len(rounds), err)
				}
				rounds = append(rounds, o)
				time.Sleep(200 * time.Millisecond)
			}
			failed, inline := tc.failed.Load()-failedBefore, zoneB.ZoneLocalInline()-inlineBefore
			t.Logf("%d rounds, %d %ss failed, %d partitions forwarded inline", len(rounds), failed, tc.name, inline)
			if failed < 2 {
				t.Errorf("%d failed %ss: the bucket was not tried again after the inline period", failed, tc.name)
			}
			if inline == 0 {
				t.Error("nothing was forwarded inline")
			}
			tc.on.Store(false)
			for i, o := range rounds {
				checkRecords(t, addrs, topic, fmt.Sprintf("%s-%d", tc.name, i), 2, o)
			}
			// The bucket is back: once the period ends, records go
			// through it again.
			fwdBefore, _ := zoneB.ZoneLocalStats()
			waitFor(t, "forwarding through the bucket again", 20*time.Second, func() bool {
				if _, err := produceRecords(cl, topic, tc.name+"-back", 1, false); err != nil {
					t.Fatal(err)
				}
				f, _ := zoneB.ZoneLocalStats()
				return f > fwdBefore
			})
		})
	}
}

// TestZoneLocalProducePolicyAuto checks wal.zonelocal.produce.policy=auto:
// small forwarded requests, whose objects would cost more than the
// transfer they save, go to their leaders inline; a request as large as
// the break-even object (~58 KB with the default prices) goes through
// the bucket; every record is acknowledged and read back once at its
// offset either way.
func TestZoneLocalProducePolicyAuto(t *testing.T) {
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"),
		brokertest.WithSetting("wal.zonelocal.produce.policy", "auto"))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	zoneB := wc.Brokers[1].Server() // broker 2, zone b
	topic := "zl-auto"
	createTopic(t, adm, topic, zlPartitions, nil)
	if ledElsewhere(t, adm, topic, 2) == 0 {
		t.Fatal("broker 2 leads every partition")
	}
	zcl := producer(t, addrs, kgo.ClientID("strata_az=b"), kgo.RequiredAcks(kgo.AllISRAcks()))

	// A trickle: 1 KB records, inline.
	fwd0, _ := zoneB.ZoneLocalStats()
	inline0 := zoneB.ZoneLocalInline()
	offsets := zoneLocalProduce(t, zcl, topic, "small", 10, false)
	fwd1, _ := zoneB.ZoneLocalStats()
	inline1 := zoneB.ZoneLocalInline()
	if fwd1 != fwd0 || inline1 == inline0 {
		t.Fatalf("small requests: %d partitions through the bucket, %d inline; want none and some", fwd1-fwd0, inline1-inline0)
	}
	if p := zoneB.ZoneLocalPath(); p != "inline-cost" {
		t.Fatalf("path %q after small requests, want inline-cost", p)
	}
	checkRecords(t, addrs, topic, "small", 10, offsets)

	// Requests of 64 KB records, one per request: each pays for its
	// object.
	big := producer(t, addrs, kgo.ClientID("strata_az=b"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(1))
	var p int32 = -1
	for i, l := range leaders(adm, topic) {
		if l[0] != 2 {
			p = int32(i)
		}
	}
	var bigOffsets []int64
	for i := range 3 {
		value := make([]byte, 64<<10)
		_, _ = rand.Read(value)
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("big-%d", i)), Value: value}
		if err := big.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		bigOffsets = append(bigOffsets, r.Offset)
	}
	fwd2, _ := zoneB.ZoneLocalStats()
	if fwd2 == fwd1 {
		t.Fatal("64 KB requests went inline")
	}
	if got := zoneB.ZoneLocalPath(); got != "bucket" {
		t.Fatalf("path %q after 64 KB requests, want bucket", got)
	}
	t.Logf("small: %d partitions inline; 64 KB: %d partitions through the bucket", inline1-inline0, fwd2-fwd1)
	rcl := newClient(t, addrs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(bigOffsets[0])}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got := 0; got < len(bigOffsets); {
		fs := rcl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the 64 KB records", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if got < len(bigOffsets) && string(r.Key) == fmt.Sprintf("big-%d", got) {
				if r.Offset != bigOffsets[got] {
					t.Fatalf("big-%d at offset %d, acknowledged at %d", got, r.Offset, bigOffsets[got])
				}
				got++
			}
		})
	}
}

// zoneLocalObjects returns broker i's (from 0) forwarded objects and the
// client produce requests in them (strata_zonelocal_objects_total and
// strata_zonelocal_object_requests' sum).
func zoneLocalObjects(t *testing.T, c *brokertest.Cluster, i int) (objects, requests float64) {
	t.Helper()
	mfs, err := c.Brokers[i].Server().Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "strata_zonelocal_objects_total":
				objects += m.GetCounter().GetValue()
			case "strata_zonelocal_object_requests":
				requests += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return objects, requests
}

// slowZLPuts delays the PUTs of the forwarder's objects (the slow tail of
// a bucket), so that produce requests arrive while one is in flight.
type slowZLPuts struct {
	objstore.Store
	puts *atomic.Int64
}

func (s slowZLPuts) Put(ctx context.Context, key string, data []byte) error {
	if forwarderObject(key) {
		s.puts.Add(1)
		select {
		case <-time.After(30 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Put(ctx, key, data)
}

// TestZoneLocalProduceGroupCommit: pipelined idempotent producers on
// several connections to broker 2, whose PUTs take 30 ms: the requests
// that arrive while its PUTs are in flight share the next object (fewer
// PUTs than forwarded requests), and every record is
// acknowledged, read back at its offset, in order, once.
func TestZoneLocalProduceGroupCommit(t *testing.T) {
	var puts atomic.Int64
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"),
		brokertest.WithConfig(func(c *server.Config) {
			wrap := c.Cluster.WAL.WrapStore
			c.Cluster.WAL.WrapStore = func(st objstore.Store) objstore.Store { return slowZLPuts{Store: wrap(st), puts: &puts} }
		}))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	const topic, producers, n = "zl-group", 4, 60
	createTopic(t, adm, topic, zlPartitions, nil)
	if ledElsewhere(t, adm, topic, 2) == 0 {
		t.Fatal("broker 2 leads every partition")
	}
	clients := make([]*kgo.Client, producers)
	for i := range clients {
		clients[i] = producer(t, addrs, kgo.ClientID(fmt.Sprintf("p%d,strata_az=b", i)), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(4096))
		if _, err := kadm.NewClient(clients[i]).Metadata(context.Background(), topic); err != nil {
			t.Fatal(err)
		}
	}
	objectsBefore, requestsBefore := zoneLocalObjects(t, wc.Cluster, 1)
	putsBefore := puts.Load()
	offsets := make([]map[int32][]int64, producers)
	errs := make([]error, producers)
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() { offsets[i], errs[i] = produceRecords(cl, topic, fmt.Sprintf("p%d", i), n, false) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	objects, requests := zoneLocalObjects(t, wc.Cluster, 1)
	objects, requests = objects-objectsBefore, requests-requestsBefore
	t.Logf("broker 2: %.0f forwarded requests in %.0f objects (%d forwarded PUTs in the cluster)", requests, objects, puts.Load()-putsBefore)
	if requests == 0 {
		t.Fatal("broker 2 forwarded nothing")
	}
	// The forwarded records ride in broker 2's WAL objects, whose group
	// commit lets two PUTs run at once (wal.UploaderConfig.GroupInFlight)
	// where objects of their own had one: about two requests an object
	// here (one each without the group commit).
	if objects > requests*3/4 {
		t.Fatalf("%.0f objects for %.0f forwarded requests: the requests that came during a PUT did not share an object", objects, requests)
	}
	for i := range clients {
		checkRecords(t, addrs, topic, fmt.Sprintf("p%d", i), n, offsets[i])
	}
}

// zlSharedStore counts broker 2's PUTs of objects of their own for
// forwarded records (.../zl-<incarnation>/...).
type zlSharedStore struct {
	objstore.Store
	own *atomic.Int64
}

func (s zlSharedStore) Put(ctx context.Context, key string, data []byte) error {
	if forwarderObject(key) && strings.Contains(key, "/zl-") {
		s.own.Add(1)
	}
	return s.Store.Put(ctx, key, data)
}

// TestZoneLocalSharesWALObjects: a zone-b producer writes to partitions
// that broker 2 leads and to others; broker 2 appends the former and
// forwards the latter, whose records ride in its WAL objects beside its
// own chunks (one PUT for both: strata_zonelocal_shared_objects_total),
// never in objects of their own while its uploader takes them. Every
// record is read back at its offset, and once the followers have
// everything and the keep time passed, no object is left.
func TestZoneLocalSharesWALObjects(t *testing.T) {
	var ownObjects atomic.Int64
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"),
		brokertest.WithSetting("wal.zonelocal.object.keep.ms", "1000"),
		brokertest.WithConfig(func(c *server.Config) {
			wrap := c.Cluster.WAL.WrapStore
			c.Cluster.WAL.WrapStore = func(st objstore.Store) objstore.Store { return zlSharedStore{Store: wrap(st), own: &ownObjects} }
		}))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	const topic, n = "zl-shared", 20
	createTopic(t, adm, topic, zlPartitions, nil)
	if elsewhere := ledElsewhere(t, adm, topic, 2); elsewhere == 0 || elsewhere == zlPartitions {
		t.Fatalf("%d of %d partitions led outside broker 2: want some on each side", elsewhere, zlPartitions)
	}
	zcl := producer(t, addrs, kgo.ClientID("orders-svc,strata_az=b"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	waitZoneBLeaders(t, zcl, topic)
	before := zoneLocalSnapshot(wc.Cluster)
	const rounds = 5
	for i := range rounds {
		prefix := fmt.Sprintf("shared-%d", i)
		offsets := zoneLocalProduce(t, zcl, topic, prefix, n, false)
		checkRecords(t, addrs, topic, prefix, n, offsets)
	}
	checkForwardedFromB(t, wc.Cluster, before, float64(rounds*n*zlPartitions*1000))

	objects := brokerMetric(t, wc.Cluster, 1, "strata_zonelocal_objects_total", "", "")
	shared := brokerMetric(t, wc.Cluster, 1, "strata_zonelocal_shared_objects_total", "", "")
	t.Logf("broker 2: %.0f objects with forwarded records, %.0f of them shared with its own WAL chunks; %d objects of their own", objects, shared, ownObjects.Load())
	if shared == 0 {
		t.Fatal("no forwarded records shared an object with broker 2's own WAL chunks")
	}
	if ownObjects.Load() != 0 {
		t.Fatalf("%d objects of their own for forwarded records while the WAL uploader took them", ownObjects.Load())
	}
	waitFor(t, "every object deleted", 20*time.Second, func() bool { return bucketsEmpty(wc) })
}

// bucketsEmpty says whether the zones' buckets hold no object of the
// cluster.
func bucketsEmpty(wc *walCluster) bool {
	for _, z := range zones {
		objs, err := wc.s3.Client().ListObjectsV2(context.Background(), listInput("wal-"+z, "wal/test/"+z+"/"))
		if err != nil || len(objs.Contents) > 0 {
			return false
		}
	}
	return true
}
