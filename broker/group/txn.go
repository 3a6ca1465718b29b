package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (KIP-98, KIP-447).
//
// TxnOffsetCommit keeps a producer's offsets pending in the group: they are
// persisted (TxnOffsetStore) but not visible to OffsetFetch. The
// transaction coordinator completes them with CompleteTxn when the
// transaction ends: on commit they become the group's committed offsets,
// on abort they are dropped. While a partition has pending offsets, an
// OffsetFetch with RequireStable gets UNSTABLE_OFFSET_COMMIT for it (the
// client retries), so a consumer taking over never starts from offsets a
// transaction is about to replace.

// OffsetsTopic is the topic name transaction markers for group offsets
// carry (Kafka's __consumer_offsets): a WriteTxnMarkers request naming it
// completes the producer's pending offsets at the receiving group
// coordinator instead of writing to a partition.
const OffsetsTopic = "__consumer_offsets"

// TxnOffsetStore is implemented by an OffsetStore that persists pending
// transactional offsets. Without it they are kept in memory only.
type TxnOffsetStore interface {
	// CommitPending stores commits of producerID as pending for group,
	// replacing earlier pending commits of the same partitions.
	CommitPending(ctx context.Context, group string, producerID int64, commits []OffsetCommit) error
	// CompletePending atomically makes producerID's pending commits of
	// group committed (commit) or drops them.
	CompletePending(ctx context.Context, group string, producerID int64, commit bool) error
	// LoadPending returns every group's pending commits per producer ID.
	LoadPending(ctx context.Context) (map[string]map[int64][]OffsetCommit, error)
}

// TxnOffsetCommit handles TxnOffsetCommit v0-v4. The transaction must
// have added the group (AddOffsetsToTxn) before; that, and the producer
// epoch, are the transaction coordinator's to check (verify, when set).
// v3+ (KIP-447) carries the member's generation, checked like
// OffsetCommit's when the producer sends one.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = req.Version
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	setAll := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				codes[i][j] = code
			}
		}
	}
	build := func() *kmsg.TxnOffsetCommitResponse {
		for i, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	switch {
	case req.Group == "":
		setAll(kerr.InvalidGroupID.Code)
		return build()
	case !c.owns(req.Group):
		setAll(kerr.NotCoordinator.Code)
		return build()
	}
	g, share := c.lockGroupNotShare(req.Group, true)
	if share {
		setAll(kerr.GroupIDNotFound.Code)
		return build()
	}
	if g == nil {
		setAll(kerr.NotCoordinator.Code)
		return build()
	}
	defer g.mu.Unlock()
	var partCheck func(string, int32) int16
	if req.Version >= 3 && (req.MemberID != "" || req.Generation >= 0) {
		var instanceID string
		if req.InstanceID != nil {
			instanceID = *req.InstanceID
		}
		code := int16(0)
		if g.consumer != nil {
			code, partCheck = g.validateConsumerCommit(req.Generation, req.MemberID, req.Version, true)
		} else {
			code = g.validateCommit(req.Generation, req.MemberID, instanceID)
		}
		if code != 0 {
			setAll(code)
			return build()
		}
	}
	now := c.clock.Now().UnixMilli()
	var accepted []OffsetCommit
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			leaderEpoch := int32(-1)
			if req.Version >= 2 {
				leaderEpoch = p.LeaderEpoch
			}
			if partCheck != nil {
				if code := partCheck(t.Topic, p.Partition); code != 0 {
					codes[i][j] = code
					continue
				}
			}
			oc, code := c.offsetCommit(t.Topic, p.Partition, p.Offset, leaderEpoch, p.Metadata, now)
			if code != 0 {
				codes[i][j] = code
				continue
			}
			accepted = append(accepted, oc)
		}
	}
	if len(accepted) == 0 {
		return build()
	}
	if ts, ok := c.store.(TxnOffsetStore); ok {
		if err := ts.CommitPending(ctx, g.id, req.ProducerID, accepted); err != nil {
			c.log.Error(err, "persisting transactional offset commit failed", "group", g.id, "producerID", req.ProducerID)
			code := g.storeFailed(err) // retriable
			for i := range codes {
				for j := range codes[i] {
					if codes[i][j] == 0 {
						codes[i][j] = code
					}
				}
			}
			return build()
		}
	}
	pending := g.txnOffsets[req.ProducerID]
	if pending == nil {
		pending = make(map[TopicPartition]OffsetCommit, len(accepted))
		g.txnOffsets[req.ProducerID] = pending
	}
	for _, oc := range accepted {
		pending[TopicPartition{oc.Topic, oc.Partition}] = oc
	}
	return build()
}

// CompleteTxn ends producerID's transaction in every group it has pending
// offsets in: committed (commit) or dropped. It is the group side of a
// WriteTxnMarkers for OffsetsTopic and is idempotent: a producer without
// pending offsets is a no-op. An error (the store failed) leaves the
// pending offsets in place; the transaction coordinator retries.
func (c *Coordinator) CompleteTxn(ctx context.Context, producerID int64, commit bool) error {
	if c.isClosed() {
		return ErrClosed
	}
	var ids []string
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		if _, ok := g.txnOffsets[producerID]; ok {
			ids = append(ids, g.id)
		}
		g.mu.Unlock()
	}
	if ts, ok := c.store.(TxnOffsetStore); ok && c.cfg.OwnershipEpoch != nil {
		// A group taken over from another coordinator may not be in
		// memory yet: its pending offsets are only in the store.
		all, err := ts.LoadPending(ctx)
		if err != nil {
			return fmt.Errorf("group: find pending offsets of producer %d: %w", producerID, err)
		}
		for id, byPID := range all {
			if _, ok := byPID[producerID]; ok && c.owns(id) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		g := c.lockGroup(id, true)
		if g == nil {
			continue
		}
		err := g.completeTxn(ctx, producerID, commit)
		g.mu.Unlock()
		if errors.Is(err, ErrFenced) {
			// Another broker coordinates the group now and completes
			// the transaction's offsets there.
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// completeTxn applies the outcome to one group. Callers hold g.mu.
func (g *group) completeTxn(ctx context.Context, producerID int64, commit bool) error {
	pending, ok := g.txnOffsets[producerID]
	if !ok || g.state == stateDead {
		return nil
	}
	if ts, ok := g.c.store.(TxnOffsetStore); ok {
		if err := ts.CompletePending(ctx, g.id, producerID, commit); err != nil {
			g.storeFailed(err)
			return fmt.Errorf("group: complete transactional offsets of producer %d in group %s: %w", producerID, g.id, err)
		}
	} else if commit {
		if err := g.c.store.Commit(ctx, g.id, slices.Collect(maps.Values(pending))); err != nil {
			g.storeFailed(err)
			return fmt.Errorf("group: commit transactional offsets of producer %d in group %s: %w", producerID, g.id, err)
		}
	}
	if commit {
		for tp, oc := range pending {
			g.offsets[tp] = oc
		}
	}
	delete(g.txnOffsets, producerID)
	return nil
}

// hasPendingTxn reports whether a transaction has pending offsets for tp.
// Callers hold g.mu.
func (g *group) hasPendingTxn(tp TopicPartition) bool {
	for _, pending := range g.txnOffsets {
		if _, ok := pending[tp]; ok {
			return true
		}
	}
	return false
}

// restorePending installs loaded pending commits. Callers hold g.mu.
func (g *group) restorePending(byProducer map[int64][]OffsetCommit) {
	clear(g.txnOffsets)
	for pid, cs := range byProducer {
		m := make(map[TopicPartition]OffsetCommit, len(cs))
		for _, oc := range cs {
			m[TopicPartition{oc.Topic, oc.Partition}] = oc
		}
		g.txnOffsets[pid] = m
	}
}

// pendingState is the pending transactional offsets of all groups, per
// producer ID; not safe for concurrent use (the stores lock around it).
type pendingState map[string]map[int64]map[TopicPartition]OffsetCommit

func (p pendingState) add(group string, producerID int64, commits []OffsetCommit) {
	g := p[group]
	if g == nil {
		g = map[int64]map[TopicPartition]OffsetCommit{}
		p[group] = g
	}
	m := g[producerID]
	if m == nil {
		m = map[TopicPartition]OffsetCommit{}
		g[producerID] = m
	}
	for _, c := range commits {
		m[TopicPartition{c.Topic, c.Partition}] = c
	}
}

// complete removes producerID's pending commits of group and returns
// them.
func (p pendingState) complete(group string, producerID int64) []OffsetCommit {
	g := p[group]
	m := g[producerID]
	delete(g, producerID)
	if len(g) == 0 {
		delete(p, group)
	}
	return sortedCommits(m)
}

func (p pendingState) snapshot() map[string]map[int64][]OffsetCommit {
	out := make(map[string]map[int64][]OffsetCommit, len(p))
	for group, byPID := range p {
		o := make(map[int64][]OffsetCommit, len(byPID))
		for pid, m := range byPID {
			o[pid] = sortedCommits(m)
		}
		out[group] = o
	}
	return out
}

// CommitPending implements TxnOffsetStore.
func (s *MemoryStore) CommitPending(_ context.Context, group string, producerID int64, commits []OffsetCommit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = pendingState{}
	}
	s.pending.add(group, producerID, commits)
	return nil
}

// CompletePending implements TxnOffsetStore.
func (s *MemoryStore) CompletePending(_ context.Context, group string, producerID int64, commit bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.pending.complete(group, producerID)
	if commit && len(cs) > 0 {
		s.offsets.commit(group, cs)
	}
	return nil
}

// LoadPending implements TxnOffsetStore.
func (s *MemoryStore) LoadPending(context.Context) (map[string]map[int64][]OffsetCommit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending.snapshot(), nil
}
