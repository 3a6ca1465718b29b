package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Config configures a Coordinator. DefaultConfig returns Kafka's defaults.
type Config struct {
	// Store persists committed offsets; nil means a MemoryStore.
	Store OffsetStore
	// Clock drives all timers; nil means RealClock.
	Clock Clock
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member may ask for (group.min/max.session.timeout.ms); zero means
	// Kafka's defaults, 6s and 30m.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long
	// the first rebalance of an empty group waits for more members (it
	// is extended by this much, up to the rebalance timeout, each time a
	// member joins meanwhile). Zero means no delay; Kafka's default is 3s.
	InitialRebalanceDelay time.Duration
	// NewMemberJoinTimeout removes a new member whose JoinGroup has been
	// waiting this long (Kafka's fixed 5 minutes); zero means 5m.
	NewMemberJoinTimeout time.Duration
	// MaxGroupSize is group.max.size; zero means unlimited.
	MaxGroupSize int
	// MaxMetadataBytes is offset.metadata.max.bytes; zero means 4096.
	MaxMetadataBytes int
	// OffsetsRetention is offsets.retention.minutes (KIP-211): the
	// offsets of a group that has been Empty this long are deleted, with
	// the group; offsets of groups that never had members expire this
	// long after their commit. Zero means never.
	OffsetsRetention time.Duration
	// RetentionCheckInterval is offsets.retention.check.interval.ms;
	// zero means 10 minutes.
	RetentionCheckInterval time.Duration
	// Owns reports whether this broker coordinates group; nil means every
	// group. Requests for other groups get NOT_COORDINATOR.
	Owns func(group string) bool
	// OwnershipEpoch changes whenever the placement of groups may have
	// changed (the live broker set changed, a cluster). A group last read
	// under another epoch is read again from the store (GroupLoader)
	// before use: the coordinator that takes a group over serves the
	// offsets its previous coordinator committed, not what this broker
	// loaded at start. Nil: placement never changes (a standalone broker).
	OwnershipEpoch func() uint64
	// PartitionExists reports whether a topic partition exists; nil means
	// every partition does. Commits to unknown partitions get
	// UNKNOWN_TOPIC_OR_PARTITION.
	PartitionExists func(topic string, partition int32) bool
	// TopicID returns a topic's current ID (ok false: no such topic);
	// nil: unknown. Commits remember it, and OffsetFetch does not answer
	// a commit made to an earlier topic of the same name
	// (OffsetCommit.TopicID).
	TopicID func(topic string) (id [16]byte, ok bool)
	// Topics is the cluster's topic metadata the KIP-848 consumer
	// protocol assigns from; nil answers ConsumerGroupHeartbeat with
	// COORDINATOR_NOT_AVAILABLE.
	Topics TopicMetadata
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms: a
	// consumer-protocol member that does not heartbeat this long is
	// removed; zero means Kafka's 45s.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms,
	// the interval consumer-protocol members are told to heartbeat at;
	// zero means Kafka's 5s.
	ConsumerHeartbeatInterval time.Duration
}

// DefaultConfig returns Kafka's defaults (including the 3s initial
// rebalance delay) with an in-memory store.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:      6 * time.Second,
		MaxSessionTimeout:      30 * time.Minute,
		InitialRebalanceDelay:  3 * time.Second,
		NewMemberJoinTimeout:   5 * time.Minute,
		MaxMetadataBytes:       4096,
		OffsetsRetention:       7 * 24 * time.Hour,
		RetentionCheckInterval: 10 * time.Minute,
	}
}

// Client identifies the connection a request came from; it is shown by
// DescribeGroups and seeds generated member ids.
type Client struct {
	ID   string
	Host string
}

// Coordinator is the group coordinator of one broker.
//
// Ownership: c.mu guards groups and closed only; every group's state is
// guarded by that group's own mutex (see group). Methods are safe for
// concurrent use.
type Coordinator struct {
	cfg   Config
	clock Clock
	store OffsetStore
	// log is kept on the struct because timer callbacks have no request
	// context to take a logger from.
	log logr.Logger

	mu        sync.Mutex
	groups    map[string]*group
	closed    bool
	retention timerSlot // guarded by mu

	// shares is the share coordinator using the same group ids (nil:
	// none); see grouptype.go.
	shares atomic.Pointer[ShareCoordinator]
	// typeMu makes "no group of another type has this id" and the
	// creation of a group one step, so that two requests of different
	// group types cannot both create a group of one id. Lock order:
	// typeMu before ShareCoordinator.mu, c.mu and group.mu.
	typeMu sync.Mutex
}

// New loads committed offsets from cfg.Store and returns a Coordinator.
// The logger is taken from ctx.
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	def := DefaultConfig()
	if cfg.Store == nil {
		cfg.Store = NewMemoryStore()
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = def.MinSessionTimeout
	}
	if cfg.MaxSessionTimeout == 0 {
		cfg.MaxSessionTimeout = def.MaxSessionTimeout
	}
	if cfg.NewMemberJoinTimeout == 0 {
		cfg.NewMemberJoinTimeout = def.NewMemberJoinTimeout
	}
	if cfg.MaxMetadataBytes == 0 {
		cfg.MaxMetadataBytes = def.MaxMetadataBytes
	}
	if cfg.RetentionCheckInterval == 0 {
		cfg.RetentionCheckInterval = def.RetentionCheckInterval
	}
	if cfg.MinSessionTimeout > cfg.MaxSessionTimeout {
		return nil, fmt.Errorf("group: min session timeout %v above max %v", cfg.MinSessionTimeout, cfg.MaxSessionTimeout)
	}
	c := &Coordinator{
		cfg:    cfg,
		clock:  cfg.Clock,
		store:  cfg.Store,
		log:    logr.FromContextOrDiscard(ctx).WithName("group"),
		groups: make(map[string]*group),
	}
	loaded, err := cfg.Store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("group: load offsets: %w", err)
	}
	for id, commits := range loaded {
		g := c.newGroup(id)
		for _, oc := range commits {
			g.offsets[TopicPartition{oc.Topic, oc.Partition}] = oc
		}
		c.groups[id] = g
	}
	if ms, ok := cfg.Store.(MembershipStore); ok {
		groups, err := ms.LoadGroups(ctx)
		if err != nil {
			return nil, fmt.Errorf("group: load group membership: %w", err)
		}
		for id, md := range groups {
			g := c.groups[id]
			if g == nil {
				g = c.newGroup(id)
				c.groups[id] = g
			}
			g.mu.Lock()
			g.restoreMembership(md)
			g.mu.Unlock()
		}
		c.log.V(1).Info("loaded group membership", "groups", len(groups))
	}
	if ts, ok := cfg.Store.(TxnOffsetStore); ok {
		pending, err := ts.LoadPending(ctx)
		if err != nil {
			return nil, fmt.Errorf("group: load pending transactional offsets: %w", err)
		}
		for id, byPID := range pending {
			g := c.groups[id]
			if g == nil {
				g = c.newGroup(id)
				c.groups[id] = g
			}
			g.mu.Lock()
			g.restorePending(byPID)
			g.mu.Unlock()
		}
	}
	c.log.V(1).Info("loaded committed offsets", "groups", len(loaded))
	if cfg.OffsetsRetention > 0 {
		c.mu.Lock()
		c.scheduleRetention()
		c.mu.Unlock()
	}
	return c, nil
}

// Close stops all timers and answers every waiting JoinGroup and SyncGroup
// with NOT_COORDINATOR. It does not close the store.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.retention.t != nil {
		c.retention.t.Stop()
		c.retention.t = nil
	}
	c.retention.seq++
	groups := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		g.shutdown()
		g.mu.Unlock()
	}
}

// lookup returns the group, creating it when create is set. It returns nil
// when the group does not exist (and create is false) or c is closed.
func (c *Coordinator) lookup(id string, create bool) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	g := c.groups[id]
	if g == nil && create {
		g = c.newGroup(id)
		c.groups[id] = g
	}
	return g
}

// lockGroup returns the group locked, or nil. A group found Dead (deleted
// concurrently) is reported as absent. With an OwnershipEpoch, a group not
// read under the current epoch is read from the store first.
func (c *Coordinator) lockGroup(id string, create bool) *group {
	follow := c.cfg.OwnershipEpoch != nil
	for {
		g := c.lookup(id, create || follow)
		if g == nil {
			return nil
		}
		g.mu.Lock()
		if g.state == stateDead {
			g.mu.Unlock()
			if !create {
				return nil
			}
			continue
		}
		if follow {
			if epoch := c.cfg.OwnershipEpoch(); g.fenced || g.loadedEpoch != epoch {
				if err := c.reload(g); err != nil {
					g.mu.Unlock()
					c.log.Error(err, "reading group from the store", "group", id)
					return nil
				}
				g.loadedEpoch = epoch
			}
			if !create && g.unused() {
				g.mu.Unlock()
				c.dropIfUnused(id)
				return nil
			}
		}
		return g
	}
}

// GroupLoader is implemented by an OffsetStore shared by several brokers
// (etcd): it reads one group's durable state.
type GroupLoader interface {
	// LoadGroup returns the group's committed offsets, its membership
	// (nil when none is stored) and its pending transactional offsets
	// per producer ID.
	LoadGroup(ctx context.Context, group string) ([]OffsetCommit, *GroupMetadata, map[int64][]OffsetCommit, error)
}

// GroupClaimer is implemented by a store shared by several brokers
// (etcd). A coordinator claims a group before it reads the group and
// serves it; from then on the store refuses, with ErrFenced, every write of
// the group (offsets, membership, pending transactional offsets, deletion)
// from a coordinator that claimed it earlier. This is what Kafka gets from
// the leader epoch of the group's __consumer_offsets partition: a deposed
// coordinator, one whose view of the live brokers is stale (cut off from
// etcd, say) and that still takes itself for the group's coordinator,
// cannot overwrite what the current coordinator committed.
type GroupClaimer interface {
	// ClaimGroup claims group for this coordinator. kept reports that no
	// other coordinator claimed it since this one's previous claim, so
	// what this coordinator holds in memory is still the group's latest
	// state; otherwise it must be read again from the store.
	ClaimGroup(ctx context.Context, group string) (kept bool, err error)
}

// reload claims the group (GroupClaimer) and replaces its offsets, pending
// transactional offsets and, unless members are in the group here and no
// other coordinator claimed it meanwhile, its membership with the store's.
// Callers hold g.mu.
func (c *Coordinator) reload(g *group) error {
	loader, ok := c.store.(GroupLoader)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if claimer, ok := c.store.(GroupClaimer); ok && c.owns(g.id) {
		// Only the coordinator claims: a broker reading a group it does
		// not coordinate (a transaction marker for it) must not fence
		// the one that does.
		kept, err := claimer.ClaimGroup(ctx, g.id)
		if err != nil {
			return err
		}
		if !kept || g.fenced {
			// Another coordinator served the group meanwhile: its
			// members, generation and assignments here are stale.
			g.depose()
		}
	} else if g.fenced {
		g.depose()
	}
	g.fenced = false
	offsets, md, pending, err := loader.LoadGroup(ctx, g.id)
	if err != nil {
		return err
	}
	clear(g.offsets)
	for _, oc := range offsets {
		g.offsets[TopicPartition{oc.Topic, oc.Partition}] = oc
	}
	g.restorePending(pending)
	switch {
	case md != nil && md.Consumer != nil:
		// Every change of a consumer group is written through, so the
		// store's copy is the group: replace ours.
		g.restoreConsumer(md.Consumer)
	case g.consumer != nil:
		// Another coordinator converted or deleted it meanwhile.
		g.dropConsumerState()
		if md != nil {
			g.restoreMembership(*md)
		}
	case md != nil && len(g.members) == 0 && g.state == stateEmpty:
		g.restoreMembership(*md)
	}
	return nil
}

// unused reports whether the group holds nothing. Callers hold g.mu.
func (g *group) unused() bool {
	return g.state == stateEmpty && g.consumer == nil && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 && len(g.txnOffsets) == 0 && g.generation == 0
}

// dropIfUnused removes a group that has no members and no offsets, such
// as one created by a JoinGroup that then failed validation.
func (c *Coordinator) dropIfUnused(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unused() {
		g.state = stateDead
		delete(c.groups, id)
	}
}

func (c *Coordinator) owns(group string) bool {
	return c.cfg.Owns == nil || c.cfg.Owns(group)
}

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// sortedGroups returns a snapshot of the groups sorted by id.
func (c *Coordinator) sortedGroups() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// newMemberID returns prefix-<uuid>, as Kafka does (prefix is the client
// id, or the group instance id for static members).
func newMemberID(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("group: crypto/rand: %v", err)) // never fails on Linux
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
