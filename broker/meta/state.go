package meta

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/strata-dev/strata/broker/placement"
)

// ClusterState is a consistent view of the cluster metadata at one etcd
// revision. It is immutable once published: callers may keep and share it.
type ClusterState struct {
	// Revision is the etcd revision the view reflects.
	Revision int64
	// Version is the metadata version: the number of metadata writes so far.
	// Every Store write bumps it in the same transaction; a broker lease
	// expiring does not (the controller's reaction does).
	Version int64
	// ControllerID is the broker holding the controller role, -1 if none.
	ControllerID int32
	Brokers      map[int32]BrokerInfo
	Topics       map[string]TopicInfo
	// Partitions holds the partitions of the topics in Topics (records left
	// by an interrupted write are not shown).
	Partitions map[TopicPartition]PartitionState

	partitionRevs map[TopicPartition]int64 // etcd ModRevision, for CAS
	topicRevs     map[string]int64
}

// Live reports whether broker id is registered.
func (s *ClusterState) Live(id int32) bool {
	_, ok := s.Brokers[id]
	return ok
}

// TopicPartitions returns a topic's partition states in partition order.
func (s *ClusterState) TopicPartitions(topic string) []PartitionState {
	t, ok := s.Topics[topic]
	if !ok {
		return nil
	}
	out := make([]PartitionState, 0, t.Partitions)
	for p := range t.Partitions {
		if st, ok := s.Partitions[TopicPartition{topic, p}]; ok {
			out = append(out, st)
		}
	}
	return out
}

// Reassignments returns the partitions being reassigned
// (ListPartitionReassignments).
func (s *ClusterState) Reassignments() map[TopicPartition]PartitionState {
	out := map[TopicPartition]PartitionState{}
	for tp, st := range s.Partitions {
		if st.Reassigning() {
			out[tp] = st
		}
	}
	return out
}

// SortedPartitions returns every partition name in (topic, partition) order.
func (s *ClusterState) SortedPartitions() []TopicPartition {
	out := slices.Collect(maps.Keys(s.Partitions))
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// placementBrokers lists the live brokers as placement targets.
func (s *ClusterState) placementBrokers() []placement.Broker {
	out := make([]placement.Broker, 0, len(s.Brokers))
	for _, b := range s.Brokers {
		out = append(out, placement.Broker{ID: b.ID, Zone: b.Zone})
	}
	return out
}

// placementLoad counts replicas and preferred leaders per broker, skipping
// topic skip.
func (s *ClusterState) placementLoad(skip string) map[int32]placement.Load {
	load := map[int32]placement.Load{}
	for tp, st := range s.Partitions {
		if tp.Topic == skip {
			continue
		}
		for i, id := range st.Replicas {
			l := load[id]
			l.Replicas++
			if i == 0 {
				l.Leaders++
			}
			load[id] = l
		}
	}
	return load
}

// stateBuilder accumulates etcd key-values into a ClusterState. The watcher
// owns one and publishes a snapshot after each revision.
type stateBuilder struct {
	keys        keys
	revision    int64
	version     int64
	brokers     map[int32]BrokerInfo
	topics      map[string]TopicInfo
	topicRevs   map[string]int64
	partitions  map[TopicPartition]PartitionState
	revs        map[TopicPartition]int64
	controllers map[string]candidate // election key → candidate
}

type candidate struct {
	createRev int64
	broker    int32
}

func newStateBuilder(k keys) *stateBuilder {
	return &stateBuilder{
		keys:        k,
		brokers:     map[int32]BrokerInfo{},
		topics:      map[string]TopicInfo{},
		topicRevs:   map[string]int64{},
		partitions:  map[TopicPartition]PartitionState{},
		revs:        map[TopicPartition]int64{},
		controllers: map[string]candidate{},
	}
}

// apply records one put or delete. Values that do not decode are logged and
// treated as absent: one bad record must not blind a broker to the rest.
func (b *stateBuilder) apply(log logr.Logger, kv *mvccpb.KeyValue, deleted bool) {
	key := string(kv.Key)
	kind, broker, topic, tp := b.keys.parse(key)
	switch kind {
	case kindVersion:
		if deleted {
			b.version = 0
		} else {
			b.version = kv.Version
		}
	case kindBroker:
		var info BrokerInfo
		if deleted || !decode(log, kv, &info) {
			delete(b.brokers, broker)
			return
		}
		info.ID = broker // the key is authoritative
		info.Epoch = kv.CreateRevision
		b.brokers[broker] = info
	case kindTopic:
		var info TopicInfo
		if deleted || !decode(log, kv, &info) {
			delete(b.topics, topic)
			delete(b.topicRevs, topic)
			return
		}
		info.Name = topic
		b.topics[topic] = info
		b.topicRevs[topic] = kv.ModRevision
	case kindPartition:
		var st PartitionState
		if deleted || !decode(log, kv, &st) {
			delete(b.partitions, tp)
			delete(b.revs, tp)
			return
		}
		b.partitions[tp] = st
		b.revs[tp] = kv.ModRevision
	case kindController:
		if deleted {
			delete(b.controllers, key)
			return
		}
		id, err := strconv.ParseInt(string(kv.Value), 10, 32)
		if err != nil {
			log.Error(err, "ignoring controller candidate with a bad value", "key", key)
			return
		}
		b.controllers[key] = candidate{createRev: kv.CreateRevision, broker: int32(id)}
	default:
		log.V(1).Info("ignoring unknown metadata key", "key", key)
	}
}

func decode(log logr.Logger, kv *mvccpb.KeyValue, v any) bool {
	if err := json.Unmarshal(kv.Value, v); err != nil {
		log.Error(err, "ignoring metadata record that does not decode", "key", string(kv.Key), "modRevision", kv.ModRevision)
		return false
	}
	return true
}

// snapshot copies the builder into an immutable ClusterState. Values are
// shared: the builder replaces them on change and never mutates them.
func (b *stateBuilder) snapshot() *ClusterState {
	s := &ClusterState{
		Revision:      b.revision,
		Version:       b.version,
		ControllerID:  -1,
		Brokers:       maps.Clone(b.brokers),
		Topics:        maps.Clone(b.topics),
		topicRevs:     maps.Clone(b.topicRevs),
		Partitions:    make(map[TopicPartition]PartitionState, len(b.partitions)),
		partitionRevs: make(map[TopicPartition]int64, len(b.partitions)),
	}
	for tp, st := range b.partitions {
		if t, ok := b.topics[tp.Topic]; ok && tp.Partition >= 0 && tp.Partition < t.Partitions {
			s.Partitions[tp] = st
			s.partitionRevs[tp] = b.revs[tp]
		}
	}
	var lowest int64
	for _, c := range b.controllers {
		if s.ControllerID < 0 || c.createRev < lowest {
			s.ControllerID, lowest = c.broker, c.createRev
		}
	}
	return s
}
