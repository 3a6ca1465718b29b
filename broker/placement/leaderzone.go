package placement

import (
	"cmp"
	"slices"
)

// LeaderZoneTarget returns the replica list that puts a partition's
// preferred leader (its first replica) in zone, for a topic whose leaders are
// pinned there (leader.placement.zone), and whether it differs from
// replicas. It keeps every replica it can:
//
//   - the preferred leader is in zone already, or zone is "": unchanged;
//   - a replica sits in zone: it moves to the front, the others keep their
//     order (a metadata-only change; a preferred election applies it);
//   - no replica sits in zone: the replica of the zone the partition uses
//     most (the last such slot, so the current preferred leader stays a
//     follower when it can) is replaced by the broker of zone with the
//     fewest replicas, then fewest preferred leaders (load), then lowest ID,
//     which goes to the front (a reassignment).
//
// A replica on a broker not in brokers (not registered: its zone is
// unknown) may be the one in zone, so a partition with one is left alone
// unless a known replica sits in zone. A cordoned broker is never the
// one brought in. A zone without a broker (that is not cordoned) leaves the
// partition alone too: the caller refuses such a zone when it is set.
// load is only called when a replica must move; it may return nil.
func LeaderZoneTarget(brokers []Broker, replicas []int32, zone string, load func() map[int32]Load) ([]int32, bool) {
	if zone == "" || len(replicas) == 0 {
		return replicas, false
	}
	zoneOf := make(map[int32]string, len(brokers))
	for _, b := range brokers {
		zoneOf[b.ID] = b.Zone
	}
	if z, ok := zoneOf[replicas[0]]; ok && z == zone {
		return replicas, false
	}
	if i := slices.IndexFunc(replicas, func(id int32) bool { z, ok := zoneOf[id]; return ok && z == zone }); i > 0 {
		to := make([]int32, 0, len(replicas))
		to = append(to, replicas[i])
		to = append(to, replicas[:i]...)
		return append(to, replicas[i+1:]...), true
	}
	perZone := map[string]int{}
	for _, id := range replicas {
		z, ok := zoneOf[id]
		if !ok {
			return replicas, false
		}
		perZone[z]++
	}
	slot := 0
	for i, id := range replicas {
		if perZone[zoneOf[id]] >= perZone[zoneOf[replicas[slot]]] {
			slot = i
		}
	}
	var l map[int32]Load
	if load != nil {
		l = load()
	}
	candidates := slices.DeleteFunc(slices.Clone(brokers), func(b Broker) bool {
		return b.Zone != zone || b.Cordoned || slices.Contains(replicas, b.ID)
	})
	if len(candidates) == 0 {
		return replicas, false
	}
	best := slices.MinFunc(candidates, func(a, b Broker) int {
		return cmp.Or(
			cmp.Compare(l[a.ID].Replicas, l[b.ID].Replicas),
			cmp.Compare(l[a.ID].Leaders, l[b.ID].Leaders),
			cmp.Compare(a.ID, b.ID),
		)
	})
	to := make([]int32, 0, len(replicas))
	to = append(to, best.ID)
	to = append(to, replicas[:slot]...)
	return append(to, replicas[slot+1:]...), true
}
