package replica

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time             { return c.t }
func (c *fakeClock) add(d time.Duration)        { c.t = c.t.Add(d) }
func (c *fakeClock) since(t0 time.Time) float64 { return c.t.Sub(t0).Seconds() }

// TestThrottleBoundsBytes drives a quota the way a fetcher does (check,
// fetch a response, record it; when exceeded, wait the Delay it names) on a
// fake clock, and checks the bound the package promises: by every moment
// the bytes admitted are at most burst + rate·elapsed + one response, and
// the quota does not starve the fetcher either.
func TestThrottleBoundsBytes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rate     int64
		response int
	}{
		{"small responses", 2 << 20, 64 << 10},
		{"responses larger than the burst", 512 << 10, 3 << 20},
		{"rate above the minimum burst", 50 << 20, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1000, 0)}
			q := NewThrottle(clk.now)
			q.SetRate(tc.rate)
			burst := float64(max(tc.rate, minThrottleBurst))
			t0 := clk.t
			admitted, waits := 0, 0
			for clk.since(t0) < 120 {
				if q.Exceeded() {
					d := q.Delay()
					if d <= 0 {
						t.Fatalf("exceeded, but Delay is %v", d)
					}
					clk.add(d)
					waits++
					continue
				}
				if bound := burst + float64(tc.rate)*clk.since(t0); float64(admitted) > bound {
					t.Fatalf("at %.3fs %d bytes admitted before this response; the bound is %.0f", clk.since(t0), admitted, bound)
				}
				admitted += tc.response
				q.Record(tc.response)
				clk.add(time.Millisecond) // the fetch itself
			}
			elapsed := clk.since(t0)
			if max := burst + float64(tc.rate)*elapsed + float64(tc.response); float64(admitted) > max {
				t.Fatalf("%d bytes in %.1fs at %d B/s: over the bound %.0f", admitted, elapsed, tc.rate, max)
			}
			if min := float64(tc.rate)*elapsed - float64(tc.response); float64(admitted) < min {
				t.Fatalf("%d bytes in %.1fs at %d B/s: the quota starved the fetcher (want at least %.0f)", admitted, elapsed, tc.rate, min)
			}
			if waits == 0 {
				t.Fatal("the quota never held the fetcher back")
			}
			if got := testutil.ToFloat64(q.bytes); got != float64(admitted) {
				t.Fatalf("strata_replication_throttled_bytes_total = %v, want %d", got, admitted)
			}
			if testutil.ToFloat64(q.held) == 0 {
				t.Fatal("strata_replication_throttled_partitions_total did not move")
			}
		})
	}
}

// TestThrottleRateChanges: an unthrottled quota never holds back; a rate
// set later applies at once; removing it frees the fetcher at once.
func TestThrottleRateChanges(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	q := NewThrottle(clk.now)
	q.Record(1 << 40)
	if q.Exceeded() || q.Delay() != 0 {
		t.Fatal("an unthrottled quota held back")
	}
	q.SetRate(1 << 20)
	q.Record(4 << 20) // a 1 MiB bucket, 3 MiB in debt
	if !q.Exceeded() {
		t.Fatal("4 MiB recorded against a 1 MiB/s quota with a 1 MiB bucket: not exceeded")
	}
	if d := q.Delay(); d < 3*time.Second || d > 3*time.Second+10*time.Millisecond {
		t.Fatalf("Delay = %v, want about 3s (the debt at 1 MiB/s)", d)
	}
	clk.add(3*time.Second + 10*time.Millisecond)
	if q.Exceeded() {
		t.Fatal("still exceeded after the debt was paid back")
	}
	q.Record(4 << 20)
	q.SetRate(Unthrottled)
	if q.Exceeded() {
		t.Fatal("exceeded after the rate was removed")
	}
	if got := testutil.ToFloat64(q.gauge); got != -1 {
		t.Fatalf("rate gauge = %v after removing the rate, want -1", got)
	}
}
