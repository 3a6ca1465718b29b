// Package bench is the load and measurement tool behind `strata bench`.
//
// A run has one or more modes. A mode is either an external cluster
// (`--bootstrap`) or an embedded cluster started per mode by a
// ClusterStarter (today: `strata dev` as a subprocess, see DevStarter).
// For each mode the package
//
//   - creates a fresh topic with kadm (partitions, replication factor),
//   - drives a franz-go load: N producer clients and M consumer clients
//     with direct partition assignment, a target rate or as fast as
//     possible with bounded in-flight records, a warmup and a measured
//     window,
//   - records produce latency (Produce call, or its scheduled time under a
//     target rate, to the promise) and end-to-end latency (a wall-clock
//     timestamp embedded in each record value, read by the consumer) in HDR
//     histograms,
//   - scrapes every broker's Prometheus /metrics before and after the
//     measured window and turns counter deltas into traffic figures:
//     inter-broker cross-zone bytes per produced byte, object PUTs/s per
//     broker and GETs/s,
//
// and the Report puts the modes side by side with the ratio of each mode
// to the first (WAL/classic). A figure whose metric is not exported is
// reported as absent ("n/a"), never as zero.
package bench
