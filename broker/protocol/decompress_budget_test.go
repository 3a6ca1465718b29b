package protocol_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/record"
)

// TestRequestDecompressionBudget: the batches of one request share one
// decompression budget (record.RequestDecompressionBytes of its frame).
// A Produce of 64 small zstd batches, each inflating to 4 MiB (each under
// its own 32 MiB limit, 256 MiB in all), has its first partitions
// appended and the rest refused with MESSAGE_TOO_LARGE, none of them
// half-written. One ListOffsets by timestamp over all 64 partitions, whose
// budget grows by 4 MiB per lookup, answers all of them when each lookup
// decodes a 4 MiB batch, and only the first ones, refusing the rest with
// MESSAGE_TOO_LARGE, when each decodes 16 MiB; a ListOffsets of one
// partition still answers.
func TestRequestDecompressionBudget(t *testing.T) {
	const (
		partitions = 64
		inflated   = 4 << 20
	)
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	cl := newClient(t, b.Addr())
	createTopic(t, adm, "bombs", partitions, nil)
	spec := record.DefaultSpec()
	spec.Codec = record.Zstd
	bomb, err := record.Build(spec, []record.Record{{Value: make([]byte, inflated)}})
	if err != nil {
		t.Fatal(err)
	}
	produce := func(parts ...int32) *kmsg.ProduceResponse {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "bombs"
		for _, p := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, bomb
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	all := make([]int32, partitions)
	for i := range all {
		all[i] = int32(i)
	}
	budget := record.RequestDecompressionBytes(partitions * len(bomb))
	maxOK := int(budget/inflated) + 1

	resp := produce(all...)
	appended := map[int32]bool{}
	for _, sp := range resp.Topics[0].Partitions {
		switch err := kerr.ErrorForCode(sp.ErrorCode); {
		case err == nil:
			appended[sp.Partition] = true
		case errors.Is(err, kerr.MessageTooLarge):
		default:
			t.Errorf("partition %d: %v", sp.Partition, err)
		}
	}
	if len(appended) == 0 || len(appended) > maxOK {
		t.Fatalf("one Produce of %d batches of %d inflated bytes: %d appended, want 1..%d (budget %d)", partitions, inflated, len(appended), maxOK, budget)
	}
	ends, err := adm.ListEndOffsets(testCtx(t), "bombs")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if want := map[bool]int64{true: 1, false: 0}[appended[o.Partition]]; o.Offset != want {
			t.Errorf("partition %d ends at %d, want %d", o.Partition, o.Offset, want)
		}
	})

	// One request per partition: each is within its budget.
	for _, p := range all {
		if appended[p] {
			continue
		}
		if code := produce(p).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("partition %d alone: %v", p, kerr.ErrorForCode(code))
		}
	}

	listOffsets := func(ts, want int64, parts ...int32) (ok, tooLarge int) {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "bombs"
		for _, p := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range resp.Topics[0].Partitions {
			switch err := kerr.ErrorForCode(sp.ErrorCode); {
			case err == nil && sp.Offset == want:
				ok++
			case errors.Is(err, kerr.MessageTooLarge):
				tooLarge++
			default:
				t.Errorf("ListOffsets(%d) of partition %d: offset %d, %v", ts, sp.Partition, sp.Offset, err)
			}
		}
		return ok, tooLarge
	}
	// The lookups' budget grows by 4 MiB per partition asked: 64 lookups
	// that each decode a 4 MiB batch are all answered.
	if ok, tooLarge := listOffsets(0, 0, all...); ok != partitions {
		t.Errorf("ListOffsets(0) over %d stored batches of %d inflated bytes: %d answered, %d MESSAGE_TOO_LARGE; want all", partitions, inflated, ok, tooLarge)
	}
	// Then a 16 MiB batch at timestamp 1000 in every partition: only the
	// first lookups of 64 fit.
	spec.BaseTimestamp = 1000
	if bomb, err = record.Build(spec, []record.Record{{Value: make([]byte, 4*inflated)}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if code := produce(p).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("partition %d alone: %v", p, kerr.ErrorForCode(code))
		}
	}
	listBudget := record.RequestDecompressionBytes(0) + partitions*4<<20
	most := int(listBudget/(4*inflated)) + 1
	if ok, tooLarge := listOffsets(1000, 1, all...); ok == 0 || ok > most || ok+tooLarge != partitions {
		t.Errorf("ListOffsets(1000) over %d stored batches of %d inflated bytes: %d answered, %d MESSAGE_TOO_LARGE; want 1..%d answered", partitions, 4*inflated, ok, tooLarge, most)
	}
	if ok, _ := listOffsets(1000, 1, partitions-1); ok != 1 {
		t.Errorf("ListOffsets(1000) of one partition was not answered")
	}
}
