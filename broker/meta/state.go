package meta

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/strata-dev/strata/broker/placement"
)

// ClusterState is a consistent view of the cluster metadata at one etcd
// revision. It is immutable once published: callers may keep and share it,
// and must not modify the maps or slices it returns.
//
// Successive snapshots share the partition lists of topics that did not
// change, so publishing one costs O(brokers + topics + partitions of the
// changed topics), not O(all partitions).
type ClusterState struct {
	// Revision is the etcd revision the view reflects.
	Revision int64
	// Version is the metadata version: the number of metadata writes so far.
	// Every Store write bumps it in the same transaction; a broker lease
	// expiring does not (the controller's reaction does).
	Version int64
	// ControllerID is the broker holding the controller role, -1 if none.
	ControllerID int32
	// ClusterID is the Kafka cluster ID ("" until Store.ClusterID created it).
	ClusterID string
	Brokers   map[int32]BrokerInfo
	Topics    map[string]TopicInfo
	// BrokerConfigs are the dynamic broker configs by resource name: a
	// broker ID ("3") or "" for the cluster-wide defaults.
	BrokerConfigs map[string]map[string]string
	// ClientQuotas are the client quotas by entity (QuotaEntity.Key).
	ClientQuotas map[string]ClientQuota

	// parts holds each topic's partitions (records left by an interrupted
	// write, beyond the topic's partition count, are not shown).
	parts         map[string]*topicPartitions
	topicRevs     map[string]int64
	count         int
	controllerKey string // election key of the controller
}

// topicPartitions is one topic's partitions, indexed by partition number;
// an entry with nil Replicas is a missing record. Immutable once published.
type topicPartitions struct {
	n      int // records present
	states []PartitionState
	revs   []int64 // etcd ModRevision of each record, for compare-and-swap
}

// Live reports whether broker id is registered.
func (s *ClusterState) Live(id int32) bool {
	_, ok := s.Brokers[id]
	return ok
}

// Partition returns one partition's state.
func (s *ClusterState) Partition(tp TopicPartition) (PartitionState, bool) {
	st, _, ok := s.partition(tp)
	return st, ok
}

func (s *ClusterState) partition(tp TopicPartition) (PartitionState, int64, bool) {
	tps := s.parts[tp.Topic]
	if tps == nil || tp.Partition < 0 || int(tp.Partition) >= len(tps.states) || tps.states[tp.Partition].Replicas == nil {
		return PartitionState{}, 0, false
	}
	return tps.states[tp.Partition], tps.revs[tp.Partition], true
}

// NumPartitions is the number of partitions in the view.
func (s *ClusterState) NumPartitions() int { return s.count }

// TopicPartitions returns a topic's partition states in partition order.
func (s *ClusterState) TopicPartitions(topic string) []PartitionState {
	tps := s.parts[topic]
	if tps == nil {
		return nil
	}
	out := make([]PartitionState, 0, len(tps.states))
	for _, st := range tps.states {
		if st.Replicas != nil {
			out = append(out, st)
		}
	}
	return out
}

// Partitions iterates over every partition in (topic, partition) order.
func (s *ClusterState) Partitions() iter.Seq2[TopicPartition, PartitionState] {
	return func(yield func(TopicPartition, PartitionState) bool) {
		for _, topic := range slices.Sorted(maps.Keys(s.parts)) {
			for p, st := range s.parts[topic].states {
				if st.Replicas != nil && !yield(TopicPartition{topic, int32(p)}, st) {
					return
				}
			}
		}
	}
}

// SortedPartitions returns every partition name in (topic, partition) order.
func (s *ClusterState) SortedPartitions() []TopicPartition {
	out := make([]TopicPartition, 0, s.count)
	for tp := range s.Partitions() {
		out = append(out, tp)
	}
	return out
}

// Reassignments returns the partitions being reassigned
// (ListPartitionReassignments).
func (s *ClusterState) Reassignments() map[TopicPartition]PartitionState {
	out := map[TopicPartition]PartitionState{}
	for tp, st := range s.Partitions() {
		if st.Reassigning() {
			out[tp] = st
		}
	}
	return out
}

// Cordoned reports whether broker id takes no new replica: its
// cordoned.log.dirs (else the cluster-wide default) is not empty.
func (s *ClusterState) Cordoned(id int32) bool {
	if v, ok := s.BrokerConfigs[strconv.Itoa(int(id))][ConfigCordonedLogDirs]; ok {
		return v != ""
	}
	return s.BrokerConfigs[""][ConfigCordonedLogDirs] != ""
}

// CordonedBrokers lists the registered brokers that are cordoned, by ID.
func (s *ClusterState) CordonedBrokers() []int32 {
	var out []int32
	for id := range s.Brokers {
		if s.Cordoned(id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// placementBrokers lists the live brokers as placement targets, cordoned
// ones marked (placement leaves them out).
func (s *ClusterState) placementBrokers() []placement.Broker {
	out := make([]placement.Broker, 0, len(s.Brokers))
	for _, b := range s.Brokers {
		out = append(out, placement.Broker{ID: b.ID, Zone: b.Zone, Cordoned: s.Cordoned(b.ID)})
	}
	return out
}

// checkNotCordoned refuses a replica list that puts a new replica (one
// not in existing) on a cordoned broker.
func (s *ClusterState) checkNotCordoned(replicas, existing []int32) error {
	for _, id := range replicas {
		if !slices.Contains(existing, id) && s.Cordoned(id) {
			return fmt.Errorf("%w: broker %d is cordoned (%s): it takes no new replica", ErrInvalidReplicaAssignment, id, ConfigCordonedLogDirs)
		}
	}
	return nil
}

// placementLoad counts replicas and preferred leaders per broker, skipping
// topic skip.
func (s *ClusterState) placementLoad(skip string) map[int32]placement.Load {
	load := map[int32]placement.Load{}
	for tp, st := range s.Partitions() {
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

// stateBuilder accumulates etcd key-values into ClusterStates. The watcher
// owns one and publishes a snapshot after each revision.
type stateBuilder struct {
	keys        keys
	revision    int64
	version     int64
	clusterID   string
	brokers     map[int32]BrokerInfo
	topics      map[string]TopicInfo
	topicRevs   map[string]int64
	partitions  map[string]map[int32]partitionRecord
	controllers map[string]candidate // election key → candidate
	brokerCfgs  map[string]map[string]string
	quotas      map[string]ClientQuota // by record name

	published map[string]*topicPartitions // views shared with published snapshots
	dirty     map[string]bool             // topics whose view must be rebuilt
}

type partitionRecord struct {
	state PartitionState
	rev   int64
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
		partitions:  map[string]map[int32]partitionRecord{},
		controllers: map[string]candidate{},
		brokerCfgs:  map[string]map[string]string{},
		quotas:      map[string]ClientQuota{},
		published:   map[string]*topicPartitions{},
		dirty:       map[string]bool{},
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
	case kindClusterID:
		if deleted {
			b.clusterID = ""
		} else {
			b.clusterID = string(kv.Value)
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
		b.dirty[topic] = true
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
		b.dirty[tp.Topic] = true
		var st PartitionState
		if deleted || !decode(log, kv, &st) || len(st.Replicas) == 0 {
			delete(b.partitions[tp.Topic], tp.Partition)
			if len(b.partitions[tp.Topic]) == 0 {
				delete(b.partitions, tp.Topic)
			}
			return
		}
		if b.partitions[tp.Topic] == nil {
			b.partitions[tp.Topic] = map[int32]partitionRecord{}
		}
		b.partitions[tp.Topic][tp.Partition] = partitionRecord{state: st, rev: kv.ModRevision}
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
	case kindBrokerConfig:
		var cfg map[string]string
		if deleted || !decode(log, kv, &cfg) || len(cfg) == 0 {
			delete(b.brokerCfgs, topic)
			return
		}
		b.brokerCfgs[topic] = cfg
	case kindClientQuota:
		var q ClientQuota
		if deleted || !decode(log, kv, &q) || len(q.Values) == 0 || len(q.Entity) == 0 {
			delete(b.quotas, topic)
			return
		}
		q.Entity = q.Entity.Canonical()
		b.quotas[topic] = q
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

// snapshot publishes the builder's state. Views of unchanged topics are
// shared with earlier snapshots; the builder never mutates a published view.
func (b *stateBuilder) snapshot() *ClusterState {
	for topic := range b.dirty {
		delete(b.published, topic)
		t, ok := b.topics[topic]
		if !ok || t.Partitions <= 0 {
			continue
		}
		view := &topicPartitions{states: make([]PartitionState, t.Partitions), revs: make([]int64, t.Partitions)}
		for p, rec := range b.partitions[topic] {
			if p >= 0 && p < t.Partitions {
				view.states[p], view.revs[p] = rec.state, rec.rev
				view.n++
			}
		}
		b.published[topic] = view
	}
	clear(b.dirty)
	s := &ClusterState{
		Revision:      b.revision,
		Version:       b.version,
		ControllerID:  -1,
		ClusterID:     b.clusterID,
		Brokers:       maps.Clone(b.brokers),
		Topics:        maps.Clone(b.topics),
		BrokerConfigs: maps.Clone(b.brokerCfgs),
		ClientQuotas:  make(map[string]ClientQuota, len(b.quotas)),
		topicRevs:     maps.Clone(b.topicRevs),
		parts:         maps.Clone(b.published),
	}
	for _, q := range b.quotas {
		s.ClientQuotas[q.Entity.Key()] = q
	}
	for _, v := range s.parts {
		s.count += v.n
	}
	var lowest int64
	for key, c := range b.controllers {
		if s.ControllerID < 0 || c.createRev < lowest {
			s.ControllerID, s.controllerKey, lowest = c.broker, key, c.createRev
		}
	}
	return s
}
