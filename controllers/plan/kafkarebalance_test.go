package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/strata-dev/strata/broker/placement"
)

func TestRebalancePlan(t *testing.T) {
	// Zone a has brokers 0 and 1; broker 1 holds one replica of six.
	var parts []Partition
	for p := range int32(6) {
		a := int32(0)
		if p == 0 {
			a = 1
		}
		parts = append(parts, sized(part("t", p, a, 100, 200), 1000))
	}
	md := Metadata{Brokers: brokers(0, 1, 100, 200), Partitions: parts}
	inFlight := func(md Metadata) Metadata {
		md.Partitions = slices.Clone(md.Partitions)
		p := md.Partitions[1]
		p.Replicas, p.Adding, p.Removing = []int32{0, 100, 200, 1}, []int32{1}, []int32{0}
		md.Partitions[1] = p
		return md
	}
	tests := []struct {
		name            string
		req             RebalanceRequest
		md              Metadata
		moves           int // replica moves
		onto, off       []int32
		waiting         int
		refused, waitOn string
	}{
		{name: "full evens zone a", req: RebalanceRequest{Mode: ModeFull}, md: md, moves: 2, onto: []int32{1}},
		{name: "add-brokers onto 1", req: RebalanceRequest{Mode: ModeAddBrokers, Brokers: []int32{1}}, md: md, moves: 2, onto: []int32{1}},
		{name: "add-brokers onto 0 moves nothing", req: RebalanceRequest{Mode: ModeAddBrokers, Brokers: []int32{0}}, md: md, moves: 0},
		{name: "remove-brokers 1 moves its replica to 0", req: RebalanceRequest{Mode: ModeRemoveBrokers, Brokers: []int32{1}}, md: md, moves: 1, off: []int32{1}},
		{name: "remove the only broker of a zone RF 3 needs", req: RebalanceRequest{Mode: ModeRemoveBrokers, Brokers: []int32{200}}, md: md, refused: "zone"},
		{name: "a broker that is not registered", req: RebalanceRequest{Mode: ModeAddBrokers, Brokers: []int32{2}}, md: md, refused: "broker 2 is not registered"},
		{name: "every broker removed", req: RebalanceRequest{Mode: ModeRemoveBrokers, Brokers: []int32{0, 1, 100, 200}}, md: md, refused: "none would be left"},
		{name: "a replica on a broker that is gone: wait", req: RebalanceRequest{Mode: ModeFull}, md: Metadata{Brokers: brokers(0, 100, 200), Partitions: []Partition{part("t", 0, 1, 100, 200)}}, waitOn: "broker 1, which is not registered"},
		{name: "a partition in flight is left out", req: RebalanceRequest{Mode: ModeFull}, md: inFlight(md), moves: 1, onto: []int32{1}, waiting: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RebalancePlan(tt.req, tt.md)
			if !strings.Contains(got.Refused, tt.refused) || (tt.refused == "") != (got.Refused == "") ||
				!strings.Contains(got.Wait, tt.waitOn) || (tt.waitOn == "") != (got.Wait == "") {
				t.Fatalf("refused %q, wait %q; want %q, %q", got.Refused, got.Wait, tt.refused, tt.waitOn)
			}
			data := 0
			for _, m := range got.Moves {
				checkZoneSpread(t, m)
				if !m.CopiesData() {
					continue
				}
				data++
				for _, id := range m.To {
					if !slices.Contains(m.From, id) && len(tt.onto) > 0 && !slices.Contains(tt.onto, id) {
						t.Errorf("move %+v adds a replica on %d, want only on %v", m, id, tt.onto)
					}
				}
				for _, id := range tt.off {
					if slices.Contains(m.To, id) {
						t.Errorf("move %+v keeps a replica on %d", m, id)
					}
				}
			}
			if data != tt.moves || got.Waiting != tt.waiting {
				t.Fatalf("%d replica moves, %d waiting (%+v); want %d, %d", data, got.Waiting, got.Moves, tt.moves, tt.waiting)
			}
		})
	}
}

// TestRebalanceStepGoesOn runs an approved request to its end, applying
// each step's moves as the brokers would: the cap holds, every step is
// part of the plan, and the plan ends with nothing to move.
func TestRebalanceStepGoesOn(t *testing.T) {
	var parts []Partition
	for p := range int32(12) {
		parts = append(parts, sized(part("t", p, 0, 100, 200), int64(1000*(p+1))))
	}
	for _, req := range []RebalanceRequest{{Mode: ModeFull}, {Mode: ModeAddBrokers, Brokers: []int32{1, 2}}} {
		t.Run(req.Mode, func(t *testing.T) {
			md := Metadata{Brokers: brokers(0, 1, 2, 100, 200), Partitions: slices.Clone(parts)}
			rounds := 0
			for ; rounds < 20; rounds++ {
				step, pl := RebalanceStep(req, md, 2)
				if pl.Refused != "" || pl.Wait != "" {
					t.Fatalf("round %d: %+v", rounds, pl)
				}
				if len(step.Moves) == 0 {
					break
				}
				data := 0
				for _, m := range step.Moves {
					if m.CopiesData() {
						data++
					}
					for i := range md.Partitions {
						if md.Partitions[i].Topic == m.Topic && md.Partitions[i].Partition == m.Partition {
							md.Partitions[i] = sized(part(m.Topic, m.Partition, m.To...), md.Partitions[i].Size())
						}
					}
				}
				if data > 2 {
					t.Fatalf("round %d: %d replica moves, the cap is 2", rounds, data)
				}
			}
			if rounds == 20 {
				t.Fatal("the plan never ends")
			}
			per := map[int32]int{}
			for _, p := range md.Partitions {
				for _, id := range p.Replicas {
					per[id]++
				}
			}
			if per[0]+per[1]+per[2] != 12 || per[1] < 3 || per[2] < 3 || per[0] > 6 {
				t.Fatalf("zone a replicas after %d rounds: %v", rounds, per)
			}
		})
	}
}

func TestCostOf(t *testing.T) {
	md := Metadata{Brokers: brokers(0, 1, 100, 200), Untiered: map[string]bool{"compacted": true},
		Partitions: []Partition{sized(part("t", 0, 100, 0, 200), 500), sized(part("compacted", 0, 100, 0, 200), 700), sized(part("t", 1, 0, 100, 200), 300)}}
	tests := []struct {
		name                    string
		move                    placement.Move
		tiered                  bool
		bytes, cross, crossTier int64
	}{
		{"leader in zone b, new replica in zone a", placement.Move{Topic: "t", Partition: 0, From: []int32{100, 0, 200}, To: []int32{100, 1, 200}}, false, 500, 500, 500},
		{"the same, tiered: hydrates", placement.Move{Topic: "t", Partition: 0, From: []int32{100, 0, 200}, To: []int32{100, 1, 200}}, true, 500, 500, 0},
		{"a compacted topic is not tiered", placement.Move{Topic: "compacted", Partition: 0, From: []int32{100, 0, 200}, To: []int32{100, 1, 200}}, true, 700, 700, 700},
		{"leader in the new replica's zone", placement.Move{Topic: "t", Partition: 1, From: []int32{0, 100, 200}, To: []int32{1, 100, 200}}, false, 300, 0, 0},
		{"a reordering copies nothing", placement.Move{Topic: "t", Partition: 1, From: []int32{0, 100, 200}, To: []int32{100, 0, 200}}, false, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := md.CostOf(tt.move, tt.tiered)
			if got.Bytes != tt.bytes || got.CrossZone != tt.cross || got.CrossZoneStrata != tt.crossTier {
				t.Fatalf("CostOf = %+v, want bytes %d, cross-zone %d, with the tier %d", got, tt.bytes, tt.cross, tt.crossTier)
			}
		})
	}
}
