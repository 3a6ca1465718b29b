// Package e2e is the user's journey of issue #13 on a real Kubernetes:
// the 3-zone cluster `make e2e-up` starts on this machine (hack/e2e,
// docs/e2e.md), driven from the host as a user would drive it.
//
// TestJourney (build tag e2e; `make e2e` runs it) applies the operator
// with `kubectl apply -k`, a KafkaCluster of three zones x one broker with
// WAL replication and a KafkaTopic, starts a `strata verify` workload in
// zone a, then scales zone b up and down, rolls the brokers for a config
// change, deletes a broker pod, deletes the operator pod in the middle of
// a roll, and deletes the KafkaCluster. Throughout, a watcher outside the
// operator records how many brokers were down at every moment; after every
// step the workload's /status must show no loss. It writes
// bin/e2e/report.json, and on failure dumps logs, events and the custom
// resources under bin/e2e/dump/.
//
// Nothing here builds without the tag: `go test ./...` does not need a
// cluster.
package e2e
