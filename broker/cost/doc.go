// Package cost prices replication and chooses the cheaper path.
//
// Prices is the price table (defaults: S3 Express One Zone and AWS
// cross-AZ transfer, issue #15): what a PUT, a GET and a byte crossing a
// zone boundary cost, and from them the break-even object size, below
// which a WAL object costs more than sending its bytes to the other
// zones' followers. Brokers read it from the cost.price.* config keys
// (SetKey); the operator renders those from KafkaCluster.spec.cost.prices.
//
// Meter turns what a broker did (bytes appended as leader, cross-zone
// replication bytes sent, object-store calls) into Prometheus counters in
// bytes and in US dollars:
//
//	strata_replication_produced_bytes_total
//	strata_replication_classic_bytes_total
//	strata_replication_cross_zone_bytes_total
//	strata_replication_cost_usd_total{path="wal"|"inline"|"classic_equivalent"}
//
// Decider is the wal.policy state machine (latency | cost | auto): a pure
// function of the observed leader throughput and the clock, so it is
// tested with table tests and no broker. See docs/wal.md "Cost and
// wal.policy".
package cost
