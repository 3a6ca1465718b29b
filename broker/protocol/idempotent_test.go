package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/record"
)

// TestIdempotentProducerAcrossRestart checks the idempotent producer rules
// with raw batches, across a broker restart (the producer state is rebuilt
// from the log): a retried batch is answered with its original offset and
// not appended again, a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER, and
// an old epoch is INVALID_PRODUCER_EPOCH.
func TestIdempotentProducerAcrossRestart(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, newAdmin(t, b.Addr()), "idem", 1, nil)
	cl := newClient(t, b.Addr())

	initReq := kmsg.NewPtrInitProducerIDRequest()
	initResp, err := initReq.RequestWith(testCtx(t), cl)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %+v", err, initResp)
	}
	pid := initResp.ProducerID
	mk := func(epoch int16, seq int32, n int) []byte {
		spec := record.DefaultSpec()
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Value: []byte(fmt.Sprintf("e%d-s%d", epoch, int(seq)+i))}
		}
		bt, err := record.Build(spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		return bt
	}
	produce := func(cl *kgo.Client, records []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 30000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "idem", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: records}}}}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if r := produce(cl, mk(0, 0, 3)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("first batch: %+v", r)
	}
	second := mk(0, 3, 2)
	if r := produce(cl, second); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("second batch: %+v", r)
	}

	b.Restart()
	cl = newClient(t, b.Addr())
	tests := []struct {
		name       string
		records    []byte
		wantCode   int16
		wantOffset int64
	}{
		{"retry of an appended batch", second, 0, 3},
		{"sequence gap", mk(0, 10, 1), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"next in sequence", mk(0, 5, 1), 0, 5},
	}
	for _, tt := range tests {
		r := produce(cl, tt.records)
		if r.ErrorCode != tt.wantCode || (tt.wantCode == 0 && r.BaseOffset != tt.wantOffset) {
			t.Fatalf("%s: %+v, want code %d offset %d", tt.name, r, tt.wantCode, tt.wantOffset)
		}
	}
	// Bump the epoch (KIP-360), then the old epoch is fenced.
	initReq.ProducerID, initReq.ProducerEpoch = pid, 0
	if resp, err := initReq.RequestWith(testCtx(t), cl); err != nil || resp.ProducerEpoch != 1 {
		t.Fatalf("epoch bump: %v %+v", err, resp)
	}
	if r := produce(cl, mk(1, 0, 1)); r.ErrorCode != 0 || r.BaseOffset != 6 {
		t.Fatalf("first batch of epoch 1: %+v", r)
	}
	if r := produce(cl, mk(0, 6, 1)); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch after the bump: %+v, want INVALID_PRODUCER_EPOCH", r)
	}
	ends, err := newAdmin(t, b.Addr()).ListEndOffsets(testCtx(t), "idem")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("idem", 0); o.Offset != 7 {
		t.Fatalf("end offset %d, want 7: a duplicate or a rejected batch was appended", o.Offset)
	}
}

// TestIdempotentStreamSurvivesRestart runs a default (idempotent, acks=all)
// franz-go producer while the broker restarts underneath it. Requests in
// flight at the restart are retried by the client; the log must end up
// with every record exactly once, in order.
func TestIdempotentStreamSurvivesRestart(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, newAdmin(t, b.Addr()), "stream", 1, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("stream"), kgo.ProducerLinger(0))
	const n = 4000
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	restarted := make(chan struct{})
	for i := range n {
		if i == n/2 {
			b.Restart() // the first half is partly in flight
			close(restarted)
		}
		wg.Add(1)
		p.Produce(context.Background(), &kgo.Record{Value: []byte(fmt.Sprintf("%06d", i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	<-restarted
	if len(errs) > 0 {
		t.Fatalf("%d produce errors, first: %v", len(errs), errs[0])
	}
	got := consume(t, b.Addr(), "stream", n)
	for i, r := range got {
		if string(r.Value) != fmt.Sprintf("%06d", i) || r.Offset != int64(i) {
			t.Fatalf("offset %d holds %s (offset %d): duplicate or reorder", i, r.Value, r.Offset)
		}
	}
	ends, err := newAdmin(t, b.Addr()).ListEndOffsets(testCtx(t), "stream")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("stream", 0); o.Offset != n {
		t.Fatalf("end offset %d, want %d (duplicates appended)", o.Offset, n)
	}
}
