// Package txn is Strata's transaction coordinator: the coordinator side of
// Kafka transactions (KIP-98) for every transactional.id this broker
// coordinates. broker/protocol wires its methods to InitProducerId (22,
// with a transactional ID), AddPartitionsToTxn (24, including the KIP-890
// VerifyOnly batches brokers send), AddOffsetsToTxn (25), EndTxn (26),
// DescribeTransactions (65) and ListTransactions (66). The partition side
// (transactional produce, control batches, the last stable offset,
// read_committed fetches) lives in broker/log and the Produce/Fetch
// handlers; the consumer-group side of TxnOffsetCommit in broker/group.
//
// # State machine
//
// Each transactional ID has one Metadata record, moved through Kafka's
// states:
//
//	Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
//	  ▲                                   │    └──EndTxn(abort) / timeout / InitProducerId──▶ PrepareAbort ──markers──▶ CompleteAbort
//	  └────────── InitProducerId (epoch bump) ◀── Complete* ──AddPartitions──▶ Ongoing
//	Empty / Complete* ──transactional.id.expiration.ms idle──▶ removed
//
// A transition is persisted in the Store before it is answered. After
// EndTxn persisted Prepare*, the coordinator answers the client and writes
// the transaction markers (MarkerWriter): WriteTxnMarkers to each
// partition's leader and the commit or abort of the transaction's pending
// group offsets at each group's coordinator, retrying until every one was
// acknowledged, then persists Complete*. The producer may start its next
// transaction meanwhile; AddPartitionsToTxn answers CONCURRENT_TRANSACTIONS
// until the markers are written (the client retries).
//
// Fencing: InitProducerId bumps the producer epoch (a new producer ID when
// the epoch would overflow); requests with an older epoch get
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for clients too old to know it).
// A transaction that stays Ongoing longer than its timeout is aborted by
// the coordinator with the epoch bumped, so its producer is fenced (as
// Kafka's abortTimedOutTransactions does). KIP-360: a producer that
// presents its current producer ID and epoch (or the previous epoch, a
// retried InitProducerId) to InitProducerId keeps its ID.
//
// # Placement and failover
//
// Transactional IDs are placed like groups (group.CoordinatorFor over the
// live brokers). Every change goes to the Store with a compare-and-swap on
// the record's revision, so two brokers that both believe they coordinate
// an ID (while their cluster views differ) cannot both change it: the
// loser answers NOT_COORDINATOR. When the ownership epoch changes (the set
// of live brokers changed), cached records are read again from the store
// before use, and the coordinator takes over the IDs now placed on it:
// Prepare* transactions a dead coordinator left are finished (markers
// written again; markers are idempotent on the partition side).
//
// # Concurrency
//
// One mutex per transactional ID (entry.mu) guards its Metadata; the
// Coordinator's mutex guards only the map of entries. Lock order:
// Coordinator.mu before entry.mu; no lock is held while markers are sent.
package txn
