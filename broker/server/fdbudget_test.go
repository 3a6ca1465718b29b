package server

import (
	"strings"
	"testing"
)

func TestFDStarved(t *testing.T) {
	for _, tc := range []struct {
		open, limit uint64
		starved     bool
	}{
		{100, 1024, false},
		{960, 1024, false}, // 64 free: the floor of the reserve
		{961, 1024, true},
		{62_000, 65_536, false},
		{62_260, 65_536, false}, // 3276 free: 5% of the limit
		{62_261, 65_536, true},
		{1_044_480, 1 << 20, false}, // 4096 free: the cap
		{1_044_481, 1 << 20, true},
		{5000, 0, false}, // no limit known
	} {
		starved, why := fdStarved(tc.open, tc.limit)
		if starved != tc.starved {
			t.Errorf("%d open of %d: starved %v (%q), want %v", tc.open, tc.limit, starved, why, tc.starved)
		}
		if starved && !strings.Contains(why, "RLIMIT_NOFILE") {
			t.Errorf("reason %q does not name the limit", why)
		}
	}
	if open, limit, ok := fdUsage(); ok && (open == 0 || limit < open) {
		t.Errorf("fdUsage: %d open of %d", open, limit)
	}
}

// TestFDHeadroomShare: brokers of one process (strata dev) each count on
// their share of the process's headroom; unknown and exhausted headroom
// pass through.
func TestFDHeadroomShare(t *testing.T) {
	for _, tc := range []struct {
		free   int64
		ok     bool
		n      int
		want   int64
		wantOK bool
	}{
		{18_968, true, 3, 6_322, true},
		{18_968, true, 1, 18_968, true},
		{18_968, true, 0, 18_968, true},
		{-10, true, 3, -10, true},
		{0, false, 3, 0, false},
	} {
		got, ok := shareHeadroom(func() (int64, bool) { return tc.free, tc.ok }, tc.n)()
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("share of %d (ok %v) over %d brokers = %d, %v; want %d, %v", tc.free, tc.ok, tc.n, got, ok, tc.want, tc.wantOK)
		}
	}
}
