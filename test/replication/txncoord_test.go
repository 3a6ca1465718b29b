package replication

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/broker/txn"
)

// stuckMarkers fails every marker write of the brokers it is installed on
// while stuck is set.
type stuckMarkers struct {
	next  txn.MarkerWriter
	stuck *atomic.Bool
}

func (s stuckMarkers) WriteMarkers(ctx context.Context, m txn.Marker) (txn.Marker, error) {
	if s.stuck.Load() {
		return m, errors.New("injected: leaders unreachable")
	}
	return s.next.WriteMarkers(ctx, m)
}

func txnCoordinator(t *testing.T, cl *kgo.Client, id string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey = 1, id
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("FindCoordinator(%s): %v %v", id, err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.NodeID
}

// TestTxnCoordinatorFailoverMidCommit: the transaction coordinator
// persists PrepareCommit and answers EndTxn, then stops before any marker
// is written. The broker the transactional ID moves to finds the prepared
// transaction in etcd and writes its markers — the transaction's consumer
// offsets become visible at the group's coordinator — and the producer's
// retried EndTxn succeeds there.
func TestTxnCoordinatorFailoverMidCommit(t *testing.T) {
	var stuck sync.Map // broker ID → *atomic.Bool
	flag := func(id int32) *atomic.Bool {
		v, _ := stuck.LoadOrStore(id, new(atomic.Bool))
		return v.(*atomic.Bool)
	}
	c := brokertest.StartCluster(t, zones, brokertest.WithConfig(func(cfg *server.Config) {
		id := cfg.Broker.NodeID
		cfg.WrapTxnMarkers = func(w txn.MarkerWriter) txn.MarkerWriter { return stuckMarkers{next: w, stuck: flag(id)} }
	}))
	cl := newClient(t, c.Addrs())
	createTopic(t, kadm.NewClient(cl), "out", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	id := "failover-app"
	coord := txnCoordinator(t, cl, id)
	flag(coord).Store(true)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60_000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %+v", err, ir)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "out", Partitions: []int32{0, 1, 2}}}
	if r, err := add.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, r)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, pid, epoch, "failover-group"
	if r, err := ao.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, r)
	}
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch, toc.Generation = id, "failover-group", pid, epoch, -1
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "out", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 1, Offset: 77, LeaderEpoch: -1}}}}
	if r, err := toc.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, r)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	if r, err := end.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %+v", err, r)
	}
	// A fresh client per question: kgo keeps a coordinator it found until
	// a request to it fails, and keeps failing at a stopped one.
	fresh := func() *kgo.Client {
		f, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	describe := func() kmsg.DescribeTransactionsResponseTransactionState {
		f := fresh()
		defer f.Close()
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{id}
		resp, err := req.RequestWith(ctx, f)
		if err != nil || len(resp.TransactionStates) != 1 {
			return kmsg.DescribeTransactionsResponseTransactionState{ErrorCode: -1}
		}
		return resp.TransactionStates[0]
	}
	if st := describe(); st.State != "PrepareCommit" {
		t.Fatalf("with markers stuck: %+v, want PrepareCommit", st)
	}

	c.Brokers[coord-1].Stop() // the coordinator goes away mid-commit
	waitFor(t, "another broker to complete the prepared commit", time.Minute, func() bool {
		return describe().State == "CompleteCommit"
	})
	if now := txnCoordinator(t, cl, id); now == coord {
		t.Fatalf("the stopped broker %d still coordinates %s", coord, id)
	}
	cl = fresh()
	defer cl.Close()
	if r, err := end.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("retried EndTxn at the new coordinator: %v %v", err, kerr.ErrorForCode(r.ErrorCode))
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group, fetch.RequireStable = "failover-group", true
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "out", Partitions: []int32{1}}}
	waitFor(t, "the transaction's offset at the group's coordinator", 30*time.Second, func() bool {
		r, err := fetch.RequestWith(ctx, cl)
		return err == nil && r.ErrorCode == 0 && len(r.Topics) == 1 && r.Topics[0].Partitions[0].ErrorCode == 0 && r.Topics[0].Partitions[0].Offset == 77
	})
}
