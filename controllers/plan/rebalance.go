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
	// Reason says what the answer is and why.
	Reason string
}

// RebalanceMoves decides the scale-up moves: replicas and preferred
// leaders spread onto the wanted brokers with placement.Rebalance (one
// replica per zone kept; count balance per broker). The rules:
//
//  1. Only when every wanted broker is registered (a new broker takes
//     replicas once it is up) and no broker is to be removed (NextDrain
//     goes first: moving replicas onto a broker about to be drained is
//     wasted work).
//  2. At most maxInFlight reassignments in flight (0: no cap); in-flight
//     ones count against it, and partitions with one in flight are not
//     moved again. Replica moves are capped, not pure reorderings of a
//     replica list (a preferred-leader change moves no data); those are
//     returned too and finish at once.
func RebalanceMoves(wanted []Wanted, md Metadata, maxInFlight int) Rebalance {
	inFlight := 0
	reassigning := map[string]bool{}
	for _, p := range md.Partitions {
		if p.Reassigning() {
			inFlight++
			reassigning[p.String()] = true
		}
	}
	r := Rebalance{InFlight: inFlight}
	want := map[int32]bool{}
	var brokers []placement.Broker
	for _, w := range wanted {
		want[w.ID] = true
		if !md.registered(w.ID) {
			r.Reason = fmt.Sprintf("waiting for broker %d of zone %q to register", w.ID, w.Zone)
			return r
		}
		brokers = append(brokers, placement.Broker{ID: w.ID, Zone: w.Zone})
	}
	for _, b := range md.Brokers {
		if !want[b.ID] {
			r.Reason = fmt.Sprintf("broker %d is to be removed: draining goes first", b.ID)
			return r
		}
	}
	var parts []placement.Partition
	for _, p := range md.sortedPartitions() {
		for _, id := range p.Replicas {
			if !want[id] {
				r.Reason = fmt.Sprintf("partition %s has a replica on broker %d, which is to be removed: draining goes first", p, id)
				return r
			}
		}
		parts = append(parts, placement.Partition{Topic: p.Topic, Partition: p.Partition, Replicas: p.Target(), LeaderZone: p.LeaderZone})
	}
	budget := len(parts) * len(brokers)
	if maxInFlight > 0 {
		budget = maxInFlight - inFlight
	}
	if budget <= 0 {
		r.Reason = fmt.Sprintf("%d reassignments in flight, the cap is %d", inFlight, maxInFlight)
		return r
	}
	moves, err := placement.Rebalance(brokers, parts, budget)
	if err != nil {
		r.Reason = fmt.Sprintf("cannot compute moves: %v", err)
		return r
	}
	dataMoves := 0
	for _, m := range moves {
		if reassigning[fmt.Sprintf("%s-%d", m.Topic, m.Partition)] {
			continue
		}
		reorder := sameSet(m.From, m.To)
		if !reorder {
			if dataMoves == budget {
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
	r.Reason = fmt.Sprintf("%d replica moves and %d leader reorderings to start, %d reassignments in flight",
		dataMoves, len(r.Moves)-dataMoves, inFlight)
	return r
}

func sameSet(a, b []int32) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
