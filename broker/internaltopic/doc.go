// Package internaltopic writes Kafka's internal topics
// (__consumer_offsets, __transaction_state) as projections of the stores
// Strata keeps their content in.
//
// In Kafka those topics are where the group and transaction coordinators
// store their state, and tools read them (Burrow reads committed offsets
// from __consumer_offsets; operators inspect __transaction_state). Strata
// keeps that state in its metadata store (etcd in a cluster, files on a
// single broker), which stays the source of truth; a Projector follows a
// store and writes what it holds into a real, replicated, compacted topic
// in Kafka's record formats, so the tools work unchanged.
//
// A Projection is the store's side (broker/offsetstopic for groups,
// broker/txntopic for transactions): it follows the store's change feed
// into an in-memory mirror and turns each change into records, each
// belonging to an owner (a group id, a transactional id) whose partition
// is abs(javaHashCode(owner)) % partitions, as in Kafka (PartitionFor).
// The Projector is the topic's side, the same for every projection: it
// creates the topic once the store holds anything, and for each partition
// it leads it first appends the whole state of that partition's owners,
// then every change, as acks=all produce requests the broker serves
// itself. A new leader thus rewrites the full state of its partitions, so
// nothing a reader needs is lost across leader changes or broken feeds; a
// reader may see a record twice (harmless for a compacted changelog). The
// projection lags the store by the feed's delay plus one produce, and is
// eventual: a record is written after the change was acknowledged to the
// client.
package internaltopic
