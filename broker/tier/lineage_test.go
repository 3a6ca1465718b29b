package tier_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/tier"
)

// copyLogUpTo appends src's batches below upTo to dst as follower.
func copyLogUpTo(t *testing.T, src, dst *log.Log, upTo int64) {
	t.Helper()
	for off := dst.EndOffset(); off < upTo; {
		r, err := src.Read(off, 1<<20, upTo)
		if err != nil {
			t.Fatal(err)
		}
		bs, _, err := record.Split(r.Records)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if _, err := dst.AppendAsFollower([]record.Batch{b}); err != nil {
				t.Fatal(err)
			}
		}
		off = r.HighestOffset + 1
	}
}

// TestUncleanElectionCutsTheTierBack (issue 25, window 2d): the manifest
// records the leader epochs of what it holds. After an unclean election
// the new leader's log leaves the old leader's at an offset below the
// tier's end: every replica's local retention stops there (not at the
// tier's end, where the tier holds the other history), and the new
// leader's first upload cuts the manifest back to it and uploads its own
// batches from there: the tier then holds exactly the new leader's log.
func TestUncleanElectionCutsTheTierBack(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem("tier")
	newTier := func() *tier.Partition {
		return tier.New(st, tier.Config{Cluster: "c"}, logr.Discard()).Partition("t", "id", 0)
	}
	old := openLog(t, 2000)
	appendN(t, old, 40, 0, 1_000)
	pOld := newTier()
	if _, err := pOld.Upload(ctx, old, old.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	mOld, _ := pOld.Manifest()
	if len(mOld.Segments) < 4 {
		t.Fatalf("the old leader uploaded %d segments", len(mOld.Segments))
	}
	for _, s := range mOld.Segments {
		if len(s.Epochs) != 1 || s.Epochs[0] != (tier.EpochStart{Epoch: 0, Start: s.BaseOffset}) {
			t.Fatalf("segment %d's lineage %+v, want epoch 0 from its base", s.BaseOffset, s.Epochs)
		}
	}
	// The new leader (elected uncleanly, epoch 1) had the old one's log up
	// to the middle of the tier only, then appended its own.
	neu := openLog(t, 2500)
	copyLogUpTo(t, old, neu, mOld.Segments[len(mOld.Segments)/2].BaseOffset+2)
	diverge := neu.EndOffset() // whole batches
	appendN(t, neu, 40, 1, 5_000)
	pNew := newTier()
	if _, err := pNew.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pNew.ConsistentEnd(neu); got != diverge {
		t.Fatalf("the new leader's retention bound %d, want the divergence point %d (the tier ends at %d)", got, diverge, mOld.EndOffset)
	}
	if got := pOld.ConsistentEnd(old); got != mOld.EndOffset {
		t.Fatalf("the old leader's retention bound %d, want the tier's end %d", got, mOld.EndOffset)
	}

	if _, err := pNew.Upload(ctx, neu, neu.EndOffset(), 1); err != nil {
		t.Fatal(err)
	}
	m, _ := pNew.Manifest()
	if m.EndOffset <= mOld.EndOffset {
		t.Fatalf("the new leader's manifest ends at %d, the old one's at %d", m.EndOffset, mOld.EndOffset)
	}
	if got, want := readAllRemote(t, newTier(), 0, m.EndOffset), localBytes(t, neu, 0, m.EndOffset); !bytes.Equal(got, want) {
		t.Fatalf("the tier's [0, %d) differs from the new leader's log (it holds the old leader's batches past %d)", m.EndOffset, diverge)
	}
	if got := pNew.ConsistentEnd(neu); got != m.EndOffset {
		t.Fatalf("after the cut the new leader's retention bound %d, want the tier's end %d", got, m.EndOffset)
	}
}
