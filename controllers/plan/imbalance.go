package plan

import (
	"fmt"
	"slices"

	"github.com/strata-dev/strata/broker/placement"
)

// Load is what one broker holds: replicas and bytes (0 when unknown).
type Load struct {
	Replicas int
	Bytes    int64
}

// Imbalance decides whether the wanted brokers' loads call for a
// rebalance: it names the first broker (by ID) whose replica count or
// bytes differ from the mean of its zone's wanted brokers by more than
// tolerancePercent of that mean — and by more than one replica (a count
// cannot be evener than that) or placement.MinByteTolerance bytes (below
// it a move costs more than it evens). "" means balanced within the
// tolerance. Brokers are compared within their zone: with one replica of
// each partition per zone (the placement rule while zones ≥ replication
// factor) a zone's share is fixed, and only the split between its brokers
// can change; a broker that holds nothing while its zone holds at least
// one replica per broker is off whatever the tolerance (the scale-up
// case). Bytes are compared only where every broker of the zone has a
// known size (hasBytes).
func Imbalance(wanted []Wanted, loads map[int32]Load, hasBytes bool, tolerancePercent int) string {
	zones := map[string][]int32{}
	var order []string
	for _, w := range wanted {
		if _, ok := zones[w.Zone]; !ok {
			order = append(order, w.Zone)
		}
		zones[w.Zone] = append(zones[w.Zone], w.ID)
	}
	slices.Sort(order)
	for _, zone := range order {
		ids := zones[zone]
		if len(ids) < 2 {
			continue
		}
		slices.Sort(ids)
		var replicas int
		var bytes int64
		for _, id := range ids {
			replicas += loads[id].Replicas
			bytes += loads[id].Bytes
		}
		n := len(ids)
		meanReplicas := float64(replicas) / float64(n)
		meanBytes := float64(bytes) / float64(n)
		countSlack := max(1, meanReplicas*float64(tolerancePercent)/100)
		byteSlack := max(float64(placement.MinByteTolerance), meanBytes*float64(tolerancePercent)/100)
		for _, id := range ids {
			if loads[id].Replicas == 0 && replicas >= n {
				// A new broker, whatever the tolerance.
				return fmt.Sprintf("broker %d (zone %q) holds no replica while its zone holds %d", id, zone, replicas)
			}
		}
		for _, id := range ids {
			l := loads[id]
			if replicas > 0 && abs(float64(l.Replicas)-meanReplicas) > countSlack {
				return fmt.Sprintf("broker %d (zone %q) holds %d replicas, the zone's mean is %.1f (tolerance %d%%)", id, zone, l.Replicas, meanReplicas, tolerancePercent)
			}
			if hasBytes && abs(float64(l.Bytes)-meanBytes) > byteSlack {
				return fmt.Sprintf("broker %d (zone %q) holds %d bytes, the zone's mean is %.0f (tolerance %d%%)", id, zone, l.Bytes, meanBytes, tolerancePercent)
			}
		}
	}
	return ""
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
