package group

import (
	"cmp"
	"slices"
)

// Server-side assignors of the KIP-848 consumer protocol. An assignor is a
// pure function from the group's members (subscriptions, racks, previous
// target assignment) and the subscribed topics' metadata to a new target
// assignment; the reconciliation in consumer.go then moves each member
// towards its target without ever giving a partition to two members.

// assignorUniform and assignorRange are the names Kafka's
// group.consumer.assignors default lists; the first is the default.
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// assignors are the server-side assignors, in preference order.
var assignors = map[string]func(assignSpec) map[string]topicParts{
	assignorUniform: assignUniform,
	assignorRange:   assignRange,
}

// topicParts is a set of partitions by topic name, partitions sorted.
type topicParts map[string][]int32

// assignSpec is an assignor's input.
type assignSpec struct {
	// members sorted by id.
	members []assignMember
	// topics are the subscribed topics that exist.
	topics map[string]topicInfo
}

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id   string
	rack string // "" when the member sent none
	// topics the member subscribes to (existing ones), sorted.
	topics []string
	// current is the member's previous target assignment (stickiness).
	current topicParts
}

// topicInfo is a subscribed topic's metadata.
type topicInfo struct {
	id         [16]byte
	partitions int32
	// racks[p] is the set of racks (zones) holding a replica of
	// partition p; nil when no member has a rack (not computed).
	racks [][]string
}

func (t topicInfo) inRack(p int32, rack string) bool {
	if rack == "" || int(p) >= len(t.racks) {
		return false
	}
	return slices.Contains(t.racks[p], rack)
}

// assignRange is Kafka's range assignor per topic: the members subscribed
// to a topic, in member id order, get contiguous ranges of its partitions,
// the first P mod N members one partition more. Members subscribing to the
// same co-partitioned topics get the same partition numbers of each. It
// is not rack-aware (as Kafka's server-side range assignor in 4.0).
func assignRange(spec assignSpec) map[string]topicParts {
	out := make(map[string]topicParts, len(spec.members))
	for _, m := range spec.members {
		out[m.id] = topicParts{}
	}
	for _, topic := range sortedKeys(spec.topics) {
		var subs []string
		for _, m := range spec.members {
			if slices.Contains(m.topics, topic) {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n, total := int32(len(subs)), spec.topics[topic].partitions
		per, extra := total/n, total%n
		next := int32(0)
		for i, id := range subs {
			count := per
			if int32(i) < extra {
				count++
			}
			for p := next; p < next+count; p++ {
				out[id][topic] = append(out[id][topic], p)
			}
			next += count
		}
	}
	return out
}

// assignUniform is the uniform assignor: every partition of a subscribed
// topic goes to one of its subscribers, the assignment is balanced (no
// partition can move to a subscriber of its topic whose load is two or
// more below its owner's), sticky (partitions stay where the previous
// target put them unless balance requires a move) and rack-aware
// (a partition prefers a member whose rack holds one of its replicas, as
// long as that does not break balance). Homogeneous and heterogeneous
// subscriptions are both handled by the same greedy algorithm.
func assignUniform(spec assignSpec) map[string]topicParts {
	members := make(map[string]*uniformMember, len(spec.members))
	order := make([]*uniformMember, 0, len(spec.members))
	for _, am := range spec.members {
		um := &uniformMember{assignMember: am, owned: map[TopicPartition]bool{}}
		members[am.id] = um
		order = append(order, um)
	}
	// subscribers per topic, and each member's fair share (its
	// topics' partitions divided by their subscriber counts, rounded up).
	subs := map[string][]*uniformMember{}
	for _, um := range order {
		for _, t := range um.topics {
			if _, ok := spec.topics[t]; ok {
				subs[t] = append(subs[t], um)
			}
		}
	}
	for _, um := range order {
		var share float64
		for _, t := range um.topics {
			if len(subs[t]) > 0 {
				share += float64(spec.topics[t].partitions) / float64(len(subs[t]))
			}
		}
		um.quota = int(share)
		if float64(um.quota) < share {
			um.quota++
		}
	}
	owner := map[TopicPartition]*uniformMember{}
	// rackMatch reports whether a subscriber of the partition's topic is
	// in one of its replicas' racks.
	rackMatch := func(t string, p int32) bool {
		for _, um := range subs[t] {
			if spec.topics[t].inRack(p, um.rack) {
				return true
			}
		}
		return false
	}
	// 1. Stickiness: keep the previous target where still valid, up to
	// each member's quota; as Kafka's rack-aware uniform assignor, not a
	// partition outside the member's rack that a member in its rack could
	// take.
	for _, um := range order {
		for _, t := range sortedKeys(um.current) {
			info, ok := spec.topics[t]
			if !ok || !slices.Contains(um.topics, t) {
				continue
			}
			for _, p := range um.current[t] {
				tp := TopicPartition{t, p}
				if p >= info.partitions || owner[tp] != nil || len(um.owned) >= um.quota {
					continue
				}
				if um.rack != "" && !info.inRack(p, um.rack) && rackMatch(t, p) {
					continue
				}
				owner[tp] = um
				um.owned[tp] = true
			}
		}
	}
	// 2. Unassigned partitions: a member in a replica's rack under its
	// quota first, else the least loaded subscriber.
	for _, t := range sortedKeys(spec.topics) {
		info := spec.topics[t]
		for p := int32(0); p < info.partitions; p++ {
			tp := TopicPartition{t, p}
			if owner[tp] != nil || len(subs[t]) == 0 {
				continue
			}
			var best *uniformMember
			for _, um := range subs[t] {
				if info.inRack(p, um.rack) && len(um.owned) < um.quota && (best == nil || len(um.owned) < len(best.owned)) {
					best = um
				}
			}
			if best == nil {
				for _, um := range subs[t] {
					if best == nil || len(um.owned) < len(best.owned) ||
						(len(um.owned) == len(best.owned) && info.inRack(p, um.rack) && !info.inRack(p, best.rack)) {
						best = um
					}
				}
			}
			owner[tp] = best
			best.owned[tp] = true
		}
	}
	// 3. Balance: move a partition from a member to a subscriber of its
	// topic whose load is at least two lower, until none can move. Each
	// move lowers the sum of squared loads, so this ends.
	for moved := true; moved; {
		moved = false
		byLoad := slices.Clone(order)
		slices.SortStableFunc(byLoad, func(a, b *uniformMember) int { return cmp.Compare(len(a.owned), len(b.owned)) })
	search:
		for _, to := range byLoad {
			for i := len(byLoad) - 1; i >= 0; i-- {
				from := byLoad[i]
				if len(from.owned)-len(to.owned) < 2 {
					break
				}
				if tp, ok := pickMove(from, to, spec.topics); ok {
					delete(from.owned, tp)
					to.owned[tp] = true
					moved = true
					break search
				}
			}
		}
	}
	out := make(map[string]topicParts, len(order))
	for _, um := range order {
		out[um.id] = fromSet(um.owned)
	}
	return out
}

type uniformMember struct {
	assignMember
	quota int
	owned map[TopicPartition]bool
}

// pickMove chooses a partition of from that to subscribes to, preferring
// one in to's rack and not in from's, then the highest partition (which
// keeps low partitions where they are, for determinism).
func pickMove(from, to *uniformMember, topics map[string]topicInfo) (TopicPartition, bool) {
	var best TopicPartition
	bestScore := -1
	for _, tp := range sortedTPs(from.owned) {
		if !slices.Contains(to.topics, tp.Topic) {
			continue
		}
		info := topics[tp.Topic]
		score := 0
		if info.inRack(tp.Partition, to.rack) {
			score += 2
		}
		if !info.inRack(tp.Partition, from.rack) {
			score++
		}
		if score >= bestScore {
			best, bestScore = tp, score
		}
	}
	return best, bestScore >= 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedTPs(set map[TopicPartition]bool) []TopicPartition {
	out := make([]TopicPartition, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// fromSet converts a partition set to topicParts.
func fromSet(set map[TopicPartition]bool) topicParts {
	out := topicParts{}
	for _, tp := range sortedTPs(set) {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	return out
}

// set converts topicParts to a partition set.
func (tp topicParts) set() map[TopicPartition]bool {
	out := map[TopicPartition]bool{}
	for t, ps := range tp {
		for _, p := range ps {
			out[TopicPartition{t, p}] = true
		}
	}
	return out
}

func (tp topicParts) has(t string, p int32) bool {
	return slices.Contains(tp[t], p)
}

func (tp topicParts) count() int {
	n := 0
	for _, ps := range tp {
		n += len(ps)
	}
	return n
}

func (tp topicParts) equal(o topicParts) bool {
	if tp.count() != o.count() {
		return false
	}
	for t, ps := range tp {
		if !slices.Equal(ps, o[t]) {
			return false
		}
	}
	return true
}
