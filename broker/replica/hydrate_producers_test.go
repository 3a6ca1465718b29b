package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/tier"
)

// TestHydrateProducerSnapshot: a replica hydrated from the tier's newest
// segments only (local retention) gets the leader's idempotent-producer
// state as of its first copied offset from the snapshot uploaded with the
// segment before, so a producer whose batches are only in the tier is
// still known when it leads: its retry is a duplicate at the original
// offset, a gap out of order; after a restart too.
func TestHydrateProducerSnapshot(t *testing.T) {
	ctx := context.Background()
	const pid = 77
	idem := func(seq int32) []record.Batch {
		spec := record.DefaultSpec()
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.BaseTimestamp = pid, 0, seq, 1
		b, err := record.Build(spec, []record.Record{{Value: fmt.Appendf(nil, "idempotent-%0100d", seq)}})
		if err != nil {
			t.Fatal(err)
		}
		return []record.Batch{b}
	}
	leader := NewPartition(tp, openSegmentedLog(t, func(c *log.Config) { c.RemoteStorage = true }), 1, nil)
	leader.becomeLeader(meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}})
	for seq := int32(0); seq < 2; seq++ {
		if _, _, err := leader.AppendAsLeader(idem(seq)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		if _, _, err := leader.AppendAsLeader(batch(t, fmt.Sprintf("record-%03d-%0100d", i, i))); err != nil {
			t.Fatal(err)
		}
	}
	tr := tier.New(objstore.NewMem("tier"), tier.Config{Cluster: "c"}, logr.Discard()).Partition("t", "id", 0)
	if _, err := tr.Upload(ctx, leader.Log, leader.Log.EndOffset(), 1); err != nil {
		t.Fatal(err)
	}
	m, err := tr.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}

	cfg := func(c *log.Config) { c.LocalRetentionBytes, c.RemoteStorage = 2000, true }
	f := NewPartition(tp, openSegmentedLog(t, cfg), 2, nil)
	f.becomeFollower(meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}})
	if _, err := f.hydrateFrom(ctx, tr, 1, 1); err != nil {
		t.Fatal(err)
	}
	first := tier.HydrationPlan(m, -1, 2000, f.now())
	if first == 0 || f.Log.StartOffset() != m.Segments[first].BaseOffset || m.Segments[first-1].ProducerSnapshotSize == 0 {
		t.Fatalf("hydrated from %d (plan: segment %d of %d, snapshot %d bytes before it); want the producer's batches (0, 1) only in the tier",
			f.Log.StartOffset(), first, len(m.Segments), m.Segments[max(first-1, 0)].ProducerSnapshotSize)
	}
	check := func(l *log.Log, when string) {
		t.Helper()
		if _, seq, last, ok := l.ProducerState(pid); !ok || seq != 1 || last != 1 {
			t.Fatalf("%s: producer state seq %d last offset %d known %v; want seq 1 at offset 1", when, seq, last, ok)
		}
		res, err := l.AppendAsLeader(idem(1), 2)
		if !errors.Is(err, log.ErrDuplicateSequence) || res.BaseOffset != 1 {
			t.Fatalf("%s: retry of seq 1: offset %d, %v; want a duplicate at offset 1", when, res.BaseOffset, err)
		}
		if _, err := l.AppendAsLeader(idem(5), 2); !errors.Is(err, log.ErrOutOfOrderSequence) {
			t.Fatalf("%s: seq 5 after 1: %v; want out of order", when, err)
		}
	}
	check(f.Log, "hydrated")

	dir, c := f.Log.Dir(), f.Log.Config()
	if err := f.Log.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := log.Open(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check(l, "hydrated, then restarted")
}
