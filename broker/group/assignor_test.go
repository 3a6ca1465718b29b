package group

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

func amember(id, rack string, current topicParts, topics ...string) assignMember {
	return assignMember{id: id, rack: rack, topics: topics, current: current}
}

// checkComplete fails unless every partition of every topic someone
// subscribes to is assigned exactly once, to a subscriber.
func checkComplete(t *testing.T, spec assignSpec, got map[string]topicParts) {
	t.Helper()
	owner := map[TopicPartition]string{}
	for _, m := range spec.members {
		for topic, ps := range got[m.id] {
			if len(ps) > 0 && !slices.Contains(m.topics, topic) {
				t.Errorf("%s got %s without subscribing", m.id, topic)
			}
			for _, p := range ps {
				tp := TopicPartition{topic, p}
				if o, dup := owner[tp]; dup {
					t.Errorf("%v assigned to %s and %s", tp, o, m.id)
				}
				owner[tp] = m.id
			}
		}
	}
	for topic, info := range spec.topics {
		subscribed := false
		for _, m := range spec.members {
			subscribed = subscribed || slices.Contains(m.topics, topic)
		}
		for p := range info.partitions {
			if _, ok := owner[TopicPartition{topic, p}]; subscribed && !ok {
				t.Errorf("%s-%d unassigned", topic, p)
			}
		}
	}
}

func loads(got map[string]topicParts) map[string]int {
	out := map[string]int{}
	for id, tp := range got {
		out[id] = tp.count()
	}
	return out
}

func TestAssignUniform(t *testing.T) {
	six := map[string]topicInfo{"a": {partitions: 6}}
	// racks: partition p has its one replica in zone z(p mod 3).
	racked := topicInfo{partitions: 6, racks: [][]string{{"z0"}, {"z1"}, {"z2"}, {"z0"}, {"z1"}, {"z2"}}}
	for _, tc := range []struct {
		name      string
		spec      assignSpec
		wantLoads map[string]int
		check     func(t *testing.T, got map[string]topicParts)
	}{
		{
			name:      "homogeneous",
			spec:      assignSpec{topics: six, members: []assignMember{amember("m1", "", nil, "a"), amember("m2", "", nil, "a"), amember("m3", "", nil, "a")}},
			wantLoads: map[string]int{"m1": 2, "m2": 2, "m3": 2},
		},
		{
			name: "sticky when a member joins",
			spec: assignSpec{topics: six, members: []assignMember{
				amember("m1", "", topicParts{"a": {0, 1, 2}}, "a"),
				amember("m2", "", topicParts{"a": {3, 4, 5}}, "a"),
				amember("m3", "", nil, "a"),
			}},
			wantLoads: map[string]int{"m1": 2, "m2": 2, "m3": 2},
			check: func(t *testing.T, got map[string]topicParts) {
				// Only the two partitions m3 needs move.
				for _, p := range got["m1"]["a"] {
					if p > 2 {
						t.Errorf("m1 got %d, not one of its own", p)
					}
				}
				for _, p := range got["m2"]["a"] {
					if p < 3 {
						t.Errorf("m2 got %d, not one of its own", p)
					}
				}
			},
		},
		{
			name: "sticky when a member leaves",
			spec: assignSpec{topics: six, members: []assignMember{
				amember("m1", "", topicParts{"a": {0, 1}}, "a"),
				amember("m3", "", topicParts{"a": {4, 5}}, "a"),
			}},
			wantLoads: map[string]int{"m1": 3, "m3": 3},
			check: func(t *testing.T, got map[string]topicParts) {
				if !slices.Contains(got["m1"]["a"], 0) || !slices.Contains(got["m1"]["a"], 1) ||
					!slices.Contains(got["m3"]["a"], 4) || !slices.Contains(got["m3"]["a"], 5) {
					t.Errorf("kept partitions moved: %v", got)
				}
			},
		},
		{
			name: "heterogeneous",
			spec: assignSpec{topics: map[string]topicInfo{"a": {partitions: 6}, "b": {partitions: 6}}, members: []assignMember{
				amember("m1", "", nil, "a"), amember("m2", "", nil, "a", "b"),
			}},
			wantLoads: map[string]int{"m1": 6, "m2": 6},
			check: func(t *testing.T, got map[string]topicParts) {
				if len(got["m2"]["b"]) != 6 {
					t.Errorf("m2 should own all of b: %v", got)
				}
			},
		},
		{
			name: "rack-aware",
			spec: assignSpec{topics: map[string]topicInfo{"a": racked}, members: []assignMember{
				amember("m1", "z0", nil, "a"), amember("m2", "z1", nil, "a"), amember("m3", "z2", nil, "a"),
			}},
			wantLoads: map[string]int{"m1": 2, "m2": 2, "m3": 2},
			check: func(t *testing.T, got map[string]topicParts) {
				for id, zone := range map[string]string{"m1": "z0", "m2": "z1", "m3": "z2"} {
					for _, p := range got[id]["a"] {
						if !racked.inRack(p, zone) {
							t.Errorf("%s (%s) got partition %d of another zone: %v", id, zone, p, got)
						}
					}
				}
			},
		},
		{
			name: "rack-aware never at the cost of balance",
			spec: assignSpec{topics: map[string]topicInfo{"a": racked}, members: []assignMember{
				amember("m1", "z0", nil, "a"), amember("m2", "z0", nil, "a"), amember("m3", "z0", nil, "a"),
			}},
			wantLoads: map[string]int{"m1": 2, "m2": 2, "m3": 2},
		},
		{
			name:      "member without existing topics",
			spec:      assignSpec{topics: six, members: []assignMember{amember("m1", "", nil, "a"), amember("m2", "", nil)}},
			wantLoads: map[string]int{"m1": 6, "m2": 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := assignUniform(tc.spec)
			checkComplete(t, tc.spec, got)
			if l := loads(got); !maps.Equal(l, tc.wantLoads) {
				t.Errorf("loads %v, want %v (%v)", l, tc.wantLoads, got)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// TestAssignUniformBalancedRandom checks balance and completeness over
// many membership and subscription shapes.
func TestAssignUniformBalancedRandom(t *testing.T) {
	topics := map[string]topicInfo{"a": {partitions: 7}, "b": {partitions: 3}, "c": {partitions: 12}}
	names := []string{"a", "b", "c"}
	for n := 1; n <= 6; n++ {
		for shape := range 8 {
			var ms []assignMember
			for i := range n {
				subs := []string{}
				for j, tn := range names {
					if (shape+i)&(1<<j) != 0 || j == 2 {
						subs = append(subs, tn)
					}
				}
				ms = append(ms, amember(fmt.Sprintf("m%d", i), "", nil, subs...))
			}
			spec := assignSpec{topics: topics, members: ms}
			got := assignUniform(spec)
			checkComplete(t, spec, got)
			// No partition can move to a subscriber two or more below its owner.
			for _, from := range ms {
				for _, to := range ms {
					if got[from.id].count()-got[to.id].count() < 2 {
						continue
					}
					for topic := range got[from.id] {
						if len(got[from.id][topic]) > 0 && slices.Contains(to.topics, topic) {
							t.Errorf("n=%d shape=%d: %s (%d) could give %s to %s (%d)", n, shape, from.id, got[from.id].count(), topic, to.id, got[to.id].count())
						}
					}
				}
			}
		}
	}
}

func TestAssignRange(t *testing.T) {
	spec := assignSpec{
		topics:  map[string]topicInfo{"a": {partitions: 7}, "b": {partitions: 7}, "c": {partitions: 2}},
		members: []assignMember{amember("m1", "", nil, "a", "b"), amember("m2", "", nil, "a", "b", "c"), amember("m3", "", nil, "a", "b")},
	}
	got := assignRange(spec)
	checkComplete(t, spec, got)
	want := map[string]topicParts{
		"m1": {"a": {0, 1, 2}, "b": {0, 1, 2}},
		"m2": {"a": {3, 4}, "b": {3, 4}, "c": {0, 1}},
		"m3": {"a": {5, 6}, "b": {5, 6}},
	}
	for id, w := range want {
		if !got[id].equal(w) {
			t.Errorf("%s: got %v, want %v", id, got[id], w)
		}
	}
}

// BenchmarkAssignUniform measures the uniform assignor on homogeneous
// groups: from scratch, and after one member joined a settled group
// (the common rebalance: sticky, few moves).
func BenchmarkAssignUniform(b *testing.B) {
	for _, size := range []struct{ members, partitions int32 }{{10, 100}, {100, 1000}, {300, 3000}} {
		topics := map[string]topicInfo{"t": {partitions: size.partitions}}
		var ms []assignMember
		for i := range size.members {
			ms = append(ms, amember(fmt.Sprintf("m%04d", i), "", nil, "t"))
		}
		spec := assignSpec{topics: topics, members: ms}
		b.Run(fmt.Sprintf("scratch-%dx%d", size.members, size.partitions), func(b *testing.B) {
			for range b.N {
				assignUniform(spec)
			}
		})
		settled := assignUniform(spec)
		joined := assignSpec{topics: topics}
		for _, m := range ms {
			m.current = settled[m.id]
			joined.members = append(joined.members, m)
		}
		joined.members = append(joined.members, amember("new", "", nil, "t"))
		b.Run(fmt.Sprintf("join-%dx%d", size.members, size.partitions), func(b *testing.B) {
			for range b.N {
				assignUniform(joined)
			}
		})
	}
}
