package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/txn"
)

type ackAllMarkers struct{}

func (ackAllMarkers) WriteMarkers(context.Context, txn.Marker) (txn.Marker, error) {
	return txn.Marker{}, nil
}

// A produce of a finished transaction is refused even though the same
// producer's earlier produce to the partition was verified: the verifier
// asks the coordinator every time (the partition's verification guard is
// what remembers answers, broker/log).
func TestTxnVerifierRefusesEndedTransactions(t *testing.T) {
	ctx := context.Background()
	var n int64
	c, err := txn.New(ctx, txn.Config{Markers: ackAllMarkers{}, ProducerIDs: func() (int64, error) { n++; return n, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	v := &txnVerifier{txns: c}
	pid, epoch, kerrr := c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	if kerrr != nil {
		t.Fatal(kerrr)
	}
	if err := v.VerifyTxnPartition(ctx, "app", pid, epoch, "t", 0); err != kerr.InvalidTxnState {
		t.Fatalf("produce before AddPartitionsToTxn: %v, want INVALID_TXN_STATE", err)
	}
	if e := c.AddPartitions(ctx, "app", pid, epoch, []txn.TopicPartition{{Topic: "t", Partition: 0}}, false); e != nil {
		t.Fatal(e)
	}
	if err := v.VerifyTxnPartition(ctx, "app", pid, epoch, "t", 0); err != nil {
		t.Fatalf("produce in the transaction: %v", err)
	}
	if err := v.VerifyTxnPartition(ctx, "app", pid, epoch+1, "t", 0); err != kerr.ProducerFenced {
		t.Fatalf("produce with another epoch: %v, want PRODUCER_FENCED", err)
	}
	if e := c.EndTxn(ctx, "app", pid, epoch, true, false); e != nil {
		t.Fatal(e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for md, _ := c.Describe(ctx, "app"); md.State != txn.CompleteCommit; md, _ = c.Describe(ctx, "app") {
		if time.Now().After(deadline) {
			t.Fatalf("state %v", md.State)
		}
		time.Sleep(time.Millisecond) // poll pace
	}
	if err := v.VerifyTxnPartition(ctx, "app", pid, epoch, "t", 0); err != kerr.InvalidTxnState {
		t.Fatalf("late produce after the commit: %v, want INVALID_TXN_STATE", err)
	}
}
