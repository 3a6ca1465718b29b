// Package config holds the operator's kustomize configuration (crd, rbac,
// manager, default, samples, manifests) and its monitoring: Grafana
// dashboards (grafana), PrometheusRule alerts (prometheus), the
// PodMonitor/ServiceMonitor component that turns them on
// (components/monitoring, off by default) and the overlay config/default +
// that component (monitoring). It has no Go code of its own; its tests
// render config/default, samples and monitoring with the kustomize binary
// the Makefile builds and check the objects a `kubectl apply -k` would
// create. The rules' promtool tests and the check that every metric they
// and the dashboards use exists are in test/monitoring.
package config
