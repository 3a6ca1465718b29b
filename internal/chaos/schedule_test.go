package chaos

import (
	"reflect"
	"strings"
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
				for i, f := range s {
					seen[f.Kind] = true
					if f.At < 5*time.Second || f.At+f.Duration > tc.duration-5*time.Second {
						t.Fatalf("seed %d fault %d %s outside the fault window", seed, i, f)
					}
					if i > 0 && f.At < s[i-1].At {
						t.Fatalf("seed %d fault %d %s before the previous one %s", seed, i, f, s[i-1])
					}
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

// TestScheduleOverlaps: schedules overlap faults, bring two and more
// process faults at once (some beyond the replication factor), and kill
// leaders during reassignments, preferred elections and the elections a
// kill causes.
func TestScheduleOverlaps(t *testing.T) {
	var overlapping, twoDown, beyond int
	during := map[string]int{}
	for seed := int64(1); seed <= 20; seed++ {
		s := NewSchedule(seed, testTopo, ScheduleOptions{Duration: 120 * time.Second})
		for i, f := range s {
			for _, g := range s[:i] {
				if f.At < g.At+g.Duration {
					overlapping++
					if kindSpecs[f.Kind].process && kindSpecs[g.Kind].process && g.Duration > 0 {
						twoDown++
					}
					break
				}
			}
			if f.Beyond {
				beyond++
				if !kindSpecs[f.Kind].process {
					t.Fatalf("seed %d: %s beyond, not a process fault", seed, f)
				}
			}
			if f.During != "" {
				during[f.During]++
				if f.Kind != KindKill || !strings.HasPrefix(f.Target, "leader:") {
					t.Fatalf("seed %d: follow-up %s is not a leader kill", seed, f)
				}
				// It follows a fault of its During kind shortly before.
				found := false
				for _, g := range s {
					if g.Kind == f.During && g.During == "" && f.At > g.At && f.At <= g.At+4*time.Second {
						found = true
					}
				}
				if !found {
					t.Fatalf("seed %d: follow-up %s has no %s before it", seed, f, f.During)
				}
			}
		}
	}
	t.Logf("20 seeds x 120 s: %d overlapping, %d with two process faults, %d beyond, follow-ups %v", overlapping, twoDown, beyond, during)
	if overlapping == 0 || twoDown == 0 || beyond == 0 {
		t.Fatalf("overlapping %d, two process faults at once %d, beyond %d: want each > 0", overlapping, twoDown, beyond)
	}
	for _, k := range []string{KindReassign, KindElect, KindKill} {
		if during[k] == 0 {
			t.Fatalf("no kill during %s in 20 seeds", k)
		}
	}
	// Without kill, nothing follows up.
	for seed := int64(1); seed <= 20; seed++ {
		for _, f := range NewSchedule(seed, testTopo, ScheduleOptions{Duration: 120 * time.Second, Kinds: []string{KindReassign, KindElect}}) {
			if f.During != "" || f.Kind == KindKill {
				t.Fatalf("seed %d: %s without kill asked for", seed, f)
			}
		}
	}
}

// TestAdmit: a fault point is under one fault at a time; process faults
// stop at the limit of brokers down.
func TestAdmit(t *testing.T) {
	held := map[string]bool{"proc:1": true, "etcd:2": true}
	tests := []struct {
		name    string
		down    int
		limit   int
		process bool
		claim   []string
		err     string
	}{
		{"free point", 0, 2, false, []string{"etcd:1"}, ""},
		{"busy point", 0, 2, false, []string{"bucket:a", "etcd:2"}, "etcd:2 is under another fault"},
		{"busy broker", 1, 2, true, []string{"proc:1"}, "proc:1 is under another fault"},
		{"second broker down", 1, 2, true, []string{"proc:2"}, ""},
		{"third broker down refused", 2, 2, true, []string{"proc:3"}, "2 brokers down already (limit 2)"},
		{"third broker down beyond", 2, 3, true, []string{"proc:3"}, ""},
		{"network fault ignores the limit", 2, 2, false, []string{"link:1-2"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := admitLocked(held, tc.down, tc.limit, tc.process, tc.claim)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err %v, want %q", err, tc.err)
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
	if k, err := ParseKinds("all"); err != nil || k != nil {
		t.Fatalf("all: %v, %v", k, err)
	}
	if k, err := ParseKinds("none"); err != nil || k == nil || len(k) != 0 {
		t.Fatalf("none: %#v, %v; want an empty, non-nil list", k, err)
	}
	if k, err := ParseKinds("kill, etcd-cut"); err != nil || !reflect.DeepEqual(k, []string{KindKill, KindEtcdCut}) {
		t.Fatalf("two kinds: %v, %v", k, err)
	}
	if _, err := ParseKinds("kill,meteor"); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}
