package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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

func init() {
	metrics.Registry.MustRegister(walSweptObjects, walSweptBytes, walSweeps, walObjects, walBytes)
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
