package meta

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrNoReassignmentInProgress: a cancellation named a partition that is not
// being reassigned: NO_REASSIGNMENT_IN_PROGRESS.
var ErrNoReassignmentInProgress = errors.New("no reassignment in progress")

// Reassignment (KIP-455, what AlterPartitionReassignments drives and the
// operator's drain uses): the partition first gets the union of its old and
// target replicas; the new ones catch up as followers and their leader adds
// them to the ISR; then the controller drops the removed replicas, moving
// leadership if the leader is among them. Pure functions here, applied by
// Controller.AlterPartitionReassignments and the controller's reconcile.

// originalReplicas is the replica set before the reassignment in progress.
func originalReplicas(s PartitionState) []int32 {
	return slices.DeleteFunc(slices.Clone(s.Replicas), func(id int32) bool { return slices.Contains(s.AddingReplicas, id) })
}

// startReassignment begins moving cur to target (nil target cancels the
// reassignment in progress, returning to the original replicas). A new
// target replaces one in progress. A target that adds no replica completes
// at once when it can (see finishReassignment).
func startReassignment(cur PartitionState, target []int32, live func(int32) bool) (PartitionState, error) {
	base := originalReplicas(cur)
	if target == nil {
		if !cur.Reassigning() {
			return cur, ErrNoReassignmentInProgress
		}
		target = base
	}
	if len(target) == 0 {
		return cur, fmt.Errorf("%w: empty target replica list", ErrInvalidReplicaAssignment)
	}
	for i, id := range target {
		if slices.Index(target, id) != i {
			return cur, fmt.Errorf("%w: target %v lists broker %d twice", ErrInvalidReplicaAssignment, target, id)
		}
		if !live(id) && !slices.Contains(base, id) {
			return cur, fmt.Errorf("%w: target broker %d is not registered", ErrInvalidReplicaAssignment, id)
		}
	}
	next := cur.Clone()
	next.AddingReplicas = slices.DeleteFunc(slices.Clone(target), func(id int32) bool { return slices.Contains(base, id) })
	next.RemovingReplicas = slices.DeleteFunc(slices.Clone(base), func(id int32) bool { return slices.Contains(target, id) })
	next.Replicas = append(slices.Clone(target), next.RemovingReplicas...)
	// Replicas of an abandoned target leave the ISR with the replica set.
	next.ISR = slices.DeleteFunc(next.ISR, func(id int32) bool { return !slices.Contains(next.Replicas, id) })
	if len(next.AddingReplicas) == 0 {
		next.AddingReplicas = nil
	}
	if len(next.RemovingReplicas) == 0 {
		next.RemovingReplicas = nil
	}
	next.PartitionEpoch++
	if done, ok := finishReassignment(next, live); ok {
		done.PartitionEpoch = next.PartitionEpoch // one change, one epoch
		return done, nil
	}
	return next, nil
}

// finishReassignment completes a reassignment once every adding replica is
// in the ISR: the removing replicas leave Replicas and ISR, and if the leader
// was among them the first live target replica in the ISR leads (leader
// epoch +1). It waits (false) while an adding replica is out of the ISR or no
// target replica could lead.
func finishReassignment(cur PartitionState, live func(int32) bool) (PartitionState, bool) {
	if !cur.Reassigning() {
		return cur, false
	}
	for _, id := range cur.AddingReplicas {
		if !slices.Contains(cur.ISR, id) {
			return cur, false
		}
	}
	removing := func(id int32) bool { return slices.Contains(cur.RemovingReplicas, id) }
	next := cur.Clone()
	next.Replicas = slices.DeleteFunc(next.Replicas, removing)
	next.ISR = slices.DeleteFunc(next.ISR, removing)
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	if next.Leader == NoLeader || removing(next.Leader) {
		leader := NoLeader
		for _, id := range next.Replicas {
			if live(id) && slices.Contains(next.ISR, id) {
				leader = id
				break
			}
		}
		if leader == NoLeader {
			return cur, false
		}
		next.Leader = leader
		next.LeaderEpoch++
	}
	next.PartitionEpoch++
	return next, true
}

// controllerWants is the controller's full decision for one partition:
// leader and ISR health first, then reassignment completion. A leader whose
// registration epoch differs from the one it was elected under restarted
// since: it is not a candidate in this decision (another ISR member leads,
// or the partition goes offline and the restarted broker is elected on the
// next pass, with a new leader epoch either way).
//
// The same holds for every ISR member (KIP-903): one registered under
// another epoch than it joined the ISR with restarted since, may have lost
// an unflushed tail, and counts as dead: it leaves the ISR and is not
// elected while a current member is alive. Only when the partition is
// offline and no current ISR member is alive may a restarted member lead
// (all that is left of the ISR, as with a restarted leader); its leader
// then re-admits the others once they caught up.
func controllerWants(cur PartitionState, brokers map[int32]BrokerInfo, unclean bool) (PartitionState, bool) {
	registered := func(id int32) bool { _, ok := brokers[id]; return ok }
	current := currentIn(cur, brokers)
	live := current
	if cur.Leader == NoLeader && !slices.ContainsFunc(cur.ISR, current) && slices.ContainsFunc(cur.ISR, registered) {
		live = registered
	}
	next, changed := controllerDecides(cur, live, unclean)
	next, changed = handOffLeadership(cur, next, changed, brokers, current)
	if changed {
		if next.Leader != NoLeader {
			// A restarted member elected as the last resort leads alone
			// (an offline partition keeps its ISR as it was).
			next.ISR = slices.DeleteFunc(next.ISR, func(id int32) bool { return id != next.Leader && !current(id) })
		}
		next = stampLeader(cur, next, brokers)
		next = next.withISREpochs(next.ISREpoch)
	}
	return next, changed
}

// currentIn reports whether a broker is registered under the incarnation
// cur knows: the one it was elected leader under, or joined the ISR under
// (0, unknown, is not checked). Another one restarted since.
func currentIn(cur PartitionState, brokers map[int32]BrokerInfo) func(int32) bool {
	return func(id int32) bool {
		b, ok := brokers[id]
		switch {
		case !ok:
			return false
		case id == cur.Leader && cur.LeaderBrokerEpoch != 0 && b.Epoch != cur.LeaderBrokerEpoch:
			return false
		case cur.ISREpoch(id) != 0 && b.Epoch != cur.ISREpoch(id) && slices.Contains(cur.ISR, id):
			return false
		}
		return true
	}
}

// electPreferred is preferred-leader election (ElectLeaders PREFERRED and
// auto.leader.rebalance): a preferred replica that restarted since it
// joined the ISR is not a candidate (KIP-903; the controller removes it),
// nor is one in controlled shutdown (its leaderships are being moved away;
// electing it again would undo that, and with auto.leader.rebalance the
// two would alternate until it stops).
func electPreferred(cur PartitionState, brokers map[int32]BrokerInfo) (PartitionState, error) {
	if len(cur.Replicas) > 0 && cur.Leader != cur.Replicas[0] && brokers[cur.Replicas[0]].ShuttingDown {
		return cur, fmt.Errorf("%w: broker %d is shutting down", ErrPreferredLeaderNotAvailable, cur.Replicas[0])
	}
	return preferredLeader(cur, currentIn(cur, brokers))
}

// handOffLeadership is the controlled-shutdown rule, applied to the
// controller's decision next (changed: next differs from cur): a leader in
// controlled shutdown hands leadership to the first replica, in preferred
// order, that is in the ISR, current (see currentIn) and not shutting down
// itself; the ISR is kept (the broker still replicates until it stops, and
// leaves the ISR when it deregisters). Without such a member the leader
// stays: a partition led by a broker about to stop beats one offline now.
func handOffLeadership(cur, next PartitionState, changed bool, brokers map[int32]BrokerInfo, current func(int32) bool) (PartitionState, bool) {
	if next.Leader == NoLeader || !brokers[next.Leader].ShuttingDown {
		return next, changed
	}
	for _, id := range next.Replicas {
		if id == next.Leader || !slices.Contains(next.ISR, id) || !current(id) || brokers[id].ShuttingDown {
			continue
		}
		out := next.Clone()
		out.Leader = id
		if out.LeaderEpoch == cur.LeaderEpoch {
			out.LeaderEpoch++
		}
		if !changed {
			out.PartitionEpoch++
		}
		return out, true
	}
	return next, changed
}

// HandoffDone reports whether broker id, in controlled shutdown, has
// nothing more to wait for in st: it leads no partition the controller
// will move (LeaderHandoff), or the controller is a broker that does not
// move leaderships off brokers shutting down (registered without
// ControlledShutdown: an older version, during a rolling upgrade), which
// oldController then names (-1 otherwise).
func HandoffDone(st *ClusterState, id int32) (done bool, oldController int32) {
	if c, ok := st.Brokers[st.ControllerID]; ok && !c.ControlledShutdown {
		return true, c.ID
	}
	moving, _ := LeaderHandoff(st, id)
	return len(moving) == 0, -1
}

// LeaderHandoff splits the partitions broker id leads in st into those
// the controller moves away while id is in controlled shutdown (another
// ISR member can lead) and those it keeps (no other eligible ISR member:
// the partition stays led by id until it stops). A broker in controlled
// shutdown waits until moving is empty.
func LeaderHandoff(st *ClusterState, id int32) (moving, staying []TopicPartition) {
	brokers := maps.Clone(st.Brokers)
	if b, ok := brokers[id]; ok {
		b.ShuttingDown = true // as the controller will see it
		brokers[id] = b
	}
	for _, tp := range st.SortedPartitions() {
		cur, _ := st.Partition(tp)
		if cur.Leader != id {
			continue
		}
		if next, _ := handOffLeadership(cur, cur, false, brokers, currentIn(cur, brokers)); next.Leader != id {
			moving = append(moving, tp)
		} else {
			staying = append(staying, tp)
		}
	}
	return moving, staying
}

// stampLeader records the new leader's registration epoch when leadership
// changed from cur to next.
func stampLeader(cur, next PartitionState, brokers map[int32]BrokerInfo) PartitionState {
	if next.Leader == cur.Leader && next.LeaderEpoch == cur.LeaderEpoch {
		return next
	}
	next.LeaderBrokerEpoch = 0
	if b, ok := brokers[next.Leader]; ok {
		next.LeaderBrokerEpoch = b.Epoch
		if e, ok := next.ISREpochs[next.Leader]; ok && e != b.Epoch {
			// A restarted member elected as the last resort: its new
			// incarnation is the one in the ISR from now on.
			next = next.Clone()
			next.ISREpochs[next.Leader] = b.Epoch
		}
	}
	return next
}

func controllerDecides(cur PartitionState, live func(int32) bool, unclean bool) (PartitionState, bool) {
	next, changed := reconcilePartition(cur, live, unclean)
	if done, ok := finishReassignment(next, live); ok {
		// One write, one step of each epoch.
		done.PartitionEpoch = cur.PartitionEpoch + 1
		done.LeaderEpoch = cur.LeaderEpoch
		if done.Leader != cur.Leader {
			done.LeaderEpoch++
		}
		return done, true
	}
	return next, changed
}
