package protocol

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/auth"
	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/quota"
	"github.com/strata-dev/strata/broker/telemetry"
	"github.com/strata-dev/strata/broker/txn"
)

// Env is what handlers reach the broker through. One Env is shared by every
// connection of a server; its fields are set before Serve and never change.
type Env struct {
	// Broker holds topics, partitions and the node identity.
	Broker *broker.Broker

	// Groups is the consumer-group coordinator (package broker/group),
	// set by broker/server; nil answers group APIs with
	// COORDINATOR_NOT_AVAILABLE.
	Groups *group.Coordinator

	// Txns is the transaction coordinator (package broker/txn), set by
	// broker/server; nil answers the transaction APIs with
	// COORDINATOR_NOT_AVAILABLE.
	Txns *txn.Coordinator

	// ProducerIDs allocates idempotent producer IDs (InitProducerID). The
	// single broker uses Broker (a block allocator persisted in its data
	// dir); a cluster plugs in its metadata store. Nil means Broker.
	ProducerIDs ProducerIDAllocator

	// Log is the base logger; handlers add key/values.
	Log logr.Logger

	// CreateInternalTopic creates one of the brokers' internal topic
	// projections (__consumer_offsets, __transaction_state;
	// broker/internaltopic) when Metadata names it and it does not exist
	// yet, as Kafka creates its internal topics on request; nil without
	// projections, a no-op for a projection that is off.
	CreateInternalTopic func(ctx context.Context, name string) error

	// Credentials holds the SCRAM credentials that SASL checks and
	// Describe/AlterUserScramCredentials manage; nil answers those APIs
	// with errors (SASL listeners then refuse every client).
	Credentials auth.CredentialStore

	// ReauthMax is connections.max.reauth.ms: the lifetime of a SASL
	// session (KIP-368); 0 means sessions do not expire.
	ReauthMax time.Duration

	// Authorizer decides ACLs (authz.go); nil: authorization is off,
	// every principal may do everything, and the ACL APIs answer
	// SECURITY_DISABLED.
	Authorizer *auth.Authorizer

	// ACLs stores the bindings CreateAcls/DeleteAcls change and
	// DescribeAcls lists (etcd in a cluster, a file standalone); the
	// Authorizer follows it. Set together with Authorizer.
	ACLs auth.ACLStore

	// Denials counts refused authorizations; may be nil.
	Denials DenialObserver

	// Limits bound what one request may make the broker do (limits.go).
	Limits Limits

	// Quotas enforces client quotas (producer_byte_rate,
	// consumer_byte_rate; quota.go); nil: none.
	Quotas *quota.Manager

	// Telemetry answers the KIP-714 client telemetry APIs and keeps what
	// clients push (package broker/telemetry); nil requests no metrics.
	Telemetry *telemetry.Manager

	// TxnVerifier, when set, is asked before the first transactional batch of a
	// producer's transaction is appended to a partition (KIP-890 part 1).
	TxnVerifier TxnVerifier

	// ZoneLocal is zone-local produce (zonelocal.go); nil: off, and
	// forwarded records are refused (KAFKA_STORAGE_ERROR).
	ZoneLocal ZoneLocal
	// zlLast is, per connection, the last forwarded produce not yet sent
	// to its leaders (closed once sent; zoneLocalOrder).
	zlMu   sync.Mutex
	zlLast map[uint64]chan struct{}

	// Shares serves share groups (KIP-932, keys 76-79 and 90-92), set by
	// broker/server; nil: created from Groups with Kafka's defaults on
	// first use (ShareCoordinator).
	Shares     *group.ShareCoordinator
	sharesOnce sync.Once
	shares     *group.ShareCoordinator

	// Fetch sessions, replicas' and consumers' (fetch_session.go), created
	// on first use.
	sessionsOnce sync.Once
	sessions     *fetchSessions
}

// TxnVerifier is the transaction coordinator's side of KIP-890 part 1
// (server-side partition verification): a late produce cannot join a
// transaction that has ended.
type TxnVerifier interface {
	// VerifyTxnPartition returns nil when topic/partition was added to the ongoing
	// transaction of transactionalID with this producer ID and epoch, else a kerr error
	// (INVALID_TXN_STATE, PRODUCER_FENCED, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, …)
	// the produce response carries for that partition.
	VerifyTxnPartition(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32) error
}

// ProducerIDAllocator hands out producer IDs that are never reused, also
// across restarts.
type ProducerIDAllocator interface {
	AllocateProducerID() (int64, error)
}

// ProducerIDAllocator returns the allocator of producer IDs (ProducerIDs,
// else Broker).
func (e *Env) ProducerIDAllocator() ProducerIDAllocator { return e.producerIDs() }

func (e *Env) producerIDs() ProducerIDAllocator {
	if e.ProducerIDs != nil {
		return e.ProducerIDs
	}
	return e.Broker
}

// ShareCoordinator returns the share-group coordinator (Shares, else one
// made from Groups on first use), or nil without a group coordinator.
func (e *Env) ShareCoordinator() *group.ShareCoordinator {
	e.sharesOnce.Do(func() {
		switch {
		case e.Shares != nil:
			e.shares = e.Shares
		case e.Groups != nil:
			e.shares = group.NewShareCoordinator(e.Groups, group.ShareConfig{})
		}
	})
	return e.shares
}
