package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/replica"
)

// Cluster mode. With etcd configured, topics, partition assignments and
// roles come from the cluster metadata (broker/meta): the server follows
// Store.Watch and hands every snapshot to ApplyClusterState, which opens
// the logs of the partitions this broker hosts, deletes those it no longer
// hosts, and makes each replica leader or follower (broker/replica). Topic
// admin calls (CreateTopic, DeleteTopic, CreatePartitions, config changes)
// become etcd transactions; the broker acts on them when the watch
// delivers them. strata-meta.json then only keeps the node ID and the
// producer-ID block.

// cluster is the state of cluster mode; nil for a standalone broker.
type cluster struct {
	store    *meta.Store
	replicas *replica.Manager
	applied  atomic.Pointer[meta.ClusterState]
	// appliedCh is closed (and replaced) after every applied snapshot.
	appliedCh  atomic.Pointer[chan struct{}]
	controller atomic.Pointer[meta.Controller]
	// deferred holds partitions the metadata names this broker leader of,
	// but under another incarnation (registration epoch) of it: the
	// restarted broker may have lost writes, so it waits (as a follower of
	// nobody) until the controller elects a leader again. Only the apply
	// loop touches it.
	deferred map[meta.TopicPartition]bool
	// ownEpoch is the registration epoch of this process's own live
	// registration (SetOwnRegistration; 0: none). A snapshot read before
	// the broker registered can still show the previous incarnation's
	// record under the same ID, until its lease expires: leadership is
	// taken only under the epoch this process registered with.
	ownEpoch atomic.Int64
}

// SetOwnRegistration records the registration epoch of this broker
// process's live registration (meta.Registration.Info().Epoch), 0 when it
// has none (before it registered, after its lease was lost). The broker
// leads only partitions elected under that epoch (or recorded without
// one while it is registered): a broker restarted before the lease of its
// previous run expired sees that run's registration in the metadata,
// under the same ID, and must not take over leaderships given to it,
// since it may have lost writes its followers have (a power loss) and
// would write other records at their offsets in the same leader epoch.
// Apply the last snapshot again after setting it (ApplyClusterState):
// leaderships deferred for want of it are taken then.
func (b *Broker) SetOwnRegistration(epoch int64) {
	if b.cluster != nil {
		b.cluster.ownEpoch.Store(epoch)
	}
}

// topicIDFile records the topic ID in each partition directory, so that a
// topic recreated under the same name never reuses the old data.
const topicIDFile = "topic-id"

// EnableCluster switches the broker to cluster mode; call it after Open
// (with Config.Clustered set) and before serving.
func (b *Broker) EnableCluster(store *meta.Store, replicas *replica.Manager) {
	c := &cluster{store: store, replicas: replicas, deferred: map[meta.TopicPartition]bool{}}
	ch := make(chan struct{})
	c.appliedCh.Store(&ch)
	b.cluster = c
}

// Clustered reports whether topics come from etcd.
func (b *Broker) Clustered() bool { return b.cluster != nil }

// ClusterState returns the last applied metadata snapshot (nil when
// standalone or before the first one).
func (b *Broker) ClusterState() *meta.ClusterState {
	if b.cluster == nil {
		return nil
	}
	return b.cluster.applied.Load()
}

// Replicas returns the replication manager (nil when standalone).
func (b *Broker) Replicas() *replica.Manager {
	if b.cluster == nil {
		return nil
	}
	return b.cluster.replicas
}

// MetaStore returns the etcd metadata store (nil when standalone).
func (b *Broker) MetaStore() *meta.Store {
	if b.cluster == nil {
		return nil
	}
	return b.cluster.store
}

// SetController records this broker's controller candidate (for
// ElectLeaders); nil when it has none (registration lost).
func (b *Broker) SetController(c *meta.Controller) {
	if b.cluster != nil {
		b.cluster.controller.Store(c)
	}
}

// Controller returns this broker's controller candidate, or nil.
func (b *Broker) Controller() *meta.Controller {
	if b.cluster == nil {
		return nil
	}
	return b.cluster.controller.Load()
}

// BrokerInfo is a broker as Metadata and DescribeCluster report it.
type BrokerInfo struct {
	ID   int32
	Host string
	Port int32
	Rack string
}

// Brokers returns the live brokers, sorted by ID (this broker alone when
// standalone).
func (b *Broker) Brokers() []BrokerInfo {
	st := b.ClusterState()
	if st == nil {
		return []BrokerInfo{{ID: b.cfg.NodeID, Host: b.cfg.Host, Port: b.cfg.Port, Rack: b.cfg.Rack}}
	}
	out := make([]BrokerInfo, 0, len(st.Brokers))
	for _, bi := range st.Brokers {
		info := BrokerInfo{ID: bi.ID, Rack: bi.Zone}
		if len(bi.Listeners) > 0 {
			info.Host, info.Port = bi.Listeners[0].Host, bi.Listeners[0].Port
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, c BrokerInfo) int { return int(a.ID - c.ID) })
	return out
}

// AdvertisedListener is the address a listener advertises.
type AdvertisedListener struct {
	Name string
	Host string
	Port int32
}

// BrokersOn returns the live brokers with their address on the named
// listener, sorted by ID: what a client connected on that listener is told
// (Kafka's rule). A broker that does not register the listener is left out,
// as in Kafka; an empty name (an unnamed listener) takes each broker's first
// listener, as Brokers does.
func (b *Broker) BrokersOn(listener string) []BrokerInfo {
	if listener == "" {
		return b.Brokers()
	}
	st := b.ClusterState()
	if st == nil {
		info := BrokerInfo{ID: b.cfg.NodeID, Host: b.cfg.Host, Port: b.cfg.Port, Rack: b.cfg.Rack}
		for _, l := range b.cfg.Listeners {
			if l.Name == listener {
				info.Host, info.Port = l.Host, l.Port
			}
		}
		return []BrokerInfo{info}
	}
	out := make([]BrokerInfo, 0, len(st.Brokers))
	for _, bi := range st.Brokers {
		for _, l := range bi.Listeners {
			if l.Name == listener {
				out = append(out, BrokerInfo{ID: bi.ID, Rack: bi.Zone, Host: l.Host, Port: l.Port})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, c BrokerInfo) int { return int(a.ID - c.ID) })
	return out
}

// ControllerID returns the controller's broker ID (-1 if none).
func (b *Broker) ControllerID() int32 {
	st := b.ClusterState()
	if st == nil {
		return b.cfg.NodeID
	}
	return st.ControllerID
}

// PartitionView is a partition's replication state as Metadata reports it.
type PartitionView struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32
}

// PartitionView returns a partition's leader, epoch, replicas, ISR and
// offline replicas from the metadata (this broker alone when standalone).
func (b *Broker) PartitionView(topic string, index int32) (PartitionView, bool) {
	return b.partitionView(b.ClusterState(), topic, index)
}

// partitionView is PartitionView in snapshot st (nil: standalone).
func (b *Broker) partitionView(st *meta.ClusterState, topic string, index int32) (PartitionView, bool) {
	if st == nil {
		t, ok := b.Topic(topic)
		if !ok || index < 0 || index >= t.Partitions {
			return PartitionView{}, false
		}
		n := b.cfg.NodeID
		return PartitionView{Leader: n, LeaderEpoch: LeaderEpoch, Replicas: []int32{n}, ISR: []int32{n}, Offline: []int32{}}, true
	}
	ps, ok := st.Partition(meta.TopicPartition{Topic: topic, Partition: index})
	if !ok {
		return PartitionView{}, false
	}
	v := PartitionView{Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch, Replicas: ps.Replicas, ISR: ps.ISR, Offline: []int32{}}
	for _, r := range ps.Replicas {
		if !st.Live(r) {
			v.Offline = append(v.Offline, r)
		}
	}
	return v, true
}

// MetadataView is one consistent view of the topics and their
// partitions, for answers that report both (Metadata). In cluster mode it
// is the last applied metadata snapshot alone. b.topics is no such view:
// ApplyClusterState makes it follow a new snapshot first, then hosts the
// new partitions (opening their logs, slow on a loaded machine), and only
// then stores the snapshot as applied, so in between b.topics shows a new
// topic's partitions while the applied snapshot has no state for them,
// which a Metadata answer would report as partitions without leader or
// replicas: a client reading the replication factor from it reads 0 (the
// operator's adoption event did). Standalone it is the broker's topics.
type MetadataView struct {
	b  *Broker
	st *meta.ClusterState
}

// MetadataView returns the view of the metadata applied now.
func (b *Broker) MetadataView() MetadataView {
	return MetadataView{b: b, st: b.ClusterState()}
}

func viewTopic(t meta.TopicInfo) TopicInfo {
	return TopicInfo{Name: t.Name, ID: [16]byte(t.ID), Partitions: t.Partitions}
}

// Topics returns every topic of the view, sorted by name.
func (v MetadataView) Topics() []TopicInfo {
	if v.st == nil {
		return v.b.Topics()
	}
	out := make([]TopicInfo, 0, len(v.st.Topics))
	for _, t := range v.st.Topics {
		out = append(out, viewTopic(t))
	}
	slices.SortFunc(out, func(a, c TopicInfo) int { return strings.Compare(a.Name, c.Name) })
	return out
}

// Topic returns one topic of the view.
func (v MetadataView) Topic(name string) (TopicInfo, bool) {
	if v.st == nil {
		return v.b.Topic(name)
	}
	t, ok := v.st.Topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return viewTopic(t), true
}

// TopicByID returns the topic of the view with a UUID.
func (v MetadataView) TopicByID(id [16]byte) (TopicInfo, bool) {
	if v.st == nil {
		return v.b.TopicByID(id)
	}
	for _, t := range v.st.Topics {
		if t.ID == meta.TopicID(id) {
			return viewTopic(t), true
		}
	}
	return TopicInfo{}, false
}

// Partition is PartitionView in the view.
func (v MetadataView) Partition(topic string, index int32) (PartitionView, bool) {
	return v.b.partitionView(v.st, topic, index)
}

// WaitApplied waits until the applied snapshot satisfies cond, or ctx ends.
func (b *Broker) WaitApplied(ctx context.Context, cond func(*meta.ClusterState) bool) error {
	c := b.cluster
	if c == nil {
		return nil
	}
	for {
		ch := *c.appliedCh.Load()
		if st := c.applied.Load(); st != nil && cond(st) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ApplyClusterState converges the broker to a metadata snapshot: topics
// and configs are updated, partitions no longer hosted are deleted, and
// each hosted partition becomes leader or follower as meta.Diff says.
func (b *Broker) ApplyClusterState(st *meta.ClusterState) error {
	c := b.cluster
	prev := c.applied.Load()
	changes := meta.Diff(prev, st, b.cfg.NodeID)
	c.replicas.SetBrokers(st.Brokers)
	defaultsChanged := b.applyDynamicConfigs(st)
	var errs []error
	for _, ch := range changes {
		if ch.Kind == meta.DeletePartition {
			// The topic is gone: its slow-tier data too (tiered.go).
			if p := b.hostedPartition(ch.Partition); p != nil {
				b.deleteTierData(p)
			}
		}
		if ch.Kind == meta.StopReplica || ch.Kind == meta.DeletePartition {
			b.dropPartition(ch.Partition)
		}
	}
	b.syncTopics(st, defaultsChanged)
	self, registered := st.Brokers[b.cfg.NodeID]
	// Registered as this process, not as a previous run of the same ID
	// whose lease has not expired yet (SetOwnRegistration).
	registered = registered && self.Epoch != 0 && self.Epoch == c.ownEpoch.Load()
	// mayLead: leadership given to this incarnation of the broker (or
	// recorded without an epoch while this broker is registered).
	mayLead := func(ps meta.PartitionState) bool {
		return registered && (ps.LeaderBrokerEpoch == 0 || ps.LeaderBrokerEpoch == self.Epoch)
	}
	for _, ch := range changes {
		switch ch.Kind {
		case meta.BecomeLeader, meta.BecomeFollower, meta.UpdateState:
			delete(c.deferred, ch.Partition)
			p, err := b.hostPartition(ch.Partition, ch.TopicID)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			kind := ch.Kind
			if ch.State.Leader == b.cfg.NodeID && !mayLead(ch.State) {
				b.log.Info("not leading a partition elected for a previous incarnation of this broker; waiting for a new election",
					"partition", ch.Partition.String(), "leaderEpoch", ch.State.LeaderEpoch)
				c.deferred[ch.Partition] = true
				kind = meta.BecomeFollower
			}
			c.replicas.Apply(p.Replica, kind, ch.State)
		}
	}
	// Deferred leaderships this broker may take now (it registered, and
	// the leadership carries no epoch).
	for tp := range c.deferred {
		ps, ok := st.Partition(tp)
		if !ok || ps.Leader != b.cfg.NodeID {
			delete(c.deferred, tp)
			continue
		}
		if !mayLead(ps) {
			continue
		}
		delete(c.deferred, tp)
		if p, err := b.hostPartition(tp, st.Topics[tp.Topic].ID); err == nil {
			c.replicas.Apply(p.Replica, meta.BecomeLeader, ps)
		} else {
			errs = append(errs, err)
		}
	}
	if prev == nil {
		if err := b.removeStrayPartitionsCluster(st); err != nil {
			errs = append(errs, err)
		}
	}
	c.applied.Store(st)
	next := make(chan struct{})
	old := c.appliedCh.Swap(&next)
	close(*old)
	return errors.Join(errs...)
}

// syncTopics makes b.topics match the snapshot's topics (names, IDs,
// partition counts, configs); hosted partitions stay where they are. With
// defaultsChanged (a dynamic broker default of a topic config changed)
// every topic's configs are applied again.
func (b *Broker) syncTopics(st *meta.ClusterState, defaultsChanged bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, t := range b.topics {
		info, ok := st.Topics[name]
		if !ok || meta.TopicID(t.ID) != info.ID {
			delete(b.topics, name)
		}
	}
	for name, info := range st.Topics {
		t, ok := b.topics[name]
		if !ok {
			t = &Topic{Name: name, ID: info.ID, configs: map[string]string{}}
			b.topics[name] = t
		}
		for int32(len(t.partitions)) < info.Partitions {
			t.partitions = append(t.partitions, nil)
		}
		cfg := info.Config
		if cfg == nil {
			cfg = map[string]string{}
		}
		if defaultsChanged || !mapsEqual(cfg, t.configs) {
			t.configs = cfg
			lc := b.logConfig(cfg)
			for _, p := range t.partitions {
				if p == nil {
					continue
				}
				if err := p.Log.SetConfig(lc); err != nil {
					b.log.Error(err, "applying topic configs", "topic", name, "partition", p.Index)
				}
				p.setMaxMessageBytes(lc.MaxMessageBytes)
				p.minInsyncReplicas.Store(b.minInsyncReplicas(cfg))
				b.markThrottled(cfg, p)
			}
		}
	}
}

func mapsEqual(a, c map[string]string) bool {
	if len(a) != len(c) {
		return false
	}
	for k, v := range a {
		if w, ok := c[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// hostPartition returns the local replica of tp, opening its log (and
// replacing data of an older topic with the same name) if needed.
func (b *Broker) hostPartition(tp meta.TopicPartition, id meta.TopicID) (*Partition, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[tp.Topic]
	if !ok || meta.TopicID(t.ID) != id || tp.Partition < 0 || int(tp.Partition) >= len(t.partitions) {
		return nil, fmt.Errorf("host %s: topic not in the applied metadata", tp)
	}
	if p := t.partitions[tp.Partition]; p != nil {
		return p, nil
	}
	dir := b.partitionDir(tp.Topic, tp.Partition)
	if raw, err := os.ReadFile(filepath.Join(dir, topicIDFile)); err == nil && !bytes.Equal(bytes.TrimSpace(raw), []byte(id.String())) {
		b.log.Info("removing the data of an older topic with the same name", "partition", tp.String(), "dir", dir)
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("host %s: remove old data: %w", tp, err)
		}
	}
	p, err := b.openPartition(t, tp.Partition)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, topicIDFile), []byte(id.String()+"\n"), 0o644); err != nil {
		_ = p.Log.Close()
		return nil, fmt.Errorf("host %s: write topic id: %w", tp, err)
	}
	p.Replica = replica.NewPartition(tp, p.Log, b.cfg.NodeID, nil)
	p.Replica.SetTierSource(func() replica.TierSource {
		if tp := p.Tiered(); tp != nil {
			return tp
		}
		return nil // not a typed nil: the topic is not tiered
	})
	b.markThrottled(t.configs, p)
	t.partitions[tp.Partition] = p
	return p, nil
}

// dropPartition stops replicating tp and deletes its local data.
func (b *Broker) dropPartition(tp meta.TopicPartition) {
	b.cluster.replicas.Remove(tp)
	b.mu.Lock()
	var p *Partition
	if t, ok := b.topics[tp.Topic]; ok && tp.Partition >= 0 && int(tp.Partition) < len(t.partitions) {
		p = t.partitions[tp.Partition]
		t.partitions[tp.Partition] = nil
	}
	b.mu.Unlock()
	if p != nil {
		if err := p.Log.Delete(); err != nil {
			b.log.Error(err, "deleting partition data", "partition", tp.String())
		}
		b.log.Info("partition removed from this broker", "partition", tp.String())
	}
}

// removeStrayPartitionsCluster deletes partition directories this broker
// does not host according to the first snapshot (topics deleted, or
// replicas moved away, while it was down).
func (b *Broker) removeStrayPartitionsCluster(st *meta.ClusterState) error {
	return b.removePartitionDirs("removing partition directory this broker does not host", func(topic string, partition int32) bool {
		ps, ok := st.Partition(meta.TopicPartition{Topic: topic, Partition: partition})
		return ok && slices.Contains(ps.Replicas, b.cfg.NodeID)
	})
}

// metaError maps broker/meta errors to Kafka errors.
func metaError(err error) error {
	var code *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, meta.ErrTopicExists):
		code = kerr.TopicAlreadyExists
	case errors.Is(err, meta.ErrUnknownTopic):
		code = kerr.UnknownTopicOrPartition
	case errors.Is(err, meta.ErrInvalidTopic):
		code = kerr.InvalidTopicException
	case errors.Is(err, meta.ErrInvalidReplicationFactor):
		code = kerr.InvalidReplicationFactor
	case errors.Is(err, meta.ErrInvalidPartitions):
		code = kerr.InvalidPartitions
	case errors.Is(err, meta.ErrInvalidReplicaAssignment):
		code = kerr.InvalidReplicaAssignment
	case errors.Is(err, meta.ErrNotController):
		code = kerr.NotController
	case errors.Is(err, meta.ErrElectionNotNeeded):
		code = kerr.ElectionNotNeeded
	case errors.Is(err, meta.ErrPreferredLeaderNotAvailable):
		code = kerr.PreferredLeaderNotAvailable
	case errors.Is(err, meta.ErrEligibleLeadersNotAvailable):
		code = kerr.EligibleLeadersNotAvailable
	case errors.Is(err, meta.ErrStaleState):
		code = kerr.ConcurrentTransactions // retriable; rare
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = kerr.RequestTimedOut
	default:
		return err
	}
	return fmt.Errorf("%w: %w", code, err)
}

// MetaError maps a broker/meta error to a Kafka error (for handlers that
// call the controller directly).
func MetaError(err error) error { return metaError(err) }

// waitTopic waits (bounded) until the applied metadata satisfies cond, so
// that a client's next Metadata request sees its own change.
func (b *Broker) waitTopic(ctx context.Context, cond func(*meta.ClusterState) bool) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = b.WaitApplied(wctx, cond)
}

// createTopicCluster is CreateTopic in cluster mode.
func (b *Broker) createTopicCluster(ctx context.Context, spec TopicSpec, validateOnly bool) (TopicInfo, error) {
	ms := meta.TopicSpec{Name: spec.Name, Partitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor, Assignment: spec.Assignment, Config: map[string]string{}}
	if len(spec.Assignment) > 0 {
		if spec.Partitions != -1 || spec.ReplicationFactor != -1 {
			return TopicInfo{}, fmt.Errorf("%w: both a replica assignment and a partition count or replication factor were given", kerr.InvalidRequest)
		}
		ms.Partitions, ms.ReplicationFactor = int32(len(spec.Assignment)), int16(len(spec.Assignment[0]))
	}
	if ms.Partitions == -1 {
		ms.Partitions = b.cfg.DefaultPartitions
	}
	if ms.ReplicationFactor == -1 {
		ms.ReplicationFactor = b.cfg.DefaultReplicationFactor
	}
	if ms.Partitions > 0 {
		// Before the placement plans (and allocates for) every partition.
		if err := b.cfg.checkPartitionLimits(spec.Name, ms.Partitions, ms.Partitions, b.clusterPartitionCount()); err != nil {
			return TopicInfo{}, err
		}
		if err := b.cfg.checkFDBudget(spec.Name, b.replicasPerBroker(ms.Partitions, ms.ReplicationFactor)); err != nil {
			return TopicInfo{}, err
		}
	}
	for k, v := range spec.Configs {
		if v == nil {
			return TopicInfo{}, fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, k)
		}
		if err := ValidateTopicConfig(k, *v); err != nil {
			return TopicInfo{}, err
		}
		ms.Config[k] = *v
	}
	if err := b.checkTopicConfigs(ms.Config); err != nil {
		return TopicInfo{}, err
	}
	zone, err := b.placementZone(ms.Config)
	if err != nil {
		return TopicInfo{}, err
	}
	ms.LeaderZone = zone
	if st := b.ClusterState(); st != nil {
		for name := range st.Topics {
			if name != spec.Name && collisionName(name) == collisionName(spec.Name) {
				return TopicInfo{}, fmt.Errorf("%w: topic %q collides with existing topic %q ('.' and '_' are treated alike)", kerr.InvalidTopicException, spec.Name, name)
			}
		}
	}
	var info meta.TopicInfo
	if validateOnly {
		info, _, err = b.cluster.store.PlanTopic(ctx, ms)
	} else {
		info, err = b.cluster.store.CreateTopic(ctx, ms)
	}
	if err != nil {
		return TopicInfo{}, metaError(err)
	}
	if !validateOnly {
		b.waitTopic(ctx, func(st *meta.ClusterState) bool { t, ok := st.Topics[spec.Name]; return ok && t.ID == info.ID })
		b.log.Info("topic created", "topic", info.Name, "partitions", info.Partitions, "replicationFactor", info.ReplicationFactor, "configs", ms.Config)
	}
	return TopicInfo{Name: info.Name, ID: info.ID, Partitions: info.Partitions}, nil
}

func (b *Broker) deleteTopicCluster(ctx context.Context, name string) error {
	if err := b.cluster.store.DeleteTopic(ctx, name); err != nil {
		return metaError(err)
	}
	b.waitTopic(ctx, func(st *meta.ClusterState) bool { _, ok := st.Topics[name]; return !ok })
	b.log.Info("topic deleted", "topic", name)
	return nil
}

func (b *Broker) createPartitionsCluster(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	st := b.ClusterState()
	t, ok := st.Topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	switch {
	case count < t.Partitions:
		return fmt.Errorf("%w: topic %s has %d partitions; the count can only grow", kerr.InvalidPartitions, name, t.Partitions)
	case count == t.Partitions:
		return fmt.Errorf("%w: topic %s already has %d partitions", kerr.InvalidPartitions, name, t.Partitions)
	case assignment != nil && int32(len(assignment)) != count-t.Partitions:
		return fmt.Errorf("%w: %d assignments for %d new partitions", kerr.InvalidReplicaAssignment, len(assignment), count-t.Partitions)
	}
	if err := b.cfg.checkPartitionLimits(name, count, count-t.Partitions, b.clusterPartitionCount()); err != nil {
		return err
	}
	if err := b.cfg.checkFDBudget(name, b.replicasPerBroker(count-t.Partitions, t.ReplicationFactor)); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	zone, err := b.placementZone(t.Config)
	if err != nil {
		return err
	}
	if _, err := b.cluster.store.CreatePartitions(ctx, name, count, assignment, zone); err != nil {
		return metaError(err)
	}
	b.waitTopic(ctx, func(st *meta.ClusterState) bool { t, ok := st.Topics[name]; return ok && t.Partitions >= count })
	return nil
}

func (b *Broker) setTopicConfigsCluster(ctx context.Context, topic string, edit func(map[string]string) (map[string]string, error), validateOnly bool) error {
	st := b.ClusterState()
	t, ok := st.Topics[topic]
	if !ok {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, topic)
	}
	// edit plus the leader zone check: a zone must have brokers when it is
	// set, not only when partitions are placed.
	checked := func(cfg map[string]string) (map[string]string, error) {
		next, err := edit(cfg)
		if err != nil {
			return nil, err
		}
		if z, ok := next[meta.ConfigLeaderZone]; ok && z != cfg[meta.ConfigLeaderZone] {
			if err := b.checkLeaderZone(z); err != nil {
				return nil, err
			}
		}
		if err := b.checkTopicConfigs(next); err != nil {
			return nil, err
		}
		if err := b.checkRemoteStorageChange(cfg, next); err != nil {
			return nil, err
		}
		return next, nil
	}
	if validateOnly {
		_, err := checked(cloneMap(t.Config))
		return err
	}
	info, err := b.cluster.store.UpdateTopicConfig(ctx, topic, func(cfg map[string]string) error {
		next, err := checked(cloneMap(cfg))
		if err != nil {
			return err
		}
		clear(cfg)
		for k, v := range next {
			cfg[k] = v
		}
		return nil
	})
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return err
		}
		return metaError(err)
	}
	b.waitTopic(ctx, func(st *meta.ClusterState) bool { return mapsEqual(st.Topics[topic].Config, info.Config) })
	b.log.Info("topic configs changed", "topic", topic, "configs", info.Config)
	return nil
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ensure log is referenced (for follower retention helpers).
var _ = log.ErrClosed

// PreferredReadReplica implements KIP-392's rack-aware replica selection
// for a consumer in rack: an in-sync replica of the partition on a live
// broker in that rack (in replica order), or -1 when the leader is in that
// rack already or none is.
func (b *Broker) PreferredReadReplica(topic string, index int32, rack string) int32 {
	st := b.ClusterState()
	if st == nil || rack == "" {
		return -1
	}
	ps, ok := st.Partition(meta.TopicPartition{Topic: topic, Partition: index})
	if !ok {
		return -1
	}
	if l, ok := st.Brokers[ps.Leader]; ok && l.Zone == rack {
		return -1
	}
	for _, r := range ps.Replicas {
		if bi, ok := st.Brokers[r]; ok && bi.Zone == rack && slices.Contains(ps.ISR, r) {
			return r
		}
	}
	return -1
}

// placementZone is the zone new partitions of a topic with these configs
// get their preferred leaders in: the topic's leader.placement.zone, which
// must have brokers, else the cluster default. A default zone without a
// registered broker (its brokers are all down) does not block creating
// topics: they are placed balanced, and the controller moves their
// leaders into the zone once it has brokers again.
func (b *Broker) placementZone(configs map[string]string) (string, error) {
	if zone, ok := configs[meta.ConfigLeaderZone]; ok {
		return zone, b.checkLeaderZone(zone)
	}
	zone := b.cfg.LeaderZone()
	if err := b.checkLeaderZone(zone); err != nil {
		b.log.Info("placing new partitions balanced: the default leader zone has no registered broker; the controller moves their leaders there when it has", "zone", zone)
		return "", nil
	}
	return zone, nil
}

// checkLeaderZone refuses a leader zone ("" is none) in which no broker is
// registered (standalone: other than this broker's rack) with
// INVALID_CONFIG naming the zones that have brokers, so that a typo is
// caught when the topic or its config is written, not found later as
// leaders that never move.
func (b *Broker) checkLeaderZone(zone string) error {
	if zone == "" {
		return nil
	}
	zones := []string{b.cfg.Rack}
	if st := b.ClusterState(); st != nil {
		zones = zones[:0]
		for _, bi := range st.Brokers {
			if !slices.Contains(zones, bi.Zone) {
				zones = append(zones, bi.Zone)
			}
		}
		slices.Sort(zones)
	}
	if !slices.Contains(zones, zone) {
		return fmt.Errorf("%w: %s=%s: no broker runs in zone %q (zones with brokers: %q)", kerr.InvalidConfig, meta.ConfigLeaderZone, zone, zone, zones)
	}
	return nil
}
