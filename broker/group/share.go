package group

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups (KIP-932, "queues for Kafka").
//
// A ShareCoordinator serves two roles that Kafka splits between the group
// coordinator and the partition leaders:
//
//   - membership (ShareGroupHeartbeat, ShareGroupDescribe) for the share
//     groups this broker coordinates (placement as for consumer groups,
//     Config.Owns). There is no revocation: share partitions may be
//     consumed by several members at once, so a member takes its new
//     assignment with the heartbeat that bumps its epoch. The "simple"
//     assignor spreads each topic's partitions round-robin over the members
//     subscribed to it; with more members than partitions every member gets
//     one partition and partitions are shared. A member that does not
//     heartbeat within the session timeout is removed (checked on every
//     request for its group) and the records it had acquired here are
//     released. Membership is not persisted: after a coordinator restart
//     members get UNKNOWN_MEMBER_ID and rejoin with the same member id.
//   - share-partition state (share_partition.go) of the partitions this
//     broker leads, with the share sessions of ShareFetch and
//     ShareAcknowledge. State is loaded from the ShareStateStore on first
//     use (in a cluster: again whenever the partition's leader epoch
//     changed, so a new leader continues where the old one stopped, and
//     when a share session adds the partition while nothing of it is
//     acquired, so that what the group's coordinator altered or deleted
//     meanwhile applies) and written through on every acquisition and
//     acknowledgement.
//
// Locking: c.mu guards groups, partitions and sessions; each share
// partition has its own mutex, taken after c.mu is released, held across
// its store writes. Store calls for different partitions may overlap.

// ShareConfig configures share groups; zero fields take Kafka's defaults.
type ShareConfig struct {
	// RecordLockDuration is share.record.lock.duration.ms (default 30s).
	RecordLockDuration time.Duration
	// DeliveryCountLimit is share.delivery.count.limit (default 5).
	DeliveryCountLimit int16
	// AutoOffsetReset is share.auto.offset.reset: "latest" (default) or
	// "earliest": where a share partition without state starts.
	AutoOffsetReset string
	// SessionTimeout is group.share.session.timeout.ms (default 45s).
	SessionTimeout time.Duration
	// HeartbeatInterval is group.share.heartbeat.interval.ms (default 5s).
	HeartbeatInterval time.Duration
	// MaxSessions is max.share.session.cache.size (default 1000).
	MaxSessions int
	// MaxGroupSize is group.share.max.size (default 200).
	MaxGroupSize int
	// IsolationLevel is share.isolation.level: "read_uncommitted"
	// (default) delivers up to the high watermark, "read_committed" up
	// to the last stable offset and never records of aborted
	// transactions.
	IsolationLevel string
}

// ReadCommitted reports whether share groups read committed records only.
func (c ShareConfig) ReadCommitted() bool { return c.IsolationLevel == "read_committed" }

func (c ShareConfig) withDefaults() ShareConfig {
	if c.RecordLockDuration <= 0 {
		c.RecordLockDuration = 30 * time.Second
	}
	if c.DeliveryCountLimit <= 0 {
		c.DeliveryCountLimit = 5
	}
	if c.AutoOffsetReset == "" {
		c.AutoOffsetReset = "latest"
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 1000
	}
	if c.MaxGroupSize <= 0 {
		c.MaxGroupSize = 200
	}
	if c.IsolationLevel == "" {
		c.IsolationLevel = "read_uncommitted"
	}
	return c
}

// Validate reports a configuration Kafka would refuse.
func (c ShareConfig) Validate() error {
	switch c.AutoOffsetReset {
	case "", "latest", "earliest":
	default:
		return fmt.Errorf("group: share.auto.offset.reset=%q: want latest or earliest", c.AutoOffsetReset)
	}
	switch c.IsolationLevel {
	case "", "read_uncommitted", "read_committed":
	default:
		return fmt.Errorf("group: share.isolation.level=%q: want read_uncommitted or read_committed", c.IsolationLevel)
	}
	if c.DeliveryCountLimit < 0 || (c.DeliveryCountLimit > 0 && c.DeliveryCountLimit < 2) || c.DeliveryCountLimit > 10 {
		return fmt.Errorf("group: share.delivery.count.limit=%d: want 2-10", c.DeliveryCountLimit)
	}
	return nil
}

// ShareCoordinator serves share groups on one broker.
type ShareCoordinator struct {
	groups *Coordinator // placement, topics, clock, store; group id conflicts
	cfg    ShareConfig
	store  ShareStateStore // nil: in memory only
	log    logr.Logger

	mu         sync.Mutex
	sgroups    map[string]*shareGroup
	partitions map[sharePartitionKey]*sharePartitionEntry
	sessions   map[shareSessionKey]*ShareSession
}

type sharePartitionKey struct {
	group, topic string
	partition    int32
}

type sharePartitionEntry struct {
	mu          sync.Mutex
	sp          *sharePartition
	loaded      bool
	leaderEpoch int32
	topicID     [16]byte // of the topic when loaded
	// revalidate is set when a share session adds the partition: the
	// group's coordinator, another broker in a cluster, may have altered
	// or deleted the group's state meanwhile (the group was empty then).
	// The next use reads the store again unless records are acquired.
	revalidate bool
}

type shareGroup struct {
	epoch           int32
	assignmentEpoch int32
	subscription    string // fingerprint of the subscribed topics' partition counts
	members         map[string]*shareMember
}

type shareMember struct {
	id, rack, clientID, clientHost string
	topics                         []string
	epoch                          int32
	assigned                       map[string][]int32
	lastSeen                       time.Time
}

// NewShareCoordinator returns the share-group side of c: membership uses
// c's placement, topics and clock; share-partition state goes to c's store
// when it implements ShareStateStore.
func NewShareCoordinator(c *Coordinator, cfg ShareConfig) *ShareCoordinator {
	s := &ShareCoordinator{
		groups:     c,
		cfg:        cfg.withDefaults(),
		log:        c.log.WithName("share"),
		sgroups:    map[string]*shareGroup{},
		partitions: map[sharePartitionKey]*sharePartitionEntry{},
		sessions:   map[shareSessionKey]*ShareSession{},
	}
	s.store, _ = c.store.(ShareStateStore)
	c.shares.Store(s)
	return s
}

// Config returns the effective configuration.
func (s *ShareCoordinator) Config() ShareConfig { return s.cfg }

func (s *ShareCoordinator) now() time.Time { return s.groups.clock.Now() }

// ShareGroupHeartbeat handles ShareGroupHeartbeat v1.
func (s *ShareCoordinator) ShareGroupHeartbeat(_ context.Context, client Client, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.Version = req.Version
	fail := func(e *kerr.Error, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	switch {
	case req.GroupID == "":
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	case req.MemberID == "":
		return fail(kerr.InvalidRequest, "MemberId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return fail(kerr.InvalidRequest, "RackId can't be empty.")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest, "MemberEpoch is invalid.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request.")
	}
	if !s.groups.owns(req.GroupID) {
		return fail(kerr.NotCoordinator, "")
	}
	topics := s.groups.cfg.Topics
	if topics == nil {
		return fail(kerr.CoordinatorNotAvailable, "no topic metadata")
	}
	if s.groups.isClosed() {
		return fail(kerr.NotCoordinator, "")
	}
	if !s.claim(req.GroupID, req.MemberEpoch == 0) {
		return fail(kerr.GroupIDNotFound, "Group "+req.GroupID+" is not a share group.")
	}

	now := s.now()
	s.mu.Lock()
	var released []func()
	defer func() {
		s.mu.Unlock()
		for _, release := range released {
			release()
		}
	}()
	g := s.sgroups[req.GroupID]
	if g != nil {
		released = s.expireMembers(req.GroupID, g, now)
	}
	if req.MemberEpoch == -1 {
		if g == nil || g.members[req.MemberID] == nil {
			return fail(kerr.UnknownMemberID, "")
		}
		released = append(released, s.removeMember(req.GroupID, g, req.MemberID))
		resp.MemberID, resp.MemberEpoch = &req.MemberID, -1
		return resp
	}
	var m *shareMember
	if g != nil {
		m = g.members[req.MemberID]
	}
	switch {
	case m == nil && req.MemberEpoch != 0:
		return fail(kerr.UnknownMemberID, "")
	case m != nil && req.MemberEpoch != 0 && req.MemberEpoch != m.epoch:
		return fail(kerr.FencedMemberEpoch, "")
	}
	if g == nil {
		// Created by claim and deleted (DeleteGroups) since: retriable.
		return fail(kerr.CoordinatorNotAvailable, "")
	}
	bump := false
	if m == nil {
		if len(g.members) >= s.cfg.MaxGroupSize {
			return fail(kerr.GroupMaxSizeReached, "")
		}
		m = &shareMember{id: req.MemberID}
		g.members[req.MemberID] = m
		bump = true
	}
	m.lastSeen = now
	m.clientID, m.clientHost = client.ID, client.Host
	if req.RackID != nil {
		m.rack = *req.RackID
	}
	if req.SubscribedTopicNames != nil {
		subs := slices.Clone(req.SubscribedTopicNames)
		sort.Strings(subs)
		subs = slices.Compact(subs)
		if !slices.Equal(subs, m.topics) {
			m.topics, bump = subs, true
		}
	}
	if fp := g.fingerprint(topics); fp != g.subscription {
		g.subscription, bump = fp, true
	}
	if bump {
		g.epoch++
		g.assign(topics)
	}
	full := req.MemberEpoch == 0 || m.epoch != g.assignmentEpoch
	m.epoch = g.assignmentEpoch
	resp.MemberID = &req.MemberID
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(s.cfg.HeartbeatInterval / time.Millisecond)
	if full {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, t := range sortedKeys(m.assigned) {
			id, _, _, ok := topics.Topic(t, false)
			if !ok {
				continue
			}
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = id, slices.Clone(m.assigned[t])
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return resp
}

// claim reports whether id may be a share group's; with create it also
// creates the (empty) share group when there is none, in one step with
// the check against the other group types (see grouptype.go).
func (s *ShareCoordinator) claim(id string, create bool) bool {
	if create {
		s.groups.typeMu.Lock()
		defer s.groups.typeMu.Unlock()
	}
	if s.conflicts(id) {
		return false
	}
	if create {
		s.mu.Lock()
		if s.sgroups[id] == nil {
			s.sgroups[id] = &shareGroup{members: map[string]*shareMember{}}
		}
		s.mu.Unlock()
	}
	return true
}

// conflicts reports whether a classic or consumer group uses id.
func (s *ShareCoordinator) conflicts(id string) bool {
	g := s.groups.lookup(id, false)
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state != stateDead && !g.unused()
}

// fingerprint is the partition counts of the topics members subscribe to.
func (g *shareGroup) fingerprint(topics TopicMetadata) string {
	set := map[string]bool{}
	for _, m := range g.members {
		for _, t := range m.topics {
			set[t] = true
		}
	}
	var b strings.Builder
	for _, t := range sortedKeys(set) {
		_, n, _, ok := topics.Topic(t, false)
		if ok {
			fmt.Fprintf(&b, "%s:%d,", t, n)
		}
	}
	return b.String()
}

// assign is the simple assignor: per topic, partitions round-robin over
// the subscribed members (sorted by id); with more members than
// partitions, member i gets partition i mod n.
func (g *shareGroup) assign(topics TopicMetadata) {
	ids := sortedKeys(g.members)
	for _, id := range ids {
		g.members[id].assigned = map[string][]int32{}
	}
	bySubs := map[string][]string{}
	for _, id := range ids {
		for _, t := range g.members[id].topics {
			bySubs[t] = append(bySubs[t], id)
		}
	}
	for t, subs := range bySubs {
		_, n, _, ok := topics.Topic(t, false)
		if !ok || n <= 0 {
			continue
		}
		if len(subs) <= int(n) {
			for p := range n {
				m := g.members[subs[int(p)%len(subs)]]
				m.assigned[t] = append(m.assigned[t], p)
			}
			continue
		}
		for i, id := range subs {
			m := g.members[id]
			m.assigned[t] = append(m.assigned[t], int32(i)%n)
		}
	}
	g.assignmentEpoch = g.epoch
}

// expireMembers removes members whose session timed out and returns
// what releases their records; callers hold s.mu and run it after
// releasing it.
func (s *ShareCoordinator) expireMembers(id string, g *shareGroup, now time.Time) []func() {
	var out []func()
	for mid, m := range g.members {
		if now.Sub(m.lastSeen) >= s.cfg.SessionTimeout {
			s.log.V(1).Info("share group member session expired", "group", id, "member", mid)
			out = append(out, s.removeMember(id, g, mid))
		}
	}
	return out
}

// removeMember drops a member and its share session and reassigns; the
// returned func releases the records it acquired here and must run
// without s.mu (it takes the partitions' locks). Callers hold s.mu.
func (s *ShareCoordinator) removeMember(id string, g *shareGroup, member string) func() {
	delete(g.members, member)
	g.epoch++
	g.assign(s.groups.cfg.Topics)
	s.sessions[shareSessionKey{id, member}].stopWatch()
	delete(s.sessions, shareSessionKey{id, member})
	type held struct {
		k sharePartitionKey
		e *sharePartitionEntry
	}
	var parts []held
	for k, e := range s.partitions {
		if k.group == id {
			parts = append(parts, held{k, e})
		}
	}
	return func() {
		for _, p := range parts {
			s.release(p.k, p.e, member)
		}
	}
}

func (s *ShareCoordinator) release(k sharePartitionKey, e *sharePartitionEntry, member string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sp == nil {
		return
	}
	// Acquired records are stored as available: only records archived
	// by the release (delivery limit reached) change the durable state.
	if released, archived := e.sp.releaseMember(member, s.cfg.DeliveryCountLimit); released && archived {
		_ = s.persist(k, e.sp) // logged; the records stay archived in memory
	}
}

// ShareGroupDescribe handles ShareGroupDescribe v1 for the groups listed.
func (s *ShareCoordinator) ShareGroupDescribe(_ context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := kmsg.NewPtrShareGroupDescribeResponse()
	resp.Version = req.Version
	topics := s.groups.cfg.Topics
	now := s.now()
	for _, id := range req.GroupIDs {
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID = id
		fail := func(e *kerr.Error, msg string) {
			dg.ErrorCode = e.Code
			if msg != "" {
				dg.ErrorMessage = &msg
			}
		}
		otherType := id != "" && s.conflicts(id)
		s.mu.Lock()
		g := s.sgroups[id]
		switch {
		case id == "":
			fail(kerr.InvalidGroupID, "")
		case !s.groups.owns(id):
			fail(kerr.NotCoordinator, "")
		case g == nil && otherType:
			fail(kerr.GroupIDNotFound, "Group "+id+" is not a share group.")
		case g == nil:
			fail(kerr.GroupIDNotFound, "Group "+id+" not found.")
		default:
			released := s.expireMembers(id, g, now)
			s.mu.Unlock()
			for _, release := range released {
				release()
			}
			s.mu.Lock()
			dg.GroupState = "Stable"
			if len(g.members) == 0 {
				dg.GroupState = "Empty"
			}
			dg.GroupEpoch, dg.AssignmentEpoch, dg.Assignor = g.epoch, g.assignmentEpoch, "simple"
			for _, mid := range sortedKeys(g.members) {
				m := g.members[mid]
				dm := kmsg.NewShareGroupDescribeResponseGroupMember()
				dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
				if m.rack != "" {
					dm.RackID = &m.rack
				}
				dm.SubscribedTopicNames = slices.Clone(m.topics)
				for _, t := range sortedKeys(m.assigned) {
					tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
					tp.Topic, tp.Partitions = t, slices.Clone(m.assigned[t])
					if topics != nil {
						tp.TopicID, _, _, _ = topics.Topic(t, false)
					}
					dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
				}
				dg.Members = append(dg.Members, dm)
			}
		}
		s.mu.Unlock()
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// IsShareGroup reports whether id is a share group known here.
func (s *ShareCoordinator) IsShareGroup(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sgroups[id] != nil
}

// deleteGroup deletes share group id (DeleteGroups) with its
// share-partition state, here and in the store: NON_EMPTY_GROUP while it
// has members. found is false when id is not a share group: neither its
// membership nor any share-partition state of it is known here or in the
// store. (Membership is not persisted, so after a restart, or on the
// broker that took the group over, an empty share group is known by its
// state only.)
func (s *ShareCoordinator) deleteGroup(ctx context.Context, id string) (code int16, found bool) {
	now := s.now()
	s.mu.Lock()
	g := s.sgroups[id]
	var released []func()
	if g != nil {
		released = s.expireMembers(id, g, now)
		if len(g.members) > 0 {
			s.mu.Unlock()
			for _, release := range released {
				release()
			}
			return kerr.NonEmptyGroup.Code, true
		}
	}
	found = g != nil
	delete(s.sgroups, id)
	var entries []*sharePartitionEntry
	for k, e := range s.partitions {
		if k.group == id {
			entries = append(entries, e)
			delete(s.partitions, k)
		}
	}
	for k, ss := range s.sessions {
		if k.group == id {
			ss.stopWatch()
			delete(s.sessions, k)
		}
	}
	s.mu.Unlock()
	for _, release := range released {
		release()
	}
	found = found || len(entries) > 0
	if !found {
		if lister, ok := s.store.(ShareStateLister); ok {
			stored, err := lister.ListShareState(ctx, id)
			if err != nil {
				s.log.Error(err, "listing share state of a group to delete", "group", id)
				return kerr.CoordinatorNotAvailable.Code, true
			}
			found = len(stored) > 0
		}
		if !found {
			return 0, false
		}
	}
	// The partitions stay locked until the store forgot them: an
	// operation that held one of them before it left the map must not
	// write its state back afterwards.
	for _, e := range entries {
		e.mu.Lock()
	}
	defer func() {
		for _, e := range entries {
			sp := newSharePartition()
			if e.sp != nil {
				e.sp.notify() // parked fetches look again
				sp.changed = e.sp.changed
			}
			e.sp, e.loaded = sp, false
			e.mu.Unlock()
		}
	}()
	if s.store != nil {
		if err := s.store.DeleteShareState(ctx, id); err != nil {
			s.log.Error(err, "deleting the share state of a deleted share group", "group", id)
			return kerr.CoordinatorNotAvailable.Code, true
		}
	}
	s.log.V(1).Info("share group deleted", "group", id, "partitions", len(entries))
	return 0, true
}

// CheckShareGroupID returns the error code for an admin request about
// share group id: NOT_COORDINATOR when another broker coordinates it,
// GROUP_ID_NOT_FOUND when it is a classic or consumer group, else 0.
func (s *ShareCoordinator) CheckShareGroupID(id string) int16 {
	switch {
	case !s.groups.owns(id):
		return kerr.NotCoordinator.Code
	case s.conflicts(id):
		return kerr.GroupIDNotFound.Code
	}
	return 0
}

// ShareGroupListing is one share group as ListGroups shows it.
type ShareGroupListing struct {
	ID    string
	State string // "Empty" or "Stable"
}

// ListShareGroups returns the share groups this broker coordinates,
// sorted by id, for ListGroups. Members whose session timed out are
// removed first: a group whose members all went away is Empty, as in
// Kafka (whose session timers remove them).
func (s *ShareCoordinator) ListShareGroups() []ShareGroupListing {
	now := s.now()
	var released []func()
	defer func() {
		for _, release := range released {
			release()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ShareGroupListing, 0, len(s.sgroups))
	for _, id := range sortedKeys(s.sgroups) {
		if !s.groups.owns(id) {
			continue
		}
		g := s.sgroups[id]
		released = append(released, s.expireMembers(id, g, now)...)
		state := "Stable"
		if len(g.members) == 0 {
			state = "Empty"
		}
		out = append(out, ShareGroupListing{ID: id, State: state})
	}
	return out
}
