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
	grown := []Broker{{ID: 1, Zone: "a"}, {ID: 2, Zone: "b"}, {ID: 3, Zone: "c"}, {ID: 4, Zone: "a"}, {ID: 5, Zone: "b"}, {ID: 6, Zone: "c"}}
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
		{"rf2 onto a new zone-c broker", append(slices.Clone(three), Broker{ID: 4, Zone: "c"}), partitionsOf("t", onThreeRF2), 0, -1, 1, -1},
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
	brokers := []Broker{{ID: 1, Zone: "a"}, {ID: 2, Zone: "b"}, {ID: 3, Zone: "c"}, {ID: 4, Zone: "a"}, {ID: 5, Zone: "b"}, {ID: 6, Zone: "c"}}
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

// TestRebalanceBytes: zone a grows from broker 1 to brokers 1 and 2
// (zones b and c have one broker each, RF 3), with skewed partition
// sizes. Zone a's brokers end within one replica and within the byte
// tolerance of each other where the sizes allow it, a huge partition is
// not moved to balance counts a small one balances as well, a partition
// with a reassignment in flight is left alone, the plan converges in a
// few capped rounds, and planning again on the result moves nothing.
func TestRebalanceBytes(t *testing.T) {
	const mib = int64(1 << 20)
	brokers := []Broker{{ID: 1, Zone: "a"}, {ID: 2, Zone: "a"}, {ID: 3, Zone: "b"}, {ID: 4, Zone: "c"}}
	type sized struct {
		topic string
		n     int
		size  int64
	}
	build := func(ts ...sized) []Partition {
		var out []Partition
		for _, s := range ts {
			for i := range s.n {
				out = append(out, Partition{Topic: s.topic, Partition: int32(i), Replicas: []int32{1, 3, 4}, Size: s.size})
			}
		}
		return out
	}
	tests := []struct {
		name  string
		parts []Partition
		// wantDiff is the largest byte difference between brokers 1 and 2
		// the sizes allow; wantCopied the most bytes the plan may copy.
		wantDiff, wantCopied int64
		wantRounds           int // capped at 2 moves a round
	}{
		{"one huge partition stays put, tiny ones move",
			build(sized{"huge", 1, 100 * mib}, sized{"tiny", 9, 1024}),
			100 * mib, 5 * 1024, 3},
		// Listed first by name, the empty topics would be the ones a count
		// balance moves; the sized one must be split too.
		{"empty topics and one with data",
			build(sized{"a-empty", 4, 0}, sized{"b-empty", 4, 0}, sized{"z-data", 4, 50 * mib}),
			0, 100 * mib, 3},
		{"a few large, many small",
			build(sized{"large", 4, 64 * mib}, sized{"small", 20, mib}),
			ByteTolerance(3*(4*64+20)*mib, 4), 140 * mib, 7},
		{"all empty: counts only", build(sized{"e", 6, 0}), 0, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			apply := func(parts []Partition, moves []Move) []Partition {
				out := slices.Clone(parts)
				for _, m := range moves {
					for i := range out {
						if out[i].Topic == m.Topic && out[i].Partition == m.Partition {
							if !slices.Equal(out[i].Replicas, m.From) {
								t.Fatalf("move %+v from %v", m, out[i].Replicas)
							}
							out[i].Replicas = m.To
						}
					}
				}
				return out
			}
			moves, err := Rebalance(brokers, tt.parts, 0)
			if err != nil {
				t.Fatal(err)
			}
			final := apply(tt.parts, moves)
			count, bytes := map[int32]int{}, map[int32]int64{}
			var copied int64
			var asg [][]int32
			for i, p := range final {
				asg = append(asg, p.Replicas)
				for _, id := range p.Replicas {
					count[id]++
					bytes[id] += p.Size
					if !slices.Contains(tt.parts[i].Replicas, id) {
						copied += p.Size
					}
				}
			}
			checkAssignment(t, brokers, asg, 3)
			t.Logf("counts %v, bytes %v, copied %d", count, bytes, copied)
			if d := count[1] - count[2]; d < -1 || d > 1 {
				t.Errorf("zone a replicas %d and %d: more than one apart", count[1], count[2])
			}
			if d := abs(bytes[1] - bytes[2]); d > tt.wantDiff {
				t.Errorf("zone a bytes %d and %d: %d apart, want at most %d", bytes[1], bytes[2], d, tt.wantDiff)
			}
			if copied > tt.wantCopied {
				t.Errorf("copied %d bytes, want at most %d", copied, tt.wantCopied)
			}
			if again, err := Rebalance(brokers, final, 0); err != nil || len(again) != 0 {
				t.Errorf("planning again on the result: %v %v, want no moves", again, err)
			}

			// Capped rounds: each round's moves are done before the next
			// plan; it converges to the same balance.
			cur := slices.Clone(tt.parts)
			rounds := 0
			for ; rounds < 50; rounds++ {
				ms, err := Rebalance(brokers, cur, 2)
				if err != nil {
					t.Fatal(err)
				}
				if len(ms) == 0 {
					break
				}
				cur = apply(cur, ms)
			}
			cb := map[int32]int64{}
			for _, p := range cur {
				for _, id := range p.Replicas {
					cb[id] += p.Size
				}
			}
			if rounds > tt.wantRounds || abs(cb[1]-cb[2]) > tt.wantDiff {
				t.Errorf("capped: %d rounds (want at most %d), bytes %v", rounds, tt.wantRounds, cb)
			}
		})
	}
}

// TestRebalanceBytesSwap: counts are balanced but both large partitions
// sit on broker 1; a swap of a large for a small replica evens the bytes
// and keeps the counts. A reassignment in flight is never touched.
func TestRebalanceBytesSwap(t *testing.T) {
	const mib = int64(1 << 20)
	brokers := []Broker{{ID: 1, Zone: "a"}, {ID: 2, Zone: "a"}}
	parts := []Partition{
		{Topic: "t", Partition: 0, Replicas: []int32{1}, Size: 64 * mib},
		{Topic: "t", Partition: 1, Replicas: []int32{1}, Size: 64 * mib},
		{Topic: "t", Partition: 2, Replicas: []int32{2}, Size: mib},
		{Topic: "t", Partition: 3, Replicas: []int32{2}, Size: mib},
	}
	moves, err := Rebalance(brokers, parts, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 2 || moves[0].Partition == moves[1].Partition {
		t.Fatalf("moves %v, want one swap (two moves)", moves)
	}
	if moves, err := Rebalance(brokers, parts, 1); err != nil || len(moves) != 0 {
		t.Fatalf("with room for one move: %v %v, want none (a swap is two moves, a single move would break the counts)", moves, err)
	}
	pinned := slices.Clone(parts)
	pinned[0].Pinned, pinned[1].Pinned = true, true
	if moves, err := Rebalance(brokers, pinned, 0); err != nil || len(moves) != 0 {
		t.Fatalf("large partitions pinned: %v %v, want no moves", moves, err)
	}
}
