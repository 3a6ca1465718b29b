package meta

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
)

// newFetchToken draws a BrokerInfo.FetchToken.
func newFetchToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("replica fetch token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// NoLeader is PartitionState.Leader of an offline partition.
const NoLeader int32 = -1

// Listener is one advertised listener of a broker.
type Listener struct {
	Name             string `json:"name"`
	Host             string `json:"host"`
	Port             int32  `json:"port"`
	SecurityProtocol string `json:"securityProtocol"`
}

// BrokerInfo is a broker's registration, stored under brokers/<id> with the
// broker's lease.
type BrokerInfo struct {
	ID        int32      `json:"id"`
	Zone      string     `json:"zone"` // Kafka rack
	Listeners []Listener `json:"listeners"`
	// Epoch is the etcd revision that created this registration: it grows
	// with every registration, so it tells incarnations of one ID apart
	// (KIP-380's broker epoch). Filled in on read, not stored in the value.
	Epoch int64 `json:"-"`
	// FetchEpoch says that this broker's replica fetches carry its Epoch
	// (Fetch ReplicaState, KIP-903). Leaders refuse a replica fetch naming
	// a broker registered with FetchEpoch unless it carries the broker's
	// current Epoch (KIP-380 style). A broker of an older version registers
	// without it, so its epoch-less fetches are still served during a
	// rolling upgrade.
	FetchEpoch bool `json:"fetchEpoch,omitempty"`
	// FetchToken is a secret of this registration: 128 random bits (hex),
	// drawn anew by every RegisterBroker, readable only by what reads the
	// metadata store (the brokers and the operator). The broker's replica
	// fetches carry it (replica.TagReplicaToken), and leaders refuse a
	// replica fetch in the broker's name without it: unlike the Epoch, an
	// etcd revision anyone can guess in a few thousand tries, it cannot be
	// guessed, so no client can pose as a follower to move a partition's
	// high watermark past what the follower holds. It holds on every
	// cluster, with or without authentication and ACLs. A broker of an
	// older version registers without it and is not checked.
	FetchToken string `json:"fetchToken,omitempty"`
	// ShuttingDown says that the broker is in controlled shutdown
	// (Registration.EnterControlledShutdown): the controller moves every
	// leadership it holds to another live ISR member and elects it leader
	// of nothing while another candidate exists. Brokers of older versions
	// ignore the field (they keep electing it, as before).
	ShuttingDown bool `json:"shuttingDown,omitempty"`
	// ControlledShutdown says that this broker, as controller, moves
	// leaderships off brokers that are ShuttingDown. A broker shutting down
	// while an older controller (without it) holds the role does not wait
	// for a handover that will not come (rolling upgrades).
	ControlledShutdown bool `json:"controlledShutdown,omitempty"`
}

// TopicID is a topic's Kafka UUID, fixed at creation, so that a topic
// deleted and recreated under the same name is a different topic.
type TopicID [16]byte

func newTopicID() (TopicID, error) {
	var id TopicID
	if _, err := rand.Read(id[:]); err != nil {
		return id, fmt.Errorf("topic ID: %w", err)
	}
	return id, nil
}

func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText encodes the ID as 32 hex digits.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes 32 hex digits.
func (id *TopicID) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(id) {
		return fmt.Errorf("topic ID %q: want 32 hex digits", b)
	}
	_, err := hex.Decode(id[:], b)
	return err
}

// TopicSpec is a topic to create. The caller resolves Kafka's -1 ("broker
// default") for Partitions and ReplicationFactor before calling.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Config            map[string]string
	// LeaderZone is the zone placement pins the new partitions' preferred
	// leaders to ("" = balance over zones). The caller resolves it from the
	// topic's leader.placement.zone config and the cluster default; it is
	// not stored: from then on the controller keeps leaders in the zone the
	// config (ConfigLeaderZone) or its own default (ControllerOptions.
	// LeaderZone) names.
	LeaderZone string
	// Assignment, when set, is a manual replica assignment (CreateTopics'
	// assignments); Partitions and ReplicationFactor are then taken from it.
	Assignment [][]int32
}

// TopicInfo is a topic's record, stored under topics/<name>.
type TopicInfo struct {
	Name              string            `json:"name"`
	ID                TopicID           `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replicationFactor"`
	Config            map[string]string `json:"config,omitempty"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// PartitionState is a partition's replication state, stored under
// partitions/<topic>/<partition> and changed only by compare-and-swap.
type PartitionState struct {
	// Replicas is the assignment; Replicas[0] is the preferred leader.
	Replicas []int32 `json:"replicas"`
	// Leader is the current leader, NoLeader when offline.
	Leader int32 `json:"leader"`
	// LeaderEpoch grows with every leader change (including to NoLeader).
	LeaderEpoch int32 `json:"leaderEpoch"`
	// ISR is the in-sync replica set. When every ISR member is dead it is
	// left as it was: those are the replicas that may lead without losing
	// acknowledged data.
	ISR []int32 `json:"isr"`
	// ISREpochs is the registration epoch (BrokerInfo.Epoch) under which
	// each ISR member joined the ISR (KIP-903): a member registered under
	// another epoch has restarted since and may have lost an unflushed
	// tail, so the controller removes it from the ISR and does not elect
	// it while another member is current. Members without an entry (records
	// written before this field existed) are not checked.
	ISREpochs map[int32]int64 `json:"isrEpochs,omitempty"`
	// PartitionEpoch grows with every change of this record.
	PartitionEpoch int32 `json:"partitionEpoch"`
	// LeaderBrokerEpoch is the registration epoch (BrokerInfo.Epoch) of the
	// leader when it was given leadership. A leader registered under another
	// epoch has restarted since: the controller treats it as a new broker
	// (new leader election, leader epoch +1), and its AlterPartition calls
	// fail. 0 when unknown.
	LeaderBrokerEpoch int64 `json:"leaderBrokerEpoch,omitempty"`
	// AddingReplicas and RemovingReplicas describe a reassignment in
	// progress (KIP-455). Replicas is then the target replicas followed by
	// the removing ones; the controller completes the reassignment once
	// every adding replica is in the ISR.
	AddingReplicas   []int32 `json:"addingReplicas,omitempty"`
	RemovingReplicas []int32 `json:"removingReplicas,omitempty"`
}

// ISREpoch returns the registration epoch under which member joined the
// ISR, 0 when unknown.
func (s PartitionState) ISREpoch(member int32) int64 { return s.ISREpochs[member] }

// withISREpochs returns s with ISREpochs holding exactly the ISR members
// that have a known epoch (entries of former members dropped), nil when
// none has.
func (s PartitionState) withISREpochs(epoch func(member int32) int64) PartitionState {
	var m map[int32]int64
	for _, id := range s.ISR {
		if e := epoch(id); e != 0 {
			if m == nil {
				m = make(map[int32]int64, len(s.ISR))
			}
			m[id] = e
		}
	}
	s.ISREpochs = m
	return s
}

// Reassigning reports whether a reassignment is in progress.
func (s PartitionState) Reassigning() bool {
	return len(s.AddingReplicas) > 0 || len(s.RemovingReplicas) > 0
}

// Clone returns a deep copy.
func (s PartitionState) Clone() PartitionState {
	s.Replicas = slices.Clone(s.Replicas)
	s.ISR = slices.Clone(s.ISR)
	s.ISREpochs = maps.Clone(s.ISREpochs)
	s.AddingReplicas = slices.Clone(s.AddingReplicas)
	s.RemovingReplicas = slices.Clone(s.RemovingReplicas)
	return s
}

// Equal reports whether two states are identical.
func (s PartitionState) Equal(o PartitionState) bool {
	return s.Leader == o.Leader && s.LeaderEpoch == o.LeaderEpoch && s.PartitionEpoch == o.PartitionEpoch &&
		s.LeaderBrokerEpoch == o.LeaderBrokerEpoch &&
		slices.Equal(s.Replicas, o.Replicas) && slices.Equal(s.ISR, o.ISR) && maps.Equal(s.ISREpochs, o.ISREpochs) &&
		slices.Equal(s.AddingReplicas, o.AddingReplicas) && slices.Equal(s.RemovingReplicas, o.RemovingReplicas)
}

// Topic config keys this package reads.
const (
	// ConfigUncleanLeaderElection ("true") lets the controller elect a live
	// replica outside the ISR when no ISR member is alive, losing data.
	ConfigUncleanLeaderElection = "unclean.leader.election.enable"
	// ConfigLeaderZone pins the topic's preferred leaders to a zone; ""
	// balances them over zones whatever the cluster default says.
	ConfigLeaderZone = "leader.placement.zone"
)

// ConfigCordonedLogDirs is the dynamic broker config (Kafka's KIP-1066)
// that cordons a broker's log directories: a broker whose effective value
// (its own, else the cluster-wide default) is not empty takes no new
// replica. A Strata broker has one log directory, so any value cordons the
// whole broker; the operator sets "*" on the brokers a scale-down removes.
const ConfigCordonedLogDirs = "cordoned.log.dirs"

// LeaderZone is the zone a topic's preferred leaders belong in: its
// leader.placement.zone config when set (also when set to "", which means
// balanced), else clusterDefault ("" = balanced).
func (t TopicInfo) LeaderZone(clusterDefault string) string {
	if z, ok := t.Config[ConfigLeaderZone]; ok {
		return z
	}
	return clusterDefault
}
