package plan

import (
	"fmt"
	"slices"

	"github.com/strata-dev/strata/broker/placement"
)

// The modes of a KafkaRebalance (api/v1alpha1 RebalanceMode).
const (
	ModeFull          = "full"
	ModeAddBrokers    = "add-brokers"
	ModeRemoveBrokers = "remove-brokers"
)

// RebalanceRequest is what a KafkaRebalance asks: a mode and, for
// add-brokers and remove-brokers, the brokers.
type RebalanceRequest struct {
	Mode    string
	Brokers []int32
}

// RequestPlan is RebalancePlan's answer: the whole plan of a request.
type RequestPlan struct {
	// Moves are every reassignment of the plan (a partition at most
	// once, with its final replica list), reassignments in flight left
	// out (those partitions are planned once they end).
	Moves []placement.Move
	// Waiting counts the partitions left out because a reassignment of
	// theirs is in flight.
	Waiting int
	// Refused says why the request cannot be planned as it is (a
	// person must change it); Wait why not now (a broker restarting).
	Refused, Wait string
}

// RebalancePlan plans a KafkaRebalance request on md with the planners
// of the operator's own scale rebalances and drains:
//
//   - full: placement.Rebalance over every registered broker (replica
//     counts within one per broker, then bytes within
//     placement.ByteTolerance, then preferred leaders; one replica per
//     zone kept), as after a scale-up.
//   - add-brokers: the same plan, keeping only the moves whose new
//     replicas all land on the brokers named; nothing moves between the
//     other brokers.
//   - remove-brokers: placement.Drain of the brokers named (every replica
//     off them, onto the brokers that stay, the drained broker's own zone
//     first), as before a scale-down, once NextDrain's feasibility rules
//     hold (replication factors and zones fit the brokers that stay).
//
// The brokers named must be registered. A replica on a broker that is not
// registered makes the answer wait (a broker restarting), except when
// that broker is one remove-brokers drains.
func RebalancePlan(req RebalanceRequest, md Metadata) RequestPlan {
	var out RequestPlan
	registered := map[int32]string{}
	var brokers []placement.Broker
	for _, b := range md.Brokers {
		registered[b.ID] = b.Rack
		brokers = append(brokers, placement.Broker{ID: b.ID, Zone: b.Rack})
	}
	named := map[int32]bool{}
	for _, id := range req.Brokers {
		if _, ok := registered[id]; !ok {
			out.Refused = fmt.Sprintf("broker %d is not registered in the cluster (registered: %v): only running brokers can be %s",
				id, sortedIDs(registered), map[bool]string{true: "added", false: "removed"}[req.Mode == ModeAddBrokers])
			return out
		}
		named[id] = true
	}
	if req.Mode != ModeFull && len(named) == 0 {
		out.Refused = "mode " + req.Mode + " needs the brokers to act on"
		return out
	}
	if req.Mode == ModeRemoveBrokers && len(named) == len(registered) {
		out.Refused = "remove-brokers names every registered broker: none would be left to take the replicas"
		return out
	}
	var parts []placement.Partition
	for _, p := range md.sortedPartitions() {
		if p.Reassigning() {
			out.Waiting++
		}
		for _, id := range slices.Concat(p.Replicas, p.Adding) {
			if _, ok := registered[id]; !ok {
				out.Wait = fmt.Sprintf("partition %s has a replica on broker %d, which is not registered: waiting for it (or for its removal)", p, id)
				return out
			}
		}
		parts = append(parts, p.placement())
	}
	var whole []placement.Move
	var err error
	switch req.Mode {
	case ModeFull, ModeAddBrokers:
		whole, err = placement.Rebalance(brokers, parts, 0)
	case ModeRemoveBrokers:
		var wanted []Wanted
		for _, b := range md.Brokers {
			if !named[b.ID] {
				wanted = append(wanted, Wanted{Zone: b.Rack, ID: b.ID})
			}
		}
		if why := drainImpossible(wanted, md); why != "" {
			out.Refused = why
			return out
		}
		whole, err = placement.Drain(brokers, parts, sortedIDs(named))
	default:
		out.Refused = fmt.Sprintf("unknown mode %q", req.Mode)
		return out
	}
	if err != nil {
		out.Refused = fmt.Sprintf("cannot plan the moves: %v", err)
		return out
	}
	pinned := map[string]bool{}
	for _, p := range md.Partitions {
		if p.Reassigning() {
			pinned[p.String()] = true
		}
	}
	for _, m := range whole {
		if pinned[fmt.Sprintf("%s-%d", m.Topic, m.Partition)] {
			continue
		}
		if req.Mode == ModeAddBrokers && !onlyOnto(m, named) {
			continue
		}
		out.Moves = append(out.Moves, m)
	}
	return out
}

// onlyOnto says whether a move copies data and every replica it adds is
// on one of the brokers.
func onlyOnto(m placement.Move, brokers map[int32]bool) bool {
	added := 0
	for _, id := range m.To {
		if slices.Contains(m.From, id) {
			continue
		}
		if !brokers[id] {
			return false
		}
		added++
	}
	return added > 0
}

func sortedIDs[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// RebalanceStep is the next step of an approved KafkaRebalance: its
// plan's first moves within the cap on reassignments in flight
// (maxInFlight, 0: none; others' reassignments count), replica moves
// capped and leader reorderings not. The step of a full rebalance is
// placement.Rebalance cut at the cap (the plan's first steps, as
// RebalanceMoves takes them); the others take the first moves of
// RebalancePlan's (each a partition's final replica list). Each call
// plans again from the assignment reached, so a step goes on where the
// last one stopped, and the request is done once the plan has no move
// and nothing it started is in flight. Planned, PlannedBytes and
// BytesLeft describe the rest of the plan, for the progress.
func RebalanceStep(req RebalanceRequest, md Metadata, maxInFlight int) (Rebalance, RequestPlan) {
	inFlight := 0
	for _, p := range md.Partitions {
		if p.Reassigning() {
			inFlight++
		}
	}
	r := Rebalance{InFlight: inFlight, BytesLeft: md.bytesInFlight()}
	pl := RebalancePlan(req, md)
	if pl.Refused != "" || pl.Wait != "" {
		r.Reason = pl.Refused + pl.Wait
		return r, pl
	}
	r.Planned, r.PlannedBytes = md.movedBytes(pl.Moves)
	r.BytesLeft += r.PlannedBytes
	budget := -1 // no cap
	if maxInFlight > 0 {
		budget = maxInFlight - inFlight
		if budget <= 0 {
			r.Reason = fmt.Sprintf("%d reassignments in flight, the cap is %d; %d replica moves planned", inFlight, maxInFlight, r.Planned)
			return r, pl
		}
	}
	moves := pl.Moves
	if req.Mode == ModeFull && budget > 0 {
		var brokers []placement.Broker
		for _, b := range md.Brokers {
			brokers = append(brokers, placement.Broker{ID: b.ID, Zone: b.Rack})
		}
		var parts []placement.Partition
		for _, p := range md.sortedPartitions() {
			parts = append(parts, p.placement())
		}
		capped, err := placement.Rebalance(brokers, parts, budget)
		if err != nil {
			r.Reason = fmt.Sprintf("cannot compute moves: %v", err)
			return r, pl
		}
		moves = capped
	}
	data := 0
	for _, m := range moves {
		if m.CopiesData() {
			if budget >= 0 && data == budget {
				continue
			}
			data++
		}
		r.Moves = append(r.Moves, m)
	}
	switch {
	case len(r.Moves) > 0:
		r.Reason = fmt.Sprintf("%d replica moves and %d leader reorderings to start, %d reassignments in flight; %d replica moves (%d bytes) planned",
			data, len(r.Moves)-data, inFlight, r.Planned, r.PlannedBytes)
	case pl.Waiting > 0:
		r.Reason = fmt.Sprintf("%d partitions wait for their reassignment in flight to end", pl.Waiting)
	default:
		r.Reason = "nothing left to move"
	}
	return r, pl
}

// MoveBytes is what one move copies and sends across zones.
type MoveBytes struct {
	// Bytes: the partition's size once per new replica.
	Bytes int64
	// CrossZone: the bytes of the new replicas outside the zone of the
	// partition's leader (Kafka's replication fetches from the leader; a
	// partition without a known leader counts as across zones).
	CrossZone int64
	// CrossZoneStrata: CrossZone, or 0 when the slow tier holds the
	// partition (the new replicas hydrate from it).
	CrossZoneStrata int64
	// To is each new replica's broker and the bytes it receives; From the
	// leader that sends them (-1: none known).
	To   []int32
	From int32
}

// CostOf tells what a move copies and sends across zones; tiered says
// whether the cluster has a slow tier (spec.tieredStorage), which holds
// every topic not in md.Untiered.
func (m Metadata) CostOf(mv placement.Move, tiered bool) MoveBytes {
	zone := map[int32]string{}
	for _, b := range m.Brokers {
		zone[b.ID] = b.Rack
	}
	var p Partition
	for _, q := range m.Partitions {
		if q.Topic == mv.Topic && q.Partition == mv.Partition {
			p = q
			break
		}
	}
	out := MoveBytes{From: p.Leader}
	if p.Leader < 0 {
		out.From = NoLeader
	}
	size := p.Size()
	for _, id := range mv.To {
		if slices.Contains(mv.From, id) {
			continue
		}
		out.To = append(out.To, id)
		out.Bytes += size
		lz, ok := zone[p.Leader]
		if !ok || lz != zone[id] {
			out.CrossZone += size
		}
	}
	out.CrossZoneStrata = out.CrossZone
	if tiered && !m.Untiered[mv.Topic] {
		out.CrossZoneStrata = 0
	}
	return out
}
