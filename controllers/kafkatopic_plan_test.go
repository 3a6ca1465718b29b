package controllers

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kadm"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/placement"
)

func TestDesiredTopicConfigs(t *testing.T) {
	kt := &strata.KafkaTopic{Spec: strata.KafkaTopicSpec{Config: map[string]string{"retention.ms": "1000"}, LeaderZone: "b"}}
	got := DesiredTopicConfigs(kt)
	want := map[string]string{"retention.ms": "1000", "leader.placement.zone": "b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("desired configs (-want +got):\n%s", diff)
	}
	if _, ok := kt.Spec.Config["leader.placement.zone"]; ok {
		t.Error("DesiredTopicConfigs wrote into the spec's map")
	}
	if got := DesiredTopicConfigs(&strata.KafkaTopic{}); got == nil || len(got) != 0 {
		t.Errorf("empty spec: got %v, want an empty map", got)
	}
}

func TestPlanTopicConfigs(t *testing.T) {
	set := func(k, v string) string { return k + "=" + v }
	del := func(k string) string { return "-" + k }
	for _, tc := range []struct {
		name                        string
		desired, applied, overrides map[string]string
		ops, drifted                []string
		unmanaged                   map[string]string
	}{
		{name: "in sync", desired: map[string]string{"retention.ms": "1"}, applied: map[string]string{"retention.ms": "1"}, overrides: map[string]string{"retention.ms": "1"}},
		{name: "new topic config", desired: map[string]string{"retention.ms": "1"}, ops: []string{set("retention.ms", "1")}},
		{name: "spec changed a value", desired: map[string]string{"retention.ms": "2"}, applied: map[string]string{"retention.ms": "1"}, overrides: map[string]string{"retention.ms": "1"},
			ops: []string{set("retention.ms", "2")}},
		{name: "someone changed a managed value", desired: map[string]string{"retention.ms": "1"}, applied: map[string]string{"retention.ms": "1"}, overrides: map[string]string{"retention.ms": "9"},
			ops: []string{set("retention.ms", "1")}, drifted: []string{"retention.ms"}},
		{name: "someone removed a managed value", desired: map[string]string{"retention.ms": "1"}, applied: map[string]string{"retention.ms": "1"},
			ops: []string{set("retention.ms", "1")}, drifted: []string{"retention.ms"}},
		{name: "key left the spec", desired: map[string]string{}, applied: map[string]string{"retention.ms": "1"}, overrides: map[string]string{"retention.ms": "1"},
			ops: []string{del("retention.ms")}},
		{name: "key left the spec and is already gone", desired: map[string]string{}, applied: map[string]string{"retention.ms": "1"}},
		{name: "adopted topic: unmanaged kept, managed converged",
			desired:   map[string]string{"retention.ms": "1", "min.insync.replicas": "2"},
			overrides: map[string]string{"retention.ms": "5", "segment.ms": "60000", "flush.ms": "10"},
			ops:       []string{set("min.insync.replicas", "2"), set("retention.ms", "1")},
			unmanaged: map[string]string{"segment.ms": "60000", "flush.ms": "10"}},
		{name: "mixed, sorted by key",
			desired:   map[string]string{"segment.ms": "5", "retention.ms": "1"},
			applied:   map[string]string{"retention.ms": "1", "flush.ms": "3"},
			overrides: map[string]string{"retention.ms": "7", "flush.ms": "3"},
			ops:       []string{del("flush.ms"), set("retention.ms", "1"), set("segment.ms", "5")}, drifted: []string{"retention.ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanTopicConfigs(tc.desired, tc.applied, tc.overrides)
			var ops []string
			for _, op := range p.Ops {
				switch op.Op {
				case kadm.SetConfig:
					ops = append(ops, set(op.Name, *op.Value))
				case kadm.DeleteConfig:
					ops = append(ops, del(op.Name))
				default:
					t.Fatalf("unexpected op %v", op)
				}
			}
			if diff := cmp.Diff(tc.ops, ops); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.drifted, p.Drifted); diff != "" {
				t.Errorf("drifted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.unmanaged, p.Unmanaged); diff != "" {
				t.Errorf("unmanaged (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResizeReplicas(t *testing.T) {
	threeZones := []placement.Broker{{ID: 0, Zone: "a"}, {ID: 100, Zone: "b"}, {ID: 200, Zone: "c"}}
	sixBrokers := []placement.Broker{{ID: 0, Zone: "a"}, {ID: 1, Zone: "a"}, {ID: 100, Zone: "b"}, {ID: 101, Zone: "b"}, {ID: 200, Zone: "c"}, {ID: 201, Zone: "c"}}
	for _, tc := range []struct {
		name    string
		brokers []placement.Broker
		current [][]int32
		rf      int
		want    [][]int32
		err     error
	}{
		{name: "unchanged", brokers: threeZones, current: [][]int32{{0, 100}, {100, 200}}, rf: 2, want: [][]int32{{0, 100}, {100, 200}}},
		{name: "grow 1 to 3 over three zones", brokers: threeZones, current: [][]int32{{0}, {100}, {200}}, rf: 3,
			want: [][]int32{{0, 100, 200}, {100, 0, 200}, {200, 0, 100}}},
		{name: "grow 2 to 3 takes the missing zone", brokers: threeZones, current: [][]int32{{0, 200}, {100, 200}}, rf: 3,
			want: [][]int32{{0, 200, 100}, {100, 200, 0}}},
		{name: "grow picks a new zone before a second broker of a used zone", brokers: sixBrokers, current: [][]int32{{0}, {1}}, rf: 2,
			want: [][]int32{{0, 100}, {1, 101}}},
		{name: "grow spreads over the brokers of a zone", brokers: sixBrokers, current: [][]int32{{0, 100}, {1, 101}, {0, 101}}, rf: 3,
			want: [][]int32{{0, 100, 200}, {1, 101, 201}, {0, 101, 200}}},
		{name: "shrink keeps the preferred leader", brokers: threeZones, current: [][]int32{{0, 100, 200}, {100, 200, 0}, {200, 0, 100}}, rf: 1,
			want: [][]int32{{0}, {100}, {200}}},
		{name: "shrink drops the second replica of a zone first", brokers: sixBrokers, current: [][]int32{{0, 1, 100}}, rf: 2,
			want: [][]int32{{0, 100}}},
		{name: "shrink drops replicas on gone brokers first", brokers: threeZones, current: [][]int32{{0, 7, 100}}, rf: 2,
			want: [][]int32{{0, 100}}},
		{name: "shrink drops a preferred leader that is gone", brokers: threeZones, current: [][]int32{{7, 0, 100}}, rf: 2,
			want: [][]int32{{0, 100}}},
		{name: "more replicas than brokers", brokers: threeZones, current: [][]int32{{0}}, rf: 4, err: placement.ErrInvalidReplicationFactor},
		{name: "zero replicas", brokers: threeZones, current: [][]int32{{0}}, rf: 0, err: placement.ErrInvalidReplicationFactor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResizeReplicas(tc.brokers, tc.current, tc.rf)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
			// One replica per zone whenever there are enough zones.
			zoneOf, allZones := map[int32]string{}, map[string]bool{}
			for _, b := range tc.brokers {
				zoneOf[b.ID] = b.Zone
				allZones[b.Zone] = true
			}
			for i, rs := range got {
				zones := map[string]bool{}
				for _, id := range rs {
					if zones[zoneOf[id]] && tc.rf <= len(allZones) {
						t.Errorf("partition %d: two replicas in zone %s: %v", i, zoneOf[id], rs)
					}
					zones[zoneOf[id]] = true
				}
			}
		})
	}
}

func TestLeadersPerZone(t *testing.T) {
	got := LeadersPerZone([]int32{0, 100, 100, -1, 7}, map[int32]string{0: "a", 100: "b"})
	if diff := cmp.Diff(map[string]int32{"a": 1, "b": 2}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
