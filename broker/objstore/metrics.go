package objstore

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PrometheusObserver counts store calls and bytes per bucket and zone.
type PrometheusObserver struct {
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewPrometheusObserver creates the collectors and registers them on reg
// (skipped when reg is nil).
func NewPrometheusObserver(reg prometheus.Registerer) *PrometheusObserver {
	o := &PrometheusObserver{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_objstore_requests_total",
			Help: "Object store calls by bucket, zone, operation and result (ok, not_found, error).",
		}, []string{"bucket", "zone", "op", "result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_objstore_bytes_total",
			Help: "Object payload bytes written (put) and read (get), by bucket and zone.",
		}, []string{"bucket", "zone", "op"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_objstore_request_duration_seconds",
			Help:    "Object store call latency including retries, by bucket, zone and operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"bucket", "zone", "op"}),
	}
	if reg != nil {
		reg.MustRegister(o.requests, o.bytes, o.latency)
	}
	return o
}

// ObserveCall implements Observer.
func (o *PrometheusObserver) ObserveCall(op Op, bucket, zone string, n int64, elapsed time.Duration, err error) {
	result := "ok"
	switch {
	case errors.Is(err, ErrNotFound):
		result = "not_found"
	case err != nil:
		result = "error"
	}
	o.requests.WithLabelValues(bucket, zone, string(op), result).Inc()
	if n > 0 {
		o.bytes.WithLabelValues(bucket, zone, string(op)).Add(float64(n))
	}
	o.latency.WithLabelValues(bucket, zone, string(op)).Observe(elapsed.Seconds())
}

// Requests returns the request counter (for tests and dashboards).
func (o *PrometheusObserver) Requests() *prometheus.CounterVec { return o.requests }

// Bytes returns the byte counter.
func (o *PrometheusObserver) Bytes() *prometheus.CounterVec { return o.bytes }
