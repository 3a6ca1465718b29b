package placement

import (
	"cmp"
	"slices"
	"sort"
)

// MinByteTolerance is the smallest byte difference between two brokers
// that Rebalance acts on: below it, moving data costs more than the
// imbalance it removes.
const MinByteTolerance int64 = 1 << 20

// ByteTolerance is the byte difference between two brokers that
// Rebalance leaves alone for a cluster holding total bytes (the sum of
// every replica's size) on n brokers: a twentieth of the mean per broker,
// at least MinByteTolerance. It absorbs the growth of the data between
// two plans, so a balanced cluster under load plans no moves.
func ByteTolerance(total int64, n int) int64 {
	if n <= 0 {
		return MinByteTolerance
	}
	return max(MinByteTolerance, total/int64(n)/20)
}

// Rebalance returns moves that even out replicas, bytes and preferred
// leaders over brokers, for example after brokers were added (the
// operator's scale-up). It makes at most maxMoves replica moves (0: no
// limit), never making a partition's zone spread worse than the placement
// rules allow, and never touching a Pinned partition (which still counts
// toward the balance). In order:
//
//  1. Counts: one replica at a time from the broker with the most
//     replicas to the one with the fewest, until no two brokers that can
//     exchange a replica differ by more than one. Of the partitions that
//     could go, it takes the one that best narrows the two brokers' byte
//     difference net of the bytes it copies (a huge partition stays put
//     when a small one balances the counts as well), preferring a
//     follower slot so leadership is left alone.
//  2. Bytes: while two brokers that can exchange replicas differ by more
//     than ByteTolerance in bytes, a move that narrows the difference by
//     at least the tolerance (or to within it): a single replica from the
//     fuller to the emptier broker when that one holds one replica fewer,
//     or a swap of a larger for a smaller replica, which keeps the counts
//     (a swap is two moves and needs two of maxMoves). Of those it takes
//     the one narrowing most, then the one copying least. Every step
//     lowers the sum of squared bytes per broker and keeps the replica
//     counts, so it ends; a cluster it ends on gets no moves from it.
//  3. Preferred leaders: balanced by reordering replica lists (no data
//     moves: a preferred-leader election applies them).
//
// Every step is a function of the assignment reached so far, so a plan
// cut short by maxMoves and computed again once its moves are done goes
// on where it stopped. A partition appears in at most one Move, with its
// final replica list.
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
	bytes := map[int32]int64{}
	var total int64
	for i, p := range parts {
		to[i] = slices.Clone(p.Replicas)
		for j, id := range p.Replicas {
			replicas[id]++
			bytes[id] += p.Size
			total += p.Size
			if j == 0 {
				leaders[id]++
			}
		}
	}
	tolerance := ByteTolerance(total, len(c.brokers))
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
	// movable returns partition i's replica list with src's replica on
	// dst, or nil when that breaks a rule.
	movable := func(i int, src, dst Broker, followerOnly bool) []int32 {
		rs := to[i]
		slot := slices.Index(rs, src.ID)
		if parts[i].Pinned || slot < 0 || (followerOnly && slot == 0) || slices.Contains(rs, dst.ID) {
			return nil
		}
		if slot == 0 && parts[i].LeaderZone != "" && dst.Zone != parts[i].LeaderZone {
			return nil
		}
		next := slices.Clone(rs)
		next[slot] = dst.ID
		if maxInZone(next) > max(zoneLimit(len(rs)), maxInZone(rs)) {
			return nil
		}
		return next
	}
	apply := func(i int, next []int32, src, dst int32) {
		if to[i][0] == src {
			leaders[src]--
			leaders[dst]++
		}
		to[i] = next
		replicas[src]--
		replicas[dst]++
		bytes[src] -= parts[i].Size
		bytes[dst] += parts[i].Size
	}
	// sortedBy orders the brokers by (replicas, bytes) or by bytes alone,
	// ascending or descending; ties keep broker ID order.
	sortedBy := func(desc, countFirst bool) []Broker {
		out := slices.Clone(c.brokers)
		slices.SortStableFunc(out, func(a, b Broker) int {
			if desc {
				a, b = b, a
			}
			if countFirst {
				return cmp.Or(cmp.Compare(replicas[a.ID], replicas[b.ID]), cmp.Compare(bytes[a.ID], bytes[b.ID]))
			}
			return cmp.Compare(bytes[a.ID], bytes[b.ID])
		})
		return out
	}
	// countMove makes one replica move that narrows the count spread.
	countMove := func() bool {
		// Among equal counts the fuller broker gives, the emptier takes.
		for _, src := range sortedBy(true, true) {
			for _, dst := range sortedBy(false, true) {
				if replicas[src.ID]-replicas[dst.ID] <= 1 {
					break
				}
				diff := bytes[src.ID] - bytes[dst.ID]
				for _, followerOnly := range []bool{true, false} {
					best, bestNext := -1, []int32(nil)
					var bestValue int64
					for i := range to {
						next := movable(i, src, dst, followerOnly)
						if next == nil {
							continue
						}
						s := parts[i].Size
						value := abs(diff) - abs(diff-2*s) - s
						if best < 0 || value > bestValue {
							best, bestNext, bestValue = i, next, value
						}
					}
					if best >= 0 {
						apply(best, bestNext, src.ID, dst.ID)
						return true
					}
				}
			}
		}
		return false
	}
	// byteMove makes one single move or swap that narrows a byte
	// difference above the tolerance; budget is the moves it may use.
	byteMove := func(budget int) int {
		for _, src := range sortedBy(true, false) {
			for _, dst := range sortedBy(false, false) {
				diff := bytes[src.ID] - bytes[dst.ID]
				if diff <= tolerance {
					break
				}
				if n := bestByteMove(parts, to, src, dst, diff, tolerance, budget, replicas, movable, apply); n > 0 {
					return n
				}
			}
		}
		return 0
	}
	moved := 0
	for maxMoves <= 0 || moved < maxMoves {
		if !countMove() {
			break
		}
		moved++
	}
	for maxMoves <= 0 || moved < maxMoves {
		budget := 2
		if maxMoves > 0 {
			budget = min(2, maxMoves-moved)
		}
		n := byteMove(budget)
		if n == 0 {
			break
		}
		moved += n
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

// bestByteMove finds and applies the best single move or swap between src
// and dst (Rebalance's rule 2) and returns how many replica moves it made
// (0: none qualifies).
func bestByteMove(parts []Partition, to [][]int32, src, dst Broker, diff, tolerance int64, budget int,
	replicas map[int32]int, movable func(int, Broker, Broker, bool) []int32, apply func(int, []int32, int32, int32)) int {
	type cand struct {
		i    int
		next []int32
		size int64
	}
	var out, in []cand // src → dst, dst → src
	for i := range to {
		if next := movable(i, src, dst, false); next != nil {
			out = append(out, cand{i, next, parts[i].Size})
		}
		if next := movable(i, dst, src, false); next != nil {
			in = append(in, cand{i, next, parts[i].Size})
		}
	}
	// A transfer of t bytes leaves |diff-2t|; it qualifies when that is
	// within the tolerance or at least the tolerance below diff.
	gain := func(t int64) int64 {
		if t <= 0 || t >= diff {
			return 0
		}
		g := diff - abs(diff-2*t)
		if abs(diff-2*t) > tolerance && g < tolerance {
			return 0
		}
		return g
	}
	var (
		bestGain, bestCopy int64
		bestOut, bestIn    = -1, -1
	)
	consider := func(o, n int, t, copied int64) {
		g := gain(t)
		if g <= 0 {
			return
		}
		if bestOut < 0 || g > bestGain || g == bestGain && copied < bestCopy {
			bestGain, bestCopy, bestOut, bestIn = g, copied, o, n
		}
	}
	// A single move keeps the counts' spread only from a broker holding
	// one replica more.
	if replicas[src.ID] == replicas[dst.ID]+1 {
		for o, c := range out {
			consider(o, -1, c.size, c.size)
		}
	}
	if budget >= 2 && len(in) > 0 {
		idx := make([]int, len(in)) // in, by size
		for k := range idx {
			idx[k] = k
		}
		sort.SliceStable(idx, func(a, b int) bool { return in[idx[a]].size < in[idx[b]].size })
		for o, c := range out {
			// The best partner is near size c.size - diff/2.
			want := c.size - diff/2
			k := sort.Search(len(idx), func(k int) bool { return in[idx[k]].size >= want })
			for _, j := range []int{k - 1, k} {
				if j < 0 || j >= len(idx) {
					continue
				}
				n := idx[j] // a partition on dst, not on src: never c's
				consider(o, n, c.size-in[n].size, c.size+in[n].size)
			}
		}
	}
	if bestOut < 0 {
		return 0
	}
	o := out[bestOut]
	apply(o.i, o.next, src.ID, dst.ID)
	if bestIn < 0 {
		return 1
	}
	n := in[bestIn]
	apply(n.i, n.next, dst.ID, src.ID)
	return 2
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// balanceLeaders evens out preferred leaders by reordering replica lists.
// While some broker leads at least two more partitions than another broker
// reachable from it, leadership shifts along the path: X leads p1 which has
// replica Y, Y leads p2 which has replica Z, ... Each shift lowers the sum of
// squared leader counts, so it ends, and it ends balanced as far as the
// replica sets allow. Current leaders are kept where balance does not need a
// change. Pinned partitions keep their order.
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
					if rs[0] != u || parts[i].Pinned {
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
