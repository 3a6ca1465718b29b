package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/replica"
)

// TopicInfo is a snapshot of a topic's identity and size.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

func (t *Topic) info() TopicInfo {
	return TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.partitions))}
}

// Topics returns every topic sorted by name.
func (b *Broker) Topics() []TopicInfo {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]TopicInfo, 0, len(b.topics))
	for _, t := range b.topics {
		out = append(out, t.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic returns one topic.
func (b *Broker) Topic(name string) (TopicInfo, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t, ok := b.topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return t.info(), true
}

// TopicByID returns the topic with a UUID.
func (b *Broker) TopicByID(id [16]byte) (TopicInfo, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, t := range b.topics {
		if t.ID == id {
			return t.info(), true
		}
	}
	return TopicInfo{}, false
}

// Partition returns a partition, or UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) Partition(topic string, index int32) (*Partition, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t, ok := b.topics[topic]
	if !ok || index < 0 || int(index) >= len(t.partitions) {
		return nil, fmt.Errorf("%w: %s-%d", kerr.UnknownTopicOrPartition, topic, index)
	}
	if t.partitions[index] == nil {
		return nil, fmt.Errorf("%w: broker %d does not host %s-%d", kerr.NotLeaderForPartition, b.cfg.NodeID, topic, index)
	}
	return t.partitions[index], nil
}

// TopicSpec is a topic to create.
type TopicSpec struct {
	Name string
	// Partitions is the partition count; -1 means num.partitions.
	Partitions int32
	// ReplicationFactor must be 1 or -1 on a single broker.
	ReplicationFactor int16
	// Assignment, if set, gives each partition's replicas explicitly; on a
	// single broker each must be exactly [NodeID].
	Assignment [][]int32
	// Configs are topic config overrides; a nil value is invalid.
	Configs map[string]*string
}

// CreateTopic creates a topic, or only validates the request.
func (b *Broker) CreateTopic(ctx context.Context, spec TopicSpec, validateOnly bool) (TopicInfo, error) {
	if err := ValidateTopicName(spec.Name); err != nil {
		return TopicInfo{}, err
	}
	if err := CheckNotInternalTopic(spec.Name); err != nil {
		return TopicInfo{}, err
	}
	return b.createTopic(ctx, spec, validateOnly)
}

// CreateInternalTopic creates one of Kafka's internal topics, which
// clients may not create (the brokers' __consumer_offsets projection,
// broker/offsetstopic).
func (b *Broker) CreateInternalTopic(ctx context.Context, spec TopicSpec) (TopicInfo, error) {
	if !IsInternalTopic(spec.Name) {
		return TopicInfo{}, fmt.Errorf("%w: %s is not an internal topic", kerr.InvalidTopicException, spec.Name)
	}
	return b.createTopic(ctx, spec, false)
}

func (b *Broker) createTopic(ctx context.Context, spec TopicSpec, validateOnly bool) (TopicInfo, error) {
	if b.cluster != nil {
		return b.createTopicCluster(ctx, spec, validateOnly)
	}
	partitions := spec.Partitions
	switch {
	case len(spec.Assignment) > 0:
		if partitions != -1 || spec.ReplicationFactor != -1 {
			return TopicInfo{}, fmt.Errorf("%w: both a replica assignment and a partition count or replication factor were given", kerr.InvalidRequest)
		}
		for i, replicas := range spec.Assignment {
			if len(replicas) != 1 || replicas[0] != b.cfg.NodeID {
				return TopicInfo{}, fmt.Errorf("%w: partition %d assigned to %v; the only broker is %d", kerr.InvalidReplicaAssignment, i, replicas, b.cfg.NodeID)
			}
		}
		partitions = int32(len(spec.Assignment))
	case partitions == -1:
		partitions = b.cfg.DefaultPartitions
	case partitions <= 0:
		return TopicInfo{}, fmt.Errorf("%w: partition count %d must be positive", kerr.InvalidPartitions, partitions)
	}
	if rf := spec.ReplicationFactor; rf != -1 && rf != 1 && len(spec.Assignment) == 0 {
		return TopicInfo{}, fmt.Errorf("%w: replication factor %d is larger than the number of brokers (1)", kerr.InvalidReplicationFactor, rf)
	}
	if partitions > b.cfg.maxPartitionsPerTopic() {
		// Before validating the rest: the message names the limit.
		return TopicInfo{}, b.cfg.checkPartitionLimits(spec.Name, partitions, partitions, 0)
	}
	configs := map[string]string{}
	for k, v := range spec.Configs {
		if v == nil {
			return TopicInfo{}, fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, k)
		}
		if err := ValidateTopicConfig(k, *v); err != nil {
			return TopicInfo{}, err
		}
		configs[k] = *v
	}
	if err := b.checkLeaderZone(configs[meta.ConfigLeaderZone]); err != nil {
		return TopicInfo{}, err
	}
	if err := b.checkTopicConfigs(configs); err != nil {
		return TopicInfo{}, err
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return TopicInfo{}, fmt.Errorf("%w: broker is shutting down", kerr.BrokerNotAvailable)
	}
	if _, ok := b.topics[spec.Name]; ok {
		return TopicInfo{}, fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, spec.Name)
	}
	for name := range b.topics {
		if collisionName(name) == collisionName(spec.Name) {
			return TopicInfo{}, fmt.Errorf("%w: topic %q collides with existing topic %q ('.' and '_' are treated alike)", kerr.InvalidTopicException, spec.Name, name)
		}
	}
	if err := b.cfg.checkPartitionLimits(spec.Name, partitions, partitions, b.partitionCountLocked()); err != nil {
		return TopicInfo{}, err
	}
	if err := b.cfg.checkFDBudget(spec.Name, int64(partitions)); err != nil {
		return TopicInfo{}, err
	}
	t := &Topic{Name: spec.Name, ID: newTopicID(), configs: configs}
	if validateOnly {
		return TopicInfo{Name: t.Name, ID: t.ID, Partitions: partitions}, nil
	}
	for i := range partitions {
		p, err := b.openPartition(t, i)
		if err != nil {
			for _, p := range t.partitions {
				_ = p.Log.Delete()
			}
			return TopicInfo{}, err
		}
		t.partitions = append(t.partitions, p)
	}
	b.topics[t.Name] = t
	b.snapshotMetaLocked()
	if err := b.writeMetaLocked(); err != nil {
		delete(b.topics, t.Name)
		b.snapshotMetaLocked()
		for _, p := range t.partitions {
			_ = p.Log.Delete()
		}
		return TopicInfo{}, err
	}
	b.log.Info("topic created", "topic", t.Name, "partitions", partitions, "configs", configs)
	return t.info(), nil
}

// DeleteTopic deletes a topic and its data.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if err := CheckNotInternalTopic(name); err != nil {
		return err
	}
	if b.cluster != nil {
		return b.deleteTopicCluster(ctx, name)
	}
	b.mu.Lock()
	t, ok := b.topics[name]
	if !ok {
		b.mu.Unlock()
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	delete(b.topics, name)
	b.snapshotMetaLocked()
	if err := b.writeMetaLocked(); err != nil {
		b.topics[name] = t
		b.snapshotMetaLocked()
		b.mu.Unlock()
		return err
	}
	b.mu.Unlock()
	var errs []error
	for _, p := range t.partitions {
		b.deleteTierData(p)
		if err := p.Log.Delete(); err != nil {
			errs = append(errs, fmt.Errorf("delete %s-%d: %w", name, p.Index, err))
		}
	}
	b.log.Info("topic deleted", "topic", name)
	// The metadata no longer has the topic: leftovers are removed on the
	// next start, so a failed directory removal is only logged.
	if err := errors.Join(errs...); err != nil {
		b.log.Error(err, "removing partition data of a deleted topic", "topic", name)
	}
	return nil
}

// CreatePartitions raises a topic's partition count to count.
func (b *Broker) CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	if err := CheckNotInternalTopic(name); err != nil {
		return err
	}
	if b.cluster != nil {
		return b.createPartitionsCluster(ctx, name, count, assignment, validateOnly)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, name)
	}
	cur := int32(len(t.partitions))
	switch {
	case count < cur:
		return fmt.Errorf("%w: topic %s has %d partitions; the count can only grow", kerr.InvalidPartitions, name, cur)
	case count == cur:
		return fmt.Errorf("%w: topic %s already has %d partitions", kerr.InvalidPartitions, name, cur)
	}
	if err := b.cfg.checkPartitionLimits(name, count, count-cur, b.partitionCountLocked()); err != nil {
		return err
	}
	if err := b.cfg.checkFDBudget(name, int64(count-cur)); err != nil {
		return err
	}
	if assignment != nil {
		if int32(len(assignment)) != count-cur {
			return fmt.Errorf("%w: %d assignments for %d new partitions", kerr.InvalidReplicaAssignment, len(assignment), count-cur)
		}
		for i, replicas := range assignment {
			if len(replicas) != 1 || replicas[0] != b.cfg.NodeID {
				return fmt.Errorf("%w: new partition %d assigned to %v; the only broker is %d", kerr.InvalidReplicaAssignment, i, replicas, b.cfg.NodeID)
			}
		}
	}
	if validateOnly {
		return nil
	}
	var added []*Partition
	for i := cur; i < count; i++ {
		p, err := b.openPartition(t, i)
		if err != nil {
			for _, p := range added {
				_ = p.Log.Delete()
			}
			return err
		}
		added = append(added, p)
	}
	t.partitions = append(t.partitions, added...)
	b.snapshotMetaLocked()
	if err := b.writeMetaLocked(); err != nil {
		t.partitions = t.partitions[:cur]
		b.snapshotMetaLocked()
		for _, p := range added {
			_ = p.Log.Delete()
		}
		return err
	}
	b.log.Info("partitions created", "topic", name, "from", cur, "to", count)
	return nil
}

// DescribeTopicConfigs returns the named configs of a topic (all if names
// is empty).
func (b *Broker) DescribeTopicConfigs(topic string, names []string) ([]ConfigEntry, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t, ok := b.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, topic)
	}
	return filterEntries(b.topicConfigEntries(t.configs), names), nil
}

func filterEntries(all []ConfigEntry, names []string) []ConfigEntry {
	if len(names) == 0 {
		return all
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := all[:0:0]
	for _, e := range all {
		if want[e.Name] {
			out = append(out, e)
		}
	}
	return out
}

// Config operations of IncrementalAlterConfigs.
const (
	OpSet      = 0
	OpDelete   = 1
	OpAppend   = 2
	OpSubtract = 3
)

// ConfigOp is one IncrementalAlterConfigs operation.
type ConfigOp struct {
	Name  string
	Op    int8
	Value *string
}

// AlterTopicConfigs replaces a topic's config overrides (AlterConfigs
// semantics: configs not given return to their defaults).
func (b *Broker) AlterTopicConfigs(ctx context.Context, topic string, configs map[string]*string, validateOnly bool) error {
	next := map[string]string{}
	for k, v := range configs {
		if v == nil {
			return fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, k)
		}
		if err := ValidateTopicConfig(k, *v); err != nil {
			return err
		}
		next[k] = *v
	}
	return b.setTopicConfigs(ctx, topic, func(map[string]string) (map[string]string, error) { return next, nil }, validateOnly)
}

// IncrementalAlterTopicConfigs applies operations to a topic's overrides.
func (b *Broker) IncrementalAlterTopicConfigs(ctx context.Context, topic string, ops []ConfigOp, validateOnly bool) error {
	return b.setTopicConfigs(ctx, topic, func(cur map[string]string) (map[string]string, error) {
		next := make(map[string]string, len(cur))
		for k, v := range cur {
			next[k] = v
		}
		seen := map[string]bool{}
		for _, op := range ops {
			tc, ok := topicConfigByName[op.Name]
			if !ok {
				return nil, fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
			}
			if seen[op.Name] {
				return nil, fmt.Errorf("%w: config %q appears twice", kerr.InvalidRequest, op.Name)
			}
			seen[op.Name] = true
			switch op.Op {
			case OpSet:
				if op.Value == nil {
					return nil, fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, op.Name)
				}
				next[op.Name] = *op.Value
			case OpDelete:
				delete(next, op.Name)
			case OpAppend, OpSubtract:
				if tc.typ != typeList {
					return nil, fmt.Errorf("%w: config %q is not a list", kerr.InvalidConfig, op.Name)
				}
				if op.Value == nil {
					return nil, fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, op.Name)
				}
				curVal, ok := next[op.Name]
				if !ok {
					curVal = b.effectiveTopicConfig(tc, nil).Value
				}
				next[op.Name] = editList(curVal, *op.Value, op.Op == OpAppend)
			default:
				return nil, fmt.Errorf("%w: unknown config operation %d", kerr.InvalidRequest, op.Op)
			}
			if v, ok := next[op.Name]; ok {
				if err := ValidateTopicConfig(op.Name, v); err != nil {
					return nil, err
				}
			}
		}
		return next, nil
	}, validateOnly)
}

func editList(cur, values string, add bool) string {
	var items []string
	if cur != "" {
		items = strings.Split(cur, ",")
	}
	for _, v := range strings.Split(values, ",") {
		idx := -1
		for i, it := range items {
			if it == v {
				idx = i
			}
		}
		switch {
		case add && idx < 0:
			items = append(items, v)
		case !add && idx >= 0:
			items = append(items[:idx], items[idx+1:]...)
		}
	}
	return strings.Join(items, ",")
}

func (b *Broker) setTopicConfigs(ctx context.Context, topic string, edit func(map[string]string) (map[string]string, error), validateOnly bool) error {
	if b.cluster != nil {
		return b.setTopicConfigsCluster(ctx, topic, edit, validateOnly)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[topic]
	if !ok {
		return fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, topic)
	}
	next, err := edit(t.configs)
	if err == nil && next[meta.ConfigLeaderZone] != t.configs[meta.ConfigLeaderZone] {
		err = b.checkLeaderZone(next[meta.ConfigLeaderZone])
	}
	if err == nil {
		err = b.checkTopicConfigs(next)
	}
	if err == nil {
		err = b.checkRemoteStorageChange(t.configs, next)
	}
	if err != nil || validateOnly {
		return err
	}
	prev := t.configs
	t.configs = next
	b.snapshotMetaLocked()
	if err := b.writeMetaLocked(); err != nil {
		t.configs = prev
		b.snapshotMetaLocked()
		return err
	}
	cfg := b.logConfig(next)
	var errs []error
	for _, p := range t.partitions {
		if err := p.Log.SetConfig(cfg); err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", p.Index, err))
		}
		p.setMaxMessageBytes(cfg.MaxMessageBytes)
		p.minInsyncReplicas.Store(b.minInsyncReplicas(next))
	}
	if err := errors.Join(errs...); err != nil {
		// Validated values the log still refused: a bug, not bad input.
		b.log.Error(err, "applying topic configs to the logs", "topic", topic)
	}
	b.log.Info("topic configs changed", "topic", topic, "configs", next)
	return nil
}

// DescribeBrokerConfigs returns the configs of broker resource (this
// broker's ID, or "" for the cluster-wide view), all if names is empty.
// The static configs (config file) are read-only; the dynamic ones
// (dynconfig.go) show this broker's value, or for resource "" the
// cluster-wide default, with their source.
func (b *Broker) DescribeBrokerConfigs(resource string, names []string) []ConfigEntry {
	static := func(name, value, def string, typ int8) ConfigEntry {
		src := int8(SourceStaticBroker)
		if value == def {
			src = SourceDefault
		}
		return ConfigEntry{Name: name, Value: value, Source: src, ReadOnly: true, Type: typ,
			Synonyms: []ConfigSynonym{{Name: name, Value: value, Source: src}}}
	}
	out := []ConfigEntry{
		static("broker.id", fmt.Sprint(b.cfg.NodeID), "-1", typeInt),
		static("broker.rack", b.cfg.Rack, "", typeString),
		static("log.dirs", b.cfg.DataDir, "", typeString),
		static("num.partitions", fmt.Sprint(b.cfg.DefaultPartitions), "1", typeInt),
		static("auto.create.topics.enable", fmt.Sprint(b.cfg.AutoCreateTopics), "true", typeBoolean),
		static("default.replication.factor", fmt.Sprint(b.cfg.DefaultReplicationFactor), "1", typeInt),
		static("leader.placement.policy", orDefault(b.cfg.LeaderPlacementPolicy, PolicyBalanced), PolicyBalanced, typeString),
	}
	for _, tc := range topicConfigs {
		if _, dynamic := dynamicConfigByName(tc.brokerKey); tc.brokerKey == "" || dynamic {
			continue // dynamic ones: dynamicBrokerEntries
		}
		e := b.effectiveTopicConfig(&tc, nil)
		e.Name = tc.brokerKey
		e.ReadOnly = true
		out = append(out, e)
	}
	out = append(out, b.dynamicBrokerEntries(resource)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return filterEntries(out, names)
}

// ApplyRetention enforces retention on every partition and returns the
// number of segments deleted.
func (b *Broker) ApplyRetention() (int, error) {
	b.mu.RLock()
	var parts []*Partition
	for _, t := range b.topics {
		for _, p := range t.partitions {
			if p != nil {
				parts = append(parts, p)
			}
		}
	}
	b.mu.RUnlock()
	total := 0
	var errs []error
	for _, p := range parts {
		n, err := p.applyRetention()
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("retention of %s-%d: %w", p.Topic, p.Index, err))
		}
	}
	return total, errors.Join(errs...)
}

// AllPartitions returns every partition (for metrics and flushing).
func (b *Broker) AllPartitions() []*Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var parts []*Partition
	for _, t := range b.topics {
		for _, p := range t.partitions {
			if p != nil {
				parts = append(parts, p)
			}
		}
	}
	return parts
}

// LeaderEpoch is the leader epoch of every partition of a single broker.
const LeaderEpoch = 0

// Append validates a Produce record set and appends it as leader, at the
// leader epoch it returns. The log checks idempotent producers' epochs and
// sequences. In cluster mode only the leader appends
// (NOT_LEADER_OR_FOLLOWER otherwise).
func (p *Partition) Append(records []byte) (log.AppendResult, int32, error) {
	return p.append(records, false, nil, nil, nil)
}

// AppendWithin is Append, or AppendVerified when verify is set, with the
// batches' decompression counted against a request's budget (nil: only
// each batch's own limit).
func (p *Partition) AppendWithin(records []byte, verify bool, guard *log.VerificationGuard, budget *record.Budget) (log.AppendResult, int32, error) {
	return p.append(records, verify, guard, budget, nil)
}

// AppendForwarded is AppendWithin for records read from a zone-local
// forwarder's object (fwd; nil: AppendWithin): with WAL replication,
// followers may read them from there (replica.Partition.AppendForwarded).
func (p *Partition) AppendForwarded(records []byte, verify bool, guard *log.VerificationGuard, budget *record.Budget, fwd *replica.Forwarded) (log.AppendResult, int32, error) {
	return p.append(records, verify, guard, budget, fwd)
}

// AppendVerified is Append for a produce whose transactions are verified
// with their coordinator (KIP-890 part 1): a transactional batch that
// would start its producer's transaction here is appended only while
// guard (log.Log.StartTxnVerification, made before the coordinator was
// asked) is still current — no marker ended the transaction meanwhile —
// else INVALID_TXN_STATE. A nil guard accepts only batches of a
// transaction that is still open.
func (p *Partition) AppendVerified(records []byte, guard *log.VerificationGuard) (log.AppendResult, int32, error) {
	return p.append(records, true, guard, nil, nil)
}

func (p *Partition) append(records []byte, verify bool, guard *log.VerificationGuard, budget *record.Budget, fwd *replica.Forwarded) (log.AppendResult, int32, error) {
	batches, err := budget.Validate(records, p.maxBytes())
	if err != nil {
		return log.AppendResult{}, 0, err
	}
	if p.Log.Config().Compact {
		if err := checkKeyed(batches, record.DecompressLimit(p.maxBytes()), budget); err != nil {
			return log.AppendResult{}, 0, err
		}
	}
	if p.Replica != nil {
		var res log.AppendResult
		var epoch int32
		switch {
		case fwd != nil:
			res, epoch, err = p.Replica.AppendForwarded(batches, verify, guard, fwd)
		case verify:
			res, epoch, err = p.Replica.AppendAsLeaderVerified(batches, guard)
		default:
			res, epoch, err = p.Replica.AppendAsLeader(batches)
		}
		if errors.Is(err, log.ErrDuplicateSequence) {
			return res, epoch, nil
		}
		return res, epoch, err
	}
	var res log.AppendResult
	if verify {
		res, err = p.Log.AppendAsLeaderVerified(batches, LeaderEpoch, guard)
	} else {
		res, err = p.Log.AppendAsLeader(batches, LeaderEpoch)
	}
	if errors.Is(err, log.ErrDuplicateSequence) {
		// An idempotent producer's retry of a batch that is already in
		// the log: Kafka answers success with the original offsets, which
		// the log returns in res.
		return res, LeaderEpoch, nil
	}
	return res, LeaderEpoch, err
}

// AppendMarker appends a transaction marker (a COMMIT or ABORT control
// batch, WriteTxnMarkers) for a producer as leader, at the leader epoch it
// returns. The log ends the producer's transaction in this partition; a
// marker with an epoch older than the producer's is
// log.ErrInvalidProducerEpoch.
func (p *Partition) AppendMarker(producerID int64, producerEpoch int16, m record.Marker) (log.AppendResult, int32, error) {
	b, err := record.BuildMarker(producerID, producerEpoch, m, time.Now().UnixMilli())
	if err != nil {
		return log.AppendResult{}, 0, err
	}
	if p.Replica != nil {
		return p.Replica.AppendAsLeader([]record.Batch{b})
	}
	res, err := p.Log.AppendAsLeader([]record.Batch{b}, LeaderEpoch)
	if err == nil {
		// A single broker's high watermark is its log end.
		p.Log.NoteHighWatermark(res.LastOffset + 1)
	}
	return res, LeaderEpoch, err
}

// HighWatermark is the offset below which consumers may read: the log end
// on a single broker.
func (p *Partition) HighWatermark() int64 {
	if p.Replica == nil {
		return p.Log.EndOffset()
	}
	return p.Replica.HighWatermark()
}

// LastStableOffset is the offset below which read_committed consumers may
// read: the high watermark, or the first offset of a transaction that is
// not decided and replicated yet (log.Log.LastStableOffset).
func (p *Partition) LastStableOffset() int64 {
	return p.Log.LastStableOffset(p.HighWatermark())
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3, KIP-734), or -1, -1 for an empty
// log: across both tiers for a tiered partition (tiered.go), the first
// such record when several have it.
func (p *Partition) MaxTimestamp(ctx context.Context) (offset, timestamp int64, err error) {
	offset, timestamp, err = p.localMaxTimestamp(record.BudgetFrom(ctx))
	if err != nil {
		return -1, -1, err
	}
	return p.remoteMaxTimestamp(ctx, offset, timestamp)
}

// localMaxTimestamp is MaxTimestamp of the local log. The log knows the
// batch; the record is found by decoding that batch.
func (p *Partition) localMaxTimestamp(budget *record.Budget) (offset, timestamp int64, err error) {
	last, ts := p.Log.MaxTimestampOffset()
	if last < 0 {
		return -1, -1, nil
	}
	res, err := p.Log.Read(last, 1, last+1)
	if err != nil {
		return -1, -1, fmt.Errorf("read the max-timestamp batch of %s-%d: %w", p.Topic, p.Index, err)
	}
	for buf := res.Records; len(buf) >= record.BatchHeaderSize; {
		h, err := record.ParseHeader(buf)
		if err != nil || h.Size() > len(buf) {
			break
		}
		if h.BaseOffset <= last && last <= h.LastOffset() {
			if h.TimestampType() == record.TimestampLogAppendTime {
				return h.BaseOffset, ts, nil
			}
			found := int64(-1)
			err := budget.Walk(record.Batch(buf[:h.Size()]), record.MaxDecompressedBytes, func(rec *record.Record) error {
				if h.BaseTimestamp+rec.TimestampDelta == h.MaxTimestamp {
					found = h.BaseOffset + int64(rec.OffsetDelta)
					return errStopWalk
				}
				return nil
			})
			if err != nil && err != errStopWalk {
				return -1, -1, fmt.Errorf("decode batch at %d: %w", h.BaseOffset, err)
			}
			if found >= 0 {
				return found, h.MaxTimestamp, nil
			}
			break
		}
		buf = buf[h.Size():]
	}
	return last, ts, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// checkKeyed refuses a record without a key for a compacted topic, with
// Kafka's INVALID_RECORD ("Compacted topic cannot accept message without
// key"): the cleaner could never keep or replace it.
// Walking keeps no record, so a batch costs the decoder's memory, within
// the batch's decompression budget of the topic (limit).
func checkKeyed(batches []record.Batch, limit int64, budget *record.Budget) error {
	for _, b := range batches {
		err := budget.Walk(b, limit, func(r *record.Record) error {
			if r.KeyLen < 0 {
				return fmt.Errorf("%w: compacted topic cannot accept a record without a key (offset delta %d)", record.ErrInvalidRecord, r.OffsetDelta)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// errStopWalk ends a record.Walk early.
var errStopWalk = errors.New("stop walk")
