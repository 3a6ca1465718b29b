package group

import (
	"context"
	"errors"
	"sort"
	"sync"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// OffsetCommit is one committed offset of a group.
type OffsetCommit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // -1 when the client did not send one
	Metadata    string
	// CommitTimeMillis is the coordinator's clock at commit, Unix millis.
	CommitTimeMillis int64
	// TopicID is the topic's ID when the coordinator committed (zero:
	// unknown, a store that does not keep it). OffsetFetch does not
	// answer a commit whose topic ID differs from the topic's current
	// one: the topic was deleted and re-created under its name, and a
	// coordinator that did not handle the DeleteTopics never removed the
	// old topic's offsets.
	TopicID [16]byte
}

// OffsetStore persists committed offsets. A Coordinator calls it while
// holding the group's lock, so calls for one group never overlap; calls for
// different groups may run concurrently. A commit is acknowledged to the
// client only after Commit returned nil, so Commit must be durable when it
// returns.
type OffsetStore interface {
	// Load returns every group's committed offsets, keyed by group.
	Load(ctx context.Context) (map[string][]OffsetCommit, error)
	// Commit stores commits for group, replacing earlier commits of the
	// same partitions.
	Commit(ctx context.Context, group string, commits []OffsetCommit) error
	// DeleteOffsets removes the given partitions' commits of group.
	DeleteOffsets(ctx context.Context, group string, partitions []TopicPartition) error
	// DeleteGroup removes all commits of group.
	DeleteGroup(ctx context.Context, group string) error
}

// ErrClosed is returned by a closed store or coordinator.
var ErrClosed = errors.New("group: closed")

// ErrFenced is returned by a store shared by several brokers (a
// GroupClaimer) for a write of a group that another coordinator claimed
// after this one: this broker's view of the group is stale and it must not
// overwrite what the newer coordinator stored. The request gets
// NOT_COORDINATOR and the group is read again from the store.
var ErrFenced = errors.New("group: fenced: another coordinator claimed the group")

// MemoryStore is a non-durable OffsetStore for tests of other packages and
// for brokers started without a data directory.
type MemoryStore struct {
	mu      sync.Mutex
	offsets offsetState
	groups  map[string]GroupMetadata
	pending pendingState
	shares  map[string]ShareState // share-partition state (share_store.go)
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{offsets: offsetState{}, groups: map[string]GroupMetadata{}, pending: pendingState{}}
}

// SaveGroup implements MembershipStore.
func (s *MemoryStore) SaveGroup(_ context.Context, group string, md GroupMetadata) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil {
		s.groups = map[string]GroupMetadata{}
	}
	s.groups[group] = md
	return nil
}

// LoadGroups implements MembershipStore.
func (s *MemoryStore) LoadGroups(context.Context) (map[string]GroupMetadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]GroupMetadata, len(s.groups))
	for k, v := range s.groups {
		out[k] = v
	}
	return out, nil
}

// Load implements OffsetStore.
func (s *MemoryStore) Load(context.Context) (map[string][]OffsetCommit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offsets.snapshot(), nil
}

// Commit implements OffsetStore.
func (s *MemoryStore) Commit(_ context.Context, group string, commits []OffsetCommit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offsets.commit(group, commits)
	return nil
}

// DeleteOffsets implements OffsetStore.
func (s *MemoryStore) DeleteOffsets(_ context.Context, group string, partitions []TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offsets.deleteOffsets(group, partitions)
	return nil
}

// DeleteGroup implements OffsetStore.
func (s *MemoryStore) DeleteGroup(_ context.Context, group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.offsets, group)
	delete(s.groups, group)
	delete(s.pending, group)
	return nil
}

// offsetState is the committed offsets of all groups; not safe for
// concurrent use.
type offsetState map[string]map[TopicPartition]OffsetCommit

func (o offsetState) commit(group string, commits []OffsetCommit) {
	g := o[group]
	if g == nil {
		g = make(map[TopicPartition]OffsetCommit, len(commits))
		o[group] = g
	}
	for _, c := range commits {
		g[TopicPartition{c.Topic, c.Partition}] = c
	}
}

func (o offsetState) deleteOffsets(group string, partitions []TopicPartition) {
	g := o[group]
	for _, tp := range partitions {
		delete(g, tp)
	}
	if len(g) == 0 {
		delete(o, group)
	}
}

// snapshot returns a copy sorted by topic and partition, for determinism.
func (o offsetState) snapshot() map[string][]OffsetCommit {
	out := make(map[string][]OffsetCommit, len(o))
	for group, g := range o {
		out[group] = sortedCommits(g)
	}
	return out
}

func sortedCommits(g map[TopicPartition]OffsetCommit) []OffsetCommit {
	cs := make([]OffsetCommit, 0, len(g))
	for _, c := range g {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Topic != cs[j].Topic {
			return cs[i].Topic < cs[j].Topic
		}
		return cs[i].Partition < cs[j].Partition
	})
	return cs
}
