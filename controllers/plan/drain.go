package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-dev/strata/broker/placement"
)

// Drain is NextDrain's answer.
type Drain struct {
	// Broker is the broker to drain or remove now (-1: none); Zone is its
	// zone.
	Broker int32
	Zone   string
	// Empty: Broker holds no replica, leads nothing and no reassignment
	// involves it; its pod may go (and its PVC follow the deletion policy).
	Empty bool
	// Moves are the reassignments to start now to take replicas off
	// Broker (at most the cap minus the reassignments in flight).
	Moves []placement.Move
	// InFlight is the number of reassignments in flight in the cluster.
	InFlight int
	// Planned counts the moves still to start to empty Broker (Moves
	// included; not the ones waiting for a reassignment in flight on the
	// same partition), PlannedBytes what they copy.
	Planned      int
	PlannedBytes int64
	// BytesLeft is what draining Broker still has to copy: PlannedBytes
	// plus what the new replicas of the reassignments in flight still
	// lack.
	BytesLeft int64
	// Impossible says why the brokers to remove cannot be drained: nothing
	// may be removed and the reason belongs in a condition. Empty when
	// draining can proceed.
	Impossible string
	// Reason says what the answer is and why.
	Reason string
	// Unregistered are the wanted brokers that are not registered, when
	// the drain waits for them (they are to receive replicas): a broker
	// that is down blocks the scale-down, and the operator names it.
	Unregistered []int32
}

// NextDrain decides the next step of a scale-down or zone removal: the
// brokers to remove are the ones the metadata knows (registered, or named
// in a replica list) that wanted does not list. The rules:
//
//  1. Feasibility first, for the whole removal, so that nothing is removed
//     when the end state is impossible: every partition's replication
//     factor must fit the brokers that stay; when as many zones as the
//     replication factor exist now, they must still exist after (a zone
//     must not drop to zero brokers while a partition needs a replica in
//     each zone); a topic pinning its leaders to a zone needs a broker
//     there. Otherwise Impossible says which rule failed, naming the topic.
//     Every broker that stays must also be registered (it is to receive
//     replicas); until then the answer is to wait (Reason), not
//     Impossible.
//  2. One broker at a time, the highest broker ID first: a zone's
//     StatefulSet shrinks from its highest ordinal, which holds the zone's
//     highest ID.
//  3. The broker is Empty when no replica list names it (reassignments
//     included) and it leads nothing: only then may its pod go.
//  4. Otherwise its replicas move with placement.Drain (a replaced
//     replica goes to the drained broker's own zone where a broker stays
//     there, keeping one replica per zone; largest partitions first, each
//     to the broker with the fewest bytes among those with nearly the
//     fewest replicas), to brokers that stay only, never to another
//     broker being removed. Partitions with a
//     reassignment in flight are left alone until it finishes; in-flight
//     reassignments count against maxInFlight (0: no cap).
func NextDrain(wanted []Wanted, md Metadata, maxInFlight int) Drain {
	want := map[int32]Wanted{}
	for _, w := range wanted {
		want[w.ID] = w
	}
	zoneOf := map[int32]string{}
	for _, w := range wanted {
		zoneOf[w.ID] = w.Zone
	}
	for _, b := range md.Brokers {
		zoneOf[b.ID] = b.Rack
	}
	known := map[int32]bool{}
	for _, b := range md.Brokers {
		known[b.ID] = true
	}
	inFlight := 0
	for _, p := range md.Partitions {
		for _, id := range p.Replicas {
			known[id] = true
		}
		if p.Reassigning() {
			inFlight++
		}
	}
	var removed []int32
	for id := range known {
		if _, ok := want[id]; !ok {
			removed = append(removed, id)
		}
	}
	if len(removed) == 0 {
		return Drain{Broker: -1, InFlight: inFlight, Reason: "no broker to remove"}
	}
	slices.Sort(removed)
	slices.Reverse(removed) // rule 2: highest ID first
	if why := drainImpossible(wanted, md); why != "" {
		return Drain{Broker: -1, InFlight: inFlight, Impossible: why, Reason: why}
	}
	var down []int32
	var downNames []string
	for _, w := range wanted {
		if !md.registered(w.ID) {
			down = append(down, w.ID)
			downNames = append(downNames, fmt.Sprintf("%d (zone %q)", w.ID, w.Zone))
		}
	}
	if len(down) > 0 {
		// Not impossible, only not now (a broker restarting, or down).
		slices.Sort(down)
		what := "broker " + downNames[0] + ", which stays, to register: it is"
		if len(down) > 1 {
			what = "brokers " + strings.Join(downNames, ", ") + ", which stay, to register: they are"
		}
		return Drain{Broker: -1, InFlight: inFlight, Unregistered: down,
			Reason: fmt.Sprintf("waiting for %s to receive replicas", what)}
	}
	x := removed[0]
	d := Drain{Broker: x, Zone: zoneOf[x], InFlight: inFlight, BytesLeft: md.bytesInFlight()}
	holding, leading := 0, 0
	for _, p := range md.Partitions {
		if slices.Contains(p.Replicas, x) || slices.Contains(p.Adding, x) || slices.Contains(p.Removing, x) {
			holding++
		}
		if p.Leader == x {
			leading++
		}
	}
	if holding == 0 && leading == 0 {
		d.Empty = true
		d.Reason = fmt.Sprintf("broker %d holds no replica and leads nothing: its pod may go", x)
		return d
	}
	// Brokers that stay, plus x; partitions by the replica lists they end
	// with.
	brokers := []placement.Broker{{ID: x, Zone: zoneOf[x]}}
	for _, w := range wanted {
		brokers = append(brokers, placement.Broker{ID: w.ID, Zone: zoneOf[w.ID]})
	}
	var parts []placement.Partition
	reassigning := map[string]bool{}
	for _, p := range md.sortedPartitions() {
		parts = append(parts, p.placement())
		if p.Reassigning() {
			reassigning[p.String()] = true
		}
	}
	moves, err := placement.Drain(brokers, parts, []int32{x})
	if err != nil {
		d.Broker, d.Zone = -1, ""
		d.Impossible = fmt.Sprintf("cannot drain broker %d: %v", x, err)
		d.Reason = d.Impossible
		return d
	}
	budget := len(md.Partitions)
	if maxInFlight > 0 {
		budget = maxInFlight - inFlight
	}
	waiting := 0
	var planned []placement.Move
	for _, m := range moves {
		if reassigning[fmt.Sprintf("%s-%d", m.Topic, m.Partition)] {
			waiting++
			continue
		}
		planned = append(planned, m)
		if len(d.Moves) < budget {
			d.Moves = append(d.Moves, m)
		}
	}
	d.Planned, d.PlannedBytes = md.movedBytes(planned)
	d.BytesLeft += d.PlannedBytes
	if budget <= 0 {
		d.Reason = fmt.Sprintf("draining broker %d (%d partitions left): %d reassignments in flight, the cap is %d", x, holding, inFlight, maxInFlight)
		return d
	}
	d.Reason = fmt.Sprintf("draining broker %d of zone %q: %d partitions left, %d moves to start now, %d reassignments in flight",
		x, d.Zone, holding, len(d.Moves), inFlight)
	if len(d.Moves) == 0 && waiting == 0 && leading > 0 {
		// Named only as leader: a stale view; the next pass sees it go.
		d.Reason = fmt.Sprintf("broker %d still leads %d partitions without a replica there: waiting for the metadata to settle", x, leading)
	}
	return d
}

// drainImpossible applies NextDrain's rule 1.
func drainImpossible(wanted []Wanted, md Metadata) string {
	stayZones := map[string]int{}
	for _, w := range wanted {
		stayZones[w.Zone]++
	}
	zoneOf := map[int32]string{}
	for _, b := range md.Brokers {
		zoneOf[b.ID] = b.Rack
	}
	nowZones := map[string]bool{}
	for _, z := range zoneOf {
		nowZones[z] = true
	}
	var gone []string
	for z := range nowZones {
		if stayZones[z] == 0 {
			gone = append(gone, z)
		}
	}
	slices.Sort(gone)
	for _, p := range md.sortedPartitions() {
		rf := len(p.Target())
		switch {
		case rf > len(wanted):
			return fmt.Sprintf("topic %s has replication factor %d but only %d brokers would remain", p.Topic, rf, len(wanted))
		case p.LeaderZone != "" && stayZones[p.LeaderZone] == 0:
			return fmt.Sprintf("topic %s pins its leaders to zone %q, which would have no broker left", p.Topic, p.LeaderZone)
		case len(gone) > 0 && rf <= len(nowZones) && rf > len(stayZones):
			return fmt.Sprintf("zone %s would have no broker left while topic %s (replication factor %d) needs a replica in each of %d zones and only %d would remain",
				list(gone), p.Topic, rf, rf, len(stayZones))
		}
	}
	return ""
}
