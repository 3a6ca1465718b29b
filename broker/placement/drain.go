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
	// Size is the bytes of one replica (the largest one's log), 0 when
	// unknown. Rebalance and Drain balance bytes per broker with it; with
	// every size 0 they balance replica counts only.
	Size int64
	// Pinned: a reassignment of the partition is in flight. Rebalance
	// counts its replicas and bytes but neither moves nor reorders it.
	Pinned bool
}

// Move is a reassignment: Partition's replicas become To.
type Move struct {
	Topic     string
	Partition int32
	From      []int32
	To        []int32
}

// CopiesData says whether the move adds a replica somewhere (copying the
// partition), as opposed to only reordering the replica list (a
// preferred-leader change).
func (m Move) CopiesData() bool {
	for _, id := range m.To {
		if !slices.Contains(m.From, id) {
			return true
		}
	}
	return false
}

// Drain returns the moves that take every replica off the drained brokers.
// brokers are all brokers that may receive replicas plus the drained ones;
// partitions is the whole cluster's assignment (it drives the load balance).
//
// Each replica on a drained broker is replaced in place (a drained preferred
// leader is replaced by the new preferred leader) by the broker, outside the
// partition and the drained set, whose zone the partition uses least,
// preferring the drained broker's own zone so zone spread and leader zones
// are kept, then (for the leader's slot) the broker with the fewest
// preferred leaders; of those, the broker with the fewest bytes (Size)
// among the ones holding at most one replica more than the fewest, so
// bytes even out while replica counts stay within two; then the fewest
// replicas. Partitions are processed largest first (then in (topic,
// partition) order), so the large ones spread and the small ones fill in;
// the result is deterministic.
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
	bytes := map[int32]int64{}
	for _, p := range partitions {
		for i, id := range p.Replicas {
			replicas[id]++
			bytes[id] += p.Size
			if i == 0 {
				leaders[id]++
			}
		}
	}
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(b.Size, a.Size), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
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
			// The candidates that keep the zone rules (and leader balance)
			// best; then bytes among the count-fair ones.
			var cands []Broker
			for _, b := range c.brokers {
				if isDrained[b.ID] || slices.Contains(to, b.ID) {
					continue
				}
				if len(cands) > 0 {
					switch cmp.Or(
						cmp.Compare(inPartition[b.Zone], inPartition[cands[0].Zone]),
						cmp.Compare(boolRank(b.Zone != homeZone), boolRank(cands[0].Zone != homeZone)),
						leaderCmp(slot, leaders, b.ID, cands[0].ID),
					) {
					case 1:
						continue
					case -1:
						cands = cands[:0]
					}
				}
				cands = append(cands, b)
			}
			fewest := 0
			for i, b := range cands {
				if i == 0 || replicas[b.ID] < fewest {
					fewest = replicas[b.ID]
				}
			}
			var best Broker
			found := false
			for _, b := range cands {
				if replicas[b.ID] > fewest+1 {
					continue
				}
				if !found || cmp.Or(
					cmp.Compare(bytes[b.ID], bytes[best.ID]),
					cmp.Compare(replicas[b.ID], replicas[best.ID]),
					cmp.Compare(b.ID, best.ID),
				) < 0 {
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
			bytes[id] -= p.Size
			bytes[best.ID] += p.Size
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
