package meta

import (
	"fmt"
	"slices"
)

// The controller's and the leaders' decisions, as pure functions of a
// partition's state and the set of live brokers. Table-tested in
// election_test.go; the etcd code only applies what these return.

// reconcilePartition returns the state the controller wants for a partition
// given which brokers are alive, and whether it differs from cur:
//
//   - the leader is alive, a replica and in the ISR: dead brokers leave the ISR
//     (partition epoch +1, leader epoch unchanged);
//   - otherwise a new leader is the first replica (preferred order) that is
//     alive and in the ISR; the ISR keeps its live members; leader epoch +1;
//   - no ISR member alive: with unclean election the first live replica
//     leads with ISR [itself]; without, the partition goes offline
//     (NoLeader, leader epoch +1) and its ISR is kept, since only those
//     replicas may lead without losing acknowledged data. An offline
//     partition whose ISR member comes back is elected again.
func reconcilePartition(cur PartitionState, live func(int32) bool, unclean bool) (PartitionState, bool) {
	liveISR := slices.DeleteFunc(slices.Clone(cur.ISR), func(id int32) bool { return !live(id) })
	next := cur.Clone()
	if cur.Leader != NoLeader && live(cur.Leader) && slices.Contains(cur.ISR, cur.Leader) && slices.Contains(cur.Replicas, cur.Leader) {
		if len(liveISR) == len(cur.ISR) {
			return cur, false
		}
		next.ISR = liveISR
		next.PartitionEpoch++
		return next, true
	}
	for _, id := range cur.Replicas {
		if slices.Contains(liveISR, id) {
			next.Leader = id
			next.ISR = liveISR
			next.LeaderEpoch++
			next.PartitionEpoch++
			return next, true
		}
	}
	if unclean {
		for _, id := range cur.Replicas {
			if live(id) {
				next.Leader = id
				next.ISR = []int32{id}
				next.LeaderEpoch++
				next.PartitionEpoch++
				return next, true
			}
		}
	}
	if cur.Leader == NoLeader {
		return cur, false
	}
	next.Leader = NoLeader
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, true
}

// preferredLeader moves leadership to the preferred replica (Replicas[0]) if
// it is alive and in the ISR.
func preferredLeader(cur PartitionState, live func(int32) bool) (PartitionState, error) {
	if len(cur.Replicas) == 0 {
		return cur, fmt.Errorf("%w: no replicas", ErrPreferredLeaderNotAvailable)
	}
	preferred := cur.Replicas[0]
	if cur.Leader == preferred {
		return cur, ErrElectionNotNeeded
	}
	if !live(preferred) {
		return cur, fmt.Errorf("%w: broker %d is not registered", ErrPreferredLeaderNotAvailable, preferred)
	}
	if !slices.Contains(cur.ISR, preferred) {
		return cur, fmt.Errorf("%w: broker %d is not in the ISR %v", ErrPreferredLeaderNotAvailable, preferred, cur.ISR)
	}
	next := cur.Clone()
	next.Leader = preferred
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, nil
}

// checkAlterPartition validates a leader's proposed ISR change against the
// current state (KIP-497 rules): same leader, leader epoch and replicas; the
// ISR is a duplicate-free subset of the replicas that contains the leader.
// It returns the state to write (partition epoch +1) and the brokers the ISR
// gains, which must be registered (under the epoch proposed.ISREpochs
// names for them, when it names one).
func checkAlterPartition(cur, proposed PartitionState) (next PartitionState, added []int32, err error) {
	switch {
	case cur.Leader == NoLeader:
		return cur, nil, fmt.Errorf("%w: partition has no leader", ErrInvalidAlterPartition)
	case proposed.Leader != cur.Leader:
		return cur, nil, fmt.Errorf("%w: only the ISR may change (leader %d -> %d)", ErrInvalidAlterPartition, cur.Leader, proposed.Leader)
	case !slices.Equal(proposed.Replicas, cur.Replicas):
		return cur, nil, fmt.Errorf("%w: only the ISR may change (replicas %v -> %v)", ErrInvalidAlterPartition, cur.Replicas, proposed.Replicas)
	case !slices.Contains(proposed.ISR, cur.Leader):
		return cur, nil, fmt.Errorf("%w: ISR %v lacks the leader %d", ErrInvalidAlterPartition, proposed.ISR, cur.Leader)
	}
	for i, id := range proposed.ISR {
		if !slices.Contains(cur.Replicas, id) {
			return cur, nil, fmt.Errorf("%w: ISR member %d is not a replica %v", ErrInvalidAlterPartition, id, cur.Replicas)
		}
		if slices.Index(proposed.ISR, id) != i {
			return cur, nil, fmt.Errorf("%w: ISR %v lists %d twice", ErrInvalidAlterPartition, proposed.ISR, id)
		}
		if !slices.Contains(cur.ISR, id) {
			added = append(added, id)
		}
	}
	next = cur.Clone()
	next.ISR = slices.Clone(proposed.ISR)
	next.PartitionEpoch++
	// Members that stay keep the epoch they joined under; members that
	// join bring the one the leader saw in their fetches (KIP-903).
	next = next.withISREpochs(func(id int32) int64 {
		if slices.Contains(cur.ISR, id) {
			return cur.ISREpoch(id)
		}
		return proposed.ISREpoch(id)
	})
	return next, added, nil
}

// uncleanLeader is ElectLeaders with type UNCLEAN: when no ISR member is
// alive, the first live replica leads with ISR [itself] (acknowledged writes
// it lacks are lost). With a live ISR member it elects that one instead, as
// the controller would; with a healthy leader nothing is needed.
func uncleanLeader(cur PartitionState, live func(int32) bool) (PartitionState, error) {
	if cur.Leader != NoLeader && live(cur.Leader) && slices.Contains(cur.ISR, cur.Leader) {
		return cur, ErrElectionNotNeeded
	}
	next, changed := reconcilePartition(cur, live, true)
	if !changed || next.Leader == NoLeader {
		return cur, fmt.Errorf("%w: no live replica among %v", ErrEligibleLeadersNotAvailable, cur.Replicas)
	}
	return next, nil
}
