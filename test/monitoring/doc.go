// Package monitoring checks the monitoring Strata ships: the Grafana
// dashboards (config/grafana), the PrometheusRule alerts
// (config/prometheus) and their promtool unit tests.
//
//   - TestRulesPromtool: `promtool check rules` and `promtool test rules`
//     ($STRATA_PROMTOOL, built by `make promtool`) with one test file per
//     alert in config/prometheus/tests; an alert without its test file, or
//     a test file without its alert, fails.
//   - TestDashboardQueriesParse: every dashboard query, with the Grafana
//     variables filled in, through `promtool check rules` as a recording
//     rule, which parses it with Prometheus' own PromQL parser.
//   - TestMetricsExist: starts a 3-zone WAL cluster (embedded etcd, a real
//     S3 server) with franz-go traffic, scrapes every broker's /metrics,
//     and fails naming each metric a panel or an alert uses that neither a
//     broker nor the operator exposes. Names are taken from the PromQL by
//     MetricNames. Metrics that Prometheus itself makes (up) are known;
//     metrics another change is about to add are listed, with the reason,
//     in pending-metrics.txt, and an entry whose metric is exposed fails
//     the test, so the list only shrinks.
package monitoring
