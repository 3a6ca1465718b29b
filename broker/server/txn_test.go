package server

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeTxn(t *testing.T, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TransactionStates[0]
}

// TestTransactionCoordinatorAPIs drives the coordinator's APIs on a
// standalone broker with a real client, through a commit, fencing and a
// restart.
func TestTransactionCoordinatorAPIs(t *testing.T) {
	dir := t.TempDir()
	start := func() *Server {
		cfg := DefaultConfig()
		cfg.Listen = "127.0.0.1:0"
		cfg.Broker.DataDir = dir
		s, err := Start(context.Background(), cfg, logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	defer func() { _ = s.Shutdown(context.Background()) }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}

	id := "tx-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60_000
	ir, err := init.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(ir.ErrorCode))
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	init.TransactionTimeoutMillis = int32((16 * time.Minute).Milliseconds())
	if r, _ := init.RequestWith(ctx, cl); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout above transaction.max.timeout.ms: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.SetVersion(3)
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "out", Partitions: []int32{0, 1}}, {Topic: "missing", Partitions: []int32{0}}}
	ar, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := ar.Topics[0].Partitions[0].ErrorCode; c != kerr.OperationNotAttempted.Code {
		t.Fatalf("partition beside an unknown topic: %v", kerr.ErrorForCode(c))
	}
	if c := ar.Topics[1].Partitions[0].ErrorCode; c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(c))
	}
	add.Topics, add.Transactions = add.Topics[:1], nil // kgo fills Transactions in
	if ar, err = add.RequestWith(ctx, cl); err != nil || ar.Topics[0].Partitions[1].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, ar)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, pid, epoch, "g"
	if r, err := ao.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, r)
	}
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch, toc.Generation = id, "g", pid, epoch, -1
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "out", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
	if r, err := toc.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, r)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group, fetch.RequireStable = "g", true
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "out", Partitions: []int32{0}}}
	fetch.SetVersion(7)
	if r, err := fetch.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("stable OffsetFetch while the transaction is open: %v %+v", err, r)
	}
	if d := describeTxn(t, cl, id); d.State != "Ongoing" || len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 2 || d.ProducerID != pid {
		t.Fatalf("DescribeTransactions: %+v", d)
	}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.StateFilters = []string{"Ongoing", "Bogus"}
	if r, err := lt.RequestWith(ctx, cl); err != nil || len(r.TransactionStates) != 1 || r.TransactionStates[0].TransactionalID != id || len(r.UnknownStateFilters) != 1 {
		t.Fatalf("ListTransactions: %v %+v", err, r)
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	if r, err := end.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %+v", err, r)
	}
	for describeTxn(t, cl, id).State != "CompleteCommit" {
		if ctx.Err() != nil {
			t.Fatalf("transaction never completed: %+v", describeTxn(t, cl, id))
		}
		time.Sleep(10 * time.Millisecond) // poll pace
	}
	if r, err := fetch.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("OffsetFetch after the commit: %v %+v", err, r)
	}

	// A second producer with the same ID fences the first.
	if ir, err = init.RequestWith(ctx, cl); err == nil {
		init.TransactionTimeoutMillis = 60_000
		ir, err = init.RequestWith(ctx, cl)
	}
	if err != nil || ir.ErrorCode != 0 || ir.ProducerEpoch != epoch+1 {
		t.Fatalf("second InitProducerId: %v %+v", err, ir)
	}
	add.Transactions = nil
	if ar, err = add.RequestWith(ctx, cl); err != nil || ar.Topics[0].Partitions[0].ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("zombie AddPartitionsToTxn: %v %+v", err, ar)
	}

	// The state survives a restart.
	cl.Close()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = start()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if d := describeTxn(t, cl2, id); d.ErrorCode != 0 || d.State != "Empty" || d.ProducerEpoch != epoch+1 {
		t.Fatalf("after a restart: %+v", d)
	}
}
