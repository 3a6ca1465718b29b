package offsets

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta"
)

// defaultPageSize bounds each range read of Load.
const defaultPageSize = 1000

// Store implements group.OffsetStore on etcd.
type Store struct {
	client *clientv3.Client
	prefix string // /strata/<cluster>/offsets/
	groups string // /strata/<cluster>/groups/
	// txnOffsets holds pending transactional commits (txn.go).
	txnOffsets string
	maxTxnOps  int
	pageSize   int64
}

var (
	_ group.OffsetStore     = (*Store)(nil)
	_ group.MembershipStore = (*Store)(nil)
)

// New returns the offset store of the cluster that ms belongs to.
func New(ms *meta.Store) *Store {
	return &Store{client: ms.Client(), prefix: ms.OffsetsPrefix(), groups: ms.GroupsPrefix(), txnOffsets: ms.TxnOffsetsPrefix(), maxTxnOps: meta.DefaultMaxTxnOps, pageSize: defaultPageSize}
}

type record struct {
	Offset           int64  `json:"offset"`
	LeaderEpoch      int32  `json:"leaderEpoch"`
	Metadata         string `json:"metadata,omitempty"`
	CommitTimeMillis int64  `json:"commitTimeMillis"`
}

func (s *Store) groupPrefix(g string) string { return s.prefix + url.PathEscape(g) + "/" }

func (s *Store) key(g, topic string, partition int32) string {
	return s.groupPrefix(g) + topic + "/" + strconv.Itoa(int(partition))
}

// Load implements group.OffsetStore. It reads at one etcd revision, page by
// page, so the result is a consistent snapshot.
func (s *Store) Load(ctx context.Context) (map[string][]group.OffsetCommit, error) {
	out := map[string][]group.OffsetCommit{}
	log := logr.FromContextOrDiscard(ctx)
	err := s.scan(ctx, s.prefix, func(key string, value []byte) {
		g, c, err := s.decode(key, value)
		if err != nil {
			// One bad record must not lose every group's offsets.
			log.Error(err, "skipping offset record that does not decode", "key", key)
			return
		}
		out[g] = append(out[g], c)
	})
	if err != nil {
		return nil, fmt.Errorf("load offsets: %w", err)
	}
	// Keys sort as strings ("10" before "2"); order like the other stores:
	// by topic, then partition number.
	for _, cs := range out {
		slices.SortFunc(cs, func(a, b group.OffsetCommit) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
	}
	return out, nil
}

// scan calls fn for every key under prefix, in pages of s.pageSize, all read
// at the revision of the first page.
func (s *Store) scan(ctx context.Context, prefix string, fn func(key string, value []byte)) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(s.pageSize)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(ctx, from, opts...)
		if err != nil {
			return err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			fn(string(kv.Key), kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func (s *Store) decode(key string, value []byte) (string, group.OffsetCommit, error) {
	rest := strings.TrimPrefix(key, s.prefix)
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return "", group.OffsetCommit{}, fmt.Errorf("offset key %q: want <group>/<topic>/<partition>", key)
	}
	g, err := url.PathUnescape(parts[0])
	if err != nil {
		return "", group.OffsetCommit{}, fmt.Errorf("offset key %q: group: %w", key, err)
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil {
		return "", group.OffsetCommit{}, fmt.Errorf("offset key %q: partition: %w", key, err)
	}
	var r record
	if err := json.Unmarshal(value, &r); err != nil {
		return "", group.OffsetCommit{}, fmt.Errorf("offset key %q: %w", key, err)
	}
	return g, group.OffsetCommit{
		Topic: parts[1], Partition: int32(p), Offset: r.Offset, LeaderEpoch: r.LeaderEpoch,
		Metadata: r.Metadata, CommitTimeMillis: r.CommitTimeMillis,
	}, nil
}

// Commit implements group.OffsetStore.
func (s *Store) Commit(ctx context.Context, g string, commits []group.OffsetCommit) error {
	// etcd refuses a transaction that names a key twice; the last commit of
	// a partition wins, as it would applied in order.
	last := make(map[group.TopicPartition]int, len(commits))
	for i, c := range commits {
		last[group.TopicPartition{Topic: c.Topic, Partition: c.Partition}] = i
	}
	ops := make([]clientv3.Op, 0, len(commits))
	for i, c := range commits {
		if last[group.TopicPartition{Topic: c.Topic, Partition: c.Partition}] != i {
			continue
		}
		if c.Topic == "" || strings.Contains(c.Topic, "/") {
			return fmt.Errorf("commit offsets of group %q: invalid topic name %q", g, c.Topic)
		}
		b, err := json.Marshal(record{Offset: c.Offset, LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata, CommitTimeMillis: c.CommitTimeMillis})
		if err != nil {
			return fmt.Errorf("commit offsets of group %q: %w", g, err)
		}
		ops = append(ops, clientv3.OpPut(s.key(g, c.Topic, c.Partition), string(b)))
	}
	return s.apply(ctx, "commit offsets of group "+g, ops)
}

// DeleteOffsets implements group.OffsetStore.
func (s *Store) DeleteOffsets(ctx context.Context, g string, partitions []group.TopicPartition) error {
	ops := make([]clientv3.Op, 0, len(partitions))
	seen := make(map[group.TopicPartition]bool, len(partitions))
	for _, tp := range partitions {
		if !seen[tp] {
			seen[tp] = true
			ops = append(ops, clientv3.OpDelete(s.key(g, tp.Topic, tp.Partition)))
		}
	}
	return s.apply(ctx, "delete offsets of group "+g, ops)
}

// DeleteGroup implements group.OffsetStore: the group's offsets and its
// membership go in one transaction.
func (s *Store) DeleteGroup(ctx context.Context, g string) error {
	_, err := s.client.Txn(ctx).Then(
		clientv3.OpDelete(s.groupPrefix(g), clientv3.WithPrefix()),
		clientv3.OpDelete(s.groups+url.PathEscape(g)),
		clientv3.OpDelete(s.txnOffsets+url.PathEscape(g)+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return fmt.Errorf("delete group %q: %w", g, err)
	}
	return nil
}

// SaveGroup implements group.MembershipStore.
func (s *Store) SaveGroup(ctx context.Context, g string, md group.GroupMetadata) error {
	b, err := json.Marshal(md)
	if err != nil {
		return fmt.Errorf("save group %q: %w", g, err)
	}
	if _, err := s.client.Put(ctx, s.groups+url.PathEscape(g), string(b)); err != nil {
		return fmt.Errorf("save group %q: %w", g, err)
	}
	return nil
}

// LoadGroups implements group.MembershipStore, reading page by page at one
// revision. Records that do not decode are logged and skipped: the group
// then starts Empty and its members rejoin.
func (s *Store) LoadGroups(ctx context.Context) (map[string]group.GroupMetadata, error) {
	out := map[string]group.GroupMetadata{}
	log := logr.FromContextOrDiscard(ctx)
	err := s.scan(ctx, s.groups, func(key string, value []byte) {
		g, err := url.PathUnescape(strings.TrimPrefix(key, s.groups))
		var md group.GroupMetadata
		if err == nil {
			err = json.Unmarshal(value, &md)
		}
		if err != nil {
			log.Error(err, "skipping group membership record that does not decode", "key", key)
			return
		}
		out[g] = md
	})
	if err != nil {
		return nil, fmt.Errorf("load group membership: %w", err)
	}
	return out, nil
}

// apply runs ops in transactions of at most maxTxnOps.
func (s *Store) apply(ctx context.Context, what string, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), s.maxTxnOps)
		if _, err := s.client.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		ops = ops[n:]
	}
	return nil
}
