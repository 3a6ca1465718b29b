package meta

import (
	"cmp"
	"slices"
)

// How a broker converges: it keeps the last ClusterState it applied and, for
// each new snapshot from Watch, applies Diff(prev, next, self) in order.

// ChangeKind is what a broker must do for one partition.
type ChangeKind int

const (
	// BecomeLeader: this broker leads at State.LeaderEpoch (new partition,
	// new leadership or a new leader epoch).
	BecomeLeader ChangeKind = iota + 1
	// BecomeFollower: this broker follows State.Leader (NoLeader: wait) at
	// State.LeaderEpoch; truncate to the divergence point first.
	BecomeFollower
	// UpdateState: same leader and leader epoch, other fields changed (ISR,
	// replicas, reassignment). A leader uses the ISR for its high watermark.
	UpdateState
	// StopReplica: this broker is no longer a replica of a partition whose
	// topic still exists (reassigned away): stop and delete the local copy.
	StopReplica
	// DeletePartition: the topic was deleted (or recreated under a new
	// topic ID): stop and delete the local copy.
	DeletePartition
)

func (k ChangeKind) String() string {
	switch k {
	case BecomeLeader:
		return "BecomeLeader"
	case BecomeFollower:
		return "BecomeFollower"
	case UpdateState:
		return "UpdateState"
	case StopReplica:
		return "StopReplica"
	case DeletePartition:
		return "DeletePartition"
	}
	return "ChangeKind(?)"
}

// Change is one step of a broker's convergence.
type Change struct {
	Kind      ChangeKind
	Partition TopicPartition
	TopicID   TopicID
	// State is the new state (the old one for StopReplica and DeletePartition).
	State PartitionState
}

// Diff lists what broker must do to go from prev (nil: nothing applied yet)
// to next, in (topic, partition) order; deletions of a recreated topic's old
// partitions come before the new partitions' roles.
func Diff(prev, next *ClusterState, broker int32) []Change {
	if prev == nil {
		prev = &ClusterState{}
	}
	var out []Change
	hosted := func(st PartitionState) bool { return slices.Contains(st.Replicas, broker) }
	for tp, old := range prev.Partitions() {
		if !hosted(old) {
			continue
		}
		oldID := prev.Topics[tp.Topic].ID
		now, ok := next.Partition(tp)
		switch {
		case !ok || next.Topics[tp.Topic].ID != oldID:
			if t, exists := next.Topics[tp.Topic]; exists && t.ID == oldID {
				out = append(out, Change{Kind: StopReplica, Partition: tp, TopicID: oldID, State: old})
			} else {
				out = append(out, Change{Kind: DeletePartition, Partition: tp, TopicID: oldID, State: old})
			}
		case !hosted(now):
			out = append(out, Change{Kind: StopReplica, Partition: tp, TopicID: oldID, State: old})
		}
	}
	for tp, now := range next.Partitions() {
		if !hosted(now) {
			continue
		}
		id := next.Topics[tp.Topic].ID
		old, had := prev.Partition(tp)
		had = had && hosted(old) && prev.Topics[tp.Topic].ID == id
		role := BecomeFollower
		if now.Leader == broker {
			role = BecomeLeader
		}
		switch {
		case !had || old.Leader != now.Leader || old.LeaderEpoch != now.LeaderEpoch:
			out = append(out, Change{Kind: role, Partition: tp, TopicID: id, State: now})
		case !old.Equal(now):
			out = append(out, Change{Kind: UpdateState, Partition: tp, TopicID: id, State: now})
		}
	}
	slices.SortStableFunc(out, func(a, b Change) int {
		return cmp.Or(
			cmp.Compare(a.Partition.Topic, b.Partition.Topic),
			cmp.Compare(a.Partition.Partition, b.Partition.Partition),
			cmp.Compare(removal(b.Kind), removal(a.Kind)), // removals first
		)
	})
	return out
}

func removal(k ChangeKind) int {
	if k == StopReplica || k == DeletePartition {
		return 1
	}
	return 0
}
