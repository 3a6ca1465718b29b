package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Share sessions and the share-partition operations behind ShareFetch and
// ShareAcknowledge.
//
// A share session (Kafka's ShareSessionCache) is keyed by group and member
// id. Epoch 0 opens one (replacing and releasing an older one of the same
// member); the session then lists the partitions the member fetches, so
// later requests (epoch 1, 2, … wrapping to 1) name only the partitions
// they add or forget. Epoch -1 (final) closes it after its
// acknowledgements: what the member still holds on the session's
// partitions is released.

type shareSessionKey struct{ group, member string }

// ShareSession is one member's share session on this broker.
type ShareSession struct {
	epoch int32
	parts map[TopicPartition]struct{}
	order []TopicPartition // insertion order, for fair iteration
	// unbind stops the watch on the connection that opened the session
	// (BindShareSession); nil when unbound.
	unbind func() bool
}

func (ss *ShareSession) stopWatch() {
	if ss != nil && ss.unbind != nil {
		ss.unbind()
	}
}

// Session epochs with a meaning of their own.
const (
	ShareSessionInitial int32 = 0
	ShareSessionFinal   int32 = -1
)

func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// ShareSessionUpdate applies the session part of a ShareFetch (fetch true)
// or ShareAcknowledge and returns the session's partitions after it. It
// fails with SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH or
// SHARE_SESSION_LIMIT_REACHED. A final epoch does not close the session:
// call CloseShareSession once its acknowledgements are applied.
func (s *ShareCoordinator) ShareSessionUpdate(group, member string, epoch int32, fetch bool, add, forget []TopicPartition) ([]TopicPartition, error) {
	key := shareSessionKey{group, member}
	s.mu.Lock()
	sess := s.sessions[key]
	switch {
	case epoch == ShareSessionInitial && !fetch:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: ShareAcknowledge cannot open a share session", kerr.InvalidShareSessionEpoch)
	case epoch == ShareSessionInitial:
		if sess == nil && len(s.sessions) >= s.cfg.MaxSessions {
			s.mu.Unlock()
			return nil, kerr.ShareSessionLimitReached
		}
		old := sess
		old.stopWatch()
		sess = &ShareSession{epoch: 1, parts: map[TopicPartition]struct{}{}}
		s.sessions[key] = sess
		sess.add(add)
		sess.forget(forget)
		parts := sess.list()
		s.mu.Unlock()
		if old != nil {
			s.releaseParts(group, member, old.list())
		}
		s.revalidate(group, add)
		return parts, nil
	case sess == nil:
		s.mu.Unlock()
		return nil, kerr.ShareSessionNotFound
	case epoch == ShareSessionFinal:
		parts := sess.list()
		s.mu.Unlock()
		return parts, nil
	case epoch != sess.epoch:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: expected %d, got %d", kerr.InvalidShareSessionEpoch, sess.epoch, epoch)
	}
	sess.epoch = nextSessionEpoch(sess.epoch)
	sess.add(add)
	sess.forget(forget)
	parts := sess.list()
	s.mu.Unlock()
	s.revalidate(group, add)
	return parts, nil
}

// revalidate marks partitions a share session added (see
// sharePartitionEntry.revalidate).
func (s *ShareCoordinator) revalidate(group string, tps []TopicPartition) {
	if s.store == nil {
		return // memory only: every change to the state was made here
	}
	for _, tp := range tps {
		s.mu.Lock()
		e := s.partitions[sharePartitionKey{group, tp.Topic, tp.Partition}]
		s.mu.Unlock()
		if e != nil {
			e.mu.Lock()
			e.revalidate = true
			e.mu.Unlock()
		}
	}
}

// CloseShareSession ends a member's session and releases the records it
// holds on the session's partitions here.
func (s *ShareCoordinator) CloseShareSession(group, member string) {
	key := shareSessionKey{group, member}
	s.mu.Lock()
	sess := s.sessions[key]
	delete(s.sessions, key)
	sess.stopWatch()
	s.mu.Unlock()
	if sess != nil {
		s.releaseParts(group, member, sess.list())
	}
}

// BindShareSession ties the member's current share session to conn, the
// context of the connection that opened it: when the connection closes,
// the session closes and the member's records are released, as Kafka
// does. A session replaced or closed before that is not affected.
func (s *ShareCoordinator) BindShareSession(conn context.Context, group, member string) {
	key := shareSessionKey{group, member}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[key]
	if sess == nil {
		return
	}
	sess.stopWatch()
	sess.unbind = context.AfterFunc(conn, func() {
		s.mu.Lock()
		current := s.sessions[key] == sess
		if current {
			delete(s.sessions, key)
		}
		s.mu.Unlock()
		if current {
			s.releaseParts(group, member, sess.list())
		}
	})
}

func (s *ShareCoordinator) releaseParts(group, member string, parts []TopicPartition) {
	for _, tp := range parts {
		k := sharePartitionKey{group, tp.Topic, tp.Partition}
		s.mu.Lock()
		e := s.partitions[k]
		s.mu.Unlock()
		if e != nil {
			s.release(k, e, member)
		}
	}
}

func (ss *ShareSession) add(tps []TopicPartition) {
	for _, tp := range tps {
		if _, ok := ss.parts[tp]; !ok {
			ss.parts[tp] = struct{}{}
			ss.order = append(ss.order, tp)
		}
	}
}

func (ss *ShareSession) forget(tps []TopicPartition) {
	for _, tp := range tps {
		delete(ss.parts, tp)
	}
	kept := ss.order[:0]
	for _, tp := range ss.order {
		if _, ok := ss.parts[tp]; ok {
			kept = append(kept, tp)
		}
	}
	ss.order = kept
}

func (ss *ShareSession) list() []TopicPartition {
	return append([]TopicPartition(nil), ss.order...)
}

// topicID returns the current id of topic (zero when unknown).
func (s *ShareCoordinator) topicID(topic string) [16]byte {
	if s.groups.cfg.Topics == nil {
		return [16]byte{}
	}
	id, _, _, _ := s.groups.cfg.Topics.Topic(topic, false)
	return id
}

// sameTopic reports whether state kept for topic id stored belongs to the
// topic now named so (current): a topic deleted and created again has a
// new id and starts without share state, as in Kafka (share state is
// keyed by topic id there).
func sameTopic(stored, current [16]byte) bool {
	return stored == [16]byte{} || current == [16]byte{} || stored == current
}

// entry returns the share partition, locked and loaded. leaderEpoch is the
// partition's leader epoch (-1 on a single broker): state loaded under
// another epoch, or for another topic id, is read again from the store.
func (s *ShareCoordinator) entry(ctx context.Context, k sharePartitionKey, leaderEpoch int32) (*sharePartitionEntry, error) {
	id := s.topicID(k.topic)
	s.mu.Lock()
	e := s.partitions[k]
	if e == nil {
		e = &sharePartitionEntry{}
		s.partitions[k] = e
	}
	s.mu.Unlock()
	e.mu.Lock()
	if e.loaded && e.revalidate {
		// With nothing acquired here the stored state is as new as this
		// copy (every change is written through) or newer.
		e.revalidate = false
		if !e.sp.holdsAcquired() {
			e.loaded = false
		}
	}
	if e.loaded && e.leaderEpoch == leaderEpoch && sameTopic(e.topicID, id) {
		return e, nil
	}
	sp := newSharePartition()
	sp.topicID = id
	if e.sp != nil {
		sp.changed = e.sp.changed
	}
	if s.store != nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, ok, err := s.store.LoadShareState(ctx, k.group, k.topic, k.partition)
		cancel()
		if err != nil {
			e.mu.Unlock()
			return nil, fmt.Errorf("%w: load share state of %s %s-%d: %w", kerr.CoordinatorLoadInProgress, k.group, k.topic, k.partition, err)
		}
		if ok && sameTopic(st.TopicID, id) {
			sp.restore(st, s.cfg.DeliveryCountLimit)
		}
	} else if e.sp != nil && sameTopic(e.topicID, id) {
		sp = e.sp // memory only: nothing newer elsewhere
	}
	e.sp, e.loaded, e.leaderEpoch, e.topicID = sp, true, leaderEpoch, id
	return e, nil
}

func (s *ShareCoordinator) persist(k sharePartitionKey, sp *sharePartition) error {
	if s.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.store.SaveShareState(ctx, k.group, k.topic, k.partition, sp.snapshot()); err != nil {
		s.log.Error(err, "saving share-partition state", "group", k.group, "topic", k.topic, "partition", k.partition)
		return fmt.Errorf("%w: %w", kerr.KafkaStorageError, err)
	}
	return nil
}

// ShareAcquireResult is what a share fetch of one partition acquired.
type ShareAcquireResult struct {
	// Records are the batches holding the acquired records.
	Records []byte
	// Acquired are the acquired offsets and their delivery counts.
	Acquired []AcquiredRange
	// Changed is closed when records of the partition become available
	// other than by the log growing (release, lock expiry).
	Changed <-chan struct{}
	// NextExpiry is the earliest pending acquisition lock (zero if none).
	NextExpiry time.Time
}

// Acquire acquires up to maxRecords records of a share partition for member
// (a ShareFetch).
func (s *ShareCoordinator) Acquire(ctx context.Context, group, member, topic string, partition, leaderEpoch int32, log ShareLog, maxRecords, maxBytes int) (ShareAcquireResult, error) {
	k := sharePartitionKey{group, topic, partition}
	e, err := s.entry(ctx, k, leaderEpoch)
	if err != nil {
		return ShareAcquireResult{}, err
	}
	defer e.mu.Unlock()
	sp := e.sp
	spso, recs := sp.clone()
	now := s.now()
	expired, _ := sp.expire(now, s.cfg.DeliveryCountLimit)
	data, ranges, changed, err := sp.acquire(log, member, maxRecords, maxBytes, s.cfg.RecordLockDuration, now, s.cfg.AutoOffsetReset == "earliest")
	if err != nil {
		sp.spso, sp.recs = spso, recs
		return ShareAcquireResult{Changed: sp.changed}, err
	}
	if expired || changed {
		if err := s.persist(k, sp); err != nil {
			sp.spso, sp.recs = spso, recs
			return ShareAcquireResult{Changed: sp.changed}, err
		}
	}
	_, next := sp.expire(now, s.cfg.DeliveryCountLimit)
	return ShareAcquireResult{Records: data, Acquired: ranges, Changed: sp.changed, NextExpiry: next}, nil
}

// Acknowledge applies member's acknowledgements to a share partition.
// Errors carry INVALID_REQUEST, INVALID_RECORD_STATE or
// KAFKA_STORAGE_ERROR (nothing applied).
func (s *ShareCoordinator) Acknowledge(ctx context.Context, group, member, topic string, partition, leaderEpoch int32, acks []ShareAck, renew bool) error {
	k := sharePartitionKey{group, topic, partition}
	e, err := s.entry(ctx, k, leaderEpoch)
	if err != nil {
		return err
	}
	defer e.mu.Unlock()
	sp := e.sp
	spso, recs := sp.clone()
	now := s.now()
	sp.expire(now, s.cfg.DeliveryCountLimit)
	if err := sp.acknowledge(member, acks, renew, s.cfg.DeliveryCountLimit, s.cfg.RecordLockDuration, now); err != nil {
		sp.spso, sp.recs = spso, recs
		return err
	}
	if err := s.persist(k, sp); err != nil {
		sp.spso, sp.recs = spso, recs
		return err
	}
	return nil
}

// SharePartitionInfo describes a share partition's state (tests, admin).
type SharePartitionInfo struct {
	StartOffset int64 // SPSO, -1 if not initialized
	EndOffset   int64 // SPEO
	// Records are the in-flight records' states and delivery counts by
	// offset.
	Records map[int64]ShareStateBatch
}

// DescribeSharePartition returns a share partition's state.
func (s *ShareCoordinator) DescribeSharePartition(ctx context.Context, group, topic string, partition, leaderEpoch int32) (SharePartitionInfo, error) {
	e, err := s.entry(ctx, sharePartitionKey{group, topic, partition}, leaderEpoch)
	if err != nil {
		return SharePartitionInfo{}, err
	}
	defer e.mu.Unlock()
	sp := e.sp
	sp.expire(s.now(), s.cfg.DeliveryCountLimit)
	info := SharePartitionInfo{StartOffset: sp.spso, EndOffset: sp.speo(), Records: map[int64]ShareStateBatch{}}
	for off := sp.spso; sp.spso >= 0 && off < sp.speo(); off++ {
		count, state, _ := sp.deliveryCount(off)
		info.Records[off] = ShareStateBatch{First: off, Last: off, State: state, DeliveryCount: count}
	}
	return info, nil
}

// ErrorCode maps an error of this file's methods to a Kafka error code.
func ShareErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// ShareGroupPartitions returns the share partitions of group with state
// here or in the store (DescribeShareGroupOffsets without topics).
func (s *ShareCoordinator) ShareGroupPartitions(ctx context.Context, group string) ([]TopicPartition, error) {
	set := map[TopicPartition]bool{}
	if lister, ok := s.store.(ShareStateLister); ok {
		stored, err := lister.ListShareState(ctx, group)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", kerr.CoordinatorLoadInProgress, err)
		}
		for _, tp := range stored {
			set[tp] = true
		}
	}
	s.mu.Lock()
	for k := range s.partitions {
		if k.group == group {
			set[TopicPartition{Topic: k.topic, Partition: k.partition}] = true
		}
	}
	s.mu.Unlock()
	out := make([]TopicPartition, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	sortTPs(out)
	return out, nil
}

func sortTPs(tps []TopicPartition) {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}

// NotLeaderEpoch is the leader epoch ShareOffsets takes for a partition
// this broker does not lead.
const NotLeaderEpoch int32 = math.MinInt32

// ShareOffsets describes a share partition for DescribeShareGroupOffsets:
// from this broker's state when it leads the partition and loaded the
// state under its current leaderEpoch (-1 on a single broker,
// NotLeaderEpoch when another broker leads it), else from the store: a
// broker that led the partition before keeps a copy the new leader has
// moved past. A partition without state has StartOffset -1. done is the
// number of in-flight records already acknowledged or archived.
func (s *ShareCoordinator) ShareOffsets(ctx context.Context, group, topic string, partition, leaderEpoch int32) (start int64, done int64, err error) {
	k := sharePartitionKey{group, topic, partition}
	s.mu.Lock()
	e := s.partitions[k]
	s.mu.Unlock()
	var sp *sharePartition
	if e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.loaded && (s.store == nil || e.leaderEpoch == leaderEpoch) {
			sp = e.sp
			if sp.spso >= 0 {
				spso, recs := sp.clone()
				if expired, _ := sp.expire(s.now(), s.cfg.DeliveryCountLimit); expired {
					if err := s.persist(k, sp); err != nil {
						sp.spso, sp.recs = spso, recs
					}
				}
			}
		}
	}
	if sp == nil {
		sp = newSharePartition()
		if s.store != nil {
			st, ok, err := s.store.LoadShareState(ctx, group, topic, partition)
			if err != nil {
				return -1, 0, fmt.Errorf("%w: %w", kerr.CoordinatorLoadInProgress, err)
			}
			if ok && sameTopic(st.TopicID, s.topicID(topic)) {
				sp.restore(st, s.cfg.DeliveryCountLimit)
			}
		}
	}
	for _, r := range sp.recs {
		if r.state == ShareStateAcknowledged || r.state == ShareStateArchived {
			done++
		}
	}
	return sp.spso, done, nil
}

// SetShareStartOffset replaces a share partition's state by an SPSO with
// nothing in flight (AlterShareGroupOffsets), or with no state at all when
// start is -1 (DeleteShareGroupOffsets: the partition starts again per
// share.auto.offset.reset). The group must have no members:
// NON_EMPTY_GROUP otherwise.
func (s *ShareCoordinator) SetShareStartOffset(ctx context.Context, group, topic string, partition int32, start int64) error {
	if start < -1 {
		return fmt.Errorf("%w: start offset %d", kerr.InvalidRequest, start)
	}
	now := s.now()
	s.mu.Lock()
	var released []func()
	if g := s.sgroups[group]; g != nil {
		released = s.expireMembers(group, g, now)
		if len(g.members) > 0 {
			s.mu.Unlock()
			return kerr.NonEmptyGroup
		}
	}
	k := sharePartitionKey{group, topic, partition}
	e := s.partitions[k]
	if e == nil {
		e = &sharePartitionEntry{}
		s.partitions[k] = e
	}
	s.mu.Unlock()
	for _, release := range released {
		release()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	sp := newSharePartition()
	sp.spso, sp.topicID = start, s.topicID(topic)
	if e.sp != nil {
		sp.changed = e.sp.changed
	}
	if err := s.persist(k, sp); err != nil {
		return err
	}
	e.sp = sp
	sp.notify()
	return nil
}
