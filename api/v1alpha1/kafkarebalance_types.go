package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RebalanceMode is what a KafkaRebalance moves.
type RebalanceMode string

// The modes of a KafkaRebalance.
const (
	// RebalanceFull evens replicas, bytes and preferred leaders over every
	// registered broker (the planner of the operator's scale-up
	// rebalance).
	RebalanceFull RebalanceMode = "full"
	// RebalanceAddBrokers moves replicas onto spec.brokers only (brokers
	// just added): no replica moves between the other brokers.
	RebalanceAddBrokers RebalanceMode = "add-brokers"
	// RebalanceRemoveBrokers moves every replica off spec.brokers (before
	// the zones are scaled down), onto the brokers that stay.
	RebalanceRemoveBrokers RebalanceMode = "remove-brokers"
)

// RebalanceAnnotation is the annotation a person sets on a KafkaRebalance
// to act on it: approve, stop or refresh. The operator removes it once
// acted on.
const RebalanceAnnotation = "kafka.strata.dev/rebalance"

// The values of RebalanceAnnotation.
const (
	RebalanceApprove = "approve"
	RebalanceStop    = "stop"
	RebalanceRefresh = "refresh"
)

// The states of a KafkaRebalance (status.state).
const (
	// RebalanceStatePending: no proposal yet (the cluster is not there or
	// does not answer, or the operator's own moves go first).
	RebalanceStatePending = "PendingProposal"
	// RebalanceStateProposalReady: status.proposal holds the plan; it
	// waits for the approve annotation.
	RebalanceStateProposalReady = "ProposalReady"
	// RebalanceStateRebalancing: the approved moves run.
	RebalanceStateRebalancing = "Rebalancing"
	// RebalanceStateReady: every move is done.
	RebalanceStateReady = "Ready"
	// RebalanceStateStopped: the stop annotation cancelled the moves in
	// flight; refresh proposes again.
	RebalanceStateStopped = "Stopped"
	// RebalanceStateNotReady: the request cannot be planned as it is
	// (a broker that is not registered, a removal that leaves too few
	// brokers): the spec must change.
	RebalanceStateNotReady = "NotReady"
)

// DefaultMovesStalledAfter is spec.movesStalledAfter when unset.
const DefaultMovesStalledAfter = "10m"

// KafkaRebalanceSpec asks for a plan of partition moves in a cluster.
//
// +kubebuilder:validation:XValidation:rule="(!has(self.mode) || self.mode == 'full') || (has(self.brokers) && size(self.brokers) > 0)",message="brokers is required for mode add-brokers and remove-brokers: the IDs of the brokers to add or remove (KafkaCluster status.brokers)"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'full' || !has(self.brokers) || size(self.brokers) == 0",message="brokers is not allowed for mode full: a full rebalance balances over every registered broker (use add-brokers or remove-brokers to name brokers)"
// +kubebuilder:validation:XValidation:rule="self.clusterRef.name == oldSelf.clusterRef.name",message="clusterRef is immutable: create another KafkaRebalance for another cluster"
type KafkaRebalanceSpec struct {
	// ClusterRef names the KafkaCluster (same namespace) whose partitions
	// move.
	// +required
	ClusterRef LocalObjectReference `json:"clusterRef"`

	// Mode is full (even replicas, bytes and preferred leaders over every
	// registered broker), add-brokers (move replicas onto the brokers
	// listed, nothing else) or remove-brokers (move every replica off the
	// brokers listed, before a scale-down).
	// +kubebuilder:validation:Enum=full;add-brokers;remove-brokers
	// +kubebuilder:default=full
	// +optional
	Mode RebalanceMode `json:"mode,omitempty"`

	// Brokers are the broker IDs to add or remove (status.brokers of the
	// KafkaCluster lists them); only with add-brokers and remove-brokers.
	// +kubebuilder:validation:MaxItems=100
	// +listType=set
	// +optional
	Brokers []int32 `json:"brokers,omitempty"`

	// MovesStalledAfter is how long the approved moves may go without
	// progress (bytes copied or a move finished) before the MovesStalled
	// condition is set (and Stalled: a person must look, e.g. at a broker
	// that died while receiving a replica). Default 10m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('168h')",message="movesStalledAfter must be between 1s and 168h"
	// +optional
	MovesStalledAfter *metav1.Duration `json:"movesStalledAfter,omitempty"`
}

// KafkaRebalanceStatus is the proposal and the progress of its moves.
type KafkaRebalanceStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions (kstatus): Ready (every move done), Reconciling (a
	// proposal is computed or the moves run), Stalled (the request cannot
	// be planned, or MovesStalled), MovesStalled (the moves made no
	// progress for spec.movesStalledAfter).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// State is PendingProposal, ProposalReady, Rebalancing, Ready,
	// Stopped or NotReady.
	// +optional
	State string `json:"state,omitempty"`

	// Message says what the state waits for or why.
	// +optional
	Message string `json:"message,omitempty"`

	// Proposal is the plan: what it moves, the bytes, the cross-zone
	// bytes, the time at the throttle and the cost. Kept while the moves
	// run and after, as the record of what was approved.
	// +optional
	Proposal *RebalanceProposal `json:"proposal,omitempty"`

	// Progress is the approved moves' progress, with a clock.
	// +optional
	Progress *RebalanceProgress `json:"progress,omitempty"`

	// Moving lists the partitions (topic-partition) whose reassignment
	// this rebalance started and that were in flight at the last look:
	// the ones the stop annotation cancels.
	// +listType=atomic
	// +optional
	Moving []string `json:"moving,omitempty"`
}

// RebalanceProposal is a plan of partition moves, computed by the
// operator's planner (the one of its scale rebalances and drains).
type RebalanceProposal struct {
	// ComputedAt is when the plan was computed.
	ComputedAt metav1.Time `json:"computedAt"`
	// Moves counts the replica moves (reassignments that copy a
	// partition to a broker that does not hold it).
	Moves int32 `json:"moves"`
	// LeaderChanges counts the reassignments that only reorder a replica
	// list (a preferred-leader change: nothing is copied).
	// +optional
	LeaderChanges int32 `json:"leaderChanges"`
	// BytesToMove is what the new replicas copy: each one's partition
	// size (DescribeLogDirs). Sizes a broker did not report count as 0.
	BytesToMove int64 `json:"bytesToMove"`
	// CrossZoneBytes is what the moves would send across zones with
	// Kafka's own replication: a new replica fetches its partition from
	// the leader, across zones when the leader sits in another zone.
	CrossZoneBytes int64 `json:"crossZoneBytes"`
	// CrossZoneBytesStrata is what they send across zones with Strata:
	// a new replica of a tiered partition hydrates its history from the
	// slow tier (regional storage, no cross-zone transfer) and gets the
	// rest through the WAL's fast buckets, so it counts nothing (the
	// untiered tail, about 1 % in docs/tiered-storage.md, is not counted);
	// partitions that are not tiered (no spec.tieredStorage, a compacted
	// topic or remote.storage.enable=false) count as with Kafka.
	CrossZoneBytesStrata int64 `json:"crossZoneBytesStrata"`
	// Throttle is the replication throttle the moves run at
	// (KafkaCluster spec.rebalance.throttle, bytes/s per broker).
	// +optional
	Throttle *int64 `json:"throttle,omitempty"`
	// EstimatedDuration is the time the copy takes at the throttle: the
	// most any one broker receives or sends, over the rate. Absent
	// without a throttle. Hydration is not throttled, so tiered moves may
	// end sooner.
	// +optional
	EstimatedDuration *metav1.Duration `json:"estimatedDuration,omitempty"`
	// CostUSD is the cross-zone transfer bill of the moves at the
	// cluster's price table (spec.cost.prices: out and in per GB), in US
	// dollars: with Kafka's replication and with Strata's.
	CostUSD RebalanceCost `json:"costUSD"`
	// Brokers is each broker's replicas and bytes before and after the
	// plan.
	// +listType=map
	// +listMapKey=id
	// +optional
	Brokers []RebalanceBroker `json:"brokers,omitempty"`
	// Sample is the first moves of the plan (at most 20), to read what it
	// does.
	// +listType=atomic
	// +optional
	Sample []ProposedMove `json:"sample,omitempty"`
	// Reason is the planner's account of the plan.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RebalanceCost is a cost in US dollars, as decimal strings.
type RebalanceCost struct {
	Kafka  string `json:"kafka"`
	Strata string `json:"strata"`
}

// RebalanceBroker is one broker's load before and after a plan.
type RebalanceBroker struct {
	ID             int32  `json:"id"`
	Zone           string `json:"zone,omitempty"`
	ReplicasBefore int32  `json:"replicasBefore"`
	ReplicasAfter  int32  `json:"replicasAfter"`
	BytesBefore    int64  `json:"bytesBefore"`
	BytesAfter     int64  `json:"bytesAfter"`
}

// ProposedMove is one reassignment of a plan.
type ProposedMove struct {
	// Partition is topic-partition.
	Partition string `json:"partition"`
	// +listType=atomic
	From []int32 `json:"from"`
	// +listType=atomic
	To []int32 `json:"to"`
	// Bytes is what the move copies.
	// +optional
	Bytes int64 `json:"bytes"`
	// CrossZoneBytes is what it sends across zones with Kafka's
	// replication (Strata's is 0 for a tiered partition).
	// +optional
	CrossZoneBytes int64 `json:"crossZoneBytes"`
}

// MoveClock times partition moves: when they started, when they last
// progressed, the bytes copied, the rate and when they should end.
type MoveClock struct {
	// StartTime is when the first move started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// LastProgressTime is when bytes left last fell or a move last
	// finished.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// BytesMoved is what the moves have copied: bytes to move less bytes
	// left.
	// +optional
	BytesMoved int64 `json:"bytesMoved,omitempty"`
	// BytesPerSecond is BytesMoved over the time since StartTime.
	// +optional
	BytesPerSecond int64 `json:"bytesPerSecond,omitempty"`
	// EstimatedCompletionTime is when the bytes left are copied at
	// BytesPerSecond (absent before any byte moved).
	// +optional
	EstimatedCompletionTime *metav1.Time `json:"estimatedCompletionTime,omitempty"`
}

// RebalanceProgress is how far the approved moves are.
type RebalanceProgress struct {
	MoveClock `json:",inline"`
	// MovesStarted counts the replica moves started so far.
	// +optional
	MovesStarted int32 `json:"movesStarted"`
	// MovesDone counts those that finished.
	// +optional
	MovesDone int32 `json:"movesDone"`
	// MovesInFlight counts those in flight.
	// +optional
	MovesInFlight int32 `json:"movesInFlight"`
	// BytesToMove is the bytes of the approved plan, grown by every rise
	// of BytesLeft (data written meanwhile).
	// +optional
	BytesToMove int64 `json:"bytesToMove"`
	// BytesLeft is what the plan still copies: the moves not started and
	// what the new replicas in flight still lack.
	// +optional
	BytesLeft int64 `json:"bytesLeft"`
	// Percent is 100 × BytesMoved / BytesToMove (100 when done).
	// +optional
	Percent int32 `json:"percent"`
	// CompletionTime is when the last move finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// KafkaRebalance is a proposal of partition moves in a KafkaCluster,
// executed once approved (annotation kafka.strata.dev/rebalance:
// approve), stopped with stop and recomputed with refresh.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kr;krebalance,categories=strata
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Moves",type=integer,JSONPath=`.status.proposal.moves`
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.proposal.bytesToMove`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.proposal.costUSD.strata`,priority=1
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.percent`
// +kubebuilder:printcolumn:name="ETA",type=date,JSONPath=`.status.progress.estimatedCompletionTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KafkaRebalance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KafkaRebalanceSpec   `json:"spec,omitempty"`
	Status KafkaRebalanceStatus `json:"status,omitempty"`
}

// KafkaRebalanceList is a list of KafkaRebalances.
//
// +kubebuilder:object:root=true
type KafkaRebalanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaRebalance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KafkaRebalance{}, &KafkaRebalanceList{})
}
