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
	r := &rebalancer{c: c, parts: parts, to: make([][]int32, len(parts)), on: map[int32][]int{},
		replicas: map[int32]int{}, leaders: map[int32]int{}, bytes: map[int32]int64{}}
	var total int64
	for i, p := range parts {
		r.to[i] = slices.Clone(p.Replicas)
		for j, id := range p.Replicas {
			r.on[id] = append(r.on[id], i)
			r.replicas[id]++
			r.bytes[id] += p.Size
			total += p.Size
			if j == 0 {
				r.leaders[id]++
			}
		}
	}
	r.tolerance = ByteTolerance(total, len(c.brokers))
	moved := 0
	for maxMoves <= 0 || moved < maxMoves {
		if !r.countMove() {
			break
		}
		moved++
	}
	for maxMoves <= 0 || moved < maxMoves {
		budget := 2
		if maxMoves > 0 {
			budget = min(2, maxMoves-moved)
		}
		n := r.byteMove(budget)
		if n == 0 {
			break
		}
		moved += n
	}
	balanceLeaders(c, parts, r.to, r.leaders)
	var moves []Move
	for i, p := range parts {
		if !slices.Equal(p.Replicas, r.to[i]) {
			moves = append(moves, Move{Topic: p.Topic, Partition: p.Partition, From: slices.Clone(p.Replicas), To: r.to[i]})
		}
	}
	return moves, nil
}

// rebalancer is Rebalance's state: the assignment reached so far and the
// load it puts on each broker.
type rebalancer struct {
	c         *cluster
	parts     []Partition     // in (topic, partition) order
	to        [][]int32       // replica lists reached, by index into parts
	on        map[int32][]int // partition indices each broker holds, ascending
	replicas  map[int32]int
	leaders   map[int32]int
	bytes     map[int32]int64
	tolerance int64
}

// slot returns the slot of src's replica in partition i when it may move
// to dst, else -1: the partition is not pinned, holds src and not dst,
// the slot is a follower's if followerOnly, a leader stays in its
// topic's leader zone, and dst's zone does not get more replicas of the
// partition than the placement rules allow (or than a zone has already).
func (r *rebalancer) slot(i int, src, dst Broker, followerOnly bool) int {
	p, rs := &r.parts[i], r.to[i]
	if p.Pinned {
		return -1
	}
	slot := -1
	for j, id := range rs {
		switch id {
		case src.ID:
			slot = j
		case dst.ID:
			return -1
		}
	}
	if slot < 0 || (followerOnly && slot == 0) {
		return -1
	}
	if slot == 0 && p.LeaderZone != "" && dst.Zone != p.LeaderZone {
		return -1
	}
	if src.Zone != dst.Zone {
		most, inDst := 0, 0
		for _, a := range rs {
			n := 0
			for _, b := range rs {
				if r.c.byID[a].Zone == r.c.byID[b].Zone {
					n++
				}
			}
			most = max(most, n)
			if r.c.byID[a].Zone == dst.Zone {
				inDst++
			}
		}
		limit := (len(rs) + len(r.c.zones) - 1) / len(r.c.zones)
		if inDst+1 > max(limit, most) {
			return -1
		}
	}
	return slot
}

// apply moves partition i's replica in slot from src to dst.
func (r *rebalancer) apply(i, slot int, src, dst int32) {
	if slot == 0 {
		r.leaders[src]--
		r.leaders[dst]++
	}
	r.to[i][slot] = dst
	r.replicas[src]--
	r.replicas[dst]++
	r.bytes[src] -= r.parts[i].Size
	r.bytes[dst] += r.parts[i].Size
	if k, ok := slices.BinarySearch(r.on[src], i); ok {
		r.on[src] = slices.Delete(r.on[src], k, k+1)
	}
	k, _ := slices.BinarySearch(r.on[dst], i)
	r.on[dst] = slices.Insert(r.on[dst], k, i)
}

// sortedBy orders the brokers by (replicas, bytes) or by bytes alone,
// ascending or descending; ties keep broker ID order.
func (r *rebalancer) sortedBy(desc, countFirst bool) []Broker {
	out := slices.Clone(r.c.brokers)
	slices.SortStableFunc(out, func(a, b Broker) int {
		if desc {
			a, b = b, a
		}
		if countFirst {
			return cmp.Or(cmp.Compare(r.replicas[a.ID], r.replicas[b.ID]), cmp.Compare(r.bytes[a.ID], r.bytes[b.ID]))
		}
		return cmp.Compare(r.bytes[a.ID], r.bytes[b.ID])
	})
	return out
}

// countMove makes one replica move that narrows the count spread (rule
// 1); among equal counts the fuller broker gives, the emptier takes.
func (r *rebalancer) countMove() bool {
	for _, src := range r.sortedBy(true, true) {
		for _, dst := range r.sortedBy(false, true) {
			if r.replicas[src.ID]-r.replicas[dst.ID] <= 1 {
				break
			}
			diff := r.bytes[src.ID] - r.bytes[dst.ID]
			for _, followerOnly := range []bool{true, false} {
				best, bestSlot := -1, -1
				var bestValue int64
				for _, i := range r.on[src.ID] {
					slot := r.slot(i, src, dst, followerOnly)
					if slot < 0 {
						continue
					}
					s := r.parts[i].Size
					value := abs(diff) - abs(diff-2*s) - s
					if best < 0 || value > bestValue {
						best, bestSlot, bestValue = i, slot, value
					}
				}
				if best >= 0 {
					r.apply(best, bestSlot, src.ID, dst.ID)
					return true
				}
			}
		}
	}
	return false
}

// byteMove makes one single move or swap that narrows a byte difference
// above the tolerance (rule 2); budget is the moves it may use. It
// returns the moves made.
func (r *rebalancer) byteMove(budget int) int {
	for _, src := range r.sortedBy(true, false) {
		for _, dst := range r.sortedBy(false, false) {
			diff := r.bytes[src.ID] - r.bytes[dst.ID]
			if diff <= r.tolerance {
				break
			}
			if n := r.bestByteMove(src, dst, diff, budget); n > 0 {
				return n
			}
		}
	}
	return 0
}

// bestByteMove finds and applies the best single move or swap between src
// and dst and returns how many replica moves it made (0: none
// qualifies).
func (r *rebalancer) bestByteMove(src, dst Broker, diff int64, budget int) int {
	type cand struct {
		i, slot int
		size    int64
	}
	var out, in []cand // src → dst, dst → src
	for _, i := range r.on[src.ID] {
		if slot := r.slot(i, src, dst, false); slot >= 0 {
			out = append(out, cand{i, slot, r.parts[i].Size})
		}
	}
	for _, i := range r.on[dst.ID] {
		if slot := r.slot(i, dst, src, false); slot >= 0 {
			in = append(in, cand{i, slot, r.parts[i].Size})
		}
	}
	// A transfer of t bytes leaves |diff-2t|; it qualifies when that is
	// within the tolerance or at least the tolerance below diff.
	gain := func(t int64) int64 {
		if t <= 0 || t >= diff {
			return 0
		}
		g := diff - abs(diff-2*t)
		if abs(diff-2*t) > r.tolerance && g < r.tolerance {
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
	if r.replicas[src.ID] == r.replicas[dst.ID]+1 {
		for o, c := range out {
			consider(o, -1, c.size, c.size)
		}
	}
	if budget >= 2 && len(in) > 0 {
		bySize := slices.Clone(in)
		slices.SortStableFunc(bySize, func(a, b cand) int { return cmp.Compare(a.size, b.size) })
		for o, c := range out {
			// The best partner is near size c.size - diff/2.
			want := c.size - diff/2
			k := sort.Search(len(bySize), func(k int) bool { return bySize[k].size >= want })
			for _, j := range []int{k - 1, k} {
				if j < 0 || j >= len(bySize) {
					continue
				}
				n := slices.IndexFunc(in, func(x cand) bool { return x.i == bySize[j].i })
				consider(o, n, c.size-bySize[j].size, c.size+bySize[j].size)
			}
		}
	}
	if bestOut < 0 {
		return 0
	}
	o := out[bestOut]
	r.apply(o.i, o.slot, src.ID, dst.ID)
	if bestIn < 0 {
		return 1
	}
	n := in[bestIn]
	r.apply(n.i, n.slot, dst.ID, src.ID)
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
