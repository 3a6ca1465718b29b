package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-dev/strata/broker/quota"
)

// quotaMetrics count client-quota throttles (package broker/quota).
type quotaMetrics struct {
	once      sync.Once
	throttled *prometheus.CounterVec
	seconds   *prometheus.CounterVec
}

func (m *Metrics) quota() *quotaMetrics {
	q := &m.quotas
	q.once.Do(func() {
		q.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_quota_throttled_total", Help: "Responses that carried a client-quota throttle time, by quota (produce, fetch, request).",
		}, []string{"quota"})
		q.seconds = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_quota_throttle_seconds_total", Help: "Throttle time given to clients over their quota, by quota (produce, fetch, request).",
		}, []string{"quota"})
		m.Registry.MustRegister(q.throttled, q.seconds)
		for _, l := range []string{"produce", "fetch", "request"} {
			q.throttled.WithLabelValues(l)
			q.seconds.WithLabelValues(l)
		}
	})
	return q
}

// RegisterQuota makes the client-quota metrics appear (at 0) before the
// first throttle.
func (m *Metrics) RegisterQuota() { m.quota() }

// ObserveQuotaThrottle counts one throttle of d for kind.
func (m *Metrics) ObserveQuotaThrottle(kind quota.Kind, d time.Duration) {
	l := "produce"
	switch kind {
	case quota.Fetch:
		l = "fetch"
	case quota.Request:
		l = "request"
	}
	q := m.quota()
	q.throttled.WithLabelValues(l).Inc()
	q.seconds.WithLabelValues(l).Add(d.Seconds())
}
