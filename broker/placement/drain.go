package placement

import (
	"cmp"
	"fmt"
	"slices"
)

// Partition is one partition's current replica list (first = preferred leader).
type Partition struct {
	Topic     string
	Partition int32
	Replicas  []int32
	// LeaderZone, when the topic pins its leaders, keeps Rebalance from
	// moving the preferred leader out of that zone.
	LeaderZone string
}

// Move is a reassignment: Partition's replicas become To.
type Move struct {
	Topic     string
	Partition int32
	From      []int32
	To        []int32
}

// Drain returns the moves that take every replica off the drained brokers.
// brokers are all brokers that may receive replicas plus the drained ones;
// partitions is the whole cluster's assignment (it drives the load balance).
//
// Each replica on a drained broker is replaced in place (a drained preferred
// leader is replaced by the new preferred leader) by the broker, outside the
// partition and the drained set, whose zone the partition uses least,
// preferring the drained broker's own zone so zone spread and leader zones
// are kept, then the broker with the fewest replicas (fewest preferred
// leaders when the slot is the leader's). The result is deterministic:
// partitions are processed in (topic, partition) order.
func Drain(brokers []Broker, partitions []Partition, drained []int32) ([]Move, error) {
	c, err := newCluster(brokers, nil)
	if err != nil {
		return nil, err
	}
	isDrained := make(map[int32]bool, len(drained))
	for _, id := range drained {
		if _, ok := c.byID[id]; !ok {
			return nil, fmt.Errorf("%w: drained broker %d is not in the broker list", ErrInvalidBrokers, id)
		}
		isDrained[id] = true
	}
	replicas, leaders := map[int32]int{}, map[int32]int{}
	for _, p := range partitions {
		for i, id := range p.Replicas {
			replicas[id]++
			if i == 0 {
				leaders[id]++
			}
		}
	}
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	var moves []Move
	for _, p := range sorted {
		if !slices.ContainsFunc(p.Replicas, func(id int32) bool { return isDrained[id] }) {
			continue
		}
		to := slices.Clone(p.Replicas)
		for slot, id := range to {
			if !isDrained[id] {
				continue
			}
			inPartition := map[string]int{}
			for _, other := range to {
				if other != id && !isDrained[other] {
					inPartition[c.byID[other].Zone]++
				}
			}
			homeZone := c.byID[id].Zone
			var best Broker
			found := false
			for _, b := range c.brokers {
				if isDrained[b.ID] || slices.Contains(to, b.ID) {
					continue
				}
				better := !found || cmp.Or(
					cmp.Compare(inPartition[b.Zone], inPartition[best.Zone]),
					cmp.Compare(boolRank(b.Zone != homeZone), boolRank(best.Zone != homeZone)),
					leaderCmp(slot, leaders, b.ID, best.ID),
					cmp.Compare(replicas[b.ID], replicas[best.ID]),
					cmp.Compare(b.ID, best.ID),
				) < 0
				if better {
					best, found = b, true
				}
			}
			if !found {
				return nil, fmt.Errorf("%w: %s-%d has replicas %v and no broker outside the drained set %v can take the replica on %d",
					ErrCannotDrain, p.Topic, p.Partition, p.Replicas, drained, id)
			}
			to[slot] = best.ID
			replicas[id]--
			replicas[best.ID]++
			if slot == 0 {
				leaders[id]--
				leaders[best.ID]++
			}
		}
		moves = append(moves, Move{Topic: p.Topic, Partition: p.Partition, From: slices.Clone(p.Replicas), To: to})
	}
	return moves, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func leaderCmp(slot int, leaders map[int32]int, a, b int32) int {
	if slot != 0 {
		return 0
	}
	return cmp.Compare(leaders[a], leaders[b])
}
