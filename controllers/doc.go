// Package controllers holds the Strata operator's reconcilers, one per
// custom resource, and the pure desired-state builders they use.
//
// The builders (desired.go, brokerconfig.go, brokerids.go) turn a
// KafkaCluster and its zones' FastBuckets into the exact Kubernetes objects
// the operator wants: per zone a StatefulSet pinned to the zone, a
// ConfigMap with the broker configuration (broker.rack and the zone's fast
// bucket), the broker Services, the managed etcd and a
// PodDisruptionBudget. They have no I/O and are tested with table tests and
// golden files (go test ./controllers -run Golden -update).
//
// The reconcilers read the world, call the builders and write the result
// with server-side apply under the field manager strata-operator
// (apply.go): fields they set are forced back when someone else changes
// them, fields other managers own are left alone. Status follows the
// kstatus conventions (conditions.go: Ready, Reconciling, Stalled,
// observedGeneration). The envtest suite checks that wiring against a
// real kube-apiserver. The KafkaCluster reconciler also probes the metadata etcd
// (etcdhealth.go: Status and AlarmList through clientv3, bounded by a
// short timeout) for the status.metadata health line.
package controllers
