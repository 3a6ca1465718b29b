package meta

import "errors"

// Sentinel errors callers test with errors.Is. The broker maps them to Kafka
// error codes (noted per error).
var (
	// ErrStaleState: a compare-and-swap lost: the partition (or topic)
	// changed since the caller read it. FENCED_LEADER_EPOCH when the leader
	// epoch moved, otherwise INVALID_UPDATE_VERSION; re-read and retry.
	ErrStaleState = errors.New("stale metadata state")
	// ErrTopicExists: TOPIC_ALREADY_EXISTS.
	ErrTopicExists = errors.New("topic already exists")
	// ErrUnknownTopic: UNKNOWN_TOPIC_OR_PARTITION.
	ErrUnknownTopic = errors.New("unknown topic or partition")
	// ErrInvalidTopic: INVALID_TOPIC_EXCEPTION.
	ErrInvalidTopic = errors.New("invalid topic name")
	// ErrInvalidReplicationFactor: INVALID_REPLICATION_FACTOR. Wraps
	// placement.ErrInvalidReplicationFactor when placement raised it.
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")
	// ErrInvalidPartitions: INVALID_PARTITIONS.
	ErrInvalidPartitions = errors.New("invalid number of partitions")
	// ErrInvalidReplicaAssignment: INVALID_REPLICA_ASSIGNMENT.
	ErrInvalidReplicaAssignment = errors.New("invalid replica assignment")
	// ErrInvalidAlterPartition: the proposed state breaks an AlterPartition
	// rule (see docs/metadata.md): INVALID_REQUEST.
	ErrInvalidAlterPartition = errors.New("invalid partition state change")
	// ErrIneligibleReplica: an ISR addition names a broker that is not
	// registered: INELIGIBLE_REPLICA.
	ErrIneligibleReplica = errors.New("ineligible replica")
	// ErrNotController: the call needs the controller role and this broker
	// does not hold it: NOT_CONTROLLER.
	ErrNotController = errors.New("not the controller")
	// ErrElectionNotNeeded: the preferred replica already leads:
	// ELECTION_NOT_NEEDED.
	ErrElectionNotNeeded = errors.New("election not needed")
	// ErrPreferredLeaderNotAvailable: the preferred replica is dead or out of
	// the ISR: PREFERRED_LEADER_NOT_AVAILABLE.
	ErrPreferredLeaderNotAvailable = errors.New("preferred leader not available")
	// ErrEligibleLeadersNotAvailable: no live replica can lead:
	// ELIGIBLE_LEADERS_NOT_AVAILABLE.
	ErrEligibleLeadersNotAvailable = errors.New("eligible leaders not available")
	// ErrBrokerIDInUse: another live registration holds this broker ID
	// (a restarted broker whose previous lease has not expired yet sees this
	// until the lease TTL passes).
	ErrBrokerIDInUse = errors.New("broker ID already registered")
	// ErrSessionLost: the broker's etcd lease expired or was revoked; the
	// broker must register again.
	ErrSessionLost = errors.New("etcd session lost")
)
