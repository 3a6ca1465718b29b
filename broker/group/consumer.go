package group

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The KIP-848 consumer group protocol (ConsumerGroupHeartbeat).
//
// A consumer-protocol group lives in the same *group as a classic one (same
// lock, offsets, store, placement); g.consumer is set while the group is of
// type "consumer". Three epochs drive it, as in Kafka's
// GroupMetadataManager:
//
//   - the group epoch is bumped whenever something the assignment depends
//     on changes: a member joins, leaves or is fenced, a subscription,
//     rack or server assignor changes, a subscribed topic's partitions (or
//     their replicas' racks) change;
//   - the target assignment epoch: when it lags the group epoch the
//     group's assignor computes a new target assignment (synchronously, on
//     the next heartbeat) and the epoch catches up;
//   - each member's epoch: a member moves to the target epoch once it has
//     revoked every partition the target takes from it. Until then it is
//     UNREVOKED_PARTITIONS and keeps only the partitions it keeps. A
//     partition the target gives it that another member still holds
//     (assigned or pending revocation) is held back
//     (UNRELEASED_PARTITIONS) until that member's heartbeat shows it has
//     let go: a partition is never owned by two members at once.
//
// Fencing: a member that does not heartbeat within the session timeout,
// or does not revoke within its rebalance timeout, is removed and its
// partitions freed; its next heartbeat gets UNKNOWN_MEMBER_ID. A member
// heartbeating with an epoch other than its own (or the previous one, with
// a subset of its partitions: the response was lost) gets
// FENCED_MEMBER_EPOCH and rejoins with epoch 0.
//
// Durability: every change of the consumer group's state (epochs, members
// and their subscriptions, target and current assignments) is written
// through the MembershipStore (GroupMetadata.Consumer, a JSON document in
// etcd or the FileStore) before the heartbeat that caused it is answered.
// A coordinator that takes a group over (failover) reads it back with
// fresh session timers, so members keep their epochs and assignments; a
// member whose last answer was never persisted is fenced by epoch and
// rejoins, which is safe because at epoch 0 it owns nothing.

// Consumer protocol defaults (Kafka's group.consumer.* configs).
const (
	defaultConsumerSessionTimeout    = 45 * time.Second
	defaultConsumerHeartbeatInterval = 5 * time.Second
)

// TopicMetadata is the cluster's topics as the consumer protocol's
// server-side assignors see them.
type TopicMetadata interface {
	// TopicNames returns every topic's name.
	TopicNames() []string
	// Topic returns a topic's id and partition count and, with racks set,
	// the racks (zones) holding each partition's replicas.
	Topic(name string, racks bool) (id [16]byte, partitions int32, partitionRacks [][]string, ok bool)
	// TopicName returns the name of the topic with an id.
	TopicName(id [16]byte) (string, bool)
}

// memberState is a consumer-protocol member's reconciliation state.
type memberState int8

const (
	memberStable memberState = iota
	memberUnrevoked
	memberUnreleased
)

func (s memberState) String() string {
	switch s {
	case memberUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleased:
		return "UNRELEASED_PARTITIONS"
	default:
		return "STABLE"
	}
}

// cgroup is the consumer-protocol state of a group, guarded by group.mu.
type cgroup struct {
	epoch           int32
	assignmentEpoch int32
	assignor        string // of the current target assignment
	members         map[string]*cmember
	static          map[string]string     // instance id → member id
	target          map[string]topicParts // member id → target assignment
	// subscription is the fingerprint of the subscribed topics' metadata
	// the group epoch was last bumped for.
	subscription string
	regexps      map[string]*regexp.Regexp
}

// cmember is one consumer-protocol member, guarded by group.mu.
type cmember struct {
	id               string
	instanceID       string
	rack             string
	clientID         string
	clientHost       string
	topics           []string // subscribed topic names, sorted
	regex            string
	assignor         string
	rebalanceTimeout time.Duration
	epoch            int32
	prevEpoch        int32
	state            memberState
	assigned         topicParts
	revoking         topicParts
	// since is the epoch each partition of assigned and revoking was
	// given to the member at (KIP-1251 assignment epochs).
	since map[TopicPartition]int32

	session   timerSlot
	rebalance timerSlot
}

func newCGroup() *cgroup {
	return &cgroup{members: map[string]*cmember{}, static: map[string]string{}, target: map[string]topicParts{}, regexps: map[string]*regexp.Regexp{}}
}

// ConsumerGroupHeartbeat handles ConsumerGroupHeartbeat v0-v1 (KIP-848).
func (c *Coordinator) ConsumerGroupHeartbeat(_ context.Context, client Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = req.Version
	fail := func(e *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if e, msg := c.checkConsumerHeartbeat(req); e != nil {
		return fail(e, msg)
	}
	if !c.owns(req.Group) {
		return fail(kerr.NotCoordinator, "")
	}
	if c.cfg.Topics == nil {
		return fail(kerr.CoordinatorNotAvailable, "no topic metadata")
	}
	g, share := c.lockGroupNotShare(req.Group, req.MemberEpoch == 0)
	if share {
		return fail(kerr.GroupIDNotFound, "group "+req.Group+" is not a consumer group")
	}
	if g == nil {
		if c.isClosed() {
			return fail(kerr.NotCoordinator, "")
		}
		if req.MemberEpoch < 0 {
			return fail(kerr.GroupIDNotFound, "group "+req.Group+" not found")
		}
		return fail(kerr.UnknownMemberID, "")
	}
	defer g.mu.Unlock()
	if g.consumer == nil {
		if len(g.members) > 0 || g.state != stateEmpty || len(g.pending) > 0 {
			return fail(kerr.GroupIDNotFound, "group "+req.Group+" is not a consumer group")
		}
		if req.MemberEpoch != 0 {
			return fail(kerr.UnknownMemberID, "")
		}
		// An empty classic group (offsets only) is upgraded in place:
		// it keeps its committed offsets.
		g.consumer = newCGroup()
		g.protocolType = "consumer"
		g.protocol = ""
	}
	return g.consumerHeartbeat(client, req, resp)
}

// checkConsumerHeartbeat is Kafka's request validation.
func (c *Coordinator) checkConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (*kerr.Error, string) {
	switch {
	case req.Group == "":
		return kerr.InvalidRequest, "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return kerr.InvalidRequest, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return kerr.InvalidRequest, "RackId can't be empty."
	case req.MemberEpoch < -2:
		return kerr.InvalidRequest, "MemberEpoch is invalid."
	case req.Version >= 1 && req.MemberID == "":
		return kerr.InvalidRequest, "MemberId can't be empty."
	case req.Version == 0 && req.MemberEpoch != 0 && req.MemberID == "":
		return kerr.InvalidRequest, "MemberId can't be empty."
	case req.MemberEpoch == -2 && req.InstanceID == nil:
		return kerr.InvalidRequest, "InstanceId can't be null when MemberEpoch is -2."
	}
	if req.MemberEpoch == 0 {
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		case req.Topics == nil || len(req.Topics) > 0:
			return kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining."
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return kerr.InvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileTopicRegex(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression, err.Error()
		}
	}
	if req.ServerAssignor != nil && assignors[*req.ServerAssignor] == nil {
		return kerr.UnsupportedAssignor, "ServerAssignor " + *req.ServerAssignor + " is not supported. Supported assignors: uniform, range."
	}
	return nil, ""
}

// compileTopicRegex compiles a SubscribedTopicRegex. Kafka uses RE2/J and
// matches the whole topic name; Go's regexp is RE2 as well, anchored here.
func compileTopicRegex(expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("SubscribedTopicRegex %q is invalid: %w", expr, err)
	}
	return re, nil
}

// consumerHeartbeat runs one heartbeat under g.mu.
func (g *group) consumerHeartbeat(client Client, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	cg := g.consumer
	fail := func(e *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	var instanceID string
	if req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	if req.MemberEpoch < 0 {
		return g.consumerLeave(req, resp)
	}
	// dirty: the state must be written; bump: the group epoch moves
	// (once per heartbeat, whatever changed).
	dirty, bump := false, false
	var m *cmember
	if req.MemberEpoch == 0 {
		memberID := req.MemberID
		if memberID == "" { // v0: the coordinator names the member
			memberID = newMemberID(client.ID)
		}
		if instanceID != "" {
			if oldID, ok := cg.static[instanceID]; ok && oldID != memberID {
				old := cg.members[oldID]
				if old != nil && old.epoch != -2 {
					return fail(kerr.UnreleasedInstanceID, "static member "+instanceID+" with member id "+oldID+" is still in the group")
				}
				if old != nil {
					// The static member restarted: the new member id
					// takes over its assignment, no rebalance.
					m = g.replaceConsumerStatic(old, memberID)
					dirty = true
				}
			}
		}
		if m == nil {
			old := cg.members[memberID]
			if max := g.c.cfg.MaxGroupSize; max > 0 && old == nil && len(cg.members) >= max {
				return fail(kerr.GroupMaxSizeReached, "")
			}
			if old != nil {
				// A rejoin after being fenced: it owns nothing now.
				g.removeConsumerMember(old, "member rejoined with epoch 0")
			}
			m = &cmember{id: memberID, instanceID: instanceID, assigned: topicParts{}, revoking: topicParts{}, since: map[TopicPartition]int32{}}
			cg.members[memberID] = m
			if instanceID != "" {
				cg.static[instanceID] = memberID
			}
			dirty, bump = true, true
			g.c.log.V(1).Info("consumer group member joined", "group", g.id, "member", memberID)
		}
	} else {
		m = cg.members[req.MemberID]
		if m == nil {
			return fail(kerr.UnknownMemberID, "member "+req.MemberID+" is not in group "+g.id)
		}
		if instanceID != "" && m.instanceID != instanceID {
			return fail(kerr.FencedInstanceID, "")
		}
		if owned := req.Topics; req.MemberEpoch > m.epoch ||
			(req.MemberEpoch < m.epoch && (req.MemberEpoch != m.prevEpoch || owned == nil || !g.ownedSubset(owned, m.assigned))) {
			return fail(kerr.FencedMemberEpoch, fmt.Sprintf("member epoch %d, expected %d", req.MemberEpoch, m.epoch))
		}
	}
	// Member fields: null means unchanged.
	m.clientID, m.clientHost = client.ID, client.Host
	changed := false
	if req.RackID != nil && *req.RackID != m.rack {
		m.rack, changed = *req.RackID, true
	}
	if req.RebalanceTimeoutMillis >= 0 {
		d := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
		dirty = dirty || d != m.rebalanceTimeout
		m.rebalanceTimeout = d
	}
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics, changed = topics, true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, changed = *req.SubscribedTopicRegex, true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor, changed = *req.ServerAssignor, true
	}
	if changed {
		dirty, bump = true, true
	}
	g.resetConsumerSession(m)
	// Subscribed topics' metadata: new partitions or topics matching a
	// regex change the assignment.
	if fingerprint := g.subscriptionFingerprint(); fingerprint != cg.subscription {
		cg.subscription = fingerprint
		dirty, bump = true, true
	}
	if bump {
		cg.epoch++
	}
	if cg.epoch > cg.assignmentEpoch {
		g.computeTarget(g.consumerSpec())
		dirty = true
	}
	before := m.assigned
	if g.reconcile(m, req.Topics) {
		dirty = true
	}
	g.syncConsumerState()
	if dirty {
		g.saveConsumer()
	}
	id := m.id
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(g.c.consumerHeartbeatInterval() / time.Millisecond)
	full := req.MemberEpoch == 0 || (req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || !before.equal(m.assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range sortedKeys(m.assigned) {
			tid, _, _, ok := g.c.cfg.Topics.Topic(t, false)
			if !ok || len(m.assigned[t]) == 0 {
				continue
			}
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID = tid
			at.Partitions = slices.Clone(m.assigned[t])
			a.Topics = append(a.Topics, at)
		}
		if a.Topics == nil {
			a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		resp.Assignment = &a
	}
	return resp
}

// consumerLeave handles MemberEpoch -1 (leave) and -2 (a static member
// leaving temporarily: it keeps its assignment until it rejoins under a
// new member id or its session expires).
func (g *group) consumerLeave(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	cg := g.consumer
	m := cg.members[req.MemberID]
	if m == nil && req.InstanceID != nil {
		m = cg.members[cg.static[*req.InstanceID]]
		if m != nil && req.MemberID != "" && m.id != req.MemberID {
			resp.ErrorCode = kerr.FencedInstanceID.Code
			return resp
		}
	}
	if m == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	id := req.MemberID
	resp.MemberID = &id
	resp.MemberEpoch = req.MemberEpoch
	if req.MemberEpoch == -2 && m.instanceID != "" {
		m.epoch = -2
		g.stop(&m.rebalance)
		g.saveConsumer()
		return resp
	}
	g.removeConsumerMember(m, "member left the group")
	g.syncConsumerState()
	g.saveConsumer()
	return resp
}

// replaceConsumerStatic moves a static member's place to a new member id.
func (g *group) replaceConsumerStatic(old *cmember, newID string) *cmember {
	cg := g.consumer
	g.stop(&old.session)
	g.stop(&old.rebalance)
	delete(cg.members, old.id)
	if t, ok := cg.target[old.id]; ok {
		delete(cg.target, old.id)
		cg.target[newID] = t
	}
	m := *old
	m.id = newID
	m.session, m.rebalance = timerSlot{}, timerSlot{}
	// As Kafka: the new incarnation starts at epoch 0 with the old one's
	// assignment, which reconciliation confirms at the target epoch
	// without a rebalance. Partitions the old one was revoking are not
	// the new one's (it joined owning nothing).
	m.epoch, m.prevEpoch, m.state = 0, 0, memberStable
	m.revoking = topicParts{}
	cg.members[newID] = &m
	cg.static[m.instanceID] = newID
	g.c.log.V(1).Info("static consumer member rejoined", "group", g.id, "instance", m.instanceID, "old", old.id, "new", newID)
	return &m
}

// removeConsumerMember takes a member out and bumps the group epoch; its
// partitions become free.
func (g *group) removeConsumerMember(m *cmember, reason string) {
	cg := g.consumer
	g.stop(&m.session)
	g.stop(&m.rebalance)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
	cg.epoch++
	g.c.log.V(1).Info("consumer group member removed", "group", g.id, "member", m.id, "reason", reason, "epoch", cg.epoch)
}

// syncConsumerState mirrors the consumer group into the classic state
// fields that offsets, retention and deletion look at: Empty without
// members, else Stable.
func (g *group) syncConsumerState() {
	if len(g.consumer.members) == 0 {
		if g.state != stateEmpty {
			g.state = stateEmpty
			g.emptySince = g.c.clock.Now()
		}
		return
	}
	g.state = stateStable
}

func (c *Coordinator) consumerSessionTimeout() time.Duration {
	return cmpOr(c.cfg.ConsumerSessionTimeout, defaultConsumerSessionTimeout)
}

func (c *Coordinator) consumerHeartbeatInterval() time.Duration {
	return cmpOr(c.cfg.ConsumerHeartbeatInterval, defaultConsumerHeartbeatInterval)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// resetConsumerSession (re)arms the member's session expiry.
func (g *group) resetConsumerSession(m *cmember) {
	g.schedule(&m.session, g.c.consumerSessionTimeout(), func() {
		if !g.consumerTimerCurrent() || g.consumer.members[m.id] != m {
			return
		}
		g.removeConsumerMember(m, "session timeout expired")
		g.syncConsumerState()
		g.saveConsumer()
	})
}

// consumerTimerCurrent reports whether a timer of the consumer group may
// act: this broker still coordinates the group and its state is the
// store's. A group that moved away is forgotten here (its new coordinator
// expires members); one read under an older ownership epoch is read
// again, which re-arms its timers.
func (g *group) consumerTimerCurrent() bool {
	if g.consumer == nil {
		return false
	}
	if !g.c.owns(g.id) {
		g.dropConsumerState()
		return false
	}
	if oe := g.c.cfg.OwnershipEpoch; oe != nil {
		if epoch := oe(); g.fenced || g.loadedEpoch != epoch {
			if err := g.c.reload(g); err != nil {
				g.c.log.Error(err, "reading group from the store", "group", g.id)
				return false
			}
			g.loadedEpoch = epoch
			return false
		}
	}
	return true
}

// dropConsumerState stops the consumer group's timers and forgets it.
// Callers hold g.mu.
func (g *group) dropConsumerState() {
	if g.consumer == nil {
		return
	}
	for _, m := range g.consumer.members {
		g.stop(&m.session)
		g.stop(&m.rebalance)
	}
	g.consumer = nil
	if len(g.members) == 0 {
		g.state = stateEmpty
	}
}

// topicView resolves the members' subscriptions against the cluster's
// topics, each topic read once per heartbeat.
type topicView struct {
	md      TopicMetadata
	racks   bool
	all     []string // every topic name, when a member has a regex
	topics  map[string]topicInfo
	known   map[string]bool
	regexps map[string]*regexp.Regexp
}

func (g *group) newTopicView() *topicView {
	cg := g.consumer
	v := &topicView{md: g.c.cfg.Topics, topics: map[string]topicInfo{}, known: map[string]bool{}, regexps: cg.regexps}
	anyRegex := false
	for _, m := range cg.members {
		anyRegex = anyRegex || m.regex != ""
		v.racks = v.racks || m.rack != ""
	}
	if anyRegex {
		v.all = v.md.TopicNames()
	}
	return v
}

func (v *topicView) exists(t string) bool {
	if ok, seen := v.known[t]; seen {
		return ok
	}
	id, n, racks, ok := v.md.Topic(t, v.racks)
	v.known[t] = ok
	if ok {
		v.topics[t] = topicInfo{id: id, partitions: n, racks: racks}
	}
	return ok
}

// matches returns the topics a regex matches (compiled once per group).
func (v *topicView) matches(expr string) []string {
	re := v.regexps[expr]
	if re == nil {
		var err error
		if re, err = compileTopicRegex(expr); err != nil {
			return nil // validated on arrival; a stored one may not be
		}
		v.regexps[expr] = re
	}
	var out []string
	for _, t := range v.all {
		if re.MatchString(t) && v.exists(t) {
			out = append(out, t)
		}
	}
	return out
}

// subscriptionFingerprint describes the metadata of every topic some
// member subscribes to (by name or regex): the group epoch moves when it
// changes. It is computed at every heartbeat, so it resolves each distinct
// name and regex once, not per member.
func (g *group) subscriptionFingerprint() string {
	cg := g.consumer
	v := g.newTopicView()
	names, regexes := map[string]bool{}, map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.topics {
			names[t] = true
		}
		if m.regex != "" {
			regexes[m.regex] = true
		}
	}
	// Keep compiled regexes of current members only: a member changing
	// its regex at every heartbeat must not grow the cache.
	for expr := range cg.regexps {
		if !regexes[expr] {
			delete(cg.regexps, expr)
		}
	}
	for t := range names {
		v.exists(t)
	}
	for expr := range regexes {
		v.matches(expr)
	}
	var b strings.Builder
	for _, t := range sortedKeys(v.topics) {
		info := v.topics[t]
		fmt.Fprintf(&b, "%s/%x/%d", t, info.id, info.partitions)
		for _, r := range info.racks {
			b.WriteString("/" + strings.Join(r, ","))
		}
		b.WriteByte(';')
	}
	return b.String()
}

// consumerSpec builds the assignors' input from the members and the
// cluster's topics.
func (g *group) consumerSpec() assignSpec {
	cg := g.consumer
	v := g.newTopicView()
	spec := assignSpec{topics: v.topics}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		spec.members = append(spec.members, assignMember{
			id: m.id, rack: m.rack, topics: v.resolve(m), current: cg.target[m.id],
		})
	}
	return spec
}

// resolve returns the existing topics a member subscribes to, by name
// and by regex, sorted.
func (v *topicView) resolve(m *cmember) []string {
	var out []string
	for _, t := range m.topics {
		if v.exists(t) {
			out = append(out, t)
		}
	}
	if m.regex != "" {
		for _, t := range v.matches(m.regex) {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

// preferredAssignor is the assignor most members ask for (Kafka's rule),
// uniform when none asks.
func (cg *cgroup) preferredAssignor() string {
	counts := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			counts[m.assignor]++
		}
	}
	best := assignorUniform
	for _, name := range []string{assignorUniform, assignorRange} {
		if counts[name] > counts[best] {
			best = name
		}
	}
	return best
}

// computeTarget runs the group's assignor and moves the target assignment
// epoch to the group epoch.
func (g *group) computeTarget(spec assignSpec) {
	cg := g.consumer
	cg.assignor = cg.preferredAssignor()
	cg.target = assignors[cg.assignor](spec)
	cg.assignmentEpoch = cg.epoch
	g.c.log.V(1).Info("consumer group target assignment", "group", g.id, "epoch", cg.epoch, "assignor", cg.assignor, "members", len(cg.members))
}

// ownedSubset reports whether the partitions a member reports owning (by
// topic id) are all in set.
func (g *group) ownedSubset(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, set topicParts) bool {
	for _, t := range owned {
		name, ok := g.c.cfg.Topics.TopicName(t.TopicID)
		if !ok {
			continue // a deleted topic: not a partition to protect
		}
		for _, p := range t.Partitions {
			if !set.has(name, p) {
				return false
			}
		}
	}
	return true
}

// ownsAny reports whether the reported partitions include one of set.
func (g *group) ownsAny(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, set topicParts) bool {
	for _, t := range owned {
		name, ok := g.c.cfg.Topics.TopicName(t.TopicID)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			if set.has(name, p) {
				return true
			}
		}
	}
	return false
}

// heldByOther reports whether a member other than m holds the partition
// (assigned or pending revocation).
func (cg *cgroup) heldByOther(m *cmember, topic string, p int32) bool {
	for _, o := range cg.members {
		if o != m && (o.assigned.has(topic, p) || o.revoking.has(topic, p)) {
			return true
		}
	}
	return false
}

// reconcile is Kafka's CurrentAssignmentBuilder: it moves m towards its
// target assignment given the partitions it reports owning (nil: same as
// last time). It reports whether m changed.
func (g *group) reconcile(m *cmember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) bool {
	cg := g.consumer
	if m.epoch < 0 {
		return false
	}
	switch m.state {
	case memberStable:
		if m.epoch == cg.assignmentEpoch {
			return false
		}
	case memberUnrevoked:
		if owned == nil || g.ownsAny(owned, m.revoking) {
			return false
		}
	}
	return g.nextAssignment(m, owned)
}

// nextAssignment computes m's next state from its target, given the
// partitions the member reports owning (nil: unknown).
func (g *group) nextAssignment(m *cmember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) bool {
	cg := g.consumer
	target := cg.target[m.id]
	keep, revoke, add := topicParts{}, topicParts{}, topicParts{}
	unreleased := false
	for _, t := range sortedKeys(m.assigned) {
		for _, p := range m.assigned[t] {
			if target.has(t, p) {
				keep[t] = append(keep[t], p)
			} else {
				revoke[t] = append(revoke[t], p)
			}
		}
	}
	for _, t := range sortedKeys(target) {
		for _, p := range target[t] {
			if m.assigned.has(t, p) {
				continue
			}
			if cg.heldByOther(m, t, p) {
				unreleased = true
				continue
			}
			add[t] = append(add[t], p)
		}
	}
	prev := *m
	// Revocation waits for the member only if it may still own one of
	// the partitions (Kafka's ownsRevokedPartitions): a joining member, or
	// one that already dropped them, gives them up at once.
	if revoke.count() > 0 && (owned == nil || g.ownsAny(owned, revoke)) {
		// Revoke first: the member keeps what it keeps, gets nothing new
		// and stays at its epoch until its heartbeat shows the revoked
		// partitions gone.
		m.state, m.assigned, m.revoking = memberUnrevoked, keep, revoke
		if prev.state != memberUnrevoked || !prev.revoking.equal(revoke) {
			g.armRebalance(m)
		}
	} else {
		g.stop(&m.rebalance)
		if m.epoch != cg.assignmentEpoch {
			m.prevEpoch, m.epoch = m.epoch, cg.assignmentEpoch
		}
		since := make(map[TopicPartition]int32, keep.count()+add.count())
		for t, ps := range keep {
			for _, p := range ps {
				since[TopicPartition{t, p}] = m.since[TopicPartition{t, p}]
			}
		}
		for t, ps := range add {
			for _, p := range ps {
				since[TopicPartition{t, p}] = m.epoch
			}
			keep[t] = append(keep[t], ps...)
			slices.Sort(keep[t])
		}
		m.since = since
		m.assigned, m.revoking = keep, topicParts{}
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleased
		}
	}
	return m.state != prev.state || m.epoch != prev.epoch || !m.assigned.equal(prev.assigned) || !m.revoking.equal(prev.revoking)
}

// armRebalance gives a member that must revoke partitions its rebalance
// timeout to do so; past it, the member is fenced.
func (g *group) armRebalance(m *cmember) {
	epoch := m.epoch
	g.schedule(&m.rebalance, cmpOr(m.rebalanceTimeout, g.c.consumerSessionTimeout()), func() {
		if !g.consumerTimerCurrent() || g.consumer.members[m.id] != m || m.state != memberUnrevoked || m.epoch != epoch {
			return
		}
		g.removeConsumerMember(m, "did not revoke its partitions within the rebalance timeout")
		g.syncConsumerState()
		g.saveConsumer()
	})
}

// consumerStateName is the group state as Kafka names a consumer group's.
func (g *group) consumerStateName() string {
	cg := g.consumer
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch != cg.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// stateName is the group state ListGroups reports.
func (g *group) stateName() string {
	if g.consumer != nil {
		return g.consumerStateName()
	}
	return g.state.String()
}

// groupType is "consumer" for a KIP-848 group, else "classic".
func (g *group) groupType() string {
	if g.consumer != nil {
		return "consumer"
	}
	return "classic"
}

// validateConsumerCommit is Kafka's ConsumerGroup.validateOffsetCommit
// with KIP-1251's assignment epochs: a commit carrying the member's
// current epoch is accepted; one carrying an older epoch only for the
// partitions the member has held (assigned or pending revocation) since
// that epoch or before, the others get STALE_MEMBER_EPOCH (perPartition,
// nil when every partition passes). A commit that raced a heartbeat moving
// the member's epoch is then not refused for partitions it still owns:
// Kafka 4.0 refused it, and a client already leaving (franz-go) cannot
// retry with the new epoch, so those offsets were lost.
func (g *group) validateConsumerCommit(epoch int32, memberID string, version int16, transactional bool) (code int16, perPartition func(topic string, p int32) int16) {
	cg := g.consumer
	if epoch < 0 && len(cg.members) == 0 {
		return 0, nil // admin or simple commits to an empty group
	}
	if transactional && epoch < 0 && memberID == "" {
		return 0, nil
	}
	m := cg.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code, nil
	}
	if !transactional && version < 9 {
		return kerr.UnsupportedVersion.Code, nil
	}
	switch {
	case epoch == m.epoch:
		return 0, nil
	case epoch > m.epoch || epoch < 0:
		return kerr.StaleMemberEpoch.Code, nil
	}
	return 0, func(topic string, p int32) int16 {
		since, ok := m.since[TopicPartition{topic, p}]
		if !ok || since > epoch || !(m.assigned.has(topic, p) || m.revoking.has(topic, p)) {
			return kerr.StaleMemberEpoch.Code
		}
		return 0
	}
}

// validateConsumerFetch is Kafka's ConsumerGroup.validateOffsetFetch: a
// member's fetch (member id or epoch set) must carry its current epoch.
func (g *group) validateConsumerFetch(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	var id string
	if memberID != nil {
		id = *memberID
	}
	m := g.consumer.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if epoch != m.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// subscribedConsumerTopics returns the topics the members subscribe to.
func (g *group) subscribedConsumerTopics() map[string]bool {
	out := map[string]bool{}
	var v *topicView
	if g.c.cfg.Topics != nil {
		v = g.newTopicView()
	}
	for _, m := range g.consumer.members {
		for _, t := range m.topics {
			out[t] = true
		}
		if v != nil {
			for _, t := range v.resolve(m) {
				out[t] = true
			}
		}
	}
	return out
}

// ConsumerGroupDescribe handles ConsumerGroupDescribe v0-v1.
func (c *Coordinator) ConsumerGroupDescribe(_ context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		dg.State = "Dead"
		notFound := func(why string) {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "group " + id + why
			dg.ErrorMessage = &msg
		}
		switch {
		case id == "":
			dg.ErrorCode = kerr.InvalidGroupID.Code
		case !c.owns(id):
			dg.ErrorCode = kerr.NotCoordinator.Code
		default:
			g := c.lockGroup(id, false)
			if g == nil {
				if c.isClosed() {
					dg.ErrorCode = kerr.NotCoordinator.Code
				} else if c.isShareGroup(id) {
					notFound(" is not a consumer group")
				} else {
					notFound(" not found")
				}
				break
			}
			if g.consumer == nil {
				notFound(" is not a consumer group")
			} else {
				g.describeConsumer(&dg, req.Version)
			}
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (g *group) describeConsumer(dg *kmsg.ConsumerGroupDescribeResponseGroup, version int16) {
	cg := g.consumer
	dg.State = g.consumerStateName()
	dg.Epoch = cg.epoch
	dg.AssignmentEpoch = cg.assignmentEpoch
	dg.AssignorName = cg.assignor
	if dg.AssignorName == "" {
		dg.AssignorName = cg.preferredAssignor()
	}
	toAssignment := func(tp topicParts) kmsg.Assignment {
		a := kmsg.NewAssignment()
		a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
		for _, t := range sortedKeys(tp) {
			if len(tp[t]) == 0 {
				continue
			}
			at := kmsg.NewAssignmentTopicPartition()
			at.Topic = t
			if g.c.cfg.Topics != nil {
				at.TopicID, _, _, _ = g.c.cfg.Topics.Topic(t, false)
			}
			at.Partitions = slices.Clone(tp[t])
			a.TopicPartitions = append(a.TopicPartitions, at)
		}
		return a
	}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		if m.instanceID != "" {
			iid := m.instanceID
			dm.InstanceID = &iid
		}
		if m.rack != "" {
			rack := m.rack
			dm.RackID = &rack
		}
		dm.MemberEpoch = m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = slices.Clone(m.topics)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			re := m.regex
			dm.SubscribedTopicRegex = &re
		}
		dm.Assignment = toAssignment(m.assigned)
		dm.TargetAssignment = toAssignment(cg.target[m.id])
		if version >= 1 {
			dm.MemberType = 1 // consumer protocol
		}
		dg.Members = append(dg.Members, dm)
	}
}

// describeConsumerClassic is DescribeGroups of a consumer group, as
// Kafka answers it (ConsumerGroup.asDescribedGroup): protocol type
// "consumer", the assignor as protocol, each member's subscription and
// assignment in the classic consumer protocol's encoding.
func (g *group) describeConsumerClassic(dg *kmsg.DescribeGroupsResponseGroup) {
	cg := g.consumer
	dg.State = g.consumerStateName()
	dg.ProtocolType = "consumer"
	dg.Protocol = cg.assignor
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		if m.instanceID != "" {
			iid := m.instanceID
			dm.InstanceID = &iid
		}
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 3
		meta.Topics = slices.Clone(m.topics)
		if m.rack != "" {
			rack := m.rack
			meta.Rack = &rack
		}
		dm.ProtocolMetadata = meta.AppendTo(nil)
		asg := kmsg.NewConsumerMemberAssignment()
		asg.Version = 3
		for _, t := range sortedKeys(m.assigned) {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t, slices.Clone(m.assigned[t])
			asg.Topics = append(asg.Topics, at)
		}
		dm.MemberAssignment = asg.AppendTo(nil)
		dg.Members = append(dg.Members, dm)
	}
}

// ConsumerGroupMetadata is the durable state of a consumer-protocol
// group (GroupMetadata.Consumer): what Kafka writes to __consumer_offsets
// as its ConsumerGroup* records.
type ConsumerGroupMetadata struct {
	Epoch           int32                    `json:"epoch"`
	AssignmentEpoch int32                    `json:"assignmentEpoch"`
	Assignor        string                   `json:"assignor,omitempty"`
	Subscription    string                   `json:"subscription,omitempty"`
	Members         []ConsumerMemberMetadata `json:"members"`
}

// ConsumerMemberMetadata is one member of a ConsumerGroupMetadata.
type ConsumerMemberMetadata struct {
	ID                     string             `json:"id"`
	InstanceID             string             `json:"instanceID,omitempty"`
	RackID                 string             `json:"rackID,omitempty"`
	ClientID               string             `json:"clientID"`
	ClientHost             string             `json:"clientHost"`
	SubscribedTopics       []string           `json:"subscribedTopics,omitempty"`
	SubscribedTopicRegex   string             `json:"subscribedTopicRegex,omitempty"`
	ServerAssignor         string             `json:"serverAssignor,omitempty"`
	RebalanceTimeoutMillis int32              `json:"rebalanceTimeoutMillis"`
	Epoch                  int32              `json:"epoch"`
	PreviousEpoch          int32              `json:"previousEpoch"`
	State                  string             `json:"state"`
	Assigned               map[string][]int32 `json:"assigned,omitempty"`
	Revoking               map[string][]int32 `json:"revoking,omitempty"`
	Target                 map[string][]int32 `json:"target,omitempty"`
	// AssignmentEpochs is the epoch each assigned or revoking partition
	// was given to the member at, by topic and partition.
	AssignmentEpochs map[string]map[int32]int32 `json:"assignmentEpochs,omitempty"`
}

// saveConsumer persists the consumer group. As saveMembership, a failure
// is logged: the next change writes everything again, and a coordinator
// that reads an older state fences the members whose epochs it does not
// know (they rejoin).
func (g *group) saveConsumer() {
	ms, ok := g.c.store.(MembershipStore)
	if !ok {
		return
	}
	cg := g.consumer
	md := GroupMetadata{Generation: cg.epoch, ProtocolType: "consumer", Consumer: &ConsumerGroupMetadata{
		Epoch: cg.epoch, AssignmentEpoch: cg.assignmentEpoch, Assignor: cg.assignor, Subscription: cg.subscription,
		Members: []ConsumerMemberMetadata{},
	}}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		since := map[string]map[int32]int32{}
		for tp, e := range m.since {
			if since[tp.Topic] == nil {
				since[tp.Topic] = map[int32]int32{}
			}
			since[tp.Topic][tp.Partition] = e
		}
		md.Consumer.Members = append(md.Consumer.Members, ConsumerMemberMetadata{
			AssignmentEpochs: since,
			ID:               m.id, InstanceID: m.instanceID, RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost,
			SubscribedTopics: m.topics, SubscribedTopicRegex: m.regex, ServerAssignor: m.assignor,
			RebalanceTimeoutMillis: int32(m.rebalanceTimeout / time.Millisecond),
			Epoch:                  m.epoch, PreviousEpoch: m.prevEpoch, State: strconv.Itoa(int(m.state)),
			Assigned: m.assigned, Revoking: m.revoking, Target: cg.target[m.id],
		})
	}
	if err := ms.SaveGroup(context.Background(), g.id, md); err != nil {
		if g.storeFailed(err) == kerr.NotCoordinator.Code {
			g.c.log.Info("consumer group not saved: another coordinator claimed the group", "group", g.id, "epoch", cg.epoch)
			return
		}
		g.c.log.Error(err, "persisting consumer group failed", "group", g.id)
	}
}

// restoreConsumer takes back a consumer group from its stored state, each
// member with a fresh session timeout. Callers hold g.mu.
func (g *group) restoreConsumer(md *ConsumerGroupMetadata) {
	g.dropConsumerState()
	cg := newCGroup()
	cg.epoch, cg.assignmentEpoch, cg.assignor, cg.subscription = md.Epoch, md.AssignmentEpoch, md.Assignor, md.Subscription
	g.consumer = cg
	g.protocolType = "consumer"
	for _, mm := range md.Members {
		state, _ := strconv.Atoi(mm.State)
		m := &cmember{
			id: mm.ID, instanceID: mm.InstanceID, rack: mm.RackID, clientID: mm.ClientID, clientHost: mm.ClientHost,
			topics: mm.SubscribedTopics, regex: mm.SubscribedTopicRegex, assignor: mm.ServerAssignor,
			rebalanceTimeout: time.Duration(mm.RebalanceTimeoutMillis) * time.Millisecond,
			epoch:            mm.Epoch, prevEpoch: mm.PreviousEpoch, state: memberState(state),
			assigned: topicParts(mm.Assigned), revoking: topicParts(mm.Revoking),
		}
		if m.assigned == nil {
			m.assigned = topicParts{}
		}
		if m.revoking == nil {
			m.revoking = topicParts{}
		}
		m.since = map[TopicPartition]int32{}
		for _, set := range []topicParts{m.assigned, m.revoking} {
			for t, ps := range set {
				for _, p := range ps {
					e, ok := mm.AssignmentEpochs[t][p]
					if !ok {
						e = max(m.epoch, 0) // unknown: only the current epoch
					}
					m.since[TopicPartition{t, p}] = e
				}
			}
		}
		cg.members[m.id] = m
		if m.instanceID != "" {
			cg.static[m.instanceID] = m.id
		}
		if mm.Target != nil {
			cg.target[m.id] = topicParts(mm.Target)
		}
		g.resetConsumerSession(m)
		if m.state == memberUnrevoked {
			g.armRebalance(m)
		}
	}
	g.syncConsumerState()
}
