package chaos

import (
	"reflect"
	"testing"
	"time"
)

var testTopo = Topology{Zones: []string{"a", "b", "c"}, BrokerIDs: []int32{1, 2, 3}, Topics: []string{"chaos-0", "chaos-1", "chaos-2"},
	Partitions: 3, PerZone: 1, Replicas: 3}

func TestScheduleReproducible(t *testing.T) {
	o := ScheduleOptions{Duration: 120 * time.Second}
	a, b := NewSchedule(1, testTopo, o), NewSchedule(1, testTopo, o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("seed 1 gave two different schedules")
	}
	if c := NewSchedule(2, testTopo, o); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 1 and 2 gave the same schedule")
	}
}

func TestScheduleShape(t *testing.T) {
	tests := []struct {
		name     string
		duration time.Duration
		kinds    []string
		topo     Topology
		allKinds bool // every kind must appear
	}{
		{"wal 120s covers every kind", 120 * time.Second, nil, testTopo, true},
		{"classic kinds only", 60 * time.Second, []string{KindKill, KindPause, KindRestart, KindEtcdCut, KindReassign, KindElect}, testTopo, true},
		{"short run", 20 * time.Second, nil, testTopo, false},
		{"two brokers per zone", 120 * time.Second, []string{KindReassign, KindKill},
			Topology{Zones: []string{"a", "b", "c"}, BrokerIDs: []int32{1, 2, 3, 4, 5, 6}, Topics: []string{"t"}, Partitions: 2, PerZone: 2, Replicas: 3}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for seed := int64(1); seed <= 20; seed++ {
				s := NewSchedule(seed, tc.topo, ScheduleOptions{Duration: tc.duration, Kinds: tc.kinds})
				seen := map[string]bool{}
				var prevEnd time.Duration
				for i, f := range s {
					seen[f.Kind] = true
					if f.At < 5*time.Second || f.At+f.Duration > tc.duration-5*time.Second {
						t.Fatalf("seed %d fault %d %s outside the fault window", seed, i, f)
					}
					if i > 0 && f.At < prevEnd+time.Second {
						t.Fatalf("seed %d fault %d %s overlaps the previous one (ends %v)", seed, i, f, prevEnd)
					}
					prevEnd = f.At + f.Duration
					if tc.kinds != nil && !contains(tc.kinds, f.Kind) {
						t.Fatalf("seed %d: kind %s not asked for", seed, f.Kind)
					}
					if f.Kind == KindReassign {
						zones := map[int]bool{}
						for _, id := range f.Replicas {
							z := int(id-1) / tc.topo.PerZone
							if zones[z] {
								t.Fatalf("seed %d: reassignment %v puts two replicas in one zone", seed, f.Replicas)
							}
							zones[z] = true
						}
						if len(f.Replicas) != 3 {
							t.Fatalf("seed %d: reassignment to %v, want 3 replicas", seed, f.Replicas)
						}
					}
				}
				want := tc.kinds
				if want == nil {
					want = AllKinds
				}
				if tc.allKinds {
					for _, k := range want {
						if !seen[k] {
							t.Fatalf("seed %d: no %s fault in %d faults", seed, k, len(s))
						}
					}
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestParseKinds(t *testing.T) {
	if k, err := ParseKinds(""); err != nil || k != nil {
		t.Fatalf("empty: %v, %v", k, err)
	}
	if k, err := ParseKinds("kill, etcd-cut"); err != nil || !reflect.DeepEqual(k, []string{KindKill, KindEtcdCut}) {
		t.Fatalf("two kinds: %v, %v", k, err)
	}
	if _, err := ParseKinds("kill,meteor"); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}
