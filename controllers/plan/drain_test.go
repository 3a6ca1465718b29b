package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/strata-dev/strata/broker/placement"
)

func TestNextDrain(t *testing.T) {
	// Zone a scaled 2 → 1: broker 1 leaves.
	scaleDown := Metadata{
		Brokers: brokers(0, 1, 100, 200),
		Partitions: []Partition{
			part("t", 0, 1, 100, 200), part("t", 1, 100, 1, 200), part("t", 2, 200, 0, 100), part("t", 3, 0, 200, 100),
		},
	}
	empty := Metadata{Brokers: brokers(0, 1, 100, 200), Partitions: []Partition{part("t", 0, 0, 100, 200)}}
	tests := []struct {
		name       string
		wanted     []Wanted
		md         Metadata
		maxFlight  int
		broker     int32
		empty      bool
		moves      []placement.Move
		impossible string
		reason     string
	}{
		{"nothing to remove", wanted(0, 1, 100, 200), scaleDown, 0, -1, false, nil, "", "no broker to remove"},
		{"scale-down: replicas move to the broker that stays in the zone, leader slot too", wanted(0, 100, 200), scaleDown, 0, 1, false,
			[]placement.Move{{Topic: "t", Partition: 0, From: []int32{1, 100, 200}, To: []int32{0, 100, 200}}, {Topic: "t", Partition: 1, From: []int32{100, 1, 200}, To: []int32{100, 0, 200}}},
			"", "draining broker 1 of zone \"a\": 2 partitions left, 2 moves to start now"},
		{"capped: one move at a time", wanted(0, 100, 200), scaleDown, 1, 1, false,
			[]placement.Move{{Topic: "t", Partition: 0, From: []int32{1, 100, 200}, To: []int32{0, 100, 200}}}, "", "1 moves to start now"},
		{"the cap is taken by reassignments in flight", wanted(0, 100, 200), func() Metadata {
			md := scaleDown
			md.Partitions = slices.Clone(md.Partitions)
			md.Partitions[0] = Partition{Topic: "t", Partition: 0, Replicas: []int32{1, 100, 200, 0}, ISR: []int32{1, 100, 200}, Leader: 1, Adding: []int32{0}, Removing: []int32{1}}
			return md
		}(), 1, 1, false, nil, "", "1 reassignments in flight, the cap is 1"},
		{"a partition in flight is left alone, the rest moves", wanted(0, 100, 200), func() Metadata {
			md := scaleDown
			md.Partitions = slices.Clone(md.Partitions)
			md.Partitions[0] = Partition{Topic: "t", Partition: 0, Replicas: []int32{1, 100, 200, 0}, ISR: []int32{1, 100, 200}, Leader: 1, Adding: []int32{0}, Removing: []int32{1}}
			return md
		}(), 0, 1, false, []placement.Move{{Topic: "t", Partition: 1, From: []int32{100, 1, 200}, To: []int32{100, 0, 200}}}, "", "1 moves to start now, 1 reassignments in flight"},
		{"drained: the pod may go", wanted(0, 100, 200), empty, 0, 1, true, nil, "", "broker 1 holds no replica and leads nothing"},
		{"highest ID first", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 1, 2, 100, 200), Partitions: []Partition{part("t", 0, 1, 100, 200), part("t", 1, 2, 100, 200)}}, 0, 2, false,
			[]placement.Move{{Topic: "t", Partition: 1, From: []int32{2, 100, 200}, To: []int32{0, 100, 200}}}, "", "draining broker 2"},
		{"moves never land on another broker being removed", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 1, 2, 100, 200), Partitions: []Partition{part("t", 0, 2, 100, 200), part("u", 0, 0, 100, 200), part("u", 1, 0, 100, 200)}}, 0, 2, false,
			[]placement.Move{{Topic: "t", Partition: 0, From: []int32{2, 100, 200}, To: []int32{0, 100, 200}}}, "", ""},
		{"zone removal with RF 2 over 3 zones: replicas move to the zones left", wanted(0, 100), Metadata{Brokers: brokers(0, 100, 200), Partitions: []Partition{part("t", 0, 200, 0), part("t", 1, 100, 200)}}, 0, 200, false,
			[]placement.Move{{Topic: "t", Partition: 0, From: []int32{200, 0}, To: []int32{100, 0}}, {Topic: "t", Partition: 1, From: []int32{100, 200}, To: []int32{100, 0}}}, "", "draining broker 200 of zone \"c\""},
		{"impossible: a zone would go while RF 3 needs three zones", wanted(0, 1, 100), Metadata{Brokers: brokers(0, 1, 100, 200), Partitions: []Partition{part("t", 0, 0, 100, 200)}}, 0, -1, false, nil,
			"zone c would have no broker left while topic t (replication factor 3) needs a replica in each of 3 zones and only 2 would remain", ""},
		{"impossible: RF larger than the brokers left", wanted(0, 100), Metadata{Brokers: brokers(0, 1, 100), Partitions: []Partition{part("t", 0, 0, 1, 100)}}, 0, -1, false, nil,
			"topic t has replication factor 3 but only 2 brokers would remain", ""},
		{"impossible: leaders pinned to the zone removed", wanted(0, 100), Metadata{Brokers: brokers(0, 100, 200), Partitions: []Partition{{Topic: "t", Partition: 0, Replicas: []int32{200}, ISR: []int32{200}, Leader: 200, LeaderZone: "c"}}}, 0, -1, false, nil,
			"topic t pins its leaders to zone \"c\"", ""},
		{"not now: a broker that stays is not registered", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 1, 200), Partitions: []Partition{part("t", 0, 1, 200)}}, 0, -1, false, nil,
			"", "waiting for broker 100 (zone \"b\"), which stays, to register"},
		{"not now: two brokers that stay are not registered, both named", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 1), Partitions: []Partition{part("t", 0, 1, 200)}}, 0, -1, false, nil,
			"", "waiting for brokers 100 (zone \"b\"), 200 (zone \"c\"), which stay, to register"},
		{"a broker that left the metadata but is still named in a replica list is drained", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 100, 200), Partitions: []Partition{withISR(part("t", 0, 100, 1, 200), 100, 200)}}, 0, 1, false,
			[]placement.Move{{Topic: "t", Partition: 0, From: []int32{100, 1, 200}, To: []int32{100, 0, 200}}}, "", "draining broker 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NextDrain(tt.wanted, tt.md, tt.maxFlight)
			if got.Broker != tt.broker || got.Empty != tt.empty || !slices.EqualFunc(got.Moves, tt.moves, moveEqual) ||
				!strings.Contains(got.Impossible, tt.impossible) || (tt.impossible == "") != (got.Impossible == "") || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("NextDrain = %+v\nwant broker %d empty %v moves %+v impossible %q reason containing %q", got, tt.broker, tt.empty, tt.moves, tt.impossible, tt.reason)
			}
			var unregistered []int32
			for _, w := range tt.wanted {
				if !slices.ContainsFunc(tt.md.Brokers, func(b Broker) bool { return b.ID == w.ID }) && tt.impossible == "" {
					unregistered = append(unregistered, w.ID)
				}
			}
			if !slices.Equal(got.Unregistered, unregistered) {
				t.Fatalf("Unregistered = %v, want %v", got.Unregistered, unregistered)
			}
		})
	}
}

func moveEqual(a, b placement.Move) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && slices.Equal(a.From, b.From) && slices.Equal(a.To, b.To)
}

// TestNextDrainUntilEmpty plays a scale-down of zone a from 3 brokers to 1:
// apply the moves NextDrain returns (reassignments finish at once), ask
// again; brokers 2 then 1 are emptied, one at a time, and only an empty
// broker is ever reported removable.
func TestNextDrainUntilEmpty(t *testing.T) {
	md := Metadata{Brokers: brokers(0, 1, 2, 100, 200)}
	for p := range int32(9) {
		md.Partitions = append(md.Partitions, part("t", p, []int32{0, 1, 2}[p%3], 100, 200))
	}
	var removedOrder []int32
	for range 20 {
		d := NextDrain(wanted(0, 100, 200), md, 2)
		if d.Impossible != "" {
			t.Fatal(d.Impossible)
		}
		if d.Broker == -1 {
			break
		}
		if d.Empty {
			for _, p := range md.Partitions {
				if slices.Contains(p.Replicas, d.Broker) || p.Leader == d.Broker {
					t.Fatalf("broker %d reported empty but partition %s names it", d.Broker, p)
				}
			}
			removedOrder = append(removedOrder, d.Broker)
			md.Brokers = slices.DeleteFunc(slices.Clone(md.Brokers), func(b Broker) bool { return b.ID == d.Broker })
			continue
		}
		if len(d.Moves) == 0 || len(d.Moves) > 2 {
			t.Fatalf("%d moves (cap 2): %s", len(d.Moves), d.Reason)
		}
		for _, m := range d.Moves {
			for i, p := range md.Partitions {
				if p.Topic == m.Topic && p.Partition == m.Partition {
					md.Partitions[i] = part(p.Topic, p.Partition, m.To...)
				}
			}
		}
	}
	if !slices.Equal(removedOrder, []int32{2, 1}) {
		t.Fatalf("removed %v, want [2 1]", removedOrder)
	}
	for _, p := range md.Partitions {
		if !slices.Equal(p.Replicas, []int32{0, 100, 200}) {
			t.Fatalf("%s ends on %v, want [0 100 200]", p, p.Replicas)
		}
	}
}

// TestNextDrainBytes: zone a goes 3 → 2; broker 2's replicas go to the
// zone-a broker with fewer bytes, the largest first, and the answer says
// how many moves and bytes are left, counting what an in-flight
// reassignment's new replica still lacks.
func TestNextDrainBytes(t *testing.T) {
	const mib = int64(1 << 20)
	md := Metadata{
		Brokers: brokers(0, 1, 2, 100, 200),
		Partitions: []Partition{
			sized(part("big", 0, 0, 100, 200), 100*mib),
			sized(part("small", 0, 1, 100, 200), mib),
			sized(part("t", 0, 2, 100, 200), 40*mib),
			sized(part("t", 1, 2, 100, 200), 2*mib),
			// In flight: moving off 2 onto 0, half of its 10 MiB
			// copied.
			{Topic: "t", Partition: 2, Replicas: []int32{0, 100, 200, 2}, ISR: []int32{100, 200, 2}, Leader: 100,
				Adding: []int32{0}, Removing: []int32{2}, Sizes: map[int32]int64{0: 5 * mib, 100: 10 * mib, 200: 10 * mib, 2: 10 * mib}},
		},
	}
	d := NextDrain(wanted(0, 1, 100, 200), md, 10)
	if d.Broker != 2 {
		t.Fatalf("drains %d, want 2: %s", d.Broker, d.Reason)
	}
	to := map[string]int32{}
	for _, m := range d.Moves {
		to[m.Topic+"-"+string(rune('0'+m.Partition))] = m.To[slices.Index(m.From, 2)]
	}
	// t-0 (40 MiB) to broker 1 (1 MiB) rather than 0 (100 MiB + 5 in
	// flight); t-1 (2 MiB) then to 1 again (41 < 105, one replica more).
	if to["t-0"] != 1 || to["t-1"] != 1 || len(d.Moves) != 2 {
		t.Fatalf("moves %v, want t-0 and t-1 to broker 1", d.Moves)
	}
	if d.Planned != 2 || d.PlannedBytes != 42*mib || d.BytesLeft != 47*mib {
		t.Fatalf("planned %d moves, %d bytes, %d left; want 2, 42 MiB, 47 MiB (5 MiB still to copy in flight)", d.Planned, d.PlannedBytes, d.BytesLeft)
	}
	capped := NextDrain(wanted(0, 1, 100, 200), md, 1)
	if len(capped.Moves) != 0 || capped.Planned != 2 || capped.BytesLeft != 47*mib {
		t.Fatalf("at the cap: %d moves, %d planned, %d left; want 0, 2, 47 MiB: %s", len(capped.Moves), capped.Planned, capped.BytesLeft, capped.Reason)
	}
}
