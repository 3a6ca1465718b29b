package controllers

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// WAL sweeper metrics, served on the operator's metrics endpoint
// (controller-runtime's registry), labelled by the FastBucket's namespace
// and name.
var (
	walSweptObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_operator_wal_swept_objects_total",
		Help: "WAL objects the operator deleted because they were older than their cluster's wal.retention.",
	}, []string{"namespace", "fastbucket"})
	walSweptBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_operator_wal_swept_bytes_total",
		Help: "Bytes of the WAL objects the operator deleted.",
	}, []string{"namespace", "fastbucket"})
	walSweeps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_operator_wal_sweeps_total",
		Help: "WAL sweeps by result: ok, or error when the listing failed or an object was kept after an error.",
	}, []string{"namespace", "fastbucket", "result"})
	walObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_operator_wal_objects",
		Help: "Objects under wal/ in the bucket after the last sweep.",
	}, []string{"namespace", "fastbucket"})
	walBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_operator_wal_bytes",
		Help: "Bytes under wal/ in the bucket after the last sweep.",
	}, []string{"namespace", "fastbucket"})
)

// Metadata store (etcd) metrics from the operator's health probe
// (etcdhealth.go), labelled by the KafkaCluster's namespace and name: they
// cover managed and external etcd alike, with or without client TLS,
// where scraping etcd itself would need its certificates.
var (
	etcdDBSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_operator_etcd_db_size_bytes",
		Help: "Largest etcd member database (bytes) at the last probe.",
	}, []string{"namespace", "kafkacluster"})
	etcdQuota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_operator_etcd_quota_bytes",
		Help: "etcd backend quota (bytes) at the last probe; writes stop with a NOSPACE alarm when a database reaches it.",
	}, []string{"namespace", "kafkacluster"})
	etcdHealthyMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_operator_etcd_healthy_members",
		Help: "etcd endpoints that answered the last probe, out of strata_operator_etcd_members.",
	}, []string{"namespace", "kafkacluster"})
	etcdMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_operator_etcd_members",
		Help: "etcd endpoints the last probe asked.",
	}, []string{"namespace", "kafkacluster"})
	etcdAlarm = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "strata_operator_etcd_alarm",
		Help: "1 while etcd reports an alarm of this type (NOSPACE, CORRUPT) at the last probe, else 0.",
	}, []string{"namespace", "kafkacluster", "alarm"})
)

func init() {
	metrics.Registry.MustRegister(walSweptObjects, walSweptBytes, walSweeps, walObjects, walBytes,
		etcdDBSize, etcdQuota, etcdHealthyMembers, etcdMembers, etcdAlarm)
}

// recordEtcdHealth exports one probe of a KafkaCluster's etcd.
func recordEtcdHealth(namespace, name string, h *strata.MetadataHealth) {
	etcdDBSize.WithLabelValues(namespace, name).Set(float64(h.DBSizeBytes))
	etcdQuota.WithLabelValues(namespace, name).Set(float64(h.QuotaBytes))
	etcdHealthyMembers.WithLabelValues(namespace, name).Set(float64(h.HealthyMembers))
	etcdMembers.WithLabelValues(namespace, name).Set(float64(len(h.Endpoints)))
	// Both alarm types are always exported, so that an alert on "== 1"
	// resolves when the alarm is disarmed instead of losing its series.
	for _, alarm := range []string{"NOSPACE", "CORRUPT"} {
		raised := 0.0
		if slices.ContainsFunc(h.Alarms, func(a string) bool { return strings.HasPrefix(a, alarm) }) {
			raised = 1
		}
		etcdAlarm.WithLabelValues(namespace, name, alarm).Set(raised)
	}
}

// forgetClusterMetrics drops the series of a deleted KafkaCluster.
func forgetClusterMetrics(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "kafkacluster": name}
	etcdDBSize.DeletePartialMatch(l)
	etcdQuota.DeletePartialMatch(l)
	etcdHealthyMembers.DeletePartialMatch(l)
	etcdMembers.DeletePartialMatch(l)
	etcdAlarm.DeletePartialMatch(l)
}

// forgetBucketMetrics drops the series of a deleted FastBucket.
func forgetBucketMetrics(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "fastbucket": name}
	walSweptObjects.DeletePartialMatch(l)
	walSweptBytes.DeletePartialMatch(l)
	walSweeps.DeletePartialMatch(l)
	walObjects.DeletePartialMatch(l)
	walBytes.DeletePartialMatch(l)
}
