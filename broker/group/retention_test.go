package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestOffsetsRetention(t *testing.T) {
	store := NewMemoryStore()
	h := newHarness(t, func(c *Config) {
		c.Store = store
		c.OffsetsRetention = 10 * time.Minute
		c.RetentionCheckInterval = time.Minute
		c.MaxSessionTimeout = time.Hour
	})
	groups := func() []string {
		var out []string
		for _, g := range h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{}).Groups {
			out = append(out, g.Group)
		}
		return out
	}

	// A simple group: each offset expires 10 minutes after its commit.
	wantCode(t, "commit p0", h.commit(2, "simple", "", "", -1, "t", 0, 1), nil)
	// A consumer group that stays active never expires...
	active := h.stableGroup("active", 1, false)
	wantCode(t, "active commit", h.commit(2, "active", active[0].id, "", 1, "t", 0, 1), nil)
	// ...one whose members went away expires 10 minutes after it became
	// empty.
	wantCode(t, "active heartbeat", h.heartbeat(4, "active", active[0].id, "", 1), nil)
	left := h.stableGroup("left", 1, false)
	wantCode(t, "active heartbeat", h.heartbeat(4, "active", active[0].id, "", 1), nil)
	wantCode(t, "left commit", h.commit(2, "left", left[0].id, "", 1, "t", 0, 1), nil)

	keepAlive := func(d time.Duration) {
		for step := time.Duration(0); step < d; step += 5 * time.Second {
			wantCode(t, "active heartbeat", h.heartbeat(4, "active", active[0].id, "", 1), nil)
			h.clock.Advance(5 * time.Second)
		}
	}
	// left's member stops heartbeating: after its session timeout the
	// group is Empty (t ≈ 10s).
	keepAlive(8 * time.Minute)
	if s := h.state("left"); s != stateEmpty {
		t.Fatalf("left group state %v", s)
	}
	if _, got := h.fetch("left", "t", 0); got[0].offset != 1 {
		t.Fatalf("left group's offsets expired early: %+v", got)
	}
	wantCode(t, "commit p1", h.commit(2, "simple", "", "", -1, "t", 1, 2), nil) // t = 8m
	keepAlive(3 * time.Minute)                                                  // t = 11m: simple p0 (t=0) expired, p1 (t=8m) not
	if _, got := h.fetch("simple", "t", 0, 1); got[0].offset != -1 || got[1].offset != 2 {
		t.Fatalf("simple at 11m: %+v", got)
	}
	if _, got := h.fetch("left", "t", 0); got[0].offset != -1 {
		t.Fatalf("left group's offsets survived: %+v", got)
	}
	if got := groups(); len(got) != 2 {
		t.Fatalf("groups at 11m: %v", got)
	}
	keepAlive(10 * time.Minute) // t = 21m: only the active group is left
	if got := groups(); len(got) != 1 || got[0] != "active" {
		t.Fatalf("groups at 21m: %v", got)
	}
	if _, got := h.fetch("active", "t", 0); got[0].offset != 1 {
		t.Fatalf("active group's offset expired: %+v", got)
	}
	stored, _ := store.LoadGroups(context.Background())
	if _, ok := stored["left"]; ok {
		t.Fatal("expired group's membership record kept")
	}
	if offs, _ := store.Load(context.Background()); len(offs["simple"]) != 0 || len(offs["left"]) != 0 {
		t.Fatalf("store still holds expired offsets: %+v", offs)
	}
}
