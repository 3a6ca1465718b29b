package txn

import (
	"fmt"
	"slices"
	"strings"
)

// State is a transaction's state, named as Kafka's DescribeTransactions
// and ListTransactions report it.
type State int8

// The states of Kafka's TransactionState.
const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
	PrepareEpochFence
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// ParseState returns the state named s (Kafka's names, as ListTransactions
// filters use them).
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if n == s {
			return State(i), true
		}
	}
	return 0, false
}

// MarshalText implements encoding.TextMarshaler (stores keep the name).
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *State) UnmarshalText(b []byte) error {
	st, ok := ParseState(string(b))
	if !ok {
		return fmt.Errorf("unknown transaction state %q", b)
	}
	*s = st
	return nil
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// Metadata is the durable state of one transactional ID, what Kafka keeps
// in __transaction_state.
type Metadata struct {
	TransactionalID string `json:"transactionalID"`
	ProducerID      int64  `json:"producerID"`
	ProducerEpoch   int16  `json:"producerEpoch"`
	// LastProducerEpoch is the epoch before the last bump (-1 if none):
	// a producer retrying InitProducerId with it is answered with the
	// current epoch instead of being fenced (KIP-360).
	LastProducerEpoch int16 `json:"lastProducerEpoch"`
	TimeoutMillis     int32 `json:"timeoutMillis"`
	State             State `json:"state"`
	// Partitions of the ongoing (or completing) transaction, sorted.
	Partitions []TopicPartition `json:"partitions,omitempty"`
	// Groups whose offsets the transaction commits (AddOffsetsToTxn),
	// sorted.
	Groups []string `json:"groups,omitempty"`
	// StartMillis is when the transaction began (first partition or
	// group added), Unix millis; -1 when none is ongoing.
	StartMillis int64 `json:"startMillis"`
	// UpdateMillis is the last change, Unix millis.
	UpdateMillis int64 `json:"updateMillis"`
	// CoordinatorEpoch grows each time a coordinator first writes the
	// record after reading it from the store (a takeover, or the same
	// broker after the placement changed): markers carry it, and a
	// partition refuses a marker older than the last one it saw for the
	// producer (TRANSACTION_COORDINATOR_FENCED), so a stale
	// coordinator's late marker cannot end the producer's next
	// transaction. Kafka's coordinator epoch is its __transaction_state
	// partition's leader epoch; here it is per transactional ID. Records
	// written before it existed read as 0.
	CoordinatorEpoch int32 `json:"coordinatorEpoch,omitempty"`
}

func (m Metadata) clone() Metadata {
	m.Partitions = slices.Clone(m.Partitions)
	m.Groups = slices.Clone(m.Groups)
	return m
}

// hasPartition reports whether tp is part of the transaction.
func (m *Metadata) hasPartition(tp TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(m.Partitions, tp, compareTP)
	return ok
}

// addPartitions adds tps (keeping the list sorted) and reports whether any
// was new.
func (m *Metadata) addPartitions(tps []TopicPartition) bool {
	added := false
	for _, tp := range tps {
		if i, ok := slices.BinarySearchFunc(m.Partitions, tp, compareTP); !ok {
			m.Partitions = slices.Insert(m.Partitions, i, tp)
			added = true
		}
	}
	return added
}

func (m *Metadata) addGroup(g string) bool {
	i, ok := slices.BinarySearch(m.Groups, g)
	if ok {
		return false
	}
	m.Groups = slices.Insert(m.Groups, i, g)
	return true
}
