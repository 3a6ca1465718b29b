// Package placement decides where the replicas and preferred leaders of a
// topic's partitions go. It is pure: no I/O, no clocks, no randomness; the
// same input always yields the same assignment, so every rule is pinned by a
// table test.
//
// Rules, in priority order:
//
//  1. The replicas of one partition sit on distinct brokers, and in distinct
//     zones whenever there are at least as many zones as replicas; with fewer
//     zones they spread as evenly over the zones as the replication factor
//     allows.
//  2. The preferred leader (the first replica) of each partition is chosen so
//     that preferred leaders are balanced across zones (in proportion to the
//     brokers a zone has) and across brokers, or pinned to a topic's leader
//     zone when it names one.
//  3. Replicas are spread evenly across brokers, first within the topic, then
//     across the cluster (Request.ClusterLoad), so that many small topics do
//     not all land on the lowest broker IDs.
//
// Adding partitions to an existing topic (Request.Existing) continues from the
// counts of the existing assignment, so the topic stays balanced.
//
// Drain computes the moves that take every replica off a set of brokers (the
// operator's scale-down), keeping rules 1 and 2. Rebalance computes the moves
// that spread replicas and preferred leaders onto new brokers (scale-up).
// Both also balance bytes when partitions carry their Size (the operator
// reads it with DescribeLogDirs): Rebalance evens replica counts to within
// one, then narrows byte differences above ByteTolerance with single moves
// and swaps that keep the counts; Drain sends the largest partitions first,
// each to the broker with the fewest bytes among those with nearly the
// fewest replicas. With every size 0 both balance counts only.
// LeaderZoneTarget computes the replica list that brings a partition's
// preferred leader into its topic's leader zone (a reorder when a replica
// is there already, else one replica replaced), which the controller
// applies when a topic's leader zone changes or a partition drifted.
//
// A replication factor larger than the number of brokers fails with
// ErrInvalidReplicationFactor, which the broker maps to the Kafka error code
// INVALID_REPLICATION_FACTOR.
package placement
