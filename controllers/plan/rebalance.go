package plan

import (
	"fmt"
	"slices"

	"github.com/strata-dev/strata/broker/placement"
)

// Rebalance is RebalanceMoves' answer.
type Rebalance struct {
	// Moves are the reassignments to start now.
	Moves []placement.Move
	// InFlight is the number of reassignments in flight.
	InFlight int
	// Planned counts the replica moves (reassignments that copy data) the
	// whole plan still makes, the ones in Moves included; PlannedBytes is
	// what they copy.
	Planned      int
	PlannedBytes int64
	// BytesLeft is what the rebalance still has to copy: PlannedBytes plus
	// what the new replicas of the reassignments in flight still lack.
	BytesLeft int64
	// Reason says what the answer is and why.
	Reason string
	// Waiting says that no move is planned because the plan waits for
	// something (a broker to register, a drain, an assignment it cannot
	// compute), not because the brokers are balanced: a rebalance under
	// way is not done. A broker whose registration lapses for a moment
	// on a loaded machine must not end a scale-up's rebalance half way.
	Waiting bool
}

// RebalanceMoves decides the scale-up moves: replicas, bytes and
// preferred leaders spread onto the wanted brokers with
// placement.Rebalance (one replica per zone kept; replica counts within
// one per broker, then bytes within placement.ByteTolerance where the
// partition sizes allow; sizes from Partition.Sizes, counts only when
// unknown). The rules:
//
//  1. Only when every wanted broker is registered (a new broker takes
//     replicas once it is up) and no broker is to be removed (NextDrain
//     goes first: moving replicas onto a broker about to be drained is
//     wasted work).
//  2. At most maxInFlight reassignments in flight (0: no cap); in-flight
//     ones count against it, and partitions with one in flight are not
//     moved again (placement sees them pinned at the replica list they
//     end with). Replica moves are capped, not pure reorderings of a
//     replica list (a preferred-leader change moves no data); those are
//     returned too and finish at once.
//  3. The capped moves are the first steps of the plan, and the plan is
//     a function of the assignment reached, so the next call, once they
//     are done, goes on where they stopped; a balanced cluster gets no
//     moves. Planned and BytesLeft describe the whole plan, for status.
func RebalanceMoves(wanted []Wanted, md Metadata, maxInFlight int) Rebalance {
	inFlight := 0
	for _, p := range md.Partitions {
		if p.Reassigning() {
			inFlight++
		}
	}
	r := Rebalance{InFlight: inFlight, BytesLeft: md.bytesInFlight()}
	want := map[int32]bool{}
	var brokers []placement.Broker
	for _, w := range wanted {
		want[w.ID] = true
		if !md.registered(w.ID) {
			r.Reason, r.Waiting = fmt.Sprintf("waiting for broker %d of zone %q to register", w.ID, w.Zone), true
			return r
		}
		brokers = append(brokers, placement.Broker{ID: w.ID, Zone: w.Zone})
	}
	for _, b := range md.Brokers {
		if !want[b.ID] {
			r.Reason, r.Waiting = fmt.Sprintf("broker %d is to be removed: draining goes first", b.ID), true
			return r
		}
	}
	var parts []placement.Partition
	for _, p := range md.sortedPartitions() {
		for _, id := range p.Replicas {
			if !want[id] {
				r.Reason, r.Waiting = fmt.Sprintf("partition %s has a replica on broker %d, which is to be removed: draining goes first", p, id), true
				return r
			}
		}
		parts = append(parts, p.placement())
	}
	whole, err := placement.Rebalance(brokers, parts, 0)
	if err != nil {
		r.Reason, r.Waiting = fmt.Sprintf("cannot compute moves: %v", err), true
		return r
	}
	r.Planned, r.PlannedBytes = md.movedBytes(whole)
	r.BytesLeft += r.PlannedBytes
	budget := 0 // no cap
	if maxInFlight > 0 {
		budget = maxInFlight - inFlight
		if budget <= 0 {
			r.Reason = fmt.Sprintf("%d reassignments in flight, the cap is %d; %d replica moves planned", inFlight, maxInFlight, r.Planned)
			return r
		}
	}
	moves := whole
	if budget > 0 {
		if moves, err = placement.Rebalance(brokers, parts, budget); err != nil {
			r.Reason, r.Waiting = fmt.Sprintf("cannot compute moves: %v", err), true
			return r
		}
	}
	dataMoves := 0
	for _, m := range moves {
		if !sameSet(m.From, m.To) {
			if budget > 0 && dataMoves == budget {
				continue
			}
			dataMoves++
		}
		r.Moves = append(r.Moves, m)
	}
	if len(r.Moves) == 0 {
		r.Reason = "balanced: no move needed"
		if inFlight > 0 {
			r.Reason = fmt.Sprintf("%d reassignments in flight; nothing else to move", inFlight)
		}
		return r
	}
	r.Reason = fmt.Sprintf("%d replica moves and %d leader reorderings to start, %d reassignments in flight; %d replica moves (%d bytes) planned",
		dataMoves, len(r.Moves)-dataMoves, inFlight, r.Planned, r.PlannedBytes)
	return r
}

func sameSet(a, b []int32) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
