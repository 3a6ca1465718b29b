// Package tier owns the slow tier (KIP-405 style tiered storage): closed
// segments of tiered partitions in one regional bucket, a per-partition
// manifest, uploads by the partition leader, reads below the local log
// start, and tier retention. See docs/tiered-storage.md.
//
// # Layout
//
// Below tier/<cluster>/<topic>-<topicID>/<partition>/:
//
//	manifest/<leaderEpoch:010d>-<seq:020d>.json   one object per version (Manifest)
//	segments/<base:020d>-<last:020d>-<epoch>.log   the batches, as in the leader's log
//	  ... .log.index                               offset index, Kafka's 8-byte entries
//	  ... .log.timeindex                           time index, Kafka's 12-byte entries
//	  ... .log.txnindex                            aborted transactions whose marker is in
//	                                               the segment (Kafka's 34-byte entries; only
//	                                               when there are some)
//	  ... .log.producers                           the leader's idempotent-producer snapshot as
//	                                               of the segment's end (package log's format;
//	                                               only when it had one), for hydration
//
// # Consistency
//
// A manifest is never changed: each change is a new object, written with a
// conditional PUT. The newest version is the last key (highest leader
// epoch, then sequence), so a deposed leader's late writes sort below its
// successor's and are ignored; a writer that finds a newer epoch stops
// (ErrFenced). Objects are written before the manifest naming them and
// deleted after the manifest that drops them, so a manifest never names a
// missing object. Uploads start at the manifest's EndOffset, possibly
// inside a local segment (replicas roll at different offsets), so no two
// segments in a manifest overlap.
//
// # Reads
//
// Read finds the segment holding an offset in the cached manifest, the
// batch position in its offset index, and reads whole batches through a
// bounded LRU cache of aligned chunks (one ranged GET per chunk), checking
// every batch's CRC-32C. AbortedTxns answers a read_committed read from
// the segments' transaction indexes.
//
// # Hydration
//
// HydrationPlan picks the segments a follower behind the tier's end
// copies (those local retention keeps) and DownloadSegment copies one into
// a file, checked against its manifest entry (size, CRC-32C, batch frames,
// offsets) before the caller installs it; package replica appends the
// batches (replica/hydrate.go).
//
// # Transactions
//
// The caller uploads below the partition's last stable offset, so no
// undecided transaction reaches the tier and each segment's transaction
// index is final when uploaded. An entry lives with the segment of its
// ABORT marker, possibly later than the transaction's data, and past the
// tier's end in the local log: readers look through the following
// segments and then the local log's index.
package tier
