package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/strata-dev/strata/broker/placement"
)

func TestRebalanceMoves(t *testing.T) {
	// Zone a scaled 1 → 2: broker 1 is new and empty.
	var six []Partition
	for p := range int32(6) {
		six = append(six, part("t", p, []int32{0, 100, 200}[p%3], []int32{100, 200, 0}[p%3], []int32{200, 0, 100}[p%3]))
	}
	scaledUp := Metadata{Brokers: brokers(0, 1, 100, 200), Partitions: six}
	tests := []struct {
		name      string
		wanted    []Wanted
		md        Metadata
		maxFlight int
		dataMoves int
		reason    string
	}{
		{"new broker not registered yet", wanted(0, 1, 100, 200), Metadata{Brokers: brokers(0, 100, 200), Partitions: six}, 0, 0, "waiting for broker 1 of zone \"a\" to register"},
		{"a broker to remove: draining goes first", wanted(0, 100, 200), scaledUp, 0, 0, "broker 1 is to be removed: draining goes first"},
		{"a replica on a broker to remove: draining goes first", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 100, 200), Partitions: []Partition{part("t", 0, 0, 1, 100)}}, 0, 0, "replica on broker 1"},
		{"scale-up: the new broker gets its share", wanted(0, 1, 100, 200), scaledUp, 0, 3, "3 replica moves"},
		{"capped", wanted(0, 1, 100, 200), scaledUp, 2, 2, "2 replica moves"},
		{"the cap is taken by reassignments in flight", wanted(0, 1, 100, 200), func() Metadata {
			md := scaledUp
			md.Partitions = slices.Clone(md.Partitions)
			md.Partitions[0] = Partition{Topic: "t", Partition: 0, Replicas: []int32{0, 100, 200, 1}, ISR: []int32{0, 100, 200}, Leader: 0, Adding: []int32{1}, Removing: []int32{0}}
			return md
		}(), 1, 0, "1 reassignments in flight, the cap is 1"},
		{"balanced: nothing to do", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 100, 200), Partitions: six}, 0, 0, "balanced: no move needed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RebalanceMoves(tt.wanted, tt.md, tt.maxFlight)
			data := 0
			for _, m := range got.Moves {
				if !sameSet(m.From, m.To) {
					data++
				}
				checkZoneSpread(t, m)
			}
			if data != tt.dataMoves || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("RebalanceMoves = %+v\nwant %d replica moves, reason containing %q", got, tt.dataMoves, tt.reason)
			}
		})
	}
}

// checkZoneSpread: a move keeps one replica per zone.
func checkZoneSpread(t *testing.T, m placement.Move) {
	t.Helper()
	zones := map[string]bool{}
	for _, id := range m.To {
		if zones[zoneOfID(id)] {
			t.Fatalf("move %+v puts two replicas in zone %s", m, zoneOfID(id))
		}
		zones[zoneOfID(id)] = true
	}
}

// TestRebalanceMovesUntilBalanced plays a scale-up of zone a from 1 to 2
// brokers with a cap of 1: every round starts at most one replica move;
// in the end each zone-a broker holds half of zone a's replicas.
func TestRebalanceMovesUntilBalanced(t *testing.T) {
	md := Metadata{Brokers: brokers(0, 1, 100, 200)}
	for p := range int32(8) {
		md.Partitions = append(md.Partitions, part("t", p, 0, 100, 200))
	}
	for range 20 {
		r := RebalanceMoves(wanted(0, 1, 100, 200), md, 1)
		if len(r.Moves) == 0 {
			break
		}
		data := 0
		for _, m := range r.Moves {
			checkZoneSpread(t, m)
			if !sameSet(m.From, m.To) {
				data++
			}
			for i, p := range md.Partitions {
				if p.Topic == m.Topic && p.Partition == m.Partition {
					md.Partitions[i] = part(p.Topic, p.Partition, m.To...)
				}
			}
		}
		if data > 1 {
			t.Fatalf("%d replica moves with a cap of 1", data)
		}
	}
	count := map[int32]int{}
	for _, p := range md.Partitions {
		for _, id := range p.Replicas {
			count[id]++
		}
	}
	if count[0] != 4 || count[1] != 4 {
		t.Fatalf("zone a replicas: broker 0 holds %d, broker 1 holds %d; want 4 and 4", count[0], count[1])
	}
}
