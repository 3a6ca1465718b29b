package group

import (
	"fmt"
	"testing"
)

func TestCoordinatorFor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers []int32
		want    int32
	}{
		{"no brokers", nil, -1},
		{"single broker", []int32{7}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CoordinatorFor("g", tc.brokers); got != tc.want {
				t.Fatalf("got %d want %d", got, tc.want)
			}
		})
	}

	brokers := []int32{1, 2, 3, 4, 5}
	const groups = 5000
	counts := map[int32]int{}
	moved := 0
	for i := range groups {
		id := fmt.Sprintf("group-%d", i)
		b := CoordinatorFor(id, brokers)
		if b2 := CoordinatorFor(id, []int32{5, 3, 1, 4, 2}); b2 != b {
			t.Fatalf("%s: order changed the coordinator %d → %d", id, b, b2)
		}
		counts[b]++
		after := CoordinatorFor(id, []int32{1, 2, 4, 5}) // broker 3 died
		if b != 3 && after != b {
			t.Fatalf("%s moved from live broker %d to %d", id, b, after)
		}
		if b == 3 {
			moved++
		}
	}
	for _, b := range brokers {
		// Each broker should hold about 1/5 of the groups; allow ±20%.
		if n := counts[b]; n < groups/5*8/10 || n > groups/5*12/10 {
			t.Fatalf("broker %d coordinates %d of %d groups: %v", b, n, groups, counts)
		}
	}
	if moved != counts[3] {
		t.Fatalf("moved %d, want %d", moved, counts[3])
	}
}
