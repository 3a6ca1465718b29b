// Package group is Strata's consumer-group coordinator: the classic
// (pre-KIP-848) group membership protocol of Kafka's GroupCoordinator and
// the committed-offset store behind OffsetCommit / OffsetFetch.
//
// The package is a library independent of the network server: every API
// is a method of *Coordinator that takes a franz-go kmsg request and
// returns the kmsg response for the request's version. broker/protocol
// wires those methods to API keys 8, 9, 11-16, 42 and 47.
//
// # Membership
//
// A group moves through the states of Kafka's classic coordinator:
//
//	Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
//	  ▲                    ▲                                                     │ leader SyncGroup
//	  │                    └──────── join / leave / member expiry ◀── Stable ◀───┘
//	  └── last member leaves / expires                      DeleteGroups ──▶ Dead
//
// JoinGroup and SyncGroup block until the rebalance phase they wait for
// completes; they return early with an error when their context is
// cancelled (the connection closed). As in Kafka, a member whose JoinGroup
// connection went away still counts as joined: the result is dropped and the
// member expires after its session timeout if it never comes back.
//
// Supported: generations, leader election, protocol selection by vote over
// the protocols every member supports, KIP-394 member ids (JoinGroup v4+
// with an empty member id gets MEMBER_ID_REQUIRED), KIP-345 static
// membership (a restarting static member takes over its old member id's
// place and assignment without a rebalance when its protocols are
// unchanged; the old member id is fenced), session timeouts, rebalance
// timeouts (members that do not rejoin, or do not sync, in time are
// removed), group.initial.rebalance.delay.ms, KIP-814 SkipAssignment.
// Transactional offset commits (TxnOffsetCommit, txn.go) are kept pending
// per producer ID, persisted, and become committed offsets (or are
// dropped) when the transaction coordinator's marker arrives
// (CompleteTxn); OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for their partitions meanwhile.
//
// The KIP-848 consumer protocol (ConsumerGroupHeartbeat,
// ConsumerGroupDescribe) is served by the same groups: see consumer.go
// for its epochs, reconciliation, fencing and durability, and
// assignor.go for the server-side uniform and range assignors.
//
// KIP-932 share groups are served by a ShareCoordinator beside the
// Coordinator (share.go, share_partition.go, share_fetch.go,
// share_store.go). Group ids are shared by all types: an id names one
// group of one type, and requests of another type answer as Kafka's do
// (grouptype.go).
//
// # Concurrency
//
// Each group has one mutex (group.mu) guarding all of its state, including
// its committed offsets. The Coordinator's own mutex guards only the map of
// groups. Lock order: Coordinator.mu before group.mu; no method holds
// group.mu while waiting for a rebalance. Timers (session, rebalance, join
// delay, sync) run their callbacks on the Clock's goroutine and take
// group.mu themselves; a callback checks that the timer it belongs to is
// still the current one before acting (timers can fire after being
// replaced).
//
// # Durability
//
// Committed offsets are kept in memory per group and persisted through an
// OffsetStore before a commit is acknowledged. When the store also
// implements MembershipStore, group membership (generation, leader,
// members, assignments) is persisted at every Stable/Empty transition and
// restored on start, so a coordinator restart does not make groups
// rebalance. FileStore is the durable single-broker implementation of both
// (see its comment for the on-disk format); broker/meta/offsets keeps
// offsets in etcd for the replicated cluster.
//
// # Placement
//
// CoordinatorFor maps a group id to one of the live brokers (rendezvous
// hashing), so that coordination can move on failover. A cluster sets
// Config.OwnershipEpoch: when the live broker set changed, a group is read
// again from the shared store (GroupLoader) before it is served, so the
// broker that takes a group over serves what its previous coordinator
// committed. Before reading it, the new coordinator claims the group
// (GroupClaimer): the shared store then refuses the writes of every
// earlier coordinator (ErrFenced, answered NOT_COORDINATOR), so a broker
// with a stale view of the live brokers cannot store an old generation's
// commits over the current coordinator's.
package group
