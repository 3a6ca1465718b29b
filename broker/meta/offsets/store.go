package offsets

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta"
)

// defaultPageSize bounds each range read of Load.
const defaultPageSize = 1000

// Store implements group.OffsetStore on etcd.
//
// A Store serves one group coordinator (one broker): the claims it holds
// (group.GroupClaimer) are that coordinator's, and every write of a group
// is an etcd transaction that holds only while the group's claim key is
// still the one this Store wrote. A coordinator deposed by another one's
// claim gets group.ErrFenced instead of overwriting the newer
// coordinator's offsets or membership.
type Store struct {
	client *clientv3.Client
	prefix string // /strata/<cluster>/offsets/
	groups string // /strata/<cluster>/groups/
	// txnOffsets holds pending transactional commits (txn.go).
	txnOffsets string
	// claimsPrefix holds one key per group, written by the coordinator
	// that claims it (ClaimGroup).
	claimsPrefix string
	maxTxnOps    int
	pageSize     int64

	mu sync.Mutex
	// claims is the etcd revision of this Store's latest claim of each
	// group, guarded by mu.
	claims map[string]int64
}

var (
	_ group.OffsetStore     = (*Store)(nil)
	_ group.MembershipStore = (*Store)(nil)
	_ group.GroupClaimer    = (*Store)(nil)
)

// New returns the offset store of the cluster that ms belongs to.
func New(ms *meta.Store) *Store {
	return &Store{client: ms.Client(), prefix: ms.OffsetsPrefix(), groups: ms.GroupsPrefix(), txnOffsets: ms.TxnOffsetsPrefix(),
		claimsPrefix: ms.GroupClaimsPrefix(), maxTxnOps: meta.DefaultMaxTxnOps, pageSize: defaultPageSize, claims: map[string]int64{}}
}

func (s *Store) claimKey(g string) string { return s.claimsPrefix + url.PathEscape(g) }

// ClaimGroup implements group.GroupClaimer: it writes the group's claim
// key, which fences the writes of every coordinator that claimed the group
// before. kept reports that the key was still this Store's previous claim.
func (s *Store) ClaimGroup(ctx context.Context, g string) (bool, error) {
	resp, err := s.client.Put(ctx, s.claimKey(g), "", clientv3.WithPrevKV())
	if err != nil {
		return false, fmt.Errorf("claim group %q: %w", g, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, had := s.claims[g]
	kept := had && resp.PrevKv != nil && resp.PrevKv.ModRevision == prev
	s.claims[g] = resp.Header.Revision
	return kept, nil
}

// claimHeld is the condition of every write of group g: its claim key is
// the one this Store wrote last or, when this Store never claimed g, no
// coordinator has claimed it.
func (s *Store) claimHeld(g string) clientv3.Cmp {
	s.mu.Lock()
	rev, ok := s.claims[g]
	s.mu.Unlock()
	if !ok {
		return clientv3.Compare(clientv3.CreateRevision(s.claimKey(g)), "=", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(s.claimKey(g)), "=", rev)
}

type record struct {
	Offset           int64  `json:"offset"`
	LeaderEpoch      int32  `json:"leaderEpoch"`
	Metadata         string `json:"metadata,omitempty"`
	CommitTimeMillis int64  `json:"commitTimeMillis"`
	// TopicID is the committed topic's ID (hex) when the coordinator
	// knew it: a re-created topic of the same name has another
	// (group.OffsetCommit.TopicID). Absent in records of older brokers.
	TopicID string `json:"topicID,omitempty"`
}

// recordOf is the stored form of c.
func recordOf(c group.OffsetCommit) record {
	r := record{Offset: c.Offset, LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata, CommitTimeMillis: c.CommitTimeMillis}
	if c.TopicID != ([16]byte{}) {
		r.TopicID = hex.EncodeToString(c.TopicID[:])
	}
	return r
}

// commit is the OffsetCommit of r for a topic partition. A topic ID that
// does not decode is dropped (the commit then holds for any topic of the
// name, as an older broker's).
func (r record) commit(topic string, partition int32) group.OffsetCommit {
	c := group.OffsetCommit{Topic: topic, Partition: partition, Offset: r.Offset, LeaderEpoch: r.LeaderEpoch,
		Metadata: r.Metadata, CommitTimeMillis: r.CommitTimeMillis}
	if id, err := hex.DecodeString(r.TopicID); err == nil && len(id) == 16 {
		copy(c.TopicID[:], id)
	}
	return c
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
	return g, r.commit(parts[1], int32(p)), nil
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
		b, err := json.Marshal(recordOf(c))
		if err != nil {
			return fmt.Errorf("commit offsets of group %q: %w", g, err)
		}
		ops = append(ops, clientv3.OpPut(s.key(g, c.Topic, c.Partition), string(b)))
	}
	return s.applyClaimed(ctx, "commit offsets of group "+g, g, ops)
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
	return s.applyClaimed(ctx, "delete offsets of group "+g, g, ops)
}

// DeleteGroup implements group.OffsetStore: the group's offsets, its
// membership and its claim go in one transaction.
func (s *Store) DeleteGroup(ctx context.Context, g string) error {
	resp, err := s.client.Txn(ctx).If(s.claimHeld(g)).Then(
		clientv3.OpDelete(s.groupPrefix(g), clientv3.WithPrefix()),
		clientv3.OpDelete(s.groups+url.PathEscape(g)),
		clientv3.OpDelete(s.txnOffsets+url.PathEscape(g)+"/", clientv3.WithPrefix()),
		clientv3.OpDelete(s.claimKey(g)),
	).Commit()
	if err != nil {
		return fmt.Errorf("delete group %q: %w", g, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("delete group %q: %w", g, group.ErrFenced)
	}
	s.mu.Lock()
	delete(s.claims, g)
	s.mu.Unlock()
	return nil
}

// SaveGroup implements group.MembershipStore.
func (s *Store) SaveGroup(ctx context.Context, g string, md group.GroupMetadata) error {
	b, err := json.Marshal(md)
	if err != nil {
		return fmt.Errorf("save group %q: %w", g, err)
	}
	return s.applyClaimed(ctx, "save group "+g, g, []clientv3.Op{clientv3.OpPut(s.groups+url.PathEscape(g), string(b))})
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

// applyClaimed runs ops of group g in transactions of at most maxTxnOps,
// each applied only while this Store's claim of g holds (claimHeld);
// otherwise it returns group.ErrFenced.
func (s *Store) applyClaimed(ctx context.Context, what, g string, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), s.maxTxnOps)
		resp, err := s.client.Txn(ctx).If(s.claimHeld(g)).Then(ops[:n]...).Commit()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("%s: %w", what, group.ErrFenced)
		}
		ops = ops[n:]
	}
	return nil
}
