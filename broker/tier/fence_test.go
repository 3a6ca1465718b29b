package tier_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/tier"
)

// TestFencedWriterFollowsNewManifest (issue 25, window 2c): a deposed
// leader whose last manifest a new leader superseded (the new leader's
// first version was based on an older one) is fenced at its next write,
// and its view follows the new leader's manifest at once: its local
// retention, bounded by the view's end, stops trimming against what it
// wrote itself.
func TestFencedWriterFollowsNewManifest(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem("tier")
	p0 := tier.New(st, tier.Config{Cluster: "c"}, logr.Discard()).Partition("t", "id", 0)
	leader := openLog(t, 2000)
	appendN(t, leader, 40, 0, 1_000)
	if _, err := p0.Upload(ctx, leader, leader.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	mine, _ := p0.Manifest()
	if len(mine.Segments) < 2 {
		t.Fatalf("uploaded %d segments", len(mine.Segments))
	}
	// The new leader's first manifest (epoch 1) names half of them.
	theirs := mine
	theirs.Segments = mine.Segments[:len(mine.Segments)/2]
	theirs.EndOffset = theirs.Segments[len(theirs.Segments)-1].LastOffset + 1
	theirs.LeaderEpoch, theirs.Seq = 1, 0
	raw, err := json.Marshal(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, p0.Prefix()+fmt.Sprintf("manifest/%010d-%020d.json", 1, 0), raw); err != nil {
		t.Fatal(err)
	}

	appendN(t, leader, 20, 0, 9_000)
	if _, err := p0.Upload(ctx, leader, leader.EndOffset(), 0); !errors.Is(err, tier.ErrFenced) {
		t.Fatalf("deposed leader's upload: %v, want ErrFenced", err)
	}
	if m, _ := p0.Manifest(); m.LeaderEpoch != 1 || p0.EndOffset() != theirs.EndOffset {
		t.Fatalf("the fenced writer's view: epoch %d, end %d; want the new leader's (epoch 1, end %d), not its own (end %d)", m.LeaderEpoch, p0.EndOffset(), theirs.EndOffset, mine.EndOffset)
	}
}
