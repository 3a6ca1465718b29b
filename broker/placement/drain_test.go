package placement

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestDrain(t *testing.T) {
	six := zoned("a:2", "b:2", "c:2") // 1,2 in a; 3,4 in b; 5,6 in c
	assigned, err := Assign(Request{Brokers: six, Partitions: 12, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	var cluster []Partition
	for i, rs := range assigned {
		cluster = append(cluster, Partition{Topic: "t", Partition: int32(i), Replicas: rs})
	}
	cluster = append(cluster, Partition{Topic: "other", Partition: 0, Replicas: []int32{3, 5}})

	tests := []struct {
		name      string
		brokers   []Broker
		drained   []int32
		wantMoves int
		wantErr   error
		check     func(t *testing.T, moves []Move)
	}{
		{name: "broker 1 moves to its zone peer", brokers: six, drained: []int32{1}, wantMoves: 6,
			check: func(t *testing.T, moves []Move) {
				for _, m := range moves {
					i := slices.Index(m.From, 1)
					if m.To[i] != 2 {
						t.Errorf("%s-%d: replica of 1 went to %d, want 2 (same zone): %v -> %v", m.Topic, m.Partition, m.To[i], m.From, m.To)
					}
				}
			}},
		{name: "whole zone c drained: replicas go to zones a/b, two per partition at most",
			brokers: six, drained: []int32{5, 6}, wantMoves: 13},
		{name: "drain nothing hosted", brokers: append(slices.Clone(six), Broker{ID: 7, Zone: "c"}), drained: []int32{7}, wantMoves: 0},
		{name: "no room", brokers: zoned("a:1", "b:1", "c:1"), drained: []int32{1}, wantErr: ErrCannotDrain},
		{name: "unknown drained broker", brokers: six, drained: []int32{42}, wantErr: ErrInvalidBrokers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := cluster
			if tt.wantErr == ErrCannotDrain {
				input = []Partition{{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}}}
			}
			before := fmt.Sprint(input)
			moves, err := Drain(tt.brokers, input, tt.drained)
			if fmt.Sprint(input) != before {
				t.Fatalf("Drain modified its input: %s -> %v", before, input)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(moves) != tt.wantMoves {
				t.Fatalf("%d moves, want %d: %v", len(moves), tt.wantMoves, moves)
			}
			zoneOf := map[int32]string{}
			for _, b := range tt.brokers {
				zoneOf[b.ID] = b.Zone
			}
			replicas := map[int32]int{}
			for _, m := range moves {
				perZone := map[string]int{}
				for i, id := range m.To {
					if slices.Contains(tt.drained, id) {
						t.Errorf("%s-%d still on drained broker %d: %v", m.Topic, m.Partition, id, m.To)
					}
					if slices.Index(m.To, id) != i {
						t.Errorf("%s-%d: broker %d twice: %v", m.Topic, m.Partition, id, m.To)
					}
					if !slices.Contains(tt.drained, m.From[i]) && m.From[i] != id {
						t.Errorf("%s-%d: undrained replica %d moved: %v -> %v", m.Topic, m.Partition, m.From[i], m.From, m.To)
					}
					perZone[zoneOf[id]]++
					replicas[id]++
				}
				for z, n := range perZone {
					if n > 2 || (len(m.To) <= 2 && n > 1) {
						t.Errorf("%s-%d: %d replicas in zone %s: %v", m.Topic, m.Partition, n, z, m.To)
					}
				}
			}
			if tt.check != nil {
				tt.check(t, moves)
			}
		})
	}
}

// TestDrainBytes: the replicas of a drained broker go to the staying
// broker with the fewest bytes among those within one replica of the
// fewest, largest partitions first.
func TestDrainBytes(t *testing.T) {
	const mib = int64(1 << 20)
	zoneA := []Broker{{ID: 1, Zone: "a"}, {ID: 2, Zone: "a"}, {ID: 3, Zone: "a"}}
	tests := []struct {
		name  string
		parts []Partition
		// want is where each drained partition goes (partition → broker).
		want map[int32]int32
	}{
		{"the emptier broker by bytes takes it, counts being equal",
			[]Partition{
				{Topic: "t", Partition: 0, Replicas: []int32{1}, Size: 100 * mib},
				{Topic: "t", Partition: 1, Replicas: []int32{2}, Size: mib},
				{Topic: "t", Partition: 2, Replicas: []int32{3}, Size: 50 * mib},
			},
			map[int32]int32{2: 2}},
		{"large first, small ones fill the other broker; counts stay within two",
			[]Partition{
				{Topic: "t", Partition: 0, Replicas: []int32{3}, Size: mib},
				{Topic: "t", Partition: 1, Replicas: []int32{3}, Size: mib},
				{Topic: "t", Partition: 2, Replicas: []int32{3}, Size: mib},
				{Topic: "t", Partition: 3, Replicas: []int32{3}, Size: mib},
				{Topic: "t", Partition: 4, Replicas: []int32{3}, Size: 40 * mib},
				{Topic: "t", Partition: 5, Replicas: []int32{3}, Size: 40 * mib},
				{Topic: "t", Partition: 6, Replicas: []int32{3}, Size: 80 * mib},
			},
			// 80 → 1; 40 → 2; 40 → 2 (fewer bytes, one replica more
			// than 1); then the small ones to the emptier: 82 MiB each.
			map[int32]int32{6: 1, 4: 2, 5: 2, 0: 1, 1: 2, 2: 1, 3: 2}},
		{"sizes unknown: counts, then broker ID, as before",
			[]Partition{
				{Topic: "t", Partition: 0, Replicas: []int32{3}},
				{Topic: "t", Partition: 1, Replicas: []int32{3}},
				{Topic: "t", Partition: 2, Replicas: []int32{1}},
			},
			map[int32]int32{0: 2, 1: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves, err := Drain(zoneA, tt.parts, []int32{3})
			if err != nil {
				t.Fatal(err)
			}
			got := map[int32]int32{}
			for _, m := range moves {
				got[m.Partition] = m.To[0]
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("drained partitions went to %v, want %v", got, tt.want)
			}
		})
	}
}
