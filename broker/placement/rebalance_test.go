package placement

import (
	"fmt"
	"slices"
	"testing"
)

func TestRebalance(t *testing.T) {
	partitionsOf := func(topic string, asg [][]int32) []Partition {
		var out []Partition
		for i, rs := range asg {
			out = append(out, Partition{Topic: topic, Partition: int32(i), Replicas: rs})
		}
		return out
	}
	three := zoned("a:1", "b:1", "c:1")
	onThree, err := Assign(Request{Brokers: three, Partitions: 12, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	onThreeRF2, err := Assign(Request{Brokers: three, Partitions: 12, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	six := zoned("a:2", "b:2", "c:2")
	balanced, err := Assign(Request{Brokers: six, Partitions: 12, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	// 1..3 were the old brokers in zones a, b, c; 4, 5, 6 join a, b, c.
	grown := []Broker{{1, "a"}, {2, "b"}, {3, "c"}, {4, "a"}, {5, "b"}, {6, "c"}}
	tests := []struct {
		name       string
		brokers    []Broker
		partitions []Partition
		maxMoves   int
		wantMoves  int // -1: any
		wantSpread int // max-min replicas per broker after
		wantMoved  int // replicas moved (-1: any)
	}{
		{"balanced stays put", six, partitionsOf("t", balanced), 0, 0, 0, 0},
		// 36 replicas on 3 brokers to 6 each on 6: 18 must move, no more.
		{"three new brokers, one per zone", grown, partitionsOf("t", onThree), 0, -1, 0, 18},
		{"rf2 onto a new zone-c broker", append(slices.Clone(three), Broker{4, "c"}), partitionsOf("t", onThreeRF2), 0, -1, 1, -1},
		{"move budget respected", grown, partitionsOf("t", onThree), 3, -1, -1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves, err := Rebalance(tt.brokers, tt.partitions, tt.maxMoves)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantMoves >= 0 && len(moves) != tt.wantMoves {
				t.Fatalf("%d moves, want %d: %v", len(moves), tt.wantMoves, moves)
			}
			final := map[string][]int32{}
			for _, p := range tt.partitions {
				final[fmt.Sprint(p.Topic, p.Partition)] = p.Replicas
			}
			replicaMoves := 0
			for _, m := range moves {
				before := final[fmt.Sprint(m.Topic, m.Partition)]
				for _, id := range m.To {
					if !slices.Contains(before, id) {
						replicaMoves++
					}
				}
				final[fmt.Sprint(m.Topic, m.Partition)] = m.To
			}
			if tt.wantMoved >= 0 && replicaMoves != tt.wantMoved {
				t.Errorf("%d replicas moved, want %d", replicaMoves, tt.wantMoved)
			}
			var asg [][]int32
			for _, rs := range final {
				asg = append(asg, rs)
			}
			replicas, leaders := checkAssignment(t, tt.brokers, asg, len(asg[0]))
			if tt.wantSpread >= 0 {
				if lo, hi := spread(replicas, ids(tt.brokers)); hi-lo > tt.wantSpread {
					t.Errorf("replicas per broker %v: spread %d, want <= %d", replicas, hi-lo, tt.wantSpread)
				}
				if lo, hi := spread(leaders, ids(tt.brokers)); hi-lo > 1 {
					t.Errorf("leaders per broker %v: spread %d", leaders, hi-lo)
				}
			}
		})
	}
}

// Pinned leaders stay in their zone while the rest balances.
func TestRebalanceKeepsLeaderZone(t *testing.T) {
	brokers := []Broker{{1, "a"}, {2, "b"}, {3, "c"}, {4, "a"}, {5, "b"}, {6, "c"}}
	asg, err := Assign(Request{Brokers: brokers[:3], Partitions: 6, ReplicationFactor: 3, LeaderZone: "b"})
	if err != nil {
		t.Fatal(err)
	}
	var parts []Partition
	for i, rs := range asg {
		parts = append(parts, Partition{Topic: "pinned", Partition: int32(i), Replicas: rs, LeaderZone: "b"})
	}
	moves, err := Rebalance(brokers, parts, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	final := map[int32][]int32{}
	for _, p := range parts {
		final[p.Partition] = p.Replicas
	}
	for _, m := range moves {
		final[m.Partition] = m.To
	}
	for p, rs := range final {
		if rs[0] != 2 && rs[0] != 5 {
			t.Errorf("partition %d: leader %d outside zone b: %v", p, rs[0], rs)
		}
		leaders[rs[0]]++
	}
	if leaders[2] != 3 || leaders[5] != 3 {
		t.Errorf("zone-b leaders %v, want 3 and 3", leaders)
	}
}
