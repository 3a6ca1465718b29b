package group

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit handles OffsetCommit v0-v9. Commits with generation -1 and
// an empty member id ("simple" commits, also v0) are accepted only while
// the group has no members; others must come from a member of the current
// generation. A commit is acknowledged after the OffsetStore persisted it.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = req.Version
	setAll := func(code int16) {
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	generation, memberID := int32(-1), ""
	if req.Version >= 1 {
		generation, memberID = req.Generation, req.MemberID
	}
	var instanceID string
	if req.Version >= 7 && req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	if req.Group == "" {
		setAll(kerr.InvalidGroupID.Code)
		return resp
	}
	if !c.owns(req.Group) {
		setAll(kerr.NotCoordinator.Code)
		return resp
	}
	g, share := c.lockGroupNotShare(req.Group, generation < 0)
	if share {
		setAll(kerr.GroupIDNotFound.Code)
		return resp
	}
	if g == nil {
		if c.isClosed() {
			setAll(kerr.NotCoordinator.Code)
		} else {
			setAll(kerr.IllegalGeneration.Code) // as Kafka: a group we do not know cannot have this generation
		}
		return resp
	}
	defer g.mu.Unlock()
	code := int16(0)
	var partCheck func(string, int32) int16
	if g.consumer != nil {
		// The generation field carries the member epoch (KIP-848).
		code, partCheck = g.validateConsumerCommit(generation, memberID, req.Version, false)
	} else {
		code = g.validateCommit(generation, memberID, instanceID)
	}
	if code != 0 {
		setAll(code)
		return resp
	}
	now := c.clock.Now().UnixMilli()
	var accepted []OffsetCommit
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			leaderEpoch := int32(-1)
			if req.Version >= 6 {
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
	if len(accepted) > 0 {
		if err := c.store.Commit(ctx, g.id, accepted); err != nil {
			c.log.Error(err, "persisting offset commit failed", "group", g.id)
			// Retriable: the client commits again, after finding the
			// coordinator again when this one was fenced.
			code := g.storeFailed(err)
			for i := range codes {
				for j := range codes[i] {
					if codes[i][j] == 0 {
						codes[i][j] = code
					}
				}
			}
			accepted = nil
		}
	}
	for _, oc := range accepted {
		g.offsets[TopicPartition{oc.Topic, oc.Partition}] = oc
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// validateCommit is the membership check of Kafka's handleCommitOffsets.
func (g *group) validateCommit(generation int32, memberID, instanceID string) int16 {
	if g.isFenced(instanceID, memberID) {
		return kerr.FencedInstanceID.Code
	}
	if generation < 0 && g.state == stateEmpty {
		return 0 // the group only stores offsets
	}
	if g.state == stateCompletingRebalance {
		// The member has its new generation but not its assignment yet.
		return kerr.RebalanceInProgress.Code
	}
	m := g.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	g.resetSession(m, m.sessionTimeout)
	return 0
}

// OffsetFetch handles OffsetFetch v0-v9 (v8+: several groups per request).
// Partitions without a commit, and unknown groups, report offset -1.
func (c *Coordinator) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = req.Version
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []kmsg.OffsetFetchRequestTopic
			if rg.Topics != nil {
				topics = make([]kmsg.OffsetFetchRequestTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			member := groupMember{epoch: -1}
			if req.Version >= 9 {
				member = groupMember{id: rg.MemberID, epoch: rg.MemberEpoch}
			}
			code, fetched := c.fetchOffsets(rg.Group, topics, req.RequireStable, member)
			og := kmsg.NewOffsetFetchResponseGroup()
			og.Group = rg.Group
			og.ErrorCode = code
			for _, t := range fetched {
				ot := kmsg.NewOffsetFetchResponseGroupTopic()
				ot.Topic = t.Topic
				for _, p := range t.Partitions {
					op := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					op.Partition, op.Offset, op.LeaderEpoch, op.Metadata, op.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					ot.Partitions = append(ot.Partitions, op)
				}
				og.Topics = append(og.Topics, ot)
			}
			resp.Groups = append(resp.Groups, og)
		}
		return resp
	}
	topics := req.Topics
	if req.Version < 2 && topics == nil {
		topics = []kmsg.OffsetFetchRequestTopic{} // v0/v1 cannot ask for all
	}
	code, fetched := c.fetchOffsets(req.Group, topics, req.Version >= 7 && req.RequireStable, groupMember{epoch: -1})
	if req.Version >= 2 {
		resp.ErrorCode = code
	} else if code != 0 {
		for i := range fetched {
			for j := range fetched[i].Partitions {
				fetched[i].Partitions[j].ErrorCode = code
			}
		}
	}
	resp.Topics = fetched
	return resp
}

// fetchOffsets returns a group-level error code and the offsets of the
// requested topics (nil topics: every committed partition). With
// requireStable (OffsetFetch v7+, KIP-447) a partition a transaction has
// pending offsets for answers UNSTABLE_OFFSET_COMMIT: the client retries
// until the transaction ended.
func (c *Coordinator) fetchOffsets(groupID string, topics []kmsg.OffsetFetchRequestTopic, requireStable bool, member groupMember) (int16, []kmsg.OffsetFetchResponseTopic) {
	unknown := func(code int16) []kmsg.OffsetFetchResponseTopic {
		var out []kmsg.OffsetFetchResponseTopic
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				empty := ""
				rp.Metadata = &empty
				rt.Partitions = append(rt.Partitions, rp)
			}
			out = append(out, rt)
		}
		return out
	}
	if groupID == "" {
		return kerr.InvalidGroupID.Code, unknown(0)
	}
	if !c.owns(groupID) {
		return kerr.NotCoordinator.Code, unknown(0)
	}
	g := c.lockGroup(groupID, false)
	if g == nil {
		if c.isClosed() {
			return kerr.NotCoordinator.Code, unknown(0)
		}
		return 0, unknown(0)
	}
	defer g.mu.Unlock()
	if g.consumer != nil {
		// OffsetFetch v9+ of a consumer-protocol member must carry its
		// current epoch (KIP-848); classic groups ignore the fields.
		if code := g.validateConsumerFetch(member.id, member.epoch); code != 0 {
			return code, unknown(0)
		}
	}
	if topics == nil {
		byTopic := make(map[string][]int32)
		for _, oc := range sortedCommits(g.offsets) {
			if c.staleCommit(oc) {
				continue
			}
			byTopic[oc.Topic] = append(byTopic[oc.Topic], oc.Partition)
			if len(byTopic[oc.Topic]) == 1 {
				topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: oc.Topic})
			}
		}
		for i := range topics {
			topics[i].Partitions = byTopic[topics[i].Topic]
		}
	}
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset = p, -1
			meta := ""
			if oc, ok := g.offsets[TopicPartition{t.Topic, p}]; ok && !c.staleCommit(oc) {
				rp.Offset, rp.LeaderEpoch, meta = oc.Offset, oc.LeaderEpoch, oc.Metadata
			}
			if requireStable && g.hasPendingTxn(TopicPartition{t.Topic, p}) {
				rp.Offset, rp.ErrorCode = -1, kerr.UnstableOffsetCommit.Code
			}
			rp.Metadata = &meta
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return 0, out
}

// staleCommit reports whether oc was committed to an earlier topic of its
// name: the topic exists now under another ID. The DeleteTopics handler
// removes a deleted topic's offsets only from the groups its own broker
// coordinates (DeleteTopicOffsets); the others keep them, and without
// this a group would resume a re-created topic from them (skipping its
// first records, or reading from an offset past its end). A topic that
// does not exist in this broker's metadata keeps its commits: a view that
// lags must not make consumers reset their positions.
func (c *Coordinator) staleCommit(oc OffsetCommit) bool {
	if oc.TopicID == ([16]byte{}) || c.cfg.TopicID == nil {
		return false
	}
	id, ok := c.cfg.TopicID(oc.Topic)
	return ok && id != ([16]byte{}) && id != oc.TopicID
}

// groupMember is the member id and epoch an OffsetFetch v9+ carries.
type groupMember struct {
	id    *string
	epoch int32
}

// OffsetDelete handles OffsetDelete v0 (KIP-496): committed offsets of an
// empty group can be deleted; in an active consumer group only those of
// topics no member subscribes to.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = req.Version
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	if !c.owns(req.Group) {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		if c.isClosed() {
			resp.ErrorCode = kerr.NotCoordinator.Code
		}
		return resp
	}
	defer g.mu.Unlock()
	var subscribed map[string]bool
	if g.consumer != nil {
		if len(g.consumer.members) > 0 {
			subscribed = g.subscribedConsumerTopics()
		}
	} else if g.state != stateEmpty {
		topics, ok := g.subscribedTopics()
		if !ok {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return resp
		}
		subscribed = topics
	}
	var del []TopicPartition
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case subscribed[t.Topic]:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				del = append(del, TopicPartition{t.Topic, p.Partition})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(del) > 0 {
		if err := c.store.DeleteOffsets(ctx, g.id, del); err != nil {
			c.log.Error(err, "persisting offset delete failed", "group", g.id)
			resp.ErrorCode = g.storeFailed(err)
			resp.Topics = nil
			return resp
		}
		for _, tp := range del {
			delete(g.offsets, tp)
		}
	}
	return resp
}

// DeleteTopicOffsets removes every group's committed offsets of a deleted
// topic, as Kafka does when a topic is deleted, so that a topic re-created
// under the same name does not resume from stale offsets. It returns the
// number of partitions whose offsets were removed. A group another
// coordinator claimed (ErrFenced) is skipped: this broker may not write
// it. (In a cluster nothing yet removes such a group's offsets of the
// topic: its coordinator does not learn of the deletion.)
func (c *Coordinator) DeleteTopicOffsets(ctx context.Context, topic string) (int, error) {
	removed := 0
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		var tps []TopicPartition
		for tp := range g.offsets {
			if tp.Topic == topic {
				tps = append(tps, tp)
			}
		}
		if len(tps) > 0 && g.state != stateDead {
			if err := c.store.DeleteOffsets(ctx, g.id, tps); err != nil {
				if g.storeFailed(err) == kerr.NotCoordinator.Code {
					g.mu.Unlock()
					continue
				}
				g.mu.Unlock()
				return removed, fmt.Errorf("group: delete offsets of topic %s in group %s: %w", topic, g.id, err)
			}
			for _, tp := range tps {
				delete(g.offsets, tp)
			}
			removed += len(tps)
		}
		g.mu.Unlock()
	}
	return removed, nil
}

// offsetCommit checks one partition's commit (OffsetCommit and
// TxnOffsetCommit alike): the code refusing it, or 0 and the commit to
// store.
func (c *Coordinator) offsetCommit(topic string, partition int32, offset int64, leaderEpoch int32, metadata *string, now int64) (OffsetCommit, int16) {
	switch {
	case c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(topic, partition):
		return OffsetCommit{}, kerr.UnknownTopicOrPartition.Code
	case metadata != nil && len(*metadata) > c.cfg.MaxMetadataBytes:
		return OffsetCommit{}, kerr.OffsetMetadataTooLarge.Code
	}
	oc := OffsetCommit{Topic: topic, Partition: partition, Offset: offset, LeaderEpoch: leaderEpoch, CommitTimeMillis: now}
	if c.cfg.TopicID != nil {
		if id, ok := c.cfg.TopicID(topic); ok {
			oc.TopicID = id
		}
	}
	if metadata != nil {
		oc.Metadata = *metadata
	}
	return oc, 0
}
