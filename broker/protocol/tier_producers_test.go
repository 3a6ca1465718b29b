package protocol

import (
	"errors"
	"testing"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
)

// TestTieredProducerStateSurvivesLocalRetention: the tier manager's local
// retention deletes an idempotent producer's segments once uploaded; the
// producer is still within the partition (its batches are in the tier),
// so its retry is a duplicate at the original offset and a sequence gap is
// out of order. DeleteRecords past its last batch evicts it.
func TestTieredProducerStateSurvivesLocalRetention(t *testing.T) {
	tb := startTierBroker(t, t.TempDir(), objstore.NewMem("tier"))
	tb.createTiered(t, "idem")
	p, err := tb.b.Partition("idem", 0)
	if err != nil {
		t.Fatal(err)
	}
	const pid = 4242
	appendSeq := func(seq int32) (log.AppendResult, error) {
		spec := record.DefaultSpec()
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.BaseTimestamp = pid, 0, seq, 1
		b, err := record.Build(spec, []record.Record{{Value: []byte("idempotent")}})
		if err != nil {
			t.Fatal(err)
		}
		return p.Log.AppendAsLeader([]record.Batch{b}, broker.LeaderEpoch)
	}
	for seq := int32(0); seq < 2; seq++ {
		if res, err := appendSeq(seq); err != nil || res.BaseOffset != int64(seq) {
			t.Fatalf("seq %d: offset %d, %v", seq, res.BaseOffset, err)
		}
	}
	tb.produce(t, "idem", 200) // another producer: several more segments
	tb.tierRounds(t, "idem", 2)

	res, err := appendSeq(1)
	if !errors.Is(err, log.ErrDuplicateSequence) || res.BaseOffset != 1 {
		t.Fatalf("retry of seq 1 after local retention: offset %d, %v; want a duplicate at offset 1", res.BaseOffset, err)
	}
	if _, err := appendSeq(5); !errors.Is(err, log.ErrOutOfOrderSequence) {
		t.Fatalf("seq 5 after 1: %v, want out of order", err)
	}

	// The partition's start (the tier's) still holds its last batch.
	if err := p.DeleteRecordsBefore(1); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := p.Log.ProducerState(pid); !ok {
		t.Fatal("producer evicted while its last batch (offset 1) is within the partition")
	}
	if err := p.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := p.Log.ProducerState(pid); ok {
		t.Fatal("producer still known after DeleteRecords passed its last batch")
	}
}
