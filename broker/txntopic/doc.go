// Package txntopic serves Kafka's __transaction_state topic.
//
// In Kafka that topic is where the transaction coordinators store each
// transactional id's state; operators and tools read it to see which
// producers hold transactions open (Kafka's TransactionLogMessageFormatter,
// kcat piping to a decoder). Strata keeps that state in its metadata
// store (etcd in a cluster, a file on a single broker; broker/txn,
// broker/meta/txnstate), which stays the source of truth. This package
// projects it into a real, replicated, compacted topic named
// __transaction_state, written by broker/internaltopic's Projector, with
// Kafka's record format:
//
//   - key version 0 (the transactional id);
//   - value version 0 (producer id and epoch, timeout, state as Kafka
//     numbers it, the transaction's partitions by topic, last update and
//     start timestamps). A transaction that commits group offsets
//     (AddOffsetsToTxn) lists the group's __consumer_offsets partition, as
//     Kafka's does. Version 0 is what a Kafka coordinator writes at
//     transaction.version 0, the version Strata advertises;
//   - an expired transactional id is a tombstone.
//
// A transactional id's records go to partition
// abs(javaHashCode(id)) % partitions, as in Kafka. The topic
// (transaction.state.log.num.partitions, default 10 rather than Kafka's
// 50; transaction.state.log.replication.factor, default 3 capped at the
// live brokers; cleanup.policy=compact) is created by the first broker
// that sees a transactional id in the store, or on a Metadata request
// naming it. It is internal: clients may read it but not write, delete or
// grow it.
package txntopic
