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
		waiting   bool
	}{
		// Waiting, not balanced: a rebalance under way is not done when
		// its new broker's registration lapses for a moment (seen under
		// make test-stress: a scale-up ended after 2 of its moves).
		{"new broker not registered yet", wanted(0, 1, 100, 200), Metadata{Brokers: brokers(0, 100, 200), Partitions: six}, 0, 0, "waiting for broker 1 of zone \"a\" to register", true},
		{"a broker to remove: draining goes first", wanted(0, 100, 200), scaledUp, 0, 0, "broker 1 is to be removed: draining goes first", true},
		{"a replica on a broker to remove: draining goes first", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 100, 200), Partitions: []Partition{part("t", 0, 0, 1, 100)}}, 0, 0, "replica on broker 1", true},
		{"scale-up: the new broker gets its share", wanted(0, 1, 100, 200), scaledUp, 0, 3, "3 replica moves", false},
		{"capped", wanted(0, 1, 100, 200), scaledUp, 2, 2, "2 replica moves", false},
		{"the cap is taken by reassignments in flight", wanted(0, 1, 100, 200), func() Metadata {
			md := scaledUp
			md.Partitions = slices.Clone(md.Partitions)
			md.Partitions[0] = Partition{Topic: "t", Partition: 0, Replicas: []int32{0, 100, 200, 1}, ISR: []int32{0, 100, 200}, Leader: 0, Adding: []int32{1}, Removing: []int32{0}}
			return md
		}(), 1, 0, "1 reassignments in flight, the cap is 1", false},
		{"balanced: nothing to do", wanted(0, 100, 200), Metadata{Brokers: brokers(0, 100, 200), Partitions: six}, 0, 0, "balanced: no move needed", false},
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
			if data != tt.dataMoves || !strings.Contains(got.Reason, tt.reason) || got.Waiting != tt.waiting {
				t.Fatalf("RebalanceMoves = %+v\nwant %d replica moves, reason containing %q, waiting %v", got, tt.dataMoves, tt.reason, tt.waiting)
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

func sized(p Partition, size int64) Partition {
	p.Sizes = map[int32]int64{}
	for _, id := range p.Replicas {
		p.Sizes[id] = size
	}
	return p
}

// TestRebalanceMovesBytes plays scale-ups of zone a from broker 0 to
// brokers 0 and 1 with skewed partition sizes and a cap of 2 moves in
// flight: each round's moves run as reassignments (the new replica
// catching up over a round), the next round is planned on what the
// metadata then shows. Zone a ends with replica counts within one and
// bytes within the tolerance where sizes allow, in a few rounds, without
// moving a partition twice or one with a reassignment in flight;
// BytesLeft never grows and ends at 0; a plan on the end state is empty.
func TestRebalanceMovesBytes(t *testing.T) {
	const mib = int64(1 << 20)
	topic := func(name string, n int, size int64) []Partition {
		var out []Partition
		for p := range int32(n) {
			out = append(out, sized(part(name, p, 0, 100, 200), size))
		}
		return out
	}
	tests := []struct {
		name     string
		parts    []Partition
		maxDiff  int64 // zone a's byte difference at the end, at most
		maxCopy  int64 // bytes copied, at most
		maxRound int
	}{
		{"one huge partition, many tiny", slices.Concat(topic("huge", 1, 100*mib), topic("tiny", 9, 1024)), 100 * mib, 5 * 1024, 4},
		{"one topic with data, others empty", slices.Concat(topic("a-empty", 4, 0), topic("b-empty", 4, 0), topic("z-data", 4, 50*mib)), 0, 100 * mib, 4},
		{"a few large, many small", slices.Concat(topic("large", 4, 64*mib), topic("small", 20, mib)), 11 * mib, 140 * mib, 9},
		{"sizes unknown: counts", topic("t", 6, 0), 0, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := Metadata{Brokers: brokers(0, 1, 100, 200), Partitions: slices.Clone(tt.parts)}
			w := wanted(0, 1, 100, 200)
			first := RebalanceMoves(w, md, 2)
			lastLeft, copied := first.BytesLeft, int64(0)
			if first.Planned == 0 && tt.maxCopy > 0 {
				t.Fatalf("nothing planned: %+v", first)
			}
			moved := map[string]bool{}
			rounds := 0
			for ; rounds < 30; rounds++ {
				// Reassignments in flight at the start of the round
				// finish now: the new replica is complete.
				for i, p := range md.Partitions {
					if p.Reassigning() {
						np := sized(part(p.Topic, p.Partition, p.Target()...), p.Size())
						md.Partitions[i] = np
					}
				}
				r := RebalanceMoves(w, md, 2)
				if r.BytesLeft > lastLeft {
					t.Fatalf("round %d: bytes left grew from %d to %d", rounds, lastLeft, r.BytesLeft)
				}
				lastLeft = r.BytesLeft
				if len(r.Moves) == 0 {
					break
				}
				data := 0
				for _, m := range r.Moves {
					checkZoneSpread(t, m)
					for i, p := range md.Partitions {
						if p.Topic != m.Topic || p.Partition != m.Partition {
							continue
						}
						if sameSet(m.From, m.To) {
							md.Partitions[i] = sized(part(p.Topic, p.Partition, m.To...), p.Size())
							continue
						}
						data++
						if moved[p.String()] {
							t.Errorf("round %d: %s moved twice", rounds, p)
						}
						moved[p.String()] = true
						// In flight: the union of old and new, the new
						// replica empty so far.
						np := p
						np.Replicas = slices.Concat(m.To, slices.DeleteFunc(slices.Clone(m.From), func(id int32) bool { return slices.Contains(m.To, id) }))
						np.Sizes = map[int32]int64{}
						for _, id := range np.Replicas {
							np.Sizes[id] = p.Sizes[id]
						}
						for _, id := range m.To {
							if !slices.Contains(m.From, id) {
								np.Adding = append(np.Adding, id)
								copied += p.Size()
							}
						}
						for _, id := range m.From {
							if !slices.Contains(m.To, id) {
								np.Removing = append(np.Removing, id)
							}
						}
						md.Partitions[i] = np
					}
				}
				if data > 2 {
					t.Fatalf("round %d: %d replica moves with a cap of 2", rounds, data)
				}
			}
			if lastLeft != 0 {
				t.Errorf("bytes left at the end: %d", lastLeft)
			}
			count, bytes := map[int32]int{}, map[int32]int64{}
			for _, p := range md.Partitions {
				for _, id := range p.Replicas {
					count[id]++
					bytes[id] += p.Size()
				}
			}
			t.Logf("%d rounds; first plan %d moves, %d bytes; copied %d; zone a counts %d/%d, bytes %d/%d",
				rounds, first.Planned, first.PlannedBytes, copied, count[0], count[1], bytes[0], bytes[1])
			if d := count[0] - count[1]; d < -1 || d > 1 {
				t.Errorf("zone a replicas %d and %d", count[0], count[1])
			}
			if d := bytes[0] - bytes[1]; d < -tt.maxDiff || d > tt.maxDiff {
				t.Errorf("zone a bytes %d and %d, want at most %d apart", bytes[0], bytes[1], tt.maxDiff)
			}
			if copied > tt.maxCopy || copied != first.PlannedBytes {
				t.Errorf("copied %d bytes, want at most %d and what the first plan said (%d)", copied, tt.maxCopy, first.PlannedBytes)
			}
			if rounds > tt.maxRound {
				t.Errorf("%d rounds, want at most %d", rounds, tt.maxRound)
			}
			if r := RebalanceMoves(w, md, 2); len(r.Moves) != 0 || r.Planned != 0 || r.Reason != "balanced: no move needed" {
				t.Errorf("planning on the end state: %+v", r)
			}
		})
	}
}
