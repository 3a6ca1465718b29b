package placement

import (
	"cmp"
	"slices"
)

// Rebalance returns moves that even out replicas and preferred leaders over
// brokers, for example after brokers were added (the operator's scale-up).
// It moves at most maxMoves replicas (0: no limit), one at a time from the
// most to the least loaded broker, never making a partition's zone spread
// worse than the placement rules allow; then it balances preferred leaders
// by reordering replica lists (no data moves: a preferred-leader election
// applies them). A partition appears in at most one Move, with its final
// replica list.
func Rebalance(brokers []Broker, partitions []Partition, maxMoves int) ([]Move, error) {
	c, err := newCluster(brokers, nil)
	if err != nil {
		return nil, err
	}
	parts := slices.Clone(partitions)
	slices.SortFunc(parts, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	to := make([][]int32, len(parts))
	replicas, leaders := map[int32]int{}, map[int32]int{}
	for i, p := range parts {
		to[i] = slices.Clone(p.Replicas)
		for j, id := range p.Replicas {
			replicas[id]++
			if j == 0 {
				leaders[id]++
			}
		}
	}
	zoneLimit := func(rf int) int { return (rf + len(c.zones) - 1) / len(c.zones) }
	maxInZone := func(rs []int32) int {
		n := map[string]int{}
		m := 0
		for _, id := range rs {
			n[c.byID[id].Zone]++
			m = max(m, n[c.byID[id].Zone])
		}
		return m
	}
	byLoad := func(desc bool) []Broker {
		out := slices.Clone(c.brokers)
		slices.SortStableFunc(out, func(a, b Broker) int {
			if desc {
				return cmp.Compare(replicas[b.ID], replicas[a.ID])
			}
			return cmp.Compare(replicas[a.ID], replicas[b.ID])
		})
		return out
	}
	// move finds one replica move that narrows the spread, preferring a
	// follower slot so leadership is left alone.
	move := func() bool {
		for _, src := range byLoad(true) {
			for _, dst := range byLoad(false) {
				if replicas[src.ID]-replicas[dst.ID] <= 1 {
					break
				}
				for _, followerOnly := range []bool{true, false} {
					for i, rs := range to {
						slot := slices.Index(rs, src.ID)
						if slot < 0 || (followerOnly && slot == 0) || slices.Contains(rs, dst.ID) {
							continue
						}
						if slot == 0 && parts[i].LeaderZone != "" && dst.Zone != parts[i].LeaderZone {
							continue
						}
						next := slices.Clone(rs)
						next[slot] = dst.ID
						if maxInZone(next) > max(zoneLimit(len(rs)), maxInZone(rs)) {
							continue
						}
						to[i] = next
						replicas[src.ID]--
						replicas[dst.ID]++
						if slot == 0 {
							leaders[src.ID]--
							leaders[dst.ID]++
						}
						return true
					}
				}
			}
		}
		return false
	}
	for n := 0; maxMoves <= 0 || n < maxMoves; n++ {
		if !move() {
			break
		}
	}
	balanceLeaders(c, parts, to, leaders)
	var moves []Move
	for i, p := range parts {
		if !slices.Equal(p.Replicas, to[i]) {
			moves = append(moves, Move{Topic: p.Topic, Partition: p.Partition, From: slices.Clone(p.Replicas), To: to[i]})
		}
	}
	return moves, nil
}

// balanceLeaders evens out preferred leaders by reordering replica lists.
// While some broker leads at least two more partitions than another broker
// reachable from it, leadership shifts along the path: X leads p1 which has
// replica Y, Y leads p2 which has replica Z, ... Each shift lowers the sum of
// squared leader counts, so it ends, and it ends balanced as far as the
// replica sets allow. Current leaders are kept where balance does not need a
// change.
func balanceLeaders(c *cluster, parts []Partition, to [][]int32, leaders map[int32]int) {
	type edge struct {
		from      int32
		partition int
	}
	for {
		shifted := false
		order := slices.Clone(c.brokers)
		slices.SortStableFunc(order, func(a, b Broker) int { return cmp.Compare(leaders[b.ID], leaders[a.ID]) })
		for _, x := range order {
			// Breadth-first search from x over "leads a partition with".
			via := map[int32]edge{x.ID: {from: -1}}
			queue := []int32{x.ID}
			target := int32(-1)
			for len(queue) > 0 && target < 0 {
				u := queue[0]
				queue = queue[1:]
				for i, rs := range to {
					if rs[0] != u {
						continue
					}
					for _, v := range rs[1:] {
						if _, seen := via[v]; seen {
							continue
						}
						if z := parts[i].LeaderZone; z != "" && c.byID[v].Zone != z {
							continue // the topic pins its leaders to zone z
						}
						via[v] = edge{from: u, partition: i}
						if leaders[v] <= leaders[x.ID]-2 {
							target = v
							break
						}
						queue = append(queue, v)
					}
					if target >= 0 {
						break
					}
				}
			}
			if target < 0 {
				continue
			}
			for v := target; v != x.ID; {
				e := via[v]
				rs := to[e.partition]
				j := slices.Index(rs, v)
				rs[0], rs[j] = rs[j], rs[0]
				v = e.from
			}
			leaders[x.ID]--
			leaders[target]++
			shifted = true
			break
		}
		if !shifted {
			return
		}
	}
}
