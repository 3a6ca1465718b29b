// Package verify is the `strata verify` workload (docs/verify.md): an
// idempotent acks=all producer and a consumer that checks, live, that
// every acknowledged record is read exactly once and in order, for as long
// as a scenario (a roll, a scale-out, a failover) runs. The e2e journey
// runs it as a pod; the envtest roll and scaling specs run it in process.
//
//   - Workload (workload.go): the producer writes records round-robin over
//     the topic's partitions, "<run> <sequence> <padding>" with a sequence
//     per partition and a random run ID (records of other runs in the same
//     topic are skipped); it counts every error answer, retried ones
//     included (from the client's log), and the longest time without an
//     acknowledgement. The consumer reads from the start and feeds the
//     checker. Drain stops producing and waits until every acknowledged
//     record was read, or a timeout: what is still missing then is lost.
//   - checker (check.go): pure, one bit per record and partition for
//     "acknowledged" and "read"; duplicates and reorderings are counted as
//     they are read, with the first examples.
//   - Runner (runner.go): a run behind HTTP: GET /status, POST /stop (the
//     final status once drained), GET /healthz.
//
// Options.Tamper lets tests alter what the consumer saw, to prove the
// checker fails when it must.
package verify
