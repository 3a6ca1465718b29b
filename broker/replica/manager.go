package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"

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
	// Dial opens replica fetch connections to leaders (nil: net.Dialer).
	// strata dev and strata bench use it to inject inter-zone latency.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Log is the logger.
	Log logr.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
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

	mu       sync.Mutex
	parts    map[meta.TopicPartition]*Partition
	brokers  map[int32]meta.BrokerInfo
	fetchers map[int32]*fetcher
	closed   bool
	// wal is set by EnableWAL before partitions are applied; nil: classic.
	wal *walRep
}

// NewManager starts a manager; Close stops it.
func NewManager(cfg Config) *Manager {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg: cfg, ctx: ctx, cancel: cancel, isrCh: make(chan struct{}, 1),
		parts: map[meta.TopicPartition]*Partition{}, fetchers: map[int32]*fetcher{},
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.isrLoop()
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

// registered reports whether a broker is registered (may join an ISR).
// Before the first SetBrokers every broker counts as registered.
func (m *Manager) registered(id int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.brokers == nil {
		return true
	}
	_, ok := m.brokers[id]
	return ok
}

// Partition returns a managed partition.
func (m *Manager) Partition(tp meta.TopicPartition) *Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[tp]
}

// partitions is a snapshot of the managed partitions.
func (m *Manager) partitions() []*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	return parts
}

// Apply applies one metadata change to p (BecomeLeader, BecomeFollower or
// UpdateState); p is added to the manager if new.
func (m *Manager) Apply(p *Partition, kind meta.ChangeKind, st meta.PartitionState) {
	m.mu.Lock()
	m.parts[p.TP] = p
	m.mu.Unlock()
	switch kind {
	case meta.BecomeLeader:
		if m.wal != nil {
			// Before the first append of this leadership can be uploaded.
			m.wal.tracker.Lead(p.TP.Topic, p.TP.Partition, st.LeaderEpoch)
		}
		p.becomeLeader(st)
		if m.wal != nil {
			p.mu.Lock()
			p.wal = m.wal
			p.openWALLocked()
			p.mu.Unlock()
			m.wal.tracker.LogStart(p.TP.Topic, p.TP.Partition, p.Log.StartOffset())
			m.walWaitFor(p)
		}
		m.cfg.Log.V(1).Info("became leader", "partition", p.TP, "epoch", st.LeaderEpoch, "isr", st.ISR, "leo", p.Log.EndOffset())
		m.RequestISRCheck()
	case meta.BecomeFollower:
		p.becomeFollower(st)
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
// the next change. Lock order: p.mu, then m.mu (registered), then the
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
		if r != m.cfg.NodeID && m.registered(r) {
			wait = append(wait, r)
		}
	}
	m.wal.tracker.WaitFor(p.TP.Topic, p.TP.Partition, wait)
}

// Remove stops replicating a partition (StopReplica, DeletePartition).
func (m *Manager) Remove(tp meta.TopicPartition) {
	m.mu.Lock()
	p := m.parts[tp]
	delete(m.parts, tp)
	m.mu.Unlock()
	if p != nil {
		leader := p.State().Leader
		p.stop()
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
// from follower: it checks leadership and epoch, then divergence; if the
// follower's log is consistent it records its LEO (advancing the HWM and
// maybe asking for an ISR expansion). The caller reads the records from
// fetchOffset up to the log end when div is nil.
func (m *Manager) ServeReplicaFetch(p *Partition, follower int32, fetchOffset int64, lastFetchedEpoch, currentEpoch int32) (div *Divergence, err error) {
	if err := p.CheckLeader(currentEpoch); err != nil {
		return nil, err
	}
	if d := p.CheckDivergence(fetchOffset, lastFetchedEpoch); d != nil {
		return d, nil
	}
	expand, err := p.FollowerFetch(follower, fetchOffset)
	if err != nil {
		return nil, err
	}
	if expand {
		m.RequestISRCheck()
	}
	if m.wal != nil {
		m.wal.walProgress(p.TP, follower, fetchOffset)
	}
	return nil, nil
}

// CheckpointHWMs writes every partition's HWM that changed since its last
// checkpoint (also done every HWMCheckpointInterval and by Close).
func (m *Manager) CheckpointHWMs() error {
	parts := m.partitions()
	var errs []error
	for _, p := range parts {
		if p.Role() == RoleNone {
			continue // removed: its directory may be gone
		}
		if err := p.CheckpointHWM(); err != nil {
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
			if err := m.CheckpointHWMs(); err != nil {
				m.cfg.Log.Error(err, "checkpointing high watermarks")
			}
			continue
		case <-t.C:
		case <-m.isrCh:
		}
		parts := m.partitions()
		for _, p := range parts {
			expected, proposed, ok := p.proposeISR(m.cfg.LagTimeMax, m.registered)
			if !ok {
				continue
			}
			m.alterISR(p, expected, proposed)
		}
	}
}

func (m *Manager) alterISR(p *Partition, expected, proposed meta.PartitionState) {
	defer p.isrDone()
	if m.cfg.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
	defer cancel()
	st, err := m.cfg.Store.AlterPartition(ctx, p.TP, expected, proposed)
	switch {
	case err == nil:
		m.cfg.Log.Info("ISR changed", "partition", p.TP, "from", expected.ISR, "to", st.ISR, "epoch", st.LeaderEpoch)
		p.adopt(st)
	case errors.Is(err, meta.ErrStaleState):
		m.cfg.Log.V(1).Info("ISR change lost a compare; adopting the current state", "partition", p.TP, "reason", err.Error())
		p.adopt(st)
	case m.ctx.Err() != nil:
	default:
		m.cfg.Log.Error(fmt.Errorf("alter ISR of %s to %v: %w", p.TP, proposed.ISR, err), "ISR change failed")
	}
}
