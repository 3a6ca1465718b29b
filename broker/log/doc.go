// Package log owns one partition's local log: a directory of segment files
// with sparse offset and time indexes, crash recovery, roll, retention,
// truncation, the leader epoch cache and idempotent producer state.
//
// # On-disk format
//
// A partition directory holds, Kafka style:
//
//	00000000000000000000.log        record batches exactly as validated and
//	                                stamped (magic v2, see package record);
//	                                never recompressed, never split across files
//	00000000000000000000.index      sparse offset index: 8-byte entries
//	                                relativeOffset uint32 | position uint32,
//	                                one per IndexIntervalBytes, keyed by the
//	                                indexed batch's last offset
//	00000000000000000000.timeindex  sparse time index: 12-byte entries
//	                                maxTimestampSoFar int64 | relativeOffset uint32
//	00000000000000000000.txnindex   aborted transactions whose ABORT marker is in
//	                                the segment: 34-byte entries version int16 (0) |
//	                                producerId int64 | firstOffset int64 |
//	                                lastOffset int64 | lastStableOffset int64
//	leader-epoch-checkpoint         "0\n<n>\n<epoch> <startOffset>\n..."
//	log-start-offset-checkpoint     "0\n<logStartOffset>\n"
//	00000000000000004211.snapshot   idempotent producer state as of that offset,
//	                                open transactions' first offsets included
//	                                (JSON lines + CRC-32C trailer), written at
//	                                each roll and on Close
//	.clean-shutdown                 written by Close, removed by Open
//	cleaner-offset-checkpoint       compacted logs: "0\n<firstDirty>\n<n>\n<end> <ms>\n..."
//	cleaner-swap                    "<base> <end>\n" while a cleaned segment is swapped in
//
// Segment names are the 20-digit base offset. All integers are big endian.
// Small files are replaced atomically (write temp, fsync, rename, fsync dir).
//
// # Durability
//
// Config.FlushInterval is the fsync policy: > 0 fsyncs dirty data from one
// goroutine per log at that interval (default 1s), 0 fsyncs inside every
// append before it returns, < 0 leaves it to rolls and Close. FlushMessages
// adds a record-count trigger. A segment is always fsynced (data and both
// indexes) before the next one is created, and the directory is fsynced
// after every file creation, removal or rename. acks=all durability across
// machines comes from replication, not from fsync.
//
// # Recovery
//
// Because every segment but the last was fsynced before its successor was
// created, Open re-reads only the last segment after a crash (no
// .clean-shutdown): every batch's frame, CRC-32C and offsets are checked,
// indexes are rebuilt, and the first bad batch and everything after it is
// truncated (a torn write). Missing or inconsistent indexes of any segment
// are rebuilt by scanning; a bad batch met while rebuilding a segment other
// than the last is returned as *CorruptionError (file and byte offset)
// instead of being deleted. docs/storage.md has the table of outcomes.
//
// # Idempotent producers
//
// Per producer id the log keeps the epoch and the last five batches'
// sequence ranges and offsets. AppendAsLeader rejects a batch with an older
// epoch (ErrInvalidProducerEpoch), a sequence that does not follow the last
// one or a new epoch not starting at 0 (ErrOutOfOrderSequence), and answers
// an exact retry of one of the last five batches with ErrDuplicateSequence
// plus the original offsets. Followers only track. The state is rebuilt on
// Open and after TruncateTo from the newest snapshot at or below the log
// end plus a header scan of the batches after it; producers whose last
// batch falls below the log start are forgotten.
//
// # Transactions
//
// A producer's first transactional batch opens its transaction in the
// log; its COMMIT or ABORT control batch (marker) closes it. The log keeps
// the open transactions (in producer state and its snapshots), the
// completed ones whose marker may still be above the high watermark, and
// the aborted-transaction index per segment (.txnindex, also in memory).
// LastStableOffset(hwm) is the LSO, AbortedTxns serves read_committed
// fetches. Open rebuilds the index entries of the batches it replays, and
// a segment's missing or bad .txnindex from the snapshot at or below its
// base (txn.go, docs/transactions.md).
//
// # Compaction
//
// Logs with Config.Compact are cleaned by Clean (cleaner.go, Kafka's log
// cleaner): the latest record of each key is kept, offsets never move
// (rewritten batches keep their base and last offsets, so reads and
// follower appends see gaps), tombstones go DeleteRetention after the
// cleaner first reached them, each idempotent producer's last batch stays.
// A rewritten group of segments is swapped in through <base>.log.cleaned,
// the cleaner-swap commit file and .swap renames; Open finishes or drops an
// interrupted swap. cleaner-offset-checkpoint holds the first dirty offset
// and the tombstone horizons. A log without Config.Delete ignores
// RetentionMs and RetentionBytes. Nothing at or above the first unstable
// offset is cleaned, aborted transactional records are dropped, and a
// marker whose transaction has no data left is stamped with a delete
// horizon (KIP-534, in the batch) and dropped by a clean after it.
//
// # Concurrency
//
// A Log is safe for concurrent use; see the Log type for the two locks and
// who holds them. Readers use ReadAt on the files and never read past the
// committed size, so they never see a partial batch and do not block
// appends.
package log
