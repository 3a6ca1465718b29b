package placement

import (
	"slices"
	"testing"
)

func TestLeaderZoneTarget(t *testing.T) {
	three := zoned("a:1", "b:1", "c:1") // 1 in a, 2 in b, 3 in c
	six := zoned("a:2", "b:2", "c:2")   // 1,2 in a; 3,4 in b; 5,6 in c
	tests := []struct {
		name     string
		brokers  []Broker
		replicas []int32
		zone     string
		load     map[int32]Load
		want     []int32
		changed  bool
	}{
		{name: "no zone: balanced, nothing moves", brokers: three, replicas: []int32{1, 2, 3}, want: []int32{1, 2, 3}},
		{name: "leader already in zone", brokers: three, replicas: []int32{2, 3, 1}, zone: "b", want: []int32{2, 3, 1}},
		{name: "replica in zone moves first, others keep order", brokers: three, replicas: []int32{1, 3, 2}, zone: "b", want: []int32{2, 1, 3}, changed: true},
		{name: "second slot", brokers: three, replicas: []int32{3, 2, 1}, zone: "b", want: []int32{2, 3, 1}, changed: true},
		{name: "dead follower does not block a reorder", brokers: three[:2], replicas: []int32{1, 3, 2}, zone: "b", want: []int32{2, 1, 3}, changed: true},
		{name: "dead preferred leader: known replica in zone still goes first", brokers: three[1:], replicas: []int32{1, 2, 3}, zone: "c", want: []int32{3, 1, 2}, changed: true},
		{name: "dead replica may be the one in zone: leave alone", brokers: three[:2], replicas: []int32{1, 3}, zone: "c", want: []int32{1, 3}},
		{name: "no replica in zone: follower replaced by the least loaded zone broker", brokers: six, replicas: []int32{1, 5}, zone: "b",
			load: map[int32]Load{3: {Replicas: 4}, 4: {Replicas: 2}}, want: []int32{4, 1}, changed: true},
		{name: "ties on load: fewest leaders, then lowest ID", brokers: six, replicas: []int32{1, 5}, zone: "b",
			load: map[int32]Load{3: {Replicas: 2, Leaders: 2}, 4: {Replicas: 2, Leaders: 1}}, want: []int32{4, 1}, changed: true},
		{name: "no load known: lowest ID", brokers: six, replicas: []int32{1, 5}, zone: "b", want: []int32{3, 1}, changed: true},
		{name: "the crowded zone's replica goes", brokers: six, replicas: []int32{5, 1, 2}, zone: "b", want: []int32{3, 5, 1}, changed: true},
		{name: "zone without brokers: leave alone", brokers: three, replicas: []int32{1, 2}, zone: "d", want: []int32{1, 2}},
		{name: "every zone broker already a replica elsewhere is impossible; empty replicas", brokers: three, replicas: nil, zone: "b", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.replicas)
			got, changed := LeaderZoneTarget(tt.brokers, tt.replicas, tt.zone, func() map[int32]Load { return tt.load })
			if !slices.Equal(got, tt.want) || changed != tt.changed {
				t.Fatalf("got %v changed=%v, want %v changed=%v", got, changed, tt.want, tt.changed)
			}
			if !slices.Equal(before, tt.replicas) {
				t.Fatalf("input modified: %v -> %v", before, tt.replicas)
			}
		})
	}
}
