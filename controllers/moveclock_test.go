package controllers_test

import (
	"testing"
	"time"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// TestTickMoveClock plays moves of 1000 bytes: they start, copy 400
// bytes in 4 s (100 B/s, 6 s left), then stop copying; the last progress
// stays where it was, and MovesStalledFor reports them after the stall
// time only while something is in flight.
func TestTickMoveClock(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)
	c := controllers.TickMoveClock(nil, t0, 1000, 1000, true)
	if !c.StartTime.Time.Equal(t0) || !c.LastProgressTime.Time.Equal(t0) || c.BytesPerSecond != 0 || c.EstimatedCompletionTime != nil {
		t.Fatalf("start: %+v", c)
	}
	c = controllers.TickMoveClock(&c, t0.Add(4*time.Second), 1000, 600, true)
	if c.BytesMoved != 400 || c.BytesPerSecond != 100 || !c.LastProgressTime.Time.Equal(t0.Add(4*time.Second)) ||
		c.EstimatedCompletionTime == nil || !c.EstimatedCompletionTime.Time.Equal(t0.Add(10*time.Second)) || !c.StartTime.Time.Equal(t0) {
		t.Fatalf("after 4 s: %+v", c)
	}
	c = controllers.TickMoveClock(&c, t0.Add(20*time.Second), 1000, 600, false)
	if !c.LastProgressTime.Time.Equal(t0.Add(4*time.Second)) || c.BytesPerSecond != 20 {
		t.Fatalf("no progress: %+v", c)
	}
	for _, tt := range []struct {
		now      time.Duration
		inFlight int
		stalled  bool
	}{{10 * time.Second, 1, false}, {14 * time.Second, 1, true}, {60 * time.Second, 0, false}} {
		if _, got := controllers.MovesStalledFor(c, t0.Add(tt.now), tt.inFlight, 10*time.Second); got != tt.stalled {
			t.Errorf("at %s with %d in flight: stalled %v, want %v", tt.now, tt.inFlight, got, tt.stalled)
		}
	}
	done := controllers.TickMoveClock(&c, t0.Add(30*time.Second), 1000, 0, true)
	if done.EstimatedCompletionTime != nil || done.BytesMoved != 1000 {
		t.Fatalf("done: %+v", done)
	}
}

// TestTickScalingClock: a drain's clock starts with it and moves on when
// a move finishes although bytes left rose (the next broker's drain).
func TestTickScalingClock(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)
	st := strata.ScalingStatus{BytesToMove: 500, BytesLeft: 500}
	controllers.TickScalingClock(&st, nil, t0)
	next := strata.ScalingStatus{BytesToMove: 900, BytesLeft: 600, MovesDone: 1}
	controllers.TickScalingClock(&next, &st, t0.Add(time.Minute))
	if !next.StartTime.Time.Equal(t0) || !next.LastProgressTime.Time.Equal(t0.Add(time.Minute)) || next.BytesMoved != 300 || next.BytesPerSecond != 5 {
		t.Fatalf("%+v", next.MoveClock)
	}
	same := next
	controllers.TickScalingClock(&same, &next, t0.Add(2*time.Minute))
	if !same.LastProgressTime.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("no progress moved the clock: %+v", same.MoveClock)
	}
}
