package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-dev/strata/broker/placement"
)

// NoLeader is a partition's leader when it has none (Kafka's -1).
const NoLeader int32 = -1

// Wanted is a broker the spec asks for: zone, StatefulSet ordinal and the
// broker ID derived from them (the zone's ID block base + ordinal).
type Wanted struct {
	Zone    string
	Ordinal int32
	ID      int32
}

// Broker is a broker registered in the cluster metadata, with its rack
// (= zone).
type Broker struct {
	ID   int32
	Rack string
}

// Partition is one partition as the metadata shows it. Replicas is the
// full replica list (during a reassignment: the union of old and new, as
// Kafka reports it); Adding and Removing are the reassignment in flight.
type Partition struct {
	Topic     string
	Partition int32
	Replicas  []int32
	ISR       []int32
	Leader    int32
	Adding    []int32
	Removing  []int32
	// LeaderZone, when the topic pins its leaders to a zone, keeps the
	// preferred leader there when replicas move.
	LeaderZone string
	// Sizes are the bytes each replica holds, by broker, as the brokers
	// report them (DescribeLogDirs, see WithSizes). A replica missing here
	// is of unknown size; with no sizes at all, moves balance replica
	// counts only.
	Sizes map[int32]int64
}

// Size is the partition's size: its largest replica's bytes (the leader's
// log, or a follower's not yet truncated), 0 when unknown.
func (p Partition) Size() int64 {
	var n int64
	for _, s := range p.Sizes {
		n = max(n, s)
	}
	return n
}

// bytesLeft is what the replicas being added still lack of the
// partition's size.
func (p Partition) bytesLeft() int64 {
	var n int64
	for _, id := range p.Adding {
		n += max(0, p.Size()-p.Sizes[id])
	}
	return n
}

// BytesLeft is what the replicas being added still lack of the
// partition's size (0 when no reassignment is in flight).
func (p Partition) BytesLeft() int64 { return p.bytesLeft() }

// placement is the partition as placement sees it: the replica list it
// ends with, its size, and pinned while a reassignment is in flight.
func (p Partition) placement() placement.Partition {
	return placement.Partition{Topic: p.Topic, Partition: p.Partition, Replicas: p.Target(), LeaderZone: p.LeaderZone,
		Size: p.Size(), Pinned: p.Reassigning()}
}

// Reassigning says whether a reassignment of the partition is in flight.
func (p Partition) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// Target is the replica list the partition ends with: Replicas without
// the replicas being removed.
func (p Partition) Target() []int32 {
	return slices.DeleteFunc(slices.Clone(p.Replicas), func(id int32) bool { return slices.Contains(p.Removing, id) })
}

func (p Partition) String() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// Metadata is the Kafka metadata view the decisions are made on.
type Metadata struct {
	// Brokers are the registered brokers.
	Brokers []Broker
	// Controller is the controller broker's ID (-1: unknown).
	Controller int32
	// Partitions are every partition of every topic.
	Partitions []Partition
	// MinISR is min.insync.replicas per topic; a topic missing here has
	// Kafka's default, 1.
	MinISR map[string]int
	// Untiered are the topics the slow tier does not hold whatever the
	// cluster's spec.tieredStorage says: compacted ones
	// (cleanup.policy compact) and those with remote.storage.enable=false.
	Untiered map[string]bool
}

// bytesInFlight is what the reassignments in flight still have to copy.
func (m Metadata) bytesInFlight() int64 {
	var n int64
	for _, p := range m.Partitions {
		n += p.bytesLeft()
	}
	return n
}

// movedBytes counts the moves that copy data (not a mere reordering of a
// replica list) and the bytes they copy: each new replica copies its
// partition.
func (m Metadata) movedBytes(moves []placement.Move) (dataMoves int, bytes int64) {
	size := map[string]int64{}
	for _, p := range m.Partitions {
		size[p.String()] = p.Size()
	}
	for _, mv := range moves {
		if sameSet(mv.From, mv.To) {
			continue
		}
		dataMoves++
		for _, id := range mv.To {
			if !slices.Contains(mv.From, id) {
				bytes += size[fmt.Sprintf("%s-%d", mv.Topic, mv.Partition)]
			}
		}
	}
	return dataMoves, bytes
}

func (m Metadata) registered(id int32) bool {
	return slices.ContainsFunc(m.Brokers, func(b Broker) bool { return b.ID == id })
}

func (m Metadata) minISR(topic string) int {
	if n, ok := m.MinISR[topic]; ok && n > 0 {
		return n
	}
	return 1
}

// sortedPartitions returns the partitions in (topic, partition) order, so
// that reasons name the same partition every time.
func (m Metadata) sortedPartitions() []Partition {
	ps := slices.Clone(m.Partitions)
	slices.SortFunc(ps, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return ps
}

// Pod is a broker pod's state.
type Pod struct {
	Name     string
	BrokerID int32
	// Ready is the pod's Ready condition (the broker's /readyz: logs
	// recovered, registered and seeing its own registration).
	Ready bool
	// Current says the pod runs the revision the spec renders now (config
	// hash, image, FastBucket, resources): false means it needs a restart.
	Current bool
	// Terminating: the pod has a deletion timestamp.
	Terminating bool
}

// list formats up to three items and how many more there are.
func list[T any](items []T) string {
	const show = 3
	parts := make([]string, 0, show)
	for i, it := range items {
		if i == show {
			break
		}
		parts = append(parts, fmt.Sprint(it))
	}
	s := strings.Join(parts, ", ")
	if len(items) > show {
		s += fmt.Sprintf(" and %d more", len(items)-show)
	}
	return s
}
