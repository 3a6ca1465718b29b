package replica

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/meta"
)

// ISRStore changes a partition's ISR by compare-and-swap
// (meta.Store.AlterPartition).
type ISRStore interface {
	AlterPartition(ctx context.Context, tp meta.TopicPartition, expected, proposed meta.PartitionState) (meta.PartitionState, error)
}

// Traffic counts replication bytes on the follower side: the bytes of the
// replica fetch requests sent to leader and of its responses. walMetadata
// is true for a fetch that asked for WAL pointers and got no record bytes
// inline (replication-wal-metadata rather than replication-inline).
type Traffic interface {
	ReplicaFetch(leader int32, requestBytes, responseBytes int, walMetadata bool)
}

// Config configures a Manager.
type Config struct {
	// NodeID is this broker's ID (the ReplicaID of its fetches).
	NodeID int32
	// Store applies ISR changes.
	Store ISRStore
	// LagTimeMax is replica.lag.time.max.ms: a follower that has not caught
	// up with the leader's log end for this long leaves the ISR (30 s).
	LagTimeMax time.Duration
	// FetchMaxWait is replica.fetch.wait.max.ms (500 ms).
	FetchMaxWait time.Duration
	// FetchMaxBytes is replica.fetch.response.max.bytes (10 MiB).
	FetchMaxBytes int32
	// PartitionMaxBytes is replica.fetch.max.bytes (1 MiB).
	PartitionMaxBytes int32
	// Backoff is replica.fetch.backoff.ms, the pause after a failed fetch
	// (default 100 ms; Kafka's is 1 s).
	Backoff time.Duration
	// HWMCheckpointInterval is replica.high.watermark.checkpoint.interval.ms
	// (5 s).
	HWMCheckpointInterval time.Duration
	// Traffic may be nil.
	Traffic Traffic
	// Listener is the inter-broker listener name: replica fetches go to
	// the leader's address on it (default: the leader's first listener).
	Listener string
	// Dial opens replica fetch connections to leaders (nil: net.Dialer);
	// on a secured inter-broker listener broker/server wraps it with TLS
	// and SASL.
	// strata dev and strata bench use it to inject inter-zone latency.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Log is the logger.
	Log logr.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
	// Hydrate is tier.hydration.enable: followers of tiered partitions
	// copy the history the slow tier holds from its bucket rather than
	// from the leader (hydrate.go).
	Hydrate bool
	// Cost, when set, receives the leader bytes appended and their
	// cross-zone follower copies once a second (walcost.go).
	Cost *cost.Meter
}

func (c *Config) defaults() {
	if c.LagTimeMax <= 0 {
		c.LagTimeMax = 30 * time.Second
	}
	if c.FetchMaxWait <= 0 {
		c.FetchMaxWait = 500 * time.Millisecond
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = 10 << 20
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 1 << 20
	}
	if c.Backoff <= 0 {
		c.Backoff = 100 * time.Millisecond
	}
	if c.HWMCheckpointInterval <= 0 {
		c.HWMCheckpointInterval = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Manager runs replication for the partitions of one broker: it applies
// role changes, runs one fetcher per leader broker, and proposes ISR
// changes for the partitions it leads.
type Manager struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	isrCh  chan struct{}

	mu    sync.Mutex
	parts map[meta.TopicPartition]*Partition
	// sorted is parts in topic-partition order, built again (not
	// changed) when parts changes; nil: to be built.
	sorted []*Partition
	// rolesGen counts the changes of the partitions' set and roles
	// (Apply, Remove), counted after the change: a fetcher keeps the
	// partitions it follows until it moves (fetcher.items).
	rolesGen atomic.Uint64
	brokers  map[int32]meta.BrokerInfo
	// own is this process's registration (SetOwnRegistration); while
	// ownSet is false the metadata's record for this broker's ID stands
	// for it (a manager driven by SetBrokers alone, in tests).
	own      meta.BrokerInfo
	ownSet   bool
	fetchers map[int32]*fetcher
	closed   bool
	// refused counts replica fetches refused by CheckReplicaFetcher.
	refused *prometheus.CounterVec
	// hwmWakes counts replica fetches answered for an HWM move alone
	// (hwmwake.go).
	hwmWakes prometheus.Counter
	// isrShrinks and isrExpands count the ISR changes this broker made as
	// leader (Kafka's IsrShrinksPerSec and IsrExpandsPerSec); the
	// controller's removals of dead brokers are not among them.
	isrShrinks, isrExpands prometheus.Counter
	// wal is set by EnableWAL before partitions are applied; nil: classic.
	wal *walRep
	// cost is the accounting of costTick (walcost.go).
	cost costState
	// The replication quotas (throttle.go) and their metrics.
	leaderQuota, followerQuota *Throttle
	throttleMetrics            throttleMetrics
}

// NewManager starts a manager; Close stops it.
func NewManager(cfg Config) *Manager {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg: cfg, ctx: ctx, cancel: cancel, isrCh: make(chan struct{}, 1),
		parts: map[meta.TopicPartition]*Partition{}, fetchers: map[int32]*fetcher{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_replica_fetch_refused_total",
			Help: "Replica fetches refused because the fetching broker is not registered or did not send its current broker epoch, by reason.",
		}, []string{"reason"}),
		hwmWakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_replica_fetch_hwm_wakes_total",
			Help: "Replica fetches this broker answered, as leader, for a high watermark move alone: the follower serves consumers of the partition (KIP-392) and asked for HWM wakes.",
		}),
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_isr_shrinks_total",
			Help: "ISR changes this broker made as leader that removed replicas.",
		}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_isr_expands_total",
			Help: "ISR changes this broker made as leader that added replicas.",
		}),
		throttleMetrics: newThrottleMetrics(),
	}
	m.leaderQuota = newThrottle(ThrottleLeader, cfg.Now, m.throttleMetrics)
	m.followerQuota = newThrottle(ThrottleFollower, cfg.Now, m.throttleMetrics)
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.isrLoop()
	}()
	go func() {
		defer m.wg.Done()
		m.costLoop()
	}()
	return m
}

// Config returns the manager's configuration (defaults filled in).
func (m *Manager) Config() Config { return m.cfg }

// Close stops the fetchers and the ISR loop and checkpoints the high
// watermarks. Partitions keep their state but are not replicated any more;
// close their logs after Close.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	if m.wal != nil {
		m.wal.close()
		parts := m.partitions()
		for _, p := range parts {
			p.mu.Lock()
			p.closeWALLocked()
			p.mu.Unlock()
		}
	}
}

// SetBrokers updates the registered brokers (addresses of leaders to fetch
// from, zones).
func (m *Manager) SetBrokers(brokers map[int32]meta.BrokerInfo) {
	m.mu.Lock()
	m.brokers = brokers
	for _, f := range m.fetchers {
		f.poke()
	}
	m.mu.Unlock()
	// A broker that left may be in ISRs still: deletion stops waiting
	// for it now, not when the ISR shrinks.
	for _, p := range m.partitions() {
		m.walWaitFor(p)
	}
}

// Broker returns a registered broker.
func (m *Manager) Broker(id int32) (meta.BrokerInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.brokers[id]
	return b, ok
}

// registration returns a broker's registration epoch (0: unknown) and
// whether it is registered (may join an ISR). Before the first SetBrokers
// every broker counts as registered, epoch unknown.
func (m *Manager) registration(id int32) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.brokers == nil {
		return 0, true
	}
	b, ok := m.brokers[id]
	return b.Epoch, ok
}

// SetOwnRegistration records this broker process's own live
// registration (meta.Registration.Info(); the zero BrokerInfo while it
// has none: before it registered, after its lease was lost). From the
// first call on, the broker counts as registered, and its replica
// fetches carry a registration epoch and fetch token, only while the
// metadata shows that very registration: a broker restarted before the
// lease of its previous run expired sees that run's record under its ID,
// and fetching in its name (its epoch, its token) would let the leaders
// keep counting the new process, which may have lost a tail (a power
// loss), as the old one in the ISR (KIP-903). It then waits, as an
// unregistered broker does, for SetBrokers to show its own registration.
func (m *Manager) SetOwnRegistration(info meta.BrokerInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.own, m.ownSet = info, true
	for _, f := range m.fetchers {
		f.poke()
	}
}

// selfLocked is this broker's registration as the metadata shows it, if
// it is this process's own (SetOwnRegistration). m.mu held.
func (m *Manager) selfLocked() (meta.BrokerInfo, bool) {
	b, ok := m.brokers[m.cfg.NodeID]
	if !ok {
		return b, false
	}
	if m.ownSet && (m.own.Epoch <= 0 || b.Epoch != m.own.Epoch) {
		return meta.BrokerInfo{}, false
	}
	return b, true
}

// BrokerEpoch is this broker's registration epoch as the metadata shows
// it, -1 while it is not registered: what its replica fetches carry.
func (m *Manager) BrokerEpoch() int64 {
	epoch, _ := m.replicaIdentity()
	return epoch
}

// replicaIdentity is what this broker's replica fetches carry, from one
// metadata snapshot: its registration epoch (-1 while not registered) and
// the registration's fetch token, decoded (nil: none).
func (m *Manager) replicaIdentity() (int64, []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.selfLocked()
	if !ok || b.Epoch <= 0 {
		return -1, nil
	}
	token, err := hex.DecodeString(b.FetchToken)
	if err != nil {
		token = nil
	}
	return b.Epoch, token
}

// selfRegistered reports whether the metadata shows this broker
// registered (its replica fetches carry that registration's epoch).
func (m *Manager) selfRegistered() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.selfLocked()
	return ok
}

// Reasons a replica fetch is refused (the reason label of
// strata_replica_fetch_refused_total).
const (
	RefusedUnregistered = "unregistered"  // no broker of that ID is registered
	RefusedNoEpoch      = "missing_epoch" // the broker sends its epoch, this fetch did not
	RefusedStaleEpoch   = "stale_epoch"   // an older registration of the broker (it restarted)
	RefusedUnknownEpoch = "unknown_epoch" // newer than this broker's metadata knows
	RefusedBadToken     = "bad_token"     // the broker's registration has a fetch token, this fetch did not carry it
)

// CheckReplicaFetcher decides whether a replica fetch claiming to come from
// broker replica, carrying registration epoch (-1: none) and fetch token
// (nil: none; TagReplicaToken), is served (nil) or refused, and counts
// refusals by reason. This is what keeps a client from posing as a
// follower (moving its LEO and with it the HWM past what the follower
// holds, so that acks=all is answered for records one broker has), on
// every cluster whatever its listeners authenticate: the broker must be
// registered; a broker whose registration has a fetch token
// (meta.BrokerInfo.FetchToken, a secret of the metadata store) must send
// it; and a broker whose registration says its fetches carry the epoch
// (meta.BrokerInfo.FetchEpoch) must send its current one. An epoch newer
// than the registration this broker knows is refused too (its metadata
// lags; the follower retries after its backoff). Kafka answers a replica
// fetch with a stale broker epoch NOT_LEADER_OR_FOLLOWER
// (Replica.updateFetchStateOrThrow); so does this, for every reason.
func (m *Manager) CheckReplicaFetcher(replica int32, epoch int64, token []byte) error {
	reason := ""
	m.mu.Lock()
	b, ok := m.brokers[replica]
	switch {
	case !ok:
		reason = RefusedUnregistered
	case b.FetchToken != "" && subtle.ConstantTimeCompare([]byte(hex.EncodeToString(token)), []byte(b.FetchToken)) != 1:
		reason = RefusedBadToken
	case epoch < 0 && b.FetchEpoch:
		reason = RefusedNoEpoch
	case epoch < 0:
		// A broker of an older version (rolling upgrade).
	case epoch < b.Epoch:
		reason = RefusedStaleEpoch
	case epoch > b.Epoch:
		reason = RefusedUnknownEpoch
	}
	m.mu.Unlock()
	if reason == "" {
		return nil
	}
	m.refused.WithLabelValues(reason).Inc()
	return fmt.Errorf("%w: replica fetch as broker %d with broker epoch %d refused: %s (registered epoch %d)",
		kerr.NotLeaderForPartition, replica, epoch, reason, b.Epoch)
}

// Collectors returns the manager's metrics to register:
// strata_replica_fetch_refused_total, strata_replica_fetch_hwm_wakes_total,
// strata_isr_shrinks_total, strata_isr_expands_total and the replication throttle's
// (strata_replication_throttled_bytes_total,
// strata_replication_throttled_partitions_total,
// strata_replication_throttle_rate_bytes).
func (m *Manager) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.refused, m.hwmWakes, m.isrShrinks, m.isrExpands}, m.throttleMetrics.collectors()...)
}

// Partition returns a managed partition.
func (m *Manager) Partition(tp meta.TopicPartition) *Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[tp]
}

// LagTimeMax is replica.lag.time.max.ms.
func (m *Manager) LagTimeMax() time.Duration { return m.cfg.LagTimeMax }

// partitions returns the partitions in topic-partition order. The slice
// is shared: callers must not change it. (Each fetch round of each
// fetcher walks it: building and sorting it there took a tenth of a
// follower's CPU with 1,200 partitions.)
func (m *Manager) partitions() []*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sorted == nil {
		parts := make([]*Partition, 0, len(m.parts))
		for _, p := range m.parts {
			parts = append(parts, p)
		}
		slices.SortFunc(parts, func(a, b *Partition) int {
			return cmp.Or(strings.Compare(a.TP.Topic, b.TP.Topic), cmp.Compare(a.TP.Partition, b.TP.Partition))
		})
		m.sorted = parts
	}
	return m.sorted
}

// Apply applies one metadata change to p (BecomeLeader, BecomeFollower or
// UpdateState); p is added to the manager if new.
func (m *Manager) Apply(p *Partition, kind meta.ChangeKind, st meta.PartitionState) {
	defer m.rolesGen.Add(1)
	m.mu.Lock()
	if m.parts[p.TP] != p {
		m.parts[p.TP], m.sorted = p, nil
	}
	m.mu.Unlock()
	switch kind {
	case meta.BecomeLeader:
		if m.wal != nil {
			// Before the first append of this leadership can be uploaded.
			m.wal.tracker.Lead(p.TP.Topic, p.TP.Partition, st.LeaderEpoch)
		}
		if err := p.becomeLeader(st); err != nil {
			m.cfg.Log.Error(err, "recording the leader epoch of an emptied log; followers may not catch up until the first append", "partition", p.TP)
		}
		if m.wal != nil {
			p.mu.Lock()
			p.wal = m.wal
			stale, err := p.openWALLocked()
			p.mu.Unlock()
			switch {
			case err != nil:
				m.cfg.Log.Error(err, "WAL pointer index not usable; followers get this partition inline", "partition", p.TP)
			case stale > 0:
				m.cfg.Log.Info("dropped WAL pointers the log no longer holds at their epoch", "partition", p.TP, "pointers", stale)
			}
			m.wal.tracker.LogStart(p.TP.Topic, p.TP.Partition, p.Log.StartOffset())
			m.walWaitFor(p)
		}
		m.cfg.Log.V(1).Info("became leader", "partition", p.TP, "epoch", st.LeaderEpoch, "isr", st.ISR, "leo", p.Log.EndOffset())
		m.RequestISRCheck()
	case meta.BecomeFollower:
		p.becomeFollower(st)
		// Also without WAL: a pointer file of an earlier run with WAL on
		// must not survive the rewrites this follower's log may get.
		p.mu.Lock()
		err := p.dropWALLocked()
		p.mu.Unlock()
		if err != nil {
			m.cfg.Log.Error(err, "dropping the WAL pointers of a follower", "partition", p.TP)
		}
		if m.wal != nil {
			m.wal.tracker.Release(p.TP.Topic, p.TP.Partition)
		}
		m.cfg.Log.V(1).Info("became follower", "partition", p.TP, "leader", st.Leader, "epoch", st.LeaderEpoch, "leo", p.Log.EndOffset())
		if st.Leader != meta.NoLeader && st.Leader != m.cfg.NodeID {
			m.wakeFetcher(st.Leader)
		}
	case meta.UpdateState:
		if p.Role() == RoleNone {
			// Not started yet (a broker that applied no role): decide now.
			if st.Leader == m.cfg.NodeID {
				m.Apply(p, meta.BecomeLeader, st)
			} else {
				m.Apply(p, meta.BecomeFollower, st)
			}
			return
		}
		p.adopt(st)
		m.walWaitFor(p)
		m.RequestISRCheck()
	}
}

// walWaitFor tells the deletion tracker which followers of a led
// partition its objects wait for: the ISR's registered members. A dead
// or lagging replica (unregistered, or out of the ISR) would otherwise
// keep every object until wal.retention.ms; when it fetches again it
// downloads what is left and gets the rest inline.
//
// Under p.mu, so that of two concurrent calls (an ISR update and a
// registration change) the one that reaches the tracker last read the
// latest ISR and registrations, never a stale set that would stand until
// the next change. Lock order: p.mu, then m.mu (registration), then the
// tracker's.
func (m *Manager) walWaitFor(p *Partition) {
	if m.wal == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != RoleLeader {
		return
	}
	var wait []int32
	for _, r := range p.state.ISR {
		if _, ok := m.registration(r); ok && r != m.cfg.NodeID {
			wait = append(wait, r)
		}
	}
	m.wal.tracker.WaitFor(p.TP.Topic, p.TP.Partition, wait)
}

// Remove stops replicating a partition (StopReplica, DeletePartition).
func (m *Manager) Remove(tp meta.TopicPartition) {
	m.mu.Lock()
	p := m.parts[tp]
	if p != nil {
		delete(m.parts, tp)
		m.sorted = nil
	}
	m.mu.Unlock()
	if p != nil {
		leader := p.State().Leader
		p.stop()
		m.rolesGen.Add(1)
		// Its fetcher, if it has nothing else to fetch, retires now
		// rather than after its long poll.
		m.pokeFetcher(leader)
	}
	if m.wal != nil {
		// Its chunks need nothing more from us (and a late upload of it
		// tracks nothing: the tracker only tracks led partitions).
		m.wal.tracker.Release(tp.Topic, tp.Partition)
	}
}

// RequestISRCheck asks the ISR loop to look at the led partitions now (a
// follower caught up).
func (m *Manager) RequestISRCheck() {
	select {
	case m.isrCh <- struct{}{}:
	default:
	}
}

// ServeReplicaFetch is the leader side of one partition of a replica fetch
// from follower, whose fetch carries brokerEpoch (-1: none; the caller
// checked the follower's identity with CheckReplicaFetcher): it checks
// leadership and epoch, notes a follower that restarted, then divergence;
// if the follower's log is consistent it records its LEO (advancing the
// HWM and maybe asking for an ISR change). The caller reads the records
// from fetchOffset up to the log end when div is nil.
func (m *Manager) ServeReplicaFetch(p *Partition, follower int32, brokerEpoch int64, fetchOffset int64, lastFetchedEpoch, currentEpoch int32) (div *Divergence, err error) {
	if err := p.CheckLeader(currentEpoch); err != nil {
		return nil, err
	}
	if p.followerIncarnation(follower, brokerEpoch) {
		m.cfg.Log.V(1).Info("follower restarted; it is not in sync until it catches up again", "partition", p.TP, "follower", follower, "brokerEpoch", brokerEpoch)
		m.RequestISRCheck()
	}
	if d := p.CheckDivergence(fetchOffset, lastFetchedEpoch); d != nil {
		if m.wal != nil {
			m.wal.walDiverged(p.TP, follower)
		}
		return d, nil
	}
	prev, expand, err := p.FollowerFetch(follower, fetchOffset)
	if err != nil {
		return nil, err
	}
	if expand {
		m.RequestISRCheck()
	}
	if m.wal != nil {
		m.wal.walProgress(p.TP, follower, prev, fetchOffset)
	}
	return nil, nil
}

// CheckpointHWMs writes every partition's HWM that changed since its last
// checkpoint, fsynced (done by Close; every HWMCheckpointInterval the same
// without fsync, see hwmCheckpointFile).
func (m *Manager) CheckpointHWMs() error { return m.checkpointHWMs(true) }

func (m *Manager) checkpointHWMs(sync bool) error {
	parts := m.partitions()
	var errs []error
	for _, p := range parts {
		if p.Role() == RoleNone {
			continue // removed: its directory may be gone
		}
		if err := p.checkpointHWM(sync); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) isrLoop() {
	interval := max(m.cfg.LagTimeMax/4, 5*time.Millisecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	cp := time.NewTicker(m.cfg.HWMCheckpointInterval)
	defer cp.Stop()
	for {
		select {
		case <-m.ctx.Done():
			if err := m.CheckpointHWMs(); err != nil {
				m.cfg.Log.Error(err, "checkpointing high watermarks")
			}
			return
		case <-cp.C:
			if err := m.checkpointHWMs(false); err != nil {
				m.cfg.Log.Error(err, "checkpointing high watermarks")
			}
			continue
		case <-t.C:
		case <-m.isrCh:
		}
		parts := m.partitions()
		for _, p := range parts {
			expected, proposed, ok := p.proposeISR(m.cfg.LagTimeMax, m.registration)
			if !ok {
				continue
			}
			m.alterISR(p, expected, proposed)
		}
	}
}

// alterISR applies a proposed ISR change. An answer that settles it
// (success, a lost compare, a refusal) ends the proposal; a failure without
// one (a timeout, etcd unreachable: the write may have committed) keeps it
// pending, still counted in the maximal ISR, and the ISR loop proposes it
// again after the backoff.
func (m *Manager) alterISR(p *Partition, expected, proposed meta.PartitionState) {
	if m.cfg.Store == nil {
		p.isrDone(false, 0)
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	st, err := m.cfg.Store.AlterPartition(ctx, p.TP, expected, proposed)
	unknown, adopted := false, false
	switch {
	case err == nil:
		m.cfg.Log.Info("ISR changed", "partition", p.TP, "from", expected.ISR, "to", st.ISR, "epoch", st.LeaderEpoch)
		if slices.ContainsFunc(expected.ISR, func(r int32) bool { return !slices.Contains(st.ISR, r) }) {
			m.isrShrinks.Inc()
		}
		if slices.ContainsFunc(st.ISR, func(r int32) bool { return !slices.Contains(expected.ISR, r) }) {
			m.isrExpands.Inc()
		}
		adopted = p.adopt(st)
	case errors.Is(err, meta.ErrStaleState):
		m.cfg.Log.V(1).Info("ISR change lost a compare; adopting the current state", "partition", p.TP, "reason", err.Error())
		adopted = p.adopt(st)
	case m.ctx.Err() != nil:
	case errors.Is(err, meta.ErrIneligibleReplica), errors.Is(err, meta.ErrInvalidAlterPartition), errors.Is(err, meta.ErrUnknownTopic):
		m.cfg.Log.Info("ISR change refused", "partition", p.TP, "isr", proposed.ISR, "reason", err.Error())
	default:
		unknown = true
		m.cfg.Log.Error(fmt.Errorf("alter ISR of %s to %v: %w", p.TP, proposed.ISR, err), "ISR change failed without an answer; asking again")
		time.AfterFunc(m.cfg.Backoff, m.RequestISRCheck)
	}
	p.isrDone(unknown, m.cfg.Backoff)
	if adopted {
		// A follower that caught up while this change was in flight was
		// not proposed (one change at a time): look again now rather than
		// at its next fetch or the next tick. (Only from a new state: a
		// refusal or a state this leader cannot adopt would be asked
		// again and again.)
		m.RequestISRCheck()
	}
}
