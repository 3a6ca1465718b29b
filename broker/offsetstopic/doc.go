// Package offsetstopic serves Kafka's __consumer_offsets topic.
//
// In Kafka that topic is where the group coordinator stores committed
// offsets and group membership; tools such as Burrow (the lag monitor)
// read it, and `kcat -C -t __consumer_offsets` shows the commits. Strata
// keeps offsets and membership in its metadata store (etcd in a cluster,
// a log file on a single broker; broker/group, broker/meta/offsets), which
// stays the source of truth. This package writes a projection of that
// store into a real, replicated, compacted topic named __consumer_offsets,
// with Kafka's record formats, so those tools work unchanged:
//
//   - offset commits: key version 1 (group, topic, partition), value
//     version 3 (offset, leader epoch, metadata, commit timestamp); a
//     deleted offset is a tombstone;
//   - classic group membership: key version 2 (group), value version 3;
//     a deleted group is a tombstone. KIP-848 consumer-protocol groups
//     get their offsets written, not their membership (Kafka writes other
//     record types for them, which the tools do not decode).
//
// A group's records go to partition abs(javaHashCode(group)) % partitions,
// as in Kafka. The topic (offsets.topic.num.partitions, default 10, and
// offsets.topic.replication.factor, default 3 capped at the live brokers;
// cleanup.policy=compact) is created by the first broker that sees a
// group in the store, or on a Metadata request naming it (CreateTopic). It is internal: Metadata flags it so, clients may
// read it (with DESCRIBE/READ ACLs like any topic) but not write, delete
// or grow it.
//
// Every broker runs a Projector: it follows the store (an etcd watch in a
// cluster; a poll of the file store on a single broker) into an in-memory
// mirror, and for each partition of the topic it leads it first appends
// the whole state of that partition's groups, then every change, as
// acks=all produce requests the broker serves itself. A new leader thus
// rewrites the full state of its partitions, so nothing a reader needs is
// lost across leader changes or broken watches; a reader may see a
// record twice (harmless for a compacted changelog). The projection lags
// the store by the watch delay plus one produce (tens of milliseconds), is
// eventual rather than transactional (a record is written after the
// commit was acknowledged to the client), and a group deleted while no
// broker led its partition keeps its last records until it is written
// again.
package offsetstopic
