package controllers

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/placement"
)

// The KafkaTopic controller's decisions, free of I/O: which configs to set
// or delete, which configs were changed behind the operator's back, and
// where the replicas of a partition go when the replication factor
// changes. kafkatopic_plan_test.go pins them with table tests.

// DesiredTopicConfigs are the topic configs a KafkaTopic manages:
// spec.config, plus leader.placement.zone from spec.leaderZone.
func DesiredTopicConfigs(kt *strata.KafkaTopic) map[string]string {
	out := maps.Clone(kt.Spec.Config)
	if out == nil {
		out = map[string]string{}
	}
	if kt.Spec.LeaderZone != "" {
		out[strata.LeaderZoneConfig] = kt.Spec.LeaderZone
	}
	return out
}

// ConfigPlan is how a topic's config overrides converge to the spec.
type ConfigPlan struct {
	// Ops are the IncrementalAlterConfigs operations, sorted by key.
	Ops []kadm.AlterConfig
	// Drifted lists the keys whose value someone else changed (or
	// removed) since the operator last applied them; Ops reverts them.
	Drifted []string
	// Unmanaged are overrides on the topic the spec does not mention and
	// the operator never managed; they are reported, not removed.
	Unmanaged map[string]string
}

// PlanTopicConfigs compares the topic's overrides (configs with source
// DYNAMIC_TOPIC_CONFIG) with the desired configs. applied are the configs
// the operator set last time (status.configs): a key there that left the
// spec is deleted from the topic, a key whose topic value differs from
// both applied and desired was changed by another tool (drift). Only keys
// the spec manages, or managed before, are touched.
func PlanTopicConfigs(desired, applied, overrides map[string]string) ConfigPlan {
	var p ConfigPlan
	for _, k := range slices.Sorted(maps.Keys(desired)) {
		want := desired[k]
		got, ok := overrides[k]
		if ok && got == want {
			continue
		}
		p.Ops = append(p.Ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(want)})
		if prev, managed := applied[k]; managed && prev == want {
			p.Drifted = append(p.Drifted, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		if _, ok := desired[k]; ok {
			continue
		}
		if _, managed := applied[k]; managed {
			p.Ops = append(p.Ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			continue
		}
		if p.Unmanaged == nil {
			p.Unmanaged = map[string]string{}
		}
		p.Unmanaged[k] = overrides[k]
	}
	slices.SortStableFunc(p.Ops, func(a, b kadm.AlterConfig) int { return cmp.Compare(a.Name, b.Name) })
	return p
}

// ResizeReplicas returns the replica lists of a topic's partitions (in
// partition order) with rf replicas each, changing as little as it can:
//
//   - growing keeps every replica in place and adds brokers from the
//     zones the partition does not use yet (one replica per zone while
//     zones last), then the broker with the fewest replicas of the topic;
//   - shrinking keeps the preferred leader (the first replica) and drops
//     replicas on brokers that are gone first, then from zones holding
//     more than one replica of the partition, then from the broker with
//     the most replicas of the topic.
//
// brokers are the live brokers with their racks (zones). A replication
// factor above their number fails with placement.ErrInvalidReplicationFactor.
// (broker/placement places new partitions; it has no operation that
// resizes existing ones while keeping replicas in place, so the rules of
// its pickFollower are applied here to the partitions that change.)
func ResizeReplicas(brokers []placement.Broker, current [][]int32, rf int) ([][]int32, error) {
	if rf < 1 || rf > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d with %d live brokers", placement.ErrInvalidReplicationFactor, rf, len(brokers))
	}
	zoneOf := make(map[int32]string, len(brokers))
	for _, b := range brokers {
		zoneOf[b.ID] = b.Zone
	}
	load := map[int32]int{} // replicas of the topic per broker, as planned so far
	for _, rs := range current {
		for _, id := range rs {
			load[id]++
		}
	}
	sorted := slices.SortedFunc(slices.Values(brokers), func(a, b placement.Broker) int { return cmp.Compare(a.ID, b.ID) })
	out := make([][]int32, len(current))
	for i, rs := range current {
		next := slices.Clone(rs)
		inZone := func(list []int32) map[string]int {
			m := map[string]int{}
			for _, id := range list {
				if z, ok := zoneOf[id]; ok {
					m[z]++
				}
			}
			return m
		}
		for len(next) < rf {
			zones := inZone(next)
			best, found := placement.Broker{}, false
			for _, b := range sorted {
				if slices.Contains(next, b.ID) {
					continue
				}
				if !found || cmp.Or(
					cmp.Compare(zones[b.Zone], zones[best.Zone]),
					cmp.Compare(load[b.ID], load[best.ID]),
				) < 0 {
					best, found = b, true
				}
			}
			next = append(next, best.ID)
			load[best.ID]++
		}
		for len(next) > rf {
			zones := inZone(next)
			// rank: higher drops first. Index 0 (the preferred leader) is
			// dropped only if its broker is gone.
			rank := func(j int) []int {
				id := next[j]
				z, live := zoneOf[id]
				return []int{boolInt(!live), boolInt(j > 0), zones[z], load[id], j}
			}
			drop := 0
			for j := 1; j < len(next); j++ {
				if slices.Compare(rank(j), rank(drop)) > 0 {
					drop = j
				}
			}
			load[next[drop]]--
			next = slices.Delete(next, drop, drop+1)
		}
		out[i] = next
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// LeadersPerZone counts partition leaders by the zone of their broker;
// leaderless partitions (leader -1) and brokers without a rack are not
// counted.
func LeadersPerZone(leaders []int32, zoneOf map[int32]string) map[string]int32 {
	out := map[string]int32{}
	for _, l := range leaders {
		if z := zoneOf[l]; l >= 0 && z != "" {
			out[z]++
		}
	}
	return out
}
