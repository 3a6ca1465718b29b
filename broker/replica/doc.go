// Package replica owns the replication state of the partitions a broker
// hosts: for each one whether it leads or follows, at which leader epoch,
// its high watermark (HWM), and on the leader the followers' log end
// offsets (LEOs), the in-sync replica set (ISR) and the acks=all waiters.
//
// Leader side (Kafka's Partition): replica fetches (Fetch with ReplicaID =
// the follower's broker ID) report the follower's LEO as their fetch offset
// and its last fetched epoch. The leader checks the epoch against its own
// epoch cache (OffsetForLeaderEpoch semantics) and answers with the
// divergence point instead of data when the follower's log diverged;
// otherwise it records the follower's LEO, advances the HWM to the smallest
// LEO of the maximal ISR (the ISR plus the members a pending change adds;
// never backwards), shrinks the ISR when a member has not caught up for
// replica.lag.time.max.ms or restarted (a new broker epoch, KIP-903) and
// expands it when a follower reached the HWM, both by compare-and-swap on
// the partition record in etcd (meta.Store.AlterPartition; a call without
// an answer is asked again). Replica fetches are served only to registered
// brokers carrying their current broker epoch (Manager.CheckReplicaFetcher).
// acks=all produce requests wait on the HWM (Partition.WaitHighWatermark).
//
// Follower side (Kafka's ReplicaFetcherThread): one fetcher per leader
// broker long-polls it with one Fetch for every partition this broker
// follows there, appends what it gets with log.AppendAsFollower (so the
// follower builds its own indexes, epoch cache and producer state),
// truncates to the divergence point the leader returns, and takes the
// leader's HWM (bounded by its own LEO) when it is higher than its own —
// never lower, a new leader may lag — which lets it serve consumers in
// its zone (KIP-392). A fetcher with nothing left to fetch from its leader
// retires (Manager.retire), so leaders no longer followed keep no
// goroutine or connection.
//
// HWM wakes (hwmwake.go): a follower tags the partitions consumers read
// on it (Partition.NoteConsumerRead) with TagHWMWake, so that the leader
// answers its parked fetch when the HWM moves and its consumers see new
// records at acks=all latency; other partitions wait for data as before.
//
// Hydration (hydrate.go): a follower of a tiered partition that is not in
// the ISR and ends below the slow tier's end first copies the segments
// local retention keeps from the tier bucket (verified, appended as
// follower batches), then fetches the rest from its leader
// (Config.Hydrate, tier.hydration.enable).
//
// Replication cost (walcost.go): every partition counts the bytes it
// appends as leader; once a second the manager prices them with their
// cross-zone follower copies (Config.Cost) and, with WAL on, runs the
// wal.policy decider, whose plan sets the uploader's cut and may choose
// inline replication (InlinePolicy) — not a degradation.
//
// Replication throttle (throttle.go, Kafka's KIP-73 quotas): replicas the
// topic configs mark as throttled (Partition.SetThrottled) and that are not
// in the ISR fetch (follower side) and are served (leader side, the caller
// asks Manager.LeaderQuota) within the broker's quotas
// (Manager.SetThrottleRates); in-sync replication is never throttled.
//
// Locking: each Partition has one mutex that orders role changes, appends,
// truncation and follower-state updates; the HWM is also kept in an atomic
// for lock-free reads. The Manager's mutex guards its maps only; it never
// holds it while calling into a Partition that might block on I/O.
package replica
