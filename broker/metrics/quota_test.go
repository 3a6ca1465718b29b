package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-dev/strata/broker/quota"
)

// TestQuotaThrottleLabels: each quota kind is counted under its own
// label, request_percentage's as "request" (not folded into "produce"),
// and every label exists at 0 once registered.
func TestQuotaThrottleLabels(t *testing.T) {
	m := New(nil)
	m.RegisterQuota()
	m.ObserveQuotaThrottle(quota.Request, 2*time.Second)
	m.ObserveQuotaThrottle(quota.Fetch, time.Second)
	q := m.quota()
	for label, want := range map[string]float64{"produce": 0, "fetch": 1, "request": 1} {
		if got := testutil.ToFloat64(q.throttled.WithLabelValues(label)); got != want {
			t.Errorf("strata_quota_throttled_total{quota=%q} = %v, want %v", label, got, want)
		}
	}
	if got := testutil.ToFloat64(q.seconds.WithLabelValues("request")); got != 2 {
		t.Errorf("strata_quota_throttle_seconds_total{quota=\"request\"} = %v, want 2", got)
	}
}
