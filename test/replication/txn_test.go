package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/traffic"
)

// TestTxnReadCommittedReplicas: transactional batches and the markers
// WriteTxnMarkers appends (raw requests, as the coordinator sends them)
// replicate like any batch; every replica builds the same LSO and
// aborted-transaction index; franz-go's read_committed consumer reads
// exactly the committed records; after the leader fails over the new
// leader serves the same LSO and index and takes the next marker.
func TestTxnReadCommittedReplicas(t *testing.T) {
	testTxnReadCommittedReplicas(t, brokertest.StartCluster(t, zones, brokertest.WithSetting("replica.lag.time.max.ms", "3000")), false)
}

// TestWALTxnReadCommittedReplicas: the same with WAL replication (markers
// reach the followers in WAL objects).
func TestWALTxnReadCommittedReplicas(t *testing.T) {
	testTxnReadCommittedReplicas(t, startWALCluster(t).Cluster, true)
}

func testTxnReadCommittedReplicas(t *testing.T, c *brokertest.Cluster, wal bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	createTopic(t, adm, "txn", 1, nil)
	st := state(t, c, "txn", 0)
	waitFor(t, "the leader in the metadata", 30*time.Second, func() bool {
		l, _ := leaderOf(adm, "txn")
		return l == st.Leader
	})
	tx := newTxnRaw(ctx, t, cl, "txn")
	pid := tx.pid
	produce := func(transactional bool, values ...string) { t.Helper(); tx.produce(pid, transactional, values...) }
	marker := func(commit bool) { t.Helper(); tx.marker(pid, commit) }

	produce(true, "a1", "a2") // 0-1, aborted
	produce(false, "p1")      // 2
	marker(false)             // 3
	produce(true, "c1")       // 4, committed
	marker(true)              // 5
	produce(false, "p2")      // 6
	produce(true, "o1")       // 7, left open
	const lso, end = 7, 8
	want := []string{"p1", "c1", "p2"}

	readCommitted := func() []string {
		t.Helper()
		cons := newClient(t, c.Addrs(), kgo.ConsumeTopics("txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		var got []string
		for last := int64(-1); last < lso-1; {
			fs := cons.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("read_committed consumer (got %v): %v", got, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got = append(got, string(r.Value))
				last = r.Offset
			})
		}
		return got
	}
	if got := readCommitted(); !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer got %v, want %v", got, want)
	}

	// Every replica has the same transaction state.
	replicaState := func(id int32) (int64, []log.AbortedTxn) {
		p, err := brokerByID(c, id).Server().Broker().Partition("txn", 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.Log.LastStableOffset(end), p.Log.AbortedTxns(0, end)
	}
	wantAborted := []log.AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 3, LastStableOffset: 4}}
	for _, id := range st.Replicas {
		waitFor(t, fmt.Sprintf("broker %d to replicate the transactions", id), time.Minute, func() bool {
			return localLEO(t, brokerByID(c, id), "txn", 0) == end
		})
		gotLSO, gotAborted := replicaState(id)
		if gotLSO != lso || !slices.Equal(gotAborted, wantAborted) {
			t.Fatalf("broker %d: LSO %d, aborted %v; want %d, %v", id, gotLSO, gotAborted, lso, wantAborted)
		}
	}
	if wal {
		if n := sumTraffic(c, traffic.ReplicationWALMetadata, traffic.Out); n == 0 {
			t.Fatal("no WAL pointers were served: the followers did not replicate through the WAL")
		}
	}

	// Failover: the old leader goes, the new one answers read_committed
	// ListOffsets with the same LSO and takes the abort of the open
	// transaction.
	brokerByID(c, st.Leader).Stop()
	var newLeader int32
	waitFor(t, "a new leader", time.Minute, func() bool {
		newLeader, _ = leaderOf(adm, "txn")
		return newLeader > 0 && newLeader != st.Leader
	})
	waitFor(t, "read_committed latest offset from the new leader", time.Minute, func() bool {
		offs, err := adm.ListCommittedOffsets(ctx, "txn")
		if err != nil {
			return false
		}
		o, ok := offs.Lookup("txn", 0)
		return ok && o.Err == nil && o.Offset == lso
	})
	if gotLSO, gotAborted := replicaState(newLeader); gotLSO != lso || !slices.Equal(gotAborted, wantAborted) {
		t.Fatalf("new leader %d: LSO %d, aborted %v", newLeader, gotLSO, gotAborted)
	}
	marker(false) // 8: aborts o1
	produce(false, "p3")
	want = append(want, "p3")
	cons := newClient(t, c.Addrs(), kgo.ConsumeTopics("txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read_committed after failover (got %v): %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer after failover got %v, want %v", got, want)
	}
}

// txnRaw sends the raw requests of transactional producers (with producer
// IDs from InitProducerID) and of the coordinator's markers to partition 0
// of a topic, retrying NOT_LEADER_OR_FOLLOWER while a leader takes over.
type txnRaw struct {
	ctx   context.Context
	t     *testing.T
	cl    *kgo.Client
	topic string
	pid   int64 // a first producer ID
	seqs  map[int64]int32
	// ids are the transactional IDs of the producer IDs: the
	// coordinator allocated them (KIP-890 verification refuses a
	// transactional produce the coordinator does not know).
	ids map[int64]string
}

func newTxnRaw(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) *txnRaw {
	tx := &txnRaw{ctx: ctx, t: t, cl: cl, topic: topic, seqs: map[int64]int32{}, ids: map[int64]string{}}
	tx.pid = tx.newPID()
	return tx
}

func (tx *txnRaw) newPID() int64 {
	tx.t.Helper()
	id := fmt.Sprintf("txn-%s-%d", tx.topic, len(tx.ids))
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &id, 600_000
	resp, err := req.RequestWith(tx.ctx, tx.cl)
	if err != nil || resp.ErrorCode != 0 || resp.ProducerEpoch != 0 {
		tx.t.Fatalf("InitProducerID: %v %+v", err, resp)
	}
	tx.ids[resp.ProducerID] = id
	return resp.ProducerID
}

// addPartition joins the topic's partition 0 to pid's transaction at the
// coordinator, as a producer does before its first batch there.
func (tx *txnRaw) addPartition(pid int64) {
	tx.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = tx.ids[pid], pid, 0
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: tx.topic, Partitions: []int32{0}}}
	deadline := time.Now().Add(time.Minute)
	for {
		req.Transactions = nil // kgo fills it in
		resp, err := req.RequestWith(tx.ctx, tx.cl)
		if err != nil {
			tx.t.Fatal(err)
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			return
		}
		if time.Now().After(deadline) {
			tx.t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond) // the coordinator moving or loading
	}
}

// retry sends req until its partition answers without NOT_LEADER.
func (tx *txnRaw) retry(what string, send func() int16) {
	tx.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code := send()
		if code == 0 {
			return
		}
		// A leader that has not taken over yet, or the old one.
		if code != kerr.NotLeaderForPartition.Code || time.Now().After(deadline) {
			tx.t.Fatalf("%s: %v", what, kerr.ErrorForCode(code))
		}
		tx.cl.ForceMetadataRefresh()
		time.Sleep(50 * time.Millisecond) // polling for the leader, not synchronisation
	}
}

// produce sends one batch, acks=all: transactional for pid (in the
// transaction of its transactional ID at the coordinator), or plain.
func (tx *txnRaw) produce(pid int64, transactional bool, values ...string) {
	tx.t.Helper()
	spec := record.DefaultSpec()
	spec.Transactional = transactional
	if transactional {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, 0, tx.seqs[pid]
		tx.seqs[pid] += int32(len(values))
	}
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	b, err := record.Build(spec, recs)
	if err != nil {
		tx.t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	if transactional {
		id := tx.ids[pid]
		req.TransactionID = &id
		tx.addPartition(pid)
	}
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: tx.topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: b}}}}
	tx.retry(fmt.Sprint("produce ", values), func() int16 {
		resp, err := req.RequestWith(tx.ctx, tx.cl)
		if err != nil {
			tx.t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	})
}

// marker sends the coordinator's WriteTxnMarkers for pid's transaction.
func (tx *txnRaw) marker(pid int64, commit bool) {
	tx.t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.Committed, m.CoordinatorEpoch = pid, commit, 1
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: tx.topic, Partitions: []int32{0}}}
	req.Markers = append(req.Markers, m)
	tx.retry(fmt.Sprintf("marker (commit %v)", commit), func() int16 {
		resp, err := req.RequestWith(tx.ctx, tx.cl)
		if err != nil {
			tx.t.Fatal(err)
		}
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	})
}

// readCommitted consumes topic with read_committed until it has n records.
func readCommittedValues(ctx context.Context, t *testing.T, addrs []string, topic string, n int) []string {
	t.Helper()
	cons := newClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read_committed consumer (got %v): %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// committedEnd is the read_committed latest offset (the LSO) of partition 0.
func committedEnd(ctx context.Context, adm *kadm.Client, topic string) int64 {
	offs, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.Offset
}

// TestTxnLeaderSIGKILL: the leader's process is killed (SIGKILL) while a
// transaction is open; the new leader holds the LSO at that transaction
// (state built as a follower) and takes its commit; the killed broker
// recovers its log (the open transaction and the aborted index from its
// snapshot and a replay of its tail), catches up, and once preferred
// leader again serves the same LSO and aborted transactions.
func TestTxnLeaderSIGKILL(t *testing.T) {
	c := brokertest.StartProcessCluster(t, zones,
		brokertest.WithSetting("replica.lag.time.max.ms", "3000"),
		brokertest.WithSetting("unclean.leader.election.enable", "false"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	two := "2"
	createTopic(t, adm, "txnkill", 1, map[string]*string{"min.insync.replicas": &two})
	tx := newTxnRaw(ctx, t, cl, "txnkill")
	open, aborter := tx.pid, tx.newPID()
	tx.produce(open, true, "a1")    // 0, open across the kill
	tx.produce(aborter, true, "b1") // 1
	tx.marker(aborter, false)       // 2
	tx.produce(-1, false, "p1")     // 3
	waitFor(t, "the LSO at the open transaction", time.Minute, func() bool { return committedEnd(ctx, adm, "txnkill") == 0 })

	old, _ := leaderOf(adm, "txnkill")
	waitFor(t, "all replicas in the ISR", time.Minute, func() bool { _, isr := leaderOf(adm, "txnkill"); return len(isr) == 3 })
	c.Processes[old-1].Kill()
	waitFor(t, "a new leader", time.Minute, func() bool { l, _ := leaderOf(adm, "txnkill"); return l >= 1 && l != old })
	waitFor(t, "the new leader's LSO at the open transaction", time.Minute, func() bool { return committedEnd(ctx, adm, "txnkill") == 0 })
	tx.marker(open, true) // 4
	waitFor(t, "the LSO at the end after the commit", time.Minute, func() bool { return committedEnd(ctx, adm, "txnkill") == 5 })

	c.Processes[old-1].Start()
	waitFor(t, "the killed broker back in the ISR", time.Minute, func() bool {
		_, isr := leaderOf(adm, "txnkill")
		return slices.Contains(isr, old) && len(isr) == 3
	})
	waitFor(t, "the killed broker to lead again", time.Minute, func() bool {
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"txnkill": {0: {}}})
		if err != nil || res["txnkill"][0].Err != nil && !errors.Is(res["txnkill"][0].Err, kerr.ElectionNotNeeded) {
			return false
		}
		l, _ := leaderOf(adm, "txnkill")
		return l == old
	})
	if got := committedEnd(ctx, adm, "txnkill"); got != 5 {
		t.Fatalf("recovered leader's LSO %d, want 5", got)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.IsolationLevel = -1, 1<<20, 1
	details, err := adm.ListTopics(ctx, "txnkill")
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "txnkill", details["txnkill"].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(old)))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LastStableOffset != 5 || len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != aborter || p.AbortedTransactions[0].FirstOffset != 1 {
		t.Fatalf("recovered leader's read_committed fetch: error %v, LSO %d, aborted %+v; want LSO 5 and producer %d from 1",
			kerr.ErrorForCode(p.ErrorCode), p.LastStableOffset, p.AbortedTransactions, aborter)
	}
	if got, want := readCommittedValues(ctx, t, c.Addrs(), "txnkill", 2), []string{"a1", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer got %v, want %v", got, want)
	}
}
