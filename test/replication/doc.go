// Package replication holds the cluster-level replication tests: brokers
// in process (StartCluster) for the protocol, ISR, epochs, truncation,
// reassignment and WAL replication through per-zone buckets on a real
// Versity Gateway (wal_test.go), and broker subprocesses
// (StartProcessCluster) for SIGKILL/SIGSTOP failover, classic
// (failover_test.go) and with WAL uploads in flight (wal_failover_test.go,
// the gateway behind brokertest.S3Proxy). failover_helpers_test.go has what
// the failover tests share: the acknowledgement-recording producer, the
// read-back of acknowledged records and the byte comparison of the
// replicas' logs. txn_test.go replicates transactional batches and markers
// (classic, WAL, and across a leader SIGKILL) and reads them back with
// read_committed. zonelocal_test.go tests zone-local produce with franz-go,
// zonelocal_clients_test.go with kcat and confluent-kafka-python
// (librdkafka, driven through zonelocal_clients.py; skipped when the
// tool is not installed, as `make test-deps` does).
package replication
