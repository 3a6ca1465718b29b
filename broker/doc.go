// Package broker is the state of one Strata broker: its identity, its topics
// and their partitions, topic configuration and the data directory that
// persists them. The Kafka protocol handlers (broker/protocol) call it; the
// process assembly (broker/server) opens and closes it.
//
// # Data directory
//
//	<dir>/strata-meta.json      cluster ID, node ID, producer-ID block, topics
//	                            (name, UUID, partition count, config overrides);
//	                            rewritten atomically (temp file, fsync, rename,
//	                            directory fsync) on every change
//	<dir>/<topic>-<partition>/  one log per partition (package broker/log)
//	<dir>/.lock                 flock held while a broker has the dir open
//
// On open, every topic in strata-meta.json gets its partition logs opened
// (recovered by package log); partition directories of topics that are not
// in the metadata (left by a delete interrupted by a crash) are removed.
//
// # Concurrency
//
// Broker.mu guards the topic map, each topic's partition slice and config
// overrides, and the metadata file. A partition's log synchronises itself;
// Broker.mu is never held while appending or reading records.
package broker
