package telemetry

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	valueDesc = prometheus.NewDesc("strata_client_telemetry_value",
		"Latest value of a metric a client pushed (KIP-714): gauges as pushed, delta sums added up since the broker first saw the series. Metric is the client's OpenTelemetry name, attributes its data point attributes (k=v, sorted).",
		[]string{"client_instance_id", "client_id", "metric", "attributes"}, nil)
	pushesDesc = prometheus.NewDesc("strata_client_telemetry_pushes_total",
		"PushTelemetry requests answered, by error code (NONE: accepted).",
		[]string{"error"}, nil)
	clientsDesc = prometheus.NewDesc("strata_client_telemetry_clients",
		"Client instances the broker keeps telemetry state of.", nil, nil)
	seriesDesc = prometheus.NewDesc("strata_client_telemetry_series",
		"Series of strata_client_telemetry_value, all clients together.", nil, nil)
	droppedDesc = prometheus.NewDesc("strata_client_telemetry_series_dropped_total",
		"Pushed data points not kept: past the series caps, or a metric name or attributes too long for a label.", nil, nil)
)

// Collector returns the Prometheus collector of what clients pushed.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{valueDesc, pushesDesc, clientsDesc, seriesDesc, droppedDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(m.now())
	for e := m.lru.Front(); e != nil; e = e.Next() {
		cl := e.Value.(*client)
		for key, s := range cl.series {
			ch <- prometheus.MustNewConstMetric(valueDesc, prometheus.GaugeValue, s.value, cl.idLabel, cl.clientID, key.metric, key.attrs)
		}
	}
	for code, n := range m.pushes {
		name := "NONE"
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
			name = e.Message
		} else if code != 0 {
			name = strconv.Itoa(int(code))
		}
		ch <- prometheus.MustNewConstMetric(pushesDesc, prometheus.CounterValue, float64(n), name)
	}
	ch <- prometheus.MustNewConstMetric(clientsDesc, prometheus.GaugeValue, float64(len(m.clients)))
	ch <- prometheus.MustNewConstMetric(seriesDesc, prometheus.GaugeValue, float64(m.series))
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(m.dropped))
}
