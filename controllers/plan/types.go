package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
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
