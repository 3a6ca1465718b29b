package replication

import (
	"context"
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
	initResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %+v", err, initResp)
	}
	pid, seq := initResp.ProducerID, int32(0)
	produce := func(transactional bool, values ...string) {
		t.Helper()
		spec := record.DefaultSpec()
		spec.Transactional = transactional
		if transactional {
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, 0, seq
			seq += int32(len(values))
		}
		recs := make([]record.Record, len(values))
		for i, v := range values {
			recs[i] = record.Record{Value: []byte(v)}
		}
		b, err := record.Build(spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 30000
		if transactional {
			id := "txn-1"
			req.TransactionID = &id
		}
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "txn", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: b}}}}
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			code := resp.Topics[0].Partitions[0].ErrorCode
			if code == 0 {
				return
			}
			// A new leader (the topic's first, or after the failover)
			// may not have taken over yet.
			if code != kerr.NotLeaderForPartition.Code || time.Now().After(deadline) {
				t.Fatalf("produce %v: %v", values, kerr.ErrorForCode(code))
			}
			cl.ForceMetadataRefresh()
			time.Sleep(50 * time.Millisecond) // polling for the leader, not synchronisation
		}
	}
	marker := func(commit bool) {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.Committed, m.CoordinatorEpoch = pid, commit, 1
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "txn", Partitions: []int32{0}}}
		req.Markers = append(req.Markers, m)
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode
			if code == 0 {
				return
			}
			// A leader that has not taken over yet, or the old one.
			if code != kerr.NotLeaderForPartition.Code || time.Now().After(deadline) {
				t.Fatalf("marker (commit %v): %v", commit, kerr.ErrorForCode(code))
			}
			cl.ForceMetadataRefresh()
			time.Sleep(50 * time.Millisecond) // polling for the new leader, not synchronisation
		}
	}

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
