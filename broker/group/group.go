package group

import (
	"bytes"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

// String returns the state name Kafka uses in DescribeGroups/ListGroups.
func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// group is one consumer group. Every field is guarded by mu, including the
// members' fields and the timer slots; timer callbacks take mu themselves.
type group struct {
	c  *Coordinator
	id string

	mu           sync.Mutex
	state        groupState
	generation   int32
	protocolType string
	protocol     string // selected protocol of the current generation
	leader       string
	members      map[string]*member
	static       map[string]string     // group instance id → member id
	pending      map[string]*timerSlot // KIP-394 member ids handed out, not yet joined
	pendingSync  map[string]bool       // members of this generation that have not sent SyncGroup
	nextSeq      uint64                // join order of members

	joinTimer      timerSlot // DelayedJoin / InitialDelayedJoin
	inInitialDelay bool
	newMemberAdded bool
	delayRemaining time.Duration
	syncTimer      timerSlot // pending SyncGroup expiry

	// consumer is the KIP-848 state of a consumer-protocol group (nil
	// for a classic group); see consumer.go.
	consumer *cgroup

	offsets map[TopicPartition]OffsetCommit
	// txnOffsets are transactional commits (TxnOffsetCommit) not yet
	// committed or aborted, per producer ID (txn.go).
	txnOffsets map[int64]map[TopicPartition]OffsetCommit
	// loadedEpoch is the Config.OwnershipEpoch the group was last read
	// from the store under.
	loadedEpoch uint64
	// fenced is set when the store refused a write of the group because
	// another coordinator claimed it (ErrFenced): the next request
	// forgets the group's state here and reads it again (lockGroup).
	fenced bool
	// emptySince is when the group last became Empty (offset retention).
	emptySince time.Time
}

// member is one member of a group, guarded by its group's mu.
type member struct {
	id               string
	instanceID       string // "" for dynamic members
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol
	assignment       []byte
	seq              uint64
	isNew            bool

	// joinCh/syncCh are set while a JoinGroup/SyncGroup waits; buffered
	// (capacity 1) so that delivering never blocks, even when the waiter
	// gave up because its connection closed.
	joinCh  chan joinResult
	syncCh  chan syncResult
	session timerSlot
}

type joinResult struct {
	err            int16
	memberID       string
	generation     int32
	protocolType   string
	protocol       string
	leader         string
	members        []kmsg.JoinGroupResponseMember
	skipAssignment bool
}

type syncResult struct {
	err          int16
	protocolType string
	protocol     string
	assignment   []byte
}

// timerSlot holds at most one pending timer; seq invalidates callbacks of
// timers that were stopped or replaced but fired anyway.
type timerSlot struct {
	t   Timer
	seq uint64
}

func (c *Coordinator) newGroup(id string) *group {
	return &group{
		c:          c,
		id:         id,
		emptySince: c.clock.Now(),
		members:    make(map[string]*member),
		static:     make(map[string]string),
		pending:    make(map[string]*timerSlot),
		offsets:    make(map[TopicPartition]OffsetCommit),
		txnOffsets: make(map[int64]map[TopicPartition]OffsetCommit),
	}
}

// schedule arms slot to run f under g.mu after d, replacing whatever slot
// held. Callers hold g.mu.
func (g *group) schedule(slot *timerSlot, d time.Duration, f func()) {
	g.stop(slot)
	seq := slot.seq
	slot.t = g.c.clock.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if slot.seq != seq || g.state == stateDead {
			return
		}
		slot.t = nil
		slot.seq++
		f()
	})
}

func (g *group) stop(slot *timerSlot) {
	if slot.t != nil {
		slot.t.Stop()
		slot.t = nil
	}
	slot.seq++
}

// shutdown stops every timer and fails every waiter. Callers hold g.mu.
func (g *group) shutdown() {
	g.release()
	g.state = stateDead
}

// release stops every timer, answers every parked JoinGroup and SyncGroup
// NOT_COORDINATOR and drops the consumer-protocol state: what a
// coordinator that stops serving the group (shutdown, depose) lets go of.
// Callers hold g.mu.
func (g *group) release() {
	g.stop(&g.joinTimer)
	g.stop(&g.syncTimer)
	for id, slot := range g.pending {
		g.stop(slot)
		delete(g.pending, id)
	}
	for _, m := range g.members {
		g.stop(&m.session)
		g.deliverJoin(m, joinResult{err: kerr.NotCoordinator.Code, memberID: m.id, generation: -1})
		g.deliverSync(m, syncResult{err: kerr.NotCoordinator.Code})
	}
	g.dropConsumerState()
}

// depose forgets what the group holds in memory, as a coordinator that
// lost the group does: timers stop, parked JoinGroup and SyncGroup calls
// get NOT_COORDINATOR, and the group is left Empty, generation 0, without
// offsets, for reload to fill from the store. Callers hold g.mu.
func (g *group) depose() {
	g.release()
	clear(g.members)
	clear(g.static)
	g.pendingSync = nil
	g.generation, g.protocolType, g.protocol, g.leader = 0, "", "", ""
	g.inInitialDelay, g.newMemberAdded, g.delayRemaining = false, false, 0
	clear(g.offsets)
	clear(g.txnOffsets)
	g.state = stateEmpty
}

// storeFailed records a failed store write of the group and returns the
// error code for the request: NOT_COORDINATOR when another coordinator
// claimed the group (the group is read again on its next request),
// otherwise the retriable COORDINATOR_NOT_AVAILABLE. Callers hold g.mu.
func (g *group) storeFailed(err error) int16 {
	if errors.Is(err, ErrFenced) {
		g.fenced = true
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

func (g *group) deliverJoin(m *member, r joinResult) {
	if m.joinCh != nil {
		m.joinCh <- r
		m.joinCh = nil
	}
}

func (g *group) deliverSync(m *member, r syncResult) {
	if m.syncCh != nil {
		m.syncCh <- r
		m.syncCh = nil
	}
}

func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	return ms
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supportsProtocols is Kafka's GroupMetadata.supportsProtocols: an empty
// group takes any non-empty protocol type and list; otherwise the type
// must match and at least one protocol must be supported by every member.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.allSupport(p.Name, nil) {
			return true
		}
	}
	return false
}

// allSupport reports whether every member except skip supports protocol.
func (g *group) allSupport(protocol string, skip *member) bool {
	for _, m := range g.members {
		if m == skip {
			continue
		}
		if !m.supports(protocol) {
			return false
		}
	}
	return true
}

func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether the member's protocols equal ps (names, order
// and metadata), Kafka's MemberMetadata.matches.
func (m *member) matches(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || !bytes.Equal(ps[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// selectProtocol picks, among the protocols every member supports, the
// one most members list first (each member votes for its most preferred
// candidate); ties go to the candidate the longest-standing member
// prefers. It returns "" when there is no common protocol.
func (g *group) selectProtocol() string {
	ms := g.sortedMembers()
	if len(ms) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range ms[0].protocols {
		if g.allSupport(p.Name, nil) {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	votes := make(map[string]int, len(candidates))
	for _, m := range ms {
		for _, p := range m.protocols {
			if contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, name := range candidates[1:] {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// add puts a new member into the group.
func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.nextSeq++
	m.seq = g.nextSeq
	g.members[m.id] = m
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
	if g.inInitialDelay {
		g.newMemberAdded = true
	}
}

// remove takes a member out of the group without side effects on the
// group state.
func (g *group) remove(m *member) {
	g.stop(&m.session)
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// removeMember is Kafka's removeMemberAndUpdateGroup: a member left or
// expired.
func (g *group) removeMember(m *member, reason string) {
	g.c.log.V(1).Info("removing member", "group", g.id, "member", m.id, "reason", reason)
	g.deliverJoin(m, joinResult{err: kerr.UnknownMemberID.Code, memberID: m.id, generation: -1})
	g.deliverSync(m, syncResult{err: kerr.UnknownMemberID.Code})
	g.remove(m)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance(reason)
	case statePreparingRebalance:
		g.tryCompleteJoin()
	}
}

// isFenced reports whether instanceID belongs to a different member id
// (the caller is an old incarnation of a static member).
func (g *group) isFenced(instanceID, memberID string) bool {
	if instanceID == "" {
		return false
	}
	cur, ok := g.static[instanceID]
	return ok && cur != memberID
}

// resetSession (re)arms the member's session expiry after d.
func (g *group) resetSession(m *member, d time.Duration) {
	g.schedule(&m.session, d, func() { g.onSessionExpired(m) })
}

// onSessionExpired is Kafka's onExpireHeartbeat with shouldKeepAlive:
// members waiting in JoinGroup or SyncGroup are kept, except new members
// whose JoinGroup has waited NewMemberJoinTimeout.
func (g *group) onSessionExpired(m *member) {
	if g.members[m.id] != m {
		return
	}
	if (m.joinCh != nil && !m.isNew) || m.syncCh != nil {
		g.resetSession(m, m.sessionTimeout)
		return
	}
	g.removeMember(m, "session timeout expired")
}

// prepareRebalance moves the group to PreparingRebalance.
func (g *group) prepareRebalance(reason string) {
	g.c.log.V(1).Info("preparing rebalance", "group", g.id, "generation", g.generation, "reason", reason)
	if g.state == stateCompletingRebalance {
		// Members waiting for their assignment must rejoin.
		for _, m := range g.members {
			m.assignment = nil
			g.deliverSync(m, syncResult{err: kerr.RebalanceInProgress.Code})
		}
	}
	g.stop(&g.syncTimer)
	g.pendingSync = nil
	wasEmpty := g.state == stateEmpty
	g.state = statePreparingRebalance
	rt := g.rebalanceTimeout()
	if delay := g.c.cfg.InitialRebalanceDelay; wasEmpty && delay > 0 {
		g.inInitialDelay = true
		g.newMemberAdded = false
		g.delayRemaining = max(rt-delay, 0)
		g.schedule(&g.joinTimer, delay, g.onInitialDelay)
		return
	}
	g.inInitialDelay = false
	g.schedule(&g.joinTimer, rt, g.completeJoin)
	g.tryCompleteJoin()
}

// onInitialDelay is Kafka's InitialDelayedJoin: each member that joined
// during the delay extends it, up to the rebalance timeout.
func (g *group) onInitialDelay() {
	if g.newMemberAdded && g.delayRemaining > 0 {
		g.newMemberAdded = false
		d := min(g.c.cfg.InitialRebalanceDelay, g.delayRemaining)
		g.delayRemaining -= d
		g.schedule(&g.joinTimer, d, g.onInitialDelay)
		return
	}
	g.inInitialDelay = false
	g.completeJoin()
}

// maybePrepareRebalance starts a rebalance unless one is in progress.
func (g *group) maybePrepareRebalance(reason string) {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		g.prepareRebalance(reason)
	}
}

// tryCompleteJoin completes the join phase early once every member has
// rejoined and no KIP-394 member id is outstanding.
func (g *group) tryCompleteJoin() {
	if g.state != statePreparingRebalance || g.inInitialDelay || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.joinCh == nil {
			return
		}
	}
	g.completeJoin()
}

// completeJoin is Kafka's onCompleteJoin: drop dynamic members that did
// not rejoin, start the next generation and answer every JoinGroup.
func (g *group) completeJoin() {
	if g.state != statePreparingRebalance {
		return
	}
	g.stop(&g.joinTimer)
	g.inInitialDelay = false
	for _, m := range g.sortedMembers() {
		if m.joinCh == nil && m.instanceID == "" {
			g.c.log.V(1).Info("removing member that did not rejoin", "group", g.id, "member", m.id)
			g.remove(m)
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined are left: wait for
		// them to rejoin or expire.
		g.schedule(&g.joinTimer, g.rebalanceTimeout(), g.completeJoin)
		return
	}
	g.generation++
	if len(g.members) == 0 {
		g.state = stateEmpty
		g.emptySince = g.c.clock.Now()
		g.protocol = ""
		g.leader = ""
		g.saveMembership()
		return
	}
	g.protocol = g.selectProtocol()
	g.state = stateCompletingRebalance
	g.pendingSync = make(map[string]bool, len(g.members))
	ms := g.sortedMembers()
	for _, m := range ms {
		r := joinResult{
			memberID:     m.id,
			generation:   g.generation,
			protocolType: g.protocolType,
			protocol:     g.protocol,
			leader:       g.leader,
		}
		if m.id == g.leader {
			r.members = g.memberList()
		}
		g.deliverJoin(m, r)
		g.resetSession(m, m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	gen := g.generation
	g.schedule(&g.syncTimer, g.rebalanceTimeout(), func() { g.onSyncExpired(gen) })
}

// electJoinedLeader keeps the leader if it rejoined, else picks the
// longest-standing member that did; false if no member rejoined.
func (g *group) electJoinedLeader() bool {
	if l, ok := g.members[g.leader]; ok && l.joinCh != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.joinCh != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// memberList is the member list the leader receives for assignment.
func (g *group) memberList() []kmsg.JoinGroupResponseMember {
	ms := g.sortedMembers()
	out := make([]kmsg.JoinGroupResponseMember, 0, len(ms))
	for _, m := range ms {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		if m.instanceID != "" {
			id := m.instanceID
			jm.InstanceID = &id
		}
		jm.ProtocolMetadata = m.metadata(g.protocol)
		out = append(out, jm)
	}
	return out
}

// onSyncExpired removes the members of generation gen that never sent
// SyncGroup within the rebalance timeout and rebalances.
func (g *group) onSyncExpired(gen int32) {
	if gen != g.generation || (g.state != stateCompletingRebalance && g.state != stateStable) || len(g.pendingSync) == 0 {
		return
	}
	for id := range g.pendingSync {
		if m := g.members[id]; m != nil {
			g.c.log.V(1).Info("removing member that did not sync", "group", g.id, "member", id)
			g.remove(m)
		}
	}
	g.prepareRebalance("members did not send SyncGroup in time")
}

// subscribedTopics returns the topics the members subscribe to when the
// group uses the consumer protocol; ok is false when unknown.
func (g *group) subscribedTopics() (topics map[string]bool, ok bool) {
	if g.protocolType != "consumer" || g.protocol == "" {
		return nil, false
	}
	topics = make(map[string]bool)
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(g.protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics, true
}
