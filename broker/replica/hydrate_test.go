package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/tier"
)

// openSegmentedLog opens a log rolling every 1,000 bytes (cfg adjusts it).
func openSegmentedLog(t *testing.T, cfg func(*log.Config)) *log.Log {
	t.Helper()
	c := log.DefaultConfig()
	c.FlushInterval = -1
	c.SegmentBytes = 1000
	if cfg != nil {
		cfg(&c)
	}
	l, err := log.Open(t.TempDir(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// tieredLeader is a leader at epoch 1 with 40 batches in a log of many
// segments, its sealed segments uploaded to an in-memory tier.
func tieredLeader(t *testing.T) (*Partition, *tier.Partition, tier.Manifest) {
	t.Helper()
	leader := NewPartition(tp, openSegmentedLog(t, nil), 1, nil)
	leader.becomeLeader(meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}})
	for i := range 40 {
		if _, _, err := leader.AppendAsLeader(batch(t, fmt.Sprintf("record-%03d-%0100d", i, i))); err != nil {
			t.Fatal(err)
		}
	}
	tr := tier.New(objstore.NewMem("tier"), tier.Config{Cluster: "c"}, logr.Discard()).Partition("t", "id", 0)
	if _, err := tr.Upload(context.Background(), leader.Log, leader.Log.EndOffset(), 1); err != nil {
		t.Fatal(err)
	}
	m, err := tr.Load(context.Background())
	if err != nil || len(m.Segments) < 5 {
		t.Fatalf("manifest with %d segments (%v), want 5 or more", len(m.Segments), err)
	}
	return leader, tr, m
}

func logBytes(t *testing.T, l *log.Log, from, to int64) []byte {
	t.Helper()
	var out []byte
	for off := from; off < to; {
		rr, err := l.Read(off, 1<<20, to)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rr.Records...)
		off = rr.HighestOffset + 1
	}
	return out
}

func TestHydrateFrom(t *testing.T) {
	ctx := context.Background()
	st := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}}

	t.Run("empty replica", func(t *testing.T) {
		leader, tr, m := tieredLeader(t)
		f := NewPartition(tp, openSegmentedLog(t, nil), 2, nil)
		f.becomeFollower(st)
		res, err := f.hydrateFrom(ctx, tr, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.segments != len(m.Segments) || f.Log.StartOffset() != 0 || f.Log.EndOffset() != m.EndOffset || f.HighWatermark() != m.EndOffset {
			t.Fatalf("hydrated %+v: log [%d, %d) HWM %d; want %d segments, [0, %d) HWM %d", res, f.Log.StartOffset(), f.Log.EndOffset(), f.HighWatermark(), len(m.Segments), m.EndOffset, m.EndOffset)
		}
		if !bytes.Equal(logBytes(t, f.Log, 0, m.EndOffset), logBytes(t, leader.Log, 0, m.EndOffset)) {
			t.Fatal("the hydrated log differs from the leader's")
		}
		if got := f.Log.Epochs(); len(got) != 1 || got[0].Epoch != 1 || got[0].StartOffset != 0 {
			t.Fatalf("epoch cache %+v, want epoch 1 from 0", got)
		}
		if entries, _ := os.ReadDir(f.Log.Dir()); len(entries) == 0 {
			t.Fatal("no files")
		} else {
			for _, e := range entries {
				if filepath.Ext(e.Name()) == ".tmp" {
					t.Fatalf("download left %s", e.Name())
				}
			}
		}
		// Again: the log reaches the tier's end, nothing to do.
		if res, err := f.hydrateFrom(ctx, tr, 1, 1); err != nil || res.segments != 0 {
			t.Fatalf("second hydration: %+v, %v; want nothing", res, err)
		}
	})

	t.Run("stale epoch", func(t *testing.T) {
		_, tr, _ := tieredLeader(t)
		f := NewPartition(tp, openSegmentedLog(t, nil), 2, nil)
		old := st
		old.LeaderEpoch = 0
		f.becomeFollower(old)
		if _, err := f.hydrateFrom(ctx, tr, 1, 0); !errors.Is(err, errStaleEpoch) {
			t.Fatalf("hydration under epoch 0 of a manifest of epoch 1: %v, want errStaleEpoch", err)
		}
		if f.Log.EndOffset() != 0 {
			t.Fatalf("log end %d after a refused hydration, want 0", f.Log.EndOffset())
		}
	})

	t.Run("not following", func(t *testing.T) {
		_, tr, _ := tieredLeader(t)
		f := NewPartition(tp, openSegmentedLog(t, nil), 2, nil)
		f.becomeFollower(st)
		if _, err := f.hydrateFrom(ctx, tr, 3, 1); !errors.Is(err, errNotFollowing) {
			t.Fatalf("hydration for another leader: %v, want errNotFollowing", err)
		}
	})

	t.Run("committed prefix kept, uncommitted tail replaced", func(t *testing.T) {
		leader, tr, m := tieredLeader(t)
		f := NewPartition(tp, openSegmentedLog(t, nil), 2, nil)
		f.becomeFollower(st)
		// The first 7 offsets as fetched (committed: HWM 7), then a
		// batch of epoch 0 the leader does not have.
		if _, err := f.Log.AppendAsFollower(splitLog(t, logBytes(t, leader.Log, 0, 7))); err != nil {
			t.Fatal(err)
		}
		f.hwm.Store(7)
		stray := batch(t, "stray")
		record.SetBaseOffset(stray[0], 7)
		if _, err := f.Log.AppendAsFollower(stray); err != nil {
			t.Fatal(err)
		}
		res, err := f.hydrateFrom(ctx, tr, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.from != 7 || f.Log.StartOffset() != 0 || f.Log.EndOffset() != m.EndOffset {
			t.Fatalf("hydrated %+v: log [%d, %d); want from 7, [0, %d)", res, f.Log.StartOffset(), f.Log.EndOffset(), m.EndOffset)
		}
		if !bytes.Equal(logBytes(t, f.Log, 0, m.EndOffset), logBytes(t, leader.Log, 0, m.EndOffset)) {
			t.Fatal("the hydrated log differs from the leader's")
		}
	})

	t.Run("tier start inside a segment", func(t *testing.T) {
		_, tr, m := tieredLeader(t)
		start := m.Segments[1].BaseOffset + 1
		if err := tr.DeleteRecordsBefore(ctx, 1, start); err != nil {
			t.Fatal(err)
		}
		f := NewPartition(tp, openSegmentedLog(t, nil), 2, nil)
		f.becomeFollower(st)
		if _, err := f.hydrateFrom(ctx, tr, 1, 1); err != nil {
			t.Fatal(err)
		}
		if f.Log.StartOffset() != start || f.Log.EndOffset() != m.EndOffset {
			t.Fatalf("log [%d, %d), want [%d, %d): the tier's start after DeleteRecords", f.Log.StartOffset(), f.Log.EndOffset(), start, m.EndOffset)
		}
	})

	t.Run("crash mid-download", func(t *testing.T) {
		// A crash leaves the download's temp file beside a log of whole
		// batches: the log deletes it when it opens, and a hydration
		// continues from the log end.
		leader, tr, m := tieredLeader(t)
		l := openSegmentedLog(t, nil)
		dir := l.Dir()
		if _, err := l.AppendAsFollower(splitLog(t, logBytes(t, leader.Log, 0, m.Segments[1].BaseOffset))); err != nil {
			t.Fatal(err)
		}
		torn := filepath.Join(dir, fmt.Sprintf("hydrate-%020d.log.tmp", m.Segments[1].BaseOffset))
		if err := os.WriteFile(torn, logBytes(t, leader.Log, m.Segments[1].BaseOffset, m.Segments[1].LastOffset+1)[:100], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		reopened, err := log.Open(dir, l.Config())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reopened.Close() })
		if _, err := os.Stat(torn); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the torn download %s is still there after the log opened (%v)", torn, err)
		}
		f := NewPartition(tp, reopened, 2, nil)
		f.hwm.Store(reopened.EndOffset())
		f.becomeFollower(st)
		res, err := f.hydrateFrom(ctx, tr, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.from != m.Segments[1].BaseOffset || res.segments != len(m.Segments)-1 {
			t.Fatalf("hydrated %+v, want from %d, %d segments", res, m.Segments[1].BaseOffset, len(m.Segments)-1)
		}
		if !bytes.Equal(logBytes(t, f.Log, 0, m.EndOffset), logBytes(t, leader.Log, 0, m.EndOffset)) {
			t.Fatal("the hydrated log differs from the leader's")
		}
	})

	t.Run("local retention", func(t *testing.T) {
		leader, tr, m := tieredLeader(t)
		f := NewPartition(tp, openSegmentedLog(t, func(c *log.Config) { c.LocalRetentionBytes = 2000 }), 2, nil)
		f.becomeFollower(st)
		res, err := f.hydrateFrom(ctx, tr, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		first := tier.HydrationPlan(m, -1, 2000, f.now())
		start := m.Segments[first].BaseOffset
		if first == 0 || res.segments != len(m.Segments)-first || f.Log.StartOffset() != start || f.Log.EndOffset() != m.EndOffset {
			t.Fatalf("hydrated %+v: log [%d, %d); want %d segments, [%d, %d)", res, f.Log.StartOffset(), f.Log.EndOffset(), len(m.Segments)-first, start, m.EndOffset)
		}
		if !bytes.Equal(logBytes(t, f.Log, start, m.EndOffset), logBytes(t, leader.Log, start, m.EndOffset)) {
			t.Fatal("the hydrated log differs from the leader's")
		}
	})
}

func splitLog(t *testing.T, b []byte) []record.Batch {
	t.Helper()
	bs, _, err := record.Split(b)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}
