package meta

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/placement"
)

// DefaultMaxTxnOps is etcd's default --max-txn-ops. Writes that need more
// operations (topics with many partitions) are split; see writePartitions.
const DefaultMaxTxnOps = 128

// casAttempts bounds the read-compare-retry loops of writes that retry
// on unrelated concurrent changes (not on a lost compare of the caller's
// expectation, which returns ErrStaleState).
const casAttempts = 8

// Store reads and writes one cluster's metadata in etcd. It is safe for
// concurrent use; it holds no state besides the client.
type Store struct {
	client    *clientv3.Client
	keys      keys
	maxTxnOps int
	// secret caches the cluster's server secret (ServerSecret): created
	// once, never changed.
	secret atomic.Pointer[[]byte]
}

// Option configures a Store.
type Option func(*Store)

// WithMaxTxnOps sets the etcd server's --max-txn-ops (default 128).
func WithMaxTxnOps(n int) Option {
	return func(s *Store) {
		if n >= 8 {
			s.maxTxnOps = n
		}
	}
}

// New returns the Store of cluster on client.
func New(client *clientv3.Client, cluster string, opts ...Option) (*Store, error) {
	k, err := newKeys(cluster)
	if err != nil {
		return nil, err
	}
	s := &Store{client: client, keys: k, maxTxnOps: DefaultMaxTxnOps}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Client returns the etcd client (for the group offset store and tests).
func (s *Store) Client() *clientv3.Client { return s.client }

// OffsetsPrefix is the key prefix reserved for consumer-group offsets. It is
// outside the watched metadata prefix.
func (s *Store) OffsetsPrefix() string { return s.keys.offsets }

// TxnOffsetsPrefix is the key prefix reserved for pending transactional
// offset commits, beside the offsets (not watched).
func (s *Store) TxnOffsetsPrefix() string { return s.keys.txnOffsets }

// TransactionsPrefix is the key prefix reserved for the transaction
// coordinators' state (not watched).
func (s *Store) TransactionsPrefix() string { return s.keys.txns }

// GroupsPrefix is the key prefix reserved for consumer-group membership,
// also outside the watched metadata prefix.
func (s *Store) GroupsPrefix() string { return s.keys.groups }

// GroupClaimsPrefix is the key prefix reserved for the group coordinators'
// claims on their groups (broker/meta/offsets), not watched.
func (s *Store) GroupClaimsPrefix() string { return s.keys.groupClaims }

// commit runs one transaction that, if cmps hold, applies ops and bumps the
// metadata version. reason is stored as the version key's value, which makes
// the last change visible with etcdctl. On a failed compare it returns the
// else-branch responses (elseOps) for diagnosis.
func (s *Store) commit(ctx context.Context, reason string, cmps []clientv3.Cmp, ops []clientv3.Op, elseOps ...clientv3.Op) (*clientv3.TxnResponse, error) {
	ops = append(ops, clientv3.OpPut(s.keys.version(), reason))
	resp, err := s.client.Txn(ctx).If(cmps...).Then(ops...).Else(elseOps...).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd txn (%s): %w", reason, err)
	}
	return resp, nil
}

// load reads every metadata key at one revision.
func (s *Store) load(ctx context.Context) (*stateBuilder, error) {
	resp, err := s.client.Get(ctx, s.keys.root, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read metadata: %w", err)
	}
	b := newStateBuilder(s.keys)
	log := logr.FromContextOrDiscard(ctx)
	for _, kv := range resp.Kvs {
		b.apply(log, kv, false)
	}
	b.revision = resp.Header.Revision
	return b, nil
}

// Snapshot returns the cluster metadata at the current etcd revision.
func (s *Store) Snapshot(ctx context.Context) (*ClusterState, error) {
	b, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	return b.snapshot(), nil
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("meta: encoding %T: %v", v, err)) // only plain structs are encoded
	}
	return string(b)
}

// PlanTopic validates spec and computes the topic it would create, without
// writing (CreateTopics with validate_only).
func (s *Store) PlanTopic(ctx context.Context, spec TopicSpec) (TopicInfo, [][]int32, error) {
	st, err := s.Snapshot(ctx)
	if err != nil {
		return TopicInfo{}, nil, err
	}
	return planTopic(st, spec)
}

func planTopic(st *ClusterState, spec TopicSpec) (TopicInfo, [][]int32, error) {
	if err := validTopicName(spec.Name); err != nil {
		return TopicInfo{}, nil, err
	}
	if _, ok := st.Topics[spec.Name]; ok {
		return TopicInfo{}, nil, fmt.Errorf("%w: %s", ErrTopicExists, spec.Name)
	}
	var assignment [][]int32
	if spec.Assignment != nil {
		if err := checkAssignment(st, spec.Assignment, 0); err != nil {
			return TopicInfo{}, nil, err
		}
		assignment = spec.Assignment
	} else {
		var err error
		assignment, err = placement.Assign(placement.Request{
			Brokers:           st.placementBrokers(),
			Partitions:        int(spec.Partitions),
			ReplicationFactor: int(spec.ReplicationFactor),
			LeaderZone:        spec.LeaderZone,
			ClusterLoad:       st.placementLoad(spec.Name),
		})
		if err != nil {
			return TopicInfo{}, nil, placementError(spec.Name, err)
		}
	}
	id, err := newTopicID()
	if err != nil {
		return TopicInfo{}, nil, err
	}
	return TopicInfo{
		Name:              spec.Name,
		ID:                id,
		Partitions:        int32(len(assignment)),
		ReplicationFactor: int16(len(assignment[0])),
		Config:            spec.Config,
	}, assignment, nil
}

func placementError(topic string, err error) error {
	switch {
	case errors.Is(err, placement.ErrInvalidReplicationFactor):
		return fmt.Errorf("topic %s: %w: %w", topic, ErrInvalidReplicationFactor, err)
	case errors.Is(err, placement.ErrInvalidPartitions):
		return fmt.Errorf("topic %s: %w: %w", topic, ErrInvalidPartitions, err)
	}
	return fmt.Errorf("topic %s: %w: %w", topic, ErrInvalidReplicaAssignment, err)
}

// checkAssignment validates a manual assignment: at least one partition, one
// replication factor for all (equal to rf when rf > 0), distinct registered
// brokers per partition, none cordoned (as Kafka since KAFKA-20832: a
// cordoned broker takes no new replica, placed or named).
func checkAssignment(st *ClusterState, assignment [][]int32, rf int) error {
	if len(assignment) == 0 {
		return fmt.Errorf("%w: empty assignment", ErrInvalidPartitions)
	}
	if rf == 0 {
		rf = len(assignment[0])
	}
	for p, replicas := range assignment {
		if len(replicas) == 0 || len(replicas) != rf {
			return fmt.Errorf("%w: partition %d has %d replicas, want %d", ErrInvalidReplicaAssignment, p, len(replicas), rf)
		}
		for i, id := range replicas {
			if slices.Index(replicas, id) != i {
				return fmt.Errorf("%w: partition %d lists broker %d twice", ErrInvalidReplicaAssignment, p, id)
			}
			if !st.Live(id) {
				return fmt.Errorf("%w: partition %d names broker %d, which is not registered", ErrInvalidReplicaAssignment, p, id)
			}
			if err := st.checkNotCordoned([]int32{id}, nil); err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
		}
	}
	return nil
}

func initialState(replicas []int32, brokers map[int32]BrokerInfo) PartitionState {
	return PartitionState{
		Replicas:          slices.Clone(replicas),
		Leader:            replicas[0],
		ISR:               slices.Clone(replicas),
		LeaderBrokerEpoch: brokers[replicas[0]].Epoch,
	}.withISREpochs(func(id int32) int64 { return brokers[id].Epoch })
}

// CreateTopic places the topic's replicas over the registered brokers and
// writes the topic with all its partitions, each led by its preferred
// replica with the full replica set as ISR.
func (s *Store) CreateTopic(ctx context.Context, spec TopicSpec) (TopicInfo, error) {
	st, err := s.Snapshot(ctx)
	if err != nil {
		return TopicInfo{}, err
	}
	info, assignment, err := planTopic(st, spec)
	if err != nil {
		return TopicInfo{}, err
	}
	absent := clientv3.Compare(clientv3.CreateRevision(s.keys.topic(info.Name)), "=", 0)
	if len(assignment)+2 > s.maxTxnOps {
		// Clear invisible records an interrupted create may have left, so
		// that none survives beyond the new partition count.
		if _, err := s.client.Txn(ctx).If(absent).Then(clientv3.OpDelete(s.keys.partitionsOf(info.Name), clientv3.WithPrefix())).Commit(); err != nil {
			return TopicInfo{}, fmt.Errorf("clear partitions of %s: %w", info.Name, err)
		}
	}
	ok, err := s.writePartitions(ctx, "create topic "+info.Name, absent, info, 0, assignment, st.Brokers)
	if err != nil {
		return TopicInfo{}, err
	}
	if !ok {
		return TopicInfo{}, fmt.Errorf("%w: %s", ErrTopicExists, info.Name)
	}
	logr.FromContextOrDiscard(ctx).Info("created topic", "topic", info.Name, "id", info.ID, "partitions", info.Partitions, "replicationFactor", info.ReplicationFactor)
	return info, nil
}

// writePartitions writes partitions first..first+len(assignment)-1 and then
// the topic record, all guarded by guard. The topic record is the commit
// point: snapshots hide partition records beyond a topic's partition count,
// so when the writes do not fit one transaction (etcd's --max-txn-ops) the
// earlier chunks stay invisible until the last one lands, and a crash in
// between leaves only invisible records that the next create or delete
// overwrites.
func (s *Store) writePartitions(ctx context.Context, reason string, guard clientv3.Cmp, info TopicInfo, first int32, assignment [][]int32, brokers map[int32]BrokerInfo) (bool, error) {
	ops := make([]clientv3.Op, 0, len(assignment)+1)
	for i, replicas := range assignment {
		tp := TopicPartition{info.Name, first + int32(i)}
		ops = append(ops, clientv3.OpPut(s.keys.partition(tp), encode(initialState(replicas, brokers))))
	}
	limit := s.maxTxnOps - 1 // room for the version bump
	for len(ops)+1 > limit {
		resp, err := s.client.Txn(ctx).If(guard).Then(ops[:limit]...).Commit()
		if err != nil {
			return false, fmt.Errorf("etcd txn (%s): %w", reason, err)
		}
		if !resp.Succeeded {
			return false, nil
		}
		ops = ops[limit:]
	}
	ops = append(ops, clientv3.OpPut(s.keys.topic(info.Name), encode(info)))
	resp, err := s.commit(ctx, reason, []clientv3.Cmp{guard}, ops)
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// DeleteTopic removes a topic and all its partitions in one transaction.
func (s *Store) DeleteTopic(ctx context.Context, name string) error {
	if err := validTopicName(name); err != nil {
		return err
	}
	resp, err := s.commit(ctx, "delete topic "+name,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.keys.topic(name)), ">", 0)},
		[]clientv3.Op{
			clientv3.OpDelete(s.keys.topic(name)),
			clientv3.OpDelete(s.keys.partitionsOf(name), clientv3.WithPrefix()),
		})
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	logr.FromContextOrDiscard(ctx).Info("deleted topic", "topic", name)
	return nil
}

// CreatePartitions grows a topic to total partitions, placing the new ones
// so that the topic stays balanced (or per assignment, one replica list per
// new partition, when given). leaderZone, when set, pins the new preferred
// leaders to that zone (the caller resolves it as for TopicSpec.LeaderZone).
func (s *Store) CreatePartitions(ctx context.Context, name string, total int32, assignment [][]int32, leaderZone string) (TopicInfo, error) {
	for range casAttempts {
		st, err := s.Snapshot(ctx)
		if err != nil {
			return TopicInfo{}, err
		}
		info, ok := st.Topics[name]
		if !ok {
			return TopicInfo{}, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
		}
		if total <= info.Partitions {
			return TopicInfo{}, fmt.Errorf("%w: topic %s has %d partitions, cannot grow to %d", ErrInvalidPartitions, name, info.Partitions, total)
		}
		adding := int(total - info.Partitions)
		existing := make([][]int32, 0, info.Partitions)
		for _, p := range st.TopicPartitions(name) {
			existing = append(existing, p.Replicas)
		}
		if assignment != nil {
			if len(assignment) != adding {
				return TopicInfo{}, fmt.Errorf("%w: %d replica lists for %d new partitions", ErrInvalidReplicaAssignment, len(assignment), adding)
			}
			if err := checkAssignment(st, assignment, int(info.ReplicationFactor)); err != nil {
				return TopicInfo{}, err
			}
		} else {
			assignment, err = placement.Assign(placement.Request{
				Brokers:           st.placementBrokers(),
				Existing:          existing,
				Partitions:        adding,
				ReplicationFactor: int(info.ReplicationFactor),
				LeaderZone:        leaderZone,
				ClusterLoad:       st.placementLoad(name),
			})
			if err != nil {
				return TopicInfo{}, placementError(name, err)
			}
		}
		first := info.Partitions
		info.Partitions = total
		unchanged := clientv3.Compare(clientv3.ModRevision(s.keys.topic(name)), "=", st.topicRevs[name])
		ok, err = s.writePartitions(ctx, fmt.Sprintf("create partitions %s %d..%d", name, first, total-1), unchanged, info, first, assignment, st.Brokers)
		if err != nil {
			return TopicInfo{}, err
		}
		if ok {
			logr.FromContextOrDiscard(ctx).Info("created partitions", "topic", name, "from", first, "total", total)
			return info, nil
		}
	}
	return TopicInfo{}, fmt.Errorf("%w: topic %s kept changing while adding partitions", ErrStaleState, name)
}

// UpdateTopicConfig applies mutate to a copy of the topic's config and writes
// it back with compare-and-swap, retrying when the topic changed meanwhile.
// mutate may be called more than once; an error from it aborts the update.
func (s *Store) UpdateTopicConfig(ctx context.Context, name string, mutate func(config map[string]string) error) (TopicInfo, error) {
	for range casAttempts {
		resp, err := s.client.Get(ctx, s.keys.topic(name))
		if err != nil {
			return TopicInfo{}, fmt.Errorf("read topic %s: %w", name, err)
		}
		if len(resp.Kvs) == 0 {
			return TopicInfo{}, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
		}
		var info TopicInfo
		if err := json.Unmarshal(resp.Kvs[0].Value, &info); err != nil {
			return TopicInfo{}, fmt.Errorf("topic %s record: %w", name, err)
		}
		config := make(map[string]string, len(info.Config))
		for k, v := range info.Config {
			config[k] = v
		}
		if err := mutate(config); err != nil {
			return TopicInfo{}, err
		}
		info.Config = config
		tx, err := s.commit(ctx, "update config of topic "+name,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.topic(name)), "=", resp.Kvs[0].ModRevision)},
			[]clientv3.Op{clientv3.OpPut(s.keys.topic(name), encode(info))})
		if err != nil {
			return TopicInfo{}, err
		}
		if tx.Succeeded {
			return info, nil
		}
	}
	return TopicInfo{}, fmt.Errorf("%w: topic %s kept changing while updating its config", ErrStaleState, name)
}

// readPartition returns a partition's state and its etcd ModRevision.
func (s *Store) readPartition(ctx context.Context, tp TopicPartition) (PartitionState, int64, error) {
	resp, err := s.client.Get(ctx, s.keys.partition(tp))
	if err != nil {
		return PartitionState{}, 0, fmt.Errorf("read partition %s: %w", tp, err)
	}
	if len(resp.Kvs) == 0 {
		return PartitionState{}, 0, fmt.Errorf("%w: %s", ErrUnknownTopic, tp)
	}
	var st PartitionState
	if err := json.Unmarshal(resp.Kvs[0].Value, &st); err != nil {
		return PartitionState{}, 0, fmt.Errorf("partition %s record: %w", tp, err)
	}
	return st, resp.Kvs[0].ModRevision, nil
}

// PartitionState reads one partition's current state.
func (s *Store) PartitionState(ctx context.Context, tp TopicPartition) (PartitionState, error) {
	st, _, err := s.readPartition(ctx, tp)
	return st, err
}

// AlterPartition is the leader's ISR change (KIP-497 AlterPartition) done
// as a compare-and-swap: it succeeds only if the partition is still at
// expected's leader epoch and partition epoch, the proposal keeps the leader,
// leader epoch and replicas, every broker it adds to the ISR is registered
// (under the epoch proposed.ISREpochs gives for it, KIP-903), and the leader
// itself is still registered. It returns the stored state
// (partition epoch +1). When the partition moved on it returns the current
// state with ErrStaleState, so the leader can adopt it.
func (s *Store) AlterPartition(ctx context.Context, tp TopicPartition, expected, proposed PartitionState) (PartitionState, error) {
	for range casAttempts {
		cur, rev, err := s.readPartition(ctx, tp)
		if err != nil {
			return PartitionState{}, err
		}
		if cur.LeaderEpoch != expected.LeaderEpoch || cur.PartitionEpoch != expected.PartitionEpoch {
			return cur, fmt.Errorf("%w: %s is at leader epoch %d partition epoch %d, proposal expected %d/%d",
				ErrStaleState, tp, cur.LeaderEpoch, cur.PartitionEpoch, expected.LeaderEpoch, expected.PartitionEpoch)
		}
		next, added, err := checkAlterPartition(cur, proposed)
		if err != nil {
			return cur, fmt.Errorf("%s: %w", tp, err)
		}
		leaderRegistered := clientv3.Compare(clientv3.CreateRevision(s.keys.broker(cur.Leader)), ">", 0)
		if cur.LeaderBrokerEpoch != 0 {
			// The same incarnation that was given leadership.
			leaderRegistered = clientv3.Compare(clientv3.CreateRevision(s.keys.broker(cur.Leader)), "=", cur.LeaderBrokerEpoch)
		}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(s.keys.partition(tp)), "=", rev),
			leaderRegistered,
		}
		for _, id := range added {
			if e := next.ISREpoch(id); e != 0 {
				// KIP-903: the incarnation whose fetches the leader saw,
				// not one that restarted since (and may lack a tail).
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.broker(id)), "=", e))
				continue
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.broker(id)), ">", 0))
		}
		resp, err := s.commit(ctx, fmt.Sprintf("alter partition %s isr %v", tp, next.ISR), cmps,
			[]clientv3.Op{clientv3.OpPut(s.keys.partition(tp), encode(next))})
		if err != nil {
			return cur, err
		}
		if resp.Succeeded {
			return next, nil
		}
		// Lost a compare: find out which, so that the error says why.
		epochs, err := s.registrations(ctx, append([]int32{cur.Leader}, added...))
		if err != nil {
			return cur, err
		}
		if e := epochs[cur.Leader]; e == 0 || (cur.LeaderBrokerEpoch != 0 && e != cur.LeaderBrokerEpoch) {
			return cur, fmt.Errorf("%w: %s: leader %d is no longer registered under the epoch it was elected with (%d, now %d)",
				ErrStaleState, tp, cur.Leader, cur.LeaderBrokerEpoch, e)
		}
		for _, id := range added {
			if epochs[id] == 0 {
				return cur, fmt.Errorf("%s: %w: broker %d is not registered", tp, ErrIneligibleReplica, id)
			}
			if e := next.ISREpoch(id); e != 0 && epochs[id] != e {
				return cur, fmt.Errorf("%s: %w: broker %d is registered under epoch %d, not %d (it restarted)", tp, ErrIneligibleReplica, id, epochs[id], e)
			}
		}
		// The partition changed between read and write: loop to re-read, and
		// the epoch check above decides whether the proposal is stale.
	}
	return PartitionState{}, fmt.Errorf("%w: %s kept changing", ErrStaleState, tp)
}

// registrations returns the registration epoch of each of ids, 0 for a
// broker that is not registered.
func (s *Store) registrations(ctx context.Context, ids []int32) (map[int32]int64, error) {
	ops := make([]clientv3.Op, 0, len(ids))
	for _, id := range ids {
		ops = append(ops, clientv3.OpGet(s.keys.broker(id), clientv3.WithKeysOnly()))
	}
	resp, err := s.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("read broker registrations: %w", err)
	}
	out := make(map[int32]int64, len(ids))
	for i, r := range resp.Responses {
		if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
			out[ids[i]] = kvs[0].CreateRevision
		}
	}
	return out, nil
}

// ClusterID returns the cluster's Kafka cluster ID, creating it on first
// use (a random 16-byte UUID in Kafka's unpadded URL-safe base64, 22
// characters). Every broker gets the same one however many race to create it.
func (s *Store) ClusterID(ctx context.Context) (string, error) {
	id, err := newTopicID() // same shape as a topic ID: 16 random bytes
	if err != nil {
		return "", err
	}
	key := s.keys.clusterID()
	fresh := base64.RawURLEncoding.EncodeToString(id[:])
	resp, err := s.commit(ctx, "create cluster ID",
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, fresh)},
		clientv3.OpGet(key))
	if err != nil {
		return "", err
	}
	if resp.Succeeded {
		return fresh, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", fmt.Errorf("%w: cluster ID deleted concurrently", ErrStaleState)
	}
	return string(kvs[0].Value), nil
}

// UpdateBrokerConfig applies mutate to a copy of the dynamic configs of
// broker resource name (a broker ID, or "" for the cluster-wide defaults)
// and writes them back with compare-and-swap, retrying when they changed
// meanwhile; an empty result deletes the key. The caller validates names
// and values: this package stores them as given. mutate may be called more
// than once; an error from it aborts the update.
func (s *Store) UpdateBrokerConfig(ctx context.Context, name string, mutate func(config map[string]string) error) (map[string]string, error) {
	key := s.keys.brokerConfig(name)
	for range casAttempts {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read broker configs %q: %w", name, err)
		}
		config := map[string]string{}
		var rev int64
		if len(resp.Kvs) > 0 {
			rev = resp.Kvs[0].ModRevision
			if err := json.Unmarshal(resp.Kvs[0].Value, &config); err != nil {
				return nil, fmt.Errorf("broker configs %q record: %w", name, err)
			}
			if config == nil {
				config = map[string]string{}
			}
		}
		if err := mutate(config); err != nil {
			return nil, err
		}
		op := clientv3.OpPut(key, encode(config))
		if len(config) == 0 {
			op = clientv3.OpDelete(key)
		}
		// ModRevision 0 compares "the key does not exist".
		tx, err := s.commit(ctx, "update dynamic broker configs "+strconv.Quote(name),
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, []clientv3.Op{op})
		if err != nil {
			return nil, err
		}
		if tx.Succeeded {
			return config, nil
		}
	}
	return nil, fmt.Errorf("%w: broker configs %q kept changing while updating them", ErrStaleState, name)
}
