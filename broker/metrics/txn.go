package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-dev/strata/broker"
)

var (
	txnMarkersDesc = prometheus.NewDesc("strata_txn_markers_written_total",
		"Transaction markers (WriteTxnMarkers) this broker handled as partition leader, by result: committed and aborted once replicated, error when refused or not replicated.",
		[]string{"result"}, nil)
	txnOngoingDesc = prometheus.NewDesc("strata_txn_ongoing",
		"Producer transactions open in the partitions this broker hosts (each holds its partition's last stable offset).", nil, nil)
)

// txnCollector reads the transaction counters at scrape time.
type txnCollector struct{ b *broker.Broker }

func (c txnCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- txnMarkersDesc
	ch <- txnOngoingDesc
}

func (c txnCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.b.TxnMarkers()
	ch <- prometheus.MustNewConstMetric(txnMarkersDesc, prometheus.CounterValue, float64(m.Committed.Load()), "committed")
	ch <- prometheus.MustNewConstMetric(txnMarkersDesc, prometheus.CounterValue, float64(m.Aborted.Load()), "aborted")
	ch <- prometheus.MustNewConstMetric(txnMarkersDesc, prometheus.CounterValue, float64(m.Failed.Load()), "error")
	ch <- prometheus.MustNewConstMetric(txnOngoingDesc, prometheus.GaugeValue, float64(c.b.OngoingTxns()))
}
