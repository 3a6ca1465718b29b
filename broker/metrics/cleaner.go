package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-dev/strata/broker"
)

var (
	cleanerRunsDesc = prometheus.NewDesc("strata_log_cleaner_runs_total",
		"Log cleaner runs that rewrote a compacted log.", nil, nil)
	cleanerReadDesc = prometheus.NewDesc("strata_log_cleaner_read_bytes_total",
		"Bytes the log cleaner read (offset map and rewrite).", nil, nil)
	cleanerWrittenDesc = prometheus.NewDesc("strata_log_cleaner_written_bytes_total",
		"Bytes the log cleaner wrote as cleaned segments.", nil, nil)
	cleanerDirtyDesc = prometheus.NewDesc("strata_log_cleaner_max_dirty_ratio",
		"Largest dirty ratio of a compacted log at the cleaner's last selection round.", nil, nil)
	cleanerSecondsDesc = prometheus.NewDesc("strata_log_cleaner_seconds_total",
		"Time the log cleaner spent cleaning.", nil, nil)
)

// CleanerCollector exports the log cleaner's counters
// (strata_log_cleaner_*).
func CleanerCollector(c *broker.LogCleaner) prometheus.Collector { return cleanerCollector{c} }

type cleanerCollector struct{ c *broker.LogCleaner }

func (cc cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cleanerRunsDesc, cleanerReadDesc, cleanerWrittenDesc, cleanerDirtyDesc, cleanerSecondsDesc} {
		ch <- d
	}
}

func (cc cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	st := cc.c.Stats()
	ch <- prometheus.MustNewConstMetric(cleanerRunsDesc, prometheus.CounterValue, float64(st.Runs))
	ch <- prometheus.MustNewConstMetric(cleanerReadDesc, prometheus.CounterValue, float64(st.BytesRead))
	ch <- prometheus.MustNewConstMetric(cleanerWrittenDesc, prometheus.CounterValue, float64(st.BytesWritten))
	ch <- prometheus.MustNewConstMetric(cleanerDirtyDesc, prometheus.GaugeValue, st.MaxDirtyRatio)
	ch <- prometheus.MustNewConstMetric(cleanerSecondsDesc, prometheus.CounterValue, st.Seconds)
}
