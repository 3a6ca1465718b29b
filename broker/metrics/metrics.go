package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/replica"
)

// Metrics implements protocol.Observer and registers the broker metrics.
type Metrics struct {
	Registry *prometheus.Registry

	requests    *prometheus.CounterVec
	failures    *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	latency     *prometheus.HistogramVec
	bytesIn     prometheus.Counter
	bytesOut    prometheus.Counter
	connections prometheus.Gauge
	refused     *prometheus.CounterVec
	denied      *prometheus.CounterVec
	quotas      quotaMetrics // quota.go
}

// New returns metrics registered on a new registry (with the Go and process
// collectors). b may be nil; when set, per-partition log metrics are
// collected from it at scrape time.
func New(b *broker.Broker) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_requests_total", Help: "Kafka requests handled, by API.",
		}, []string{"api"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_request_failures_total", Help: "Requests that closed their connection (malformed or failed), by API.",
		}, []string{"api"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_requests_in_flight", Help: "Requests being handled (long polls and group joins park here), by API.",
		}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "strata_request_duration_seconds", Help: "Time from reading a request to queueing its response, by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"api"}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_network_bytes_in_total", Help: "Request bytes read, frames included.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_network_bytes_out_total", Help: "Response bytes queued for writing, frames included.",
		}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_connections", Help: "Open client connections.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_connections_refused_total", Help: "Connections closed on accept because they were over a limit, or closed because they did not authenticate or send a request within connections.authentication.timeout.ms, by listener and the limit's config key.",
		}, []string{"listener", "limit"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_authorization_denied_total", Help: "Authorizations the ACLs refused, by API and resource type (topic, group, cluster, transactional_id).",
		}, []string{"api", "resource_type"}),
	}
	reg.MustRegister(m.requests, m.failures, m.inFlight, m.latency, m.bytesIn, m.bytesOut, m.connections, m.refused, m.denied,
		// The scheduler's latency histogram too (go_sched_latencies_seconds):
		// on a busy CPU it is where request tails come from.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if b != nil {
		reg.MustRegister(&logCollector{b: b}, txnCollector{b: b})
	}
	return m
}

// ConnOpened implements protocol.Observer.
func (m *Metrics) ConnOpened() { m.connections.Inc() }

// ConnClosed implements protocol.Observer.
func (m *Metrics) ConnClosed() { m.connections.Dec() }

// ConnRefused implements protocol.ConnLimitObserver.
// Both labels are bounded: the broker's listener names and the limits'
// keys.
func (m *Metrics) ConnRefused(listener, limit string) {
	m.refused.WithLabelValues(listener, limit).Inc()
}

// AuthorizationDenied implements protocol.DenialObserver. Both labels are
// bounded: API names of the served keys, and the four resource types.
func (m *Metrics) AuthorizationDenied(api, resourceType string) {
	m.denied.WithLabelValues(api, resourceType).Inc()
}

// DeniedCounter returns strata_authorization_denied_total (for tests).
func (m *Metrics) DeniedCounter() *prometheus.CounterVec { return m.denied }

// RequestStarted implements protocol.Observer.
func (m *Metrics) RequestStarted(key int16) { m.inFlight.WithLabelValues(kmsg.NameForKey(key)).Inc() }

// InFlight returns the number of requests of an API being handled.
func (m *Metrics) InFlight(key int16) float64 {
	return testutilGauge(m.inFlight.WithLabelValues(kmsg.NameForKey(key)))
}

// Request implements protocol.Observer.
func (m *Metrics) Request(key, _ int16, bytesIn, bytesOut int, elapsed time.Duration, failed bool) {
	api := kmsg.NameForKey(key)
	m.inFlight.WithLabelValues(api).Dec()
	m.requests.WithLabelValues(api).Inc()
	if failed {
		m.failures.WithLabelValues(api).Inc()
	}
	m.latency.WithLabelValues(api).Observe(elapsed.Seconds())
	m.bytesIn.Add(float64(bytesIn))
	m.bytesOut.Add(float64(bytesOut))
}

var (
	endOffsetDesc = prometheus.NewDesc("strata_log_end_offset", "Log end offset (high watermark on a single broker).",
		[]string{"topic", "partition"}, nil)
	startOffsetDesc = prometheus.NewDesc("strata_log_start_offset", "Log start offset.",
		[]string{"topic", "partition"}, nil)
	sizeDesc = prometheus.NewDesc("strata_log_size_bytes", "Bytes of log segments on disk.",
		[]string{"topic", "partition"}, nil)
	hwmDesc = prometheus.NewDesc("strata_high_watermark", "High watermark of a hosted partition (cluster mode; the log end on a single broker).",
		[]string{"topic", "partition"}, nil)
	leaderDesc = prometheus.NewDesc("strata_partition_leader", "1 if this broker leads the partition, 0 if it follows (cluster mode).",
		[]string{"topic", "partition"}, nil)
	underReplicatedDesc = prometheus.NewDesc("strata_under_replicated_partitions",
		"Partitions this broker leads whose ISR is smaller than their replica set (Kafka's UnderReplicatedPartitions).", nil, nil)
	// Like Kafka's OfflinePartitionsCount and ActiveControllerCount, only
	// the controller reports the cluster-wide count (the other brokers 0):
	// sum() over the brokers is then the cluster's figure, not n times it.
	offlineDesc = prometheus.NewDesc("strata_offline_partitions",
		"Partitions without a live leader, reported by the controller broker (0 on the others; cluster mode).", nil, nil)
	activeControllerDesc = prometheus.NewDesc("strata_active_controller",
		"1 on the broker that holds the controller role, else 0 (cluster mode).", nil, nil)
	// The data directory's file system, for disk-full alerts that work
	// without the kubelet's volume metrics (the same figures as
	// DescribeLogDirs v4).
	dirCapacityDesc = prometheus.NewDesc("strata_log_dir_capacity_bytes",
		"Size of the file system holding the data directory.", []string{"dir"}, nil)
	dirAvailableDesc = prometheus.NewDesc("strata_log_dir_available_bytes",
		"Bytes of that file system available to the broker.", []string{"dir"}, nil)
)

// logCollector reads partition offsets at scrape time.
type logCollector struct{ b *broker.Broker }

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- endOffsetDesc
	ch <- startOffsetDesc
	ch <- sizeDesc
	ch <- hwmDesc
	ch <- leaderDesc
	ch <- underReplicatedDesc
	ch <- offlineDesc
	ch <- activeControllerDesc
	ch <- dirCapacityDesc
	ch <- dirAvailableDesc
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	under := 0
	for _, p := range c.b.AllPartitions() {
		part := strconv.Itoa(int(p.Index))
		ch <- prometheus.MustNewConstMetric(endOffsetDesc, prometheus.GaugeValue, float64(p.Log.EndOffset()), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(startOffsetDesc, prometheus.GaugeValue, float64(p.Log.StartOffset()), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(sizeDesc, prometheus.GaugeValue, float64(p.Log.Size()), p.Topic, part)
		hwm, leader := float64(p.Log.EndOffset()), 1.0
		if p.Replica != nil {
			hwm = float64(p.Replica.HighWatermark())
			st := p.Replica.State()
			if p.Replica.Role() != replica.RoleLeader {
				leader = 0
			} else if len(st.ISR) < len(st.Replicas) {
				under++
			}
		}
		ch <- prometheus.MustNewConstMetric(hwmDesc, prometheus.GaugeValue, hwm, p.Topic, part)
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, leader, p.Topic, part)
	}
	ch <- prometheus.MustNewConstMetric(underReplicatedDesc, prometheus.GaugeValue, float64(under))

	if st := c.b.ClusterState(); st != nil {
		active, offline := 0.0, 0
		if st.ControllerID == c.b.NodeID() {
			active = 1
			offline = offlinePartitions(st)
		}
		ch <- prometheus.MustNewConstMetric(activeControllerDesc, prometheus.GaugeValue, active)
		ch <- prometheus.MustNewConstMetric(offlineDesc, prometheus.GaugeValue, float64(offline))
	}

	dir := c.b.Config().DataDir
	if total, usable, err := c.b.DiskUsage(); err == nil {
		ch <- prometheus.MustNewConstMetric(dirCapacityDesc, prometheus.GaugeValue, float64(total), dir)
		ch <- prometheus.MustNewConstMetric(dirAvailableDesc, prometheus.GaugeValue, float64(usable), dir)
	}
}

// offlinePartitions counts the partitions whose leader is NoLeader or a
// broker that is no longer registered.
func offlinePartitions(st *meta.ClusterState) int {
	n := 0
	for topic := range st.Topics {
		for _, ps := range st.TopicPartitions(topic) {
			if ps.Leader == meta.NoLeader || !st.Live(ps.Leader) {
				n++
			}
		}
	}
	return n
}

func testutilGauge(g prometheus.Gauge) float64 {
	var pb dto.Metric
	if err := g.Write(&pb); err != nil {
		return 0
	}
	return pb.GetGauge().GetValue()
}
