package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/offsetstopic"
	"github.com/strata-dev/strata/broker/txntopic"
)

// txnTopicRecord is a transactional id's latest record in
// __transaction_state, decoded as Kafka's tools decode it.
type txnTopicRecord struct {
	producerID    int64
	producerEpoch int16
	state         string
	partitions    []string // "topic/partition", sorted
}

// readTxnStateTopic reads __transaction_state to its end: the latest
// record per transactional id, tombstones removing it. It checks each
// record is in its id's partition and in Kafka's key/value version 0.
func readTxnStateTopic(t *testing.T, addr string) map[string]txnTopicRecord {
	t.Helper()
	st := map[string]txnTopicRecord{}
	readInternalTopic(t, addr, txntopic.Topic, func(partitions int32, r *kgo.Record) {
		var k kmsg.TxnMetadataKey
		if err := k.ReadFrom(r.Key); err != nil || k.Version != 0 {
			t.Fatalf("key at %d-%d: %v (version %d)", r.Partition, r.Offset, err, k.Version)
		}
		if p := offsetstopic.PartitionFor(k.TransactionalID, partitions); p != r.Partition {
			t.Fatalf("%q's record in partition %d, want %d", k.TransactionalID, r.Partition, p)
		}
		if r.Value == nil {
			delete(st, k.TransactionalID)
			return
		}
		var v kmsg.TxnMetadataValue
		if err := v.ReadFrom(r.Value); err != nil || v.Version != 0 {
			t.Fatalf("value at %d-%d: %v (version %d)", r.Partition, r.Offset, err, v.Version)
		}
		rec := txnTopicRecord{producerID: v.ProducerID, producerEpoch: v.ProducerEpoch, state: v.State.String()}
		for _, tp := range v.Topics {
			for _, p := range tp.Partitions {
				rec.partitions = append(rec.partitions, fmt.Sprintf("%s/%d", tp.Topic, p))
			}
		}
		st[k.TransactionalID] = rec
	})
	return st
}

// waitTxnStateTopic polls the topic until id's record matches what
// DescribeTransactions reports for it, and check accepts it.
func waitTxnStateTopic(t *testing.T, addr, id, what string, check func(txnTopicRecord) bool) {
	t.Helper()
	adm := newAdmin(t, addr)
	var last map[string]txnTopicRecord
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		last = readTxnStateTopic(t, addr)
		rec, ok := last[id]
		if !ok || !check(rec) {
			continue
		}
		d, err := adm.DescribeTransactions(testCtx(t), id)
		if err != nil {
			continue
		}
		dt, err := d.On(id, nil)
		if err != nil || dt.Err != nil {
			continue
		}
		if dt.ProducerID == rec.producerID && dt.ProducerEpoch == rec.producerEpoch && dt.State == rec.state {
			return
		}
	}
	t.Fatalf("%s: __transaction_state holds %+v for %q", what, last[id], id)
}

func txnProducer(t *testing.T, addr, id string) *kgo.Client {
	return newClient(t, addr, kgo.TransactionalID(id), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
}

// runTxn produces to partitions of orders in one transaction, waiting
// (inside it) until check accepts the topic's record of id, then ends it.
func runTxn(t *testing.T, cl *kgo.Client, addr, id string, partitions []int32, commit bool, inside func()) {
	t.Helper()
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, p := range partitions {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if inside != nil {
		inside()
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// TestTransactionStateTopic: a transactional id's state appears in
// __transaction_state in Kafka's record format, in its partition, and
// agrees with DescribeTransactions: Ongoing with the transaction's
// partitions, then CompleteCommit / CompleteAbort; the topic is listed as
// internal and clients may not write it; after a restart it still holds
// the state.
func TestTransactionStateTopic(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithDir(t.TempDir()), brokertest.WithStableAddr())
	addr := b.Addr()
	createTopic(t, newAdmin(t, addr), "orders", 3, nil)
	cl := txnProducer(t, addr, "tx-app")
	runTxn(t, cl, addr, "tx-app", []int32{2, 0}, true, func() {
		waitTxnStateTopic(t, addr, "tx-app", "ongoing", func(r txnTopicRecord) bool {
			return r.state == "Ongoing" && slices.Equal(r.partitions, []string{"orders/0", "orders/2"})
		})
	})
	waitTxnStateTopic(t, addr, "tx-app", "committed", func(r txnTopicRecord) bool { return r.state == "CompleteCommit" })
	runTxn(t, cl, addr, "tx-app", []int32{1}, false, nil)
	waitTxnStateTopic(t, addr, "tx-app", "aborted", func(r txnTopicRecord) bool { return r.state == "CompleteAbort" })

	ctx := testCtx(t)
	adm := newAdmin(t, addr)
	td, err := adm.ListTopicsWithInternal(ctx, txntopic.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if d := td[txntopic.Topic]; d.Err != nil || !d.IsInternal || len(d.Partitions) != txntopic.DefaultPartitions {
		t.Fatalf("%s: %v, internal %v, %d partitions", txntopic.Topic, d.Err, d.IsInternal, len(d.Partitions))
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: txntopic.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch(t, "x")}}}}
	presp, err := req.RequestWith(ctx, newClient(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("Produce to %s: error %d, want INVALID_TOPIC_EXCEPTION", txntopic.Topic, code)
	}
	dr, err := adm.DeleteTopics(ctx, txntopic.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := dr[txntopic.Topic].Err; !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("DeleteTopics %s: %v, want INVALID_TOPIC_EXCEPTION", txntopic.Topic, err)
	}

	cl.Close()
	b.Restart()
	waitTxnStateTopic(t, addr, "tx-app", "after restart", func(r txnTopicRecord) bool { return r.state == "CompleteAbort" })
}

// TestTransactionStateTopicCluster: in a cluster the state (in etcd,
// written by each id's coordinator) reaches __transaction_state through
// the leaders of its partitions, replicated with the cluster's factor;
// when a broker stops, the new leaders write their ids' state and the
// changes that follow.
func TestTransactionStateTopicCluster(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a", "b", "c"})
	addr := c.Addrs()[1]
	adm := newAdmin(t, addr)
	resp, err := adm.CreateTopics(testCtx(t), 3, 3, nil, "orders")
	if err != nil || resp["orders"].Err != nil {
		t.Fatalf("CreateTopics: %v %v", err, resp["orders"].Err)
	}
	ids := []string{"tx-0", "tx-1", "tx-2", "tx-3"}
	for i, id := range ids {
		runTxn(t, txnProducer(t, addr, id), addr, id, []int32{int32(i % 3)}, true, nil)
	}
	for _, id := range ids {
		waitTxnStateTopic(t, addr, id, "committed", func(r txnTopicRecord) bool { return r.state == "CompleteCommit" })
	}
	td, err := adm.ListTopicsWithInternal(testCtx(t), txntopic.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if d := td[txntopic.Topic]; !d.IsInternal || len(d.Partitions[0].Replicas) != 3 {
		t.Fatalf("%s: internal %v, replicas %v", txntopic.Topic, d.IsInternal, d.Partitions[0].Replicas)
	}

	c.Brokers[0].Stop()
	for i, id := range ids {
		// A new producer of the id bumps its epoch and aborts nothing.
		cl := txnProducer(t, addr, id)
		ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
		for {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte("after")}).FirstErr()
			if err == nil {
				err = cl.EndTransaction(ctx, kgo.TryAbort)
				if err != nil {
					t.Fatal(err)
				}
				break
			}
			if ctx.Err() != nil || !kerr.IsRetriable(err) {
				t.Fatalf("produce in %s's transaction: %v", id, err)
			}
			_ = cl.EndTransaction(ctx, kgo.TryAbort)
		}
		cancel()
	}
	for _, id := range ids {
		waitTxnStateTopic(t, addr, id, "aborted after broker 1 stopped", func(r txnTopicRecord) bool { return r.state == "CompleteAbort" })
	}
}

// TestTransactionStateTopicOff: with transaction.state.log.enable=false
// the topic is not created, and a Metadata request naming it answers
// UNKNOWN_TOPIC_OR_PARTITION rather than a retriable error.
func TestTransactionStateTopicOff(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("transaction.state.log.enable", "false"))
	createTopic(t, newAdmin(t, b.Addr()), "orders", 1, nil)
	runTxn(t, txnProducer(t, b.Addr(), "tx-off"), b.Addr(), "tx-off", []int32{0}, true, nil)
	req := kmsg.NewPtrMetadataRequest()
	name := txntopic.Topic
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	for range 3 { // the projector would create it within its 1 s check
		resp, err := req.RequestWith(testCtx(t), newClient(t, b.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("Metadata %s: error %d, want UNKNOWN_TOPIC_OR_PARTITION", name, code)
		}
		time.Sleep(700 * time.Millisecond)
	}
}
