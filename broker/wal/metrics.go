package wal

import "github.com/prometheus/client_golang/prometheus"

// UploaderCollector exports an Uploader's Stats at scrape time. Register
// it on the broker's registry: prometheus.MustRegister(NewUploaderCollector(u)).
type UploaderCollector struct {
	u                                *Uploader
	objects, failed, bytes, rejected *prometheus.Desc
	buffered, inFlight, degraded     *prometheus.Desc
	hedges                           *prometheus.Desc
}

// NewUploaderCollector returns a collector for u.
func NewUploaderCollector(u *Uploader) *UploaderCollector {
	return &UploaderCollector{
		u:        u,
		objects:  prometheus.NewDesc("strata_wal_objects_uploaded_total", "WAL objects stored.", nil, nil),
		failed:   prometheus.NewDesc("strata_wal_uploads_failed_total", "WAL object uploads that failed (their ranges are replicated inline).", nil, nil),
		bytes:    prometheus.NewDesc("strata_wal_uploaded_bytes_total", "Bytes of WAL objects stored.", nil, nil),
		rejected: prometheus.NewDesc("strata_wal_appends_rejected_total", "Batches the uploader refused, by reason (buffer_full, degraded).", []string{"reason"}, nil),
		buffered: prometheus.NewDesc("strata_wal_buffered_bytes", "Batch bytes accepted and not yet uploaded.", nil, nil),
		inFlight: prometheus.NewDesc("strata_wal_uploads_in_flight", "PUTs in flight.", nil, nil),
		degraded: prometheus.NewDesc("strata_wal_degraded", "1 while the uploader refuses data because uploads fail.", nil, nil),
		hedges:   prometheus.NewDesc("strata_wal_upload_hedges_total", "WAL object PUTs that did not answer within the hedge delay and got a twin PUT of the same key and bytes (the first success wins).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *UploaderCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.objects, c.failed, c.bytes, c.rejected, c.buffered, c.inFlight, c.degraded, c.hedges} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *UploaderCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.u.Stats()
	degraded := 0.0
	if s.Degraded {
		degraded = 1
	}
	ch <- prometheus.MustNewConstMetric(c.objects, prometheus.CounterValue, float64(s.Objects))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(s.Failed))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(s.UploadedBytes))
	ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(s.RejectedFull), "buffer_full")
	ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(s.RejectedDegraded), "degraded")
	ch <- prometheus.MustNewConstMetric(c.buffered, prometheus.GaugeValue, float64(s.BufferedBytes))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, degraded)
	ch <- prometheus.MustNewConstMetric(c.hedges, prometheus.CounterValue, float64(s.Hedged))
}
