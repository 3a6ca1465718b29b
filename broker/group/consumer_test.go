package group

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a TopicMetadata for tests.
type fakeTopics struct {
	mu     sync.Mutex
	topics map[string]int32      // name → partitions
	racks  map[string][][]string // name → racks per partition
}

func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	id[15] = 1
	return id
}

func (f *fakeTopics) TopicNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sortedKeys(f.topics)
}

func (f *fakeTopics) Topic(name string, racks bool) ([16]byte, int32, [][]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.topics[name]
	if !ok {
		return [16]byte{}, 0, nil, false
	}
	var r [][]string
	if racks {
		r = f.racks[name]
	}
	return topicID(name), n, r, true
}

func (f *fakeTopics) TopicName(id [16]byte) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name := range f.topics {
		if topicID(name) == id {
			return name, true
		}
	}
	return "", false
}

func (f *fakeTopics) set(name string, partitions int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topics[name] = partitions
}

const (
	testConsumerSession = 45 * time.Second
	testMemberRebalance = 30 * time.Second
)

func newConsumerHarness(t *testing.T, mods ...func(*Config)) (*harness, *fakeTopics) {
	topics := &fakeTopics{topics: map[string]int32{"t": 6}}
	h := newHarness(t, append([]func(*Config){func(c *Config) {
		c.Topics = topics
		c.ConsumerSessionTimeout = testConsumerSession
	}}, mods...)...)
	return h, topics
}

// cmemberClient is one simulated KIP-848 member: it remembers its epoch
// and the partitions it owns (what it reports in Topics).
type cmemberClient struct {
	h        *harness
	group    string
	id       string
	instance string
	topics   []string
	regex    string
	assignor string
	rack     string
	epoch    int32
	owned    map[string][]int32
}

func (h *harness) member(group, id string, topics ...string) *cmemberClient {
	return &cmemberClient{h: h, group: group, id: id, topics: topics, owned: map[string][]int32{}}
}

func (m *cmemberClient) request(epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.id, epoch
	if m.instance != "" {
		req.InstanceID = &m.instance
	}
	if m.rack != "" {
		req.RackID = &m.rack
	}
	req.RebalanceTimeoutMillis = int32(testMemberRebalance / time.Millisecond)
	if m.regex != "" {
		req.SubscribedTopicRegex = &m.regex
	} else {
		req.SubscribedTopicNames = m.topics
	}
	if m.assignor != "" {
		req.ServerAssignor = &m.assignor
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, t := range sortedKeys(m.owned) {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = topicID(t), slices.Clone(m.owned[t])
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// send sends req and, on success, applies the response as a client does:
// the new epoch, and the assignment (revoking what is no longer in it
// at once: the callback committed instantly).
func (m *cmemberClient) send(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	m.h.t.Helper()
	resp := m.h.c.ConsumerGroupHeartbeat(context.Background(), Client{ID: m.id, Host: "/127.0.0.1"}, req)
	if resp.ErrorCode != 0 || resp.MemberEpoch < 0 {
		return resp
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = map[string][]int32{}
		for _, at := range resp.Assignment.Topics {
			name := string(at.TopicID[:1]) // test topics have one-letter names
			m.owned[name] = slices.Clone(at.Partitions)
		}
	}
	return resp
}

func (m *cmemberClient) join() *kmsg.ConsumerGroupHeartbeatResponse {
	m.h.t.Helper()
	m.owned = map[string][]int32{}
	resp := m.send(m.request(0))
	wantCode(m.h.t, "join "+m.id, resp.ErrorCode, nil)
	return resp
}

func (m *cmemberClient) heartbeat() *kmsg.ConsumerGroupHeartbeatResponse {
	m.h.t.Helper()
	return m.send(m.request(m.epoch))
}

func (m *cmemberClient) ownedCount() int {
	n := 0
	for _, ps := range m.owned {
		n += len(ps)
	}
	return n
}

func (m *cmemberClient) owns(topic string, p int32) bool { return slices.Contains(m.owned[topic], p) }

// settle heartbeats the members round-robin until nobody's state changes.
func settle(t *testing.T, ms ...*cmemberClient) {
	t.Helper()
	for range 20 {
		changed := false
		for _, m := range ms {
			before, owned := m.epoch, m.ownedCount()
			resp := m.heartbeat()
			wantCode(t, "heartbeat "+m.id, resp.ErrorCode, nil)
			changed = changed || before != m.epoch || owned != m.ownedCount()
		}
		if !changed {
			return
		}
	}
	t.Fatalf("members did not settle")
}

// noDoubleOwnership fails if two members' clients own one partition.
func noDoubleOwnership(t *testing.T, ms ...*cmemberClient) {
	t.Helper()
	seen := map[TopicPartition]string{}
	for _, m := range ms {
		for topic, ps := range m.owned {
			for _, p := range ps {
				if o, ok := seen[TopicPartition{topic, p}]; ok {
					t.Fatalf("%s-%d owned by %s and %s", topic, p, o, m.id)
				}
				seen[TopicPartition{topic, p}] = m.id
			}
		}
	}
}

// TestConsumerRevokeBeforeAssign walks the reconciliation state machine:
// a second member gets nothing the first still owns until the first's
// heartbeat shows it revoked those partitions; the first stays at its
// epoch meanwhile.
func TestConsumerRevokeBeforeAssign(t *testing.T) {
	h, _ := newConsumerHarness(t)
	m1, m2 := h.member("g", "m1", "t"), h.member("g", "m2", "t")
	resp := m1.join()
	if m1.epoch != 1 || m1.ownedCount() != 6 {
		t.Fatalf("m1 after join: epoch %d, owns %v", m1.epoch, m1.owned)
	}
	if resp.HeartbeatIntervalMillis != 5000 || resp.MemberID == nil || *resp.MemberID != "m1" {
		t.Fatalf("join response: %+v", resp)
	}
	m2.join()
	if m2.ownedCount() != 0 || m2.epoch != 2 {
		t.Fatalf("m2 got %v at epoch %d while m1 owns everything", m2.owned, m2.epoch)
	}
	h.inspect("g", func(g *group) {
		if s := g.consumer.members["m2"].state; s != memberUnreleased {
			t.Errorf("m2 state %v, want UNRELEASED_PARTITIONS", s)
		}
	})
	// m1's heartbeat still reports all six: it is told to keep three
	// and stays at epoch 1 (UNREVOKED_PARTITIONS).
	req := m1.request(m1.epoch)
	resp = m1.h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req)
	wantCode(t, "m1 heartbeat", resp.ErrorCode, nil)
	if resp.MemberEpoch != 1 || resp.Assignment == nil || len(resp.Assignment.Topics[0].Partitions) != 3 {
		t.Fatalf("m1 should be told to keep 3 partitions at epoch 1: %+v", resp)
	}
	// Not yet revoked (m1 reports all six again): m2 still gets nothing.
	m1.h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, m1.request(1))
	m2.heartbeat()
	if m2.ownedCount() != 0 {
		t.Fatalf("m2 got %v before m1 revoked", m2.owned)
	}
	// m1 revokes (applies the response), then m2 gets the rest.
	m1.send(m1.request(1))
	if m1.epoch != 1 {
		t.Fatalf("m1 epoch %d before its revocation was acknowledged", m1.epoch)
	}
	m1.heartbeat()
	if m1.epoch != 2 || m1.ownedCount() != 3 {
		t.Fatalf("m1 after revoking: epoch %d, owns %v", m1.epoch, m1.owned)
	}
	noDoubleOwnership(t, m1, m2)
	m2.heartbeat()
	if m2.ownedCount() != 3 {
		t.Fatalf("m2 after m1 revoked: %v", m2.owned)
	}
	noDoubleOwnership(t, m1, m2)

	// ConsumerGroupDescribe shows the settled group.
	d := h.c.ConsumerGroupDescribe(context.Background(), &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{"g", "nope"}})
	g := d.Groups[0]
	if g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != 2 || g.AssignmentEpoch != 2 || g.AssignorName != "uniform" || len(g.Members) != 2 {
		t.Fatalf("describe: %+v", g)
	}
	for _, dm := range g.Members {
		if dm.MemberEpoch != 2 || dm.MemberType != 1 || len(dm.Assignment.TopicPartitions) != 1 || len(dm.Assignment.TopicPartitions[0].Partitions) != 3 {
			t.Fatalf("describe member: %+v", dm)
		}
	}
	wantCode(t, "describe unknown group", d.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	lg := h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}})
	if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "consumer" || lg.Groups[0].GroupState != "Stable" || lg.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("list groups: %+v", lg.Groups)
	}
}

// TestConsumerJoinLeaveChurn: members join and leave; after each change
// the group settles balanced with no partition owned twice at any step.
func TestConsumerJoinLeaveChurn(t *testing.T) {
	h, _ := newConsumerHarness(t)
	var ms []*cmemberClient
	for _, id := range []string{"a", "b", "c"} {
		m := h.member("g", id, "t")
		m.join()
		ms = append(ms, m)
		noDoubleOwnership(t, ms...)
		settle(t, ms...)
		noDoubleOwnership(t, ms...)
	}
	for _, m := range ms {
		if m.ownedCount() != 2 {
			t.Fatalf("%s owns %v, want 2 partitions", m.id, m.owned)
		}
	}
	// b leaves (epoch -1): a and c take its partitions.
	req := ms[1].request(-1)
	resp := h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req)
	if resp.ErrorCode != 0 || resp.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", resp)
	}
	rest := []*cmemberClient{ms[0], ms[2]}
	settle(t, rest...)
	noDoubleOwnership(t, rest...)
	if ms[0].ownedCount() != 3 || ms[2].ownedCount() != 3 {
		t.Fatalf("after leave: a %v, c %v", ms[0].owned, ms[2].owned)
	}
	wantCode(t, "heartbeat after leave", ms[1].heartbeat().ErrorCode, kerr.UnknownMemberID)
}

// TestConsumerFencing: epochs the coordinator did not hand out are fenced;
// a member whose response was lost may come back with its previous epoch
// and a subset of its partitions.
func TestConsumerFencing(t *testing.T) {
	h, _ := newConsumerHarness(t)
	m1, m2 := h.member("g", "m1", "t"), h.member("g", "m2", "t")
	m1.join()
	m2.join()
	settle(t, m1, m2)
	wantCode(t, "epoch from the future", m1.send(m1.request(m1.epoch+1)).ErrorCode, kerr.FencedMemberEpoch)
	stale := m1.request(1)
	stale.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID("t"), Partitions: []int32{0, 1, 2, 3, 4, 5}}}
	wantCode(t, "previous epoch with more than assigned", m1.send(stale).ErrorCode, kerr.FencedMemberEpoch)
	wantCode(t, "previous epoch with a subset", m1.send(m1.request(1)).ErrorCode, nil)
	wantCode(t, "unknown member", h.member("g", "zz", "t").send(h.member("g", "zz", "t").request(3)).ErrorCode, kerr.UnknownMemberID)

	// A third member joins; m1's response telling it to revoke is "lost",
	// it revokes anyway on a retry at its previous epoch with a subset.
	m3 := h.member("g", "m3", "t")
	m3.join()
	settle(t, m1, m2, m3)
	h.inspect("g", func(g *group) {
		if g.consumer.members["m1"].prevEpoch == g.consumer.members["m1"].epoch {
			t.Fatalf("previous epoch not recorded")
		}
	})
	prev := h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, func() *kmsg.ConsumerGroupHeartbeatRequest {
		h.inspect("g", func(g *group) { m1.epoch = g.consumer.members["m1"].prevEpoch })
		return m1.request(m1.epoch)
	}())
	wantCode(t, "previous epoch with a subset", prev.ErrorCode, nil)
}

// TestConsumerSessionTimeout: a member that stops heartbeating is removed
// after group.consumer.session.timeout.ms and its partitions go to the
// others; its next heartbeat gets UNKNOWN_MEMBER_ID.
func TestConsumerSessionTimeout(t *testing.T) {
	h, _ := newConsumerHarness(t)
	m1, m2 := h.member("g", "m1", "t"), h.member("g", "m2", "t")
	m1.join()
	m2.join()
	settle(t, m1, m2)
	for range 3 {
		h.clock.Advance(testConsumerSession / 2)
		m1.heartbeat()
	}
	wantCode(t, "expired member", m2.heartbeat().ErrorCode, kerr.UnknownMemberID)
	settle(t, m1)
	if m1.ownedCount() != 6 {
		t.Fatalf("m1 owns %v after m2 expired", m1.owned)
	}
}

// TestConsumerRebalanceTimeout: a member that never revokes is fenced
// after its rebalance timeout; the partitions then go to the member that
// waited for them.
func TestConsumerRebalanceTimeout(t *testing.T) {
	h, _ := newConsumerHarness(t)
	m1, m2 := h.member("g", "m1", "t"), h.member("g", "m2", "t")
	m1.join()
	m2.join()
	stuck := m1.request(m1.epoch) // keeps reporting all six
	for range 4 {
		h.clock.Advance(testMemberRebalance / 3)
		resp := h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, stuck)
		if resp.ErrorCode != 0 {
			wantCode(t, "stuck member after the rebalance timeout", resp.ErrorCode, kerr.UnknownMemberID)
			break
		}
		m2.heartbeat()
		if m2.ownedCount() != 0 {
			t.Fatalf("m2 got %v while m1 had not revoked", m2.owned)
		}
	}
	settle(t, m2)
	if m2.ownedCount() != 6 {
		t.Fatalf("m2 owns %v after m1 was fenced", m2.owned)
	}
}

// TestConsumerStaticMember: a static member leaving with epoch -2 keeps
// its partitions; its restart (a new member id) takes them over without
// a new group epoch. While the old one is active, the instance id is
// UNRELEASED_INSTANCE_ID.
func TestConsumerStaticMember(t *testing.T) {
	h, _ := newConsumerHarness(t)
	s1, m2 := h.member("g", "s1", "t"), h.member("g", "m2", "t")
	s1.instance = "inst"
	s1.join()
	m2.join()
	settle(t, s1, m2)
	had := s1.owned
	var groupEpoch int32
	h.inspect("g", func(g *group) { groupEpoch = g.consumer.epoch })

	clash := h.member("g", "s1-new", "t")
	clash.instance = "inst"
	wantCode(t, "instance still in use", clash.send(clash.request(0)).ErrorCode, kerr.UnreleasedInstanceID)

	resp := s1.send(s1.request(-2))
	if resp.ErrorCode != 0 || resp.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", resp)
	}
	m2.heartbeat()
	if m2.ownedCount() != 3 {
		t.Fatalf("m2 took the static member's partitions: %v", m2.owned)
	}
	clash.join()
	if !maps2Equal(clash.owned, had) {
		t.Fatalf("restarted static member got %v, had %v", clash.owned, had)
	}
	h.inspect("g", func(g *group) {
		if g.consumer.epoch != groupEpoch {
			t.Errorf("group epoch %d, was %d: the restart rebalanced", g.consumer.epoch, groupEpoch)
		}
	})
	wantCode(t, "old incarnation", s1.send(s1.request(s1.epoch)).ErrorCode, kerr.UnknownMemberID)
}

func maps2Equal(a, b map[string][]int32) bool {
	return topicParts(a).equal(topicParts(b))
}

// TestConsumerHeartbeatValidation covers Kafka's request checks.
func TestConsumerHeartbeatValidation(t *testing.T) {
	h, _ := newConsumerHarness(t)
	m := h.member("g", "m", "t")
	for _, tc := range []struct {
		name string
		mod  func(*kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { a := "sticky"; r.ServerAssignor = &a }, kerr.UnsupportedAssignor},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) { re := "t(("; r.SubscribedTopicRegex = &re }, kerr.InvalidRegularExpression},
		{"no member id in v1", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"owned partitions on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID("t"), Partitions: []int32{0}}}
		}, kerr.InvalidRequest},
		{"no subscription on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest},
		{"no rebalance timeout on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest},
		{"epoch below -2", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"static leave without instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := m.request(0)
			tc.mod(req)
			wantCode(t, tc.name, h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req).ErrorCode, tc.want)
		})
	}
	// v0: the coordinator names the member.
	req := m.request(0)
	req.Version, req.MemberID = 0, ""
	resp := h.c.ConsumerGroupHeartbeat(context.Background(), Client{ID: "cli"}, req)
	if resp.ErrorCode != 0 || resp.MemberID == nil || len(*resp.MemberID) < 10 {
		t.Fatalf("v0 join: %+v", resp)
	}
}

// TestConsumerRegexAndNewTopics: a regex subscription takes topics created
// later; new partitions of a subscribed topic are assigned too.
func TestConsumerRegexAndNewTopics(t *testing.T) {
	h, topics := newConsumerHarness(t)
	m := h.member("g", "m", "")
	m.regex = "t|u.*"
	m.join()
	if m.ownedCount() != 6 {
		t.Fatalf("regex member owns %v", m.owned)
	}
	topics.set("u1", 2)
	topics.set("x", 3)
	settle(t, m)
	if len(m.owned["u"]) != 2 || len(m.owned["x"]) != 0 || m.ownedCount() != 8 {
		t.Fatalf("after u1 and x were created: %v", m.owned)
	}
	topics.set("t", 8)
	settle(t, m)
	if len(m.owned["t"]) != 8 {
		t.Fatalf("after t grew: %v", m.owned)
	}
}

// TestConsumerRangeAssignorSelected: the group uses the assignor its
// members ask for.
func TestConsumerRangeAssignorSelected(t *testing.T) {
	h, _ := newConsumerHarness(t)
	m1, m2 := h.member("g", "m1", "t"), h.member("g", "m2", "t")
	m1.assignor, m2.assignor = "range", "range"
	m1.join()
	m2.join()
	settle(t, m1, m2)
	if !slices.Equal(m1.owned["t"], []int32{0, 1, 2}) || !slices.Equal(m2.owned["t"], []int32{3, 4, 5}) {
		t.Fatalf("range: m1 %v, m2 %v", m1.owned, m2.owned)
	}
	d := h.c.ConsumerGroupDescribe(context.Background(), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}})
	if d.Groups[0].AssignorName != "range" {
		t.Fatalf("assignor %q", d.Groups[0].AssignorName)
	}
}

// TestConsumerRackAware: members with a rack get the partitions whose
// replicas are in their rack.
func TestConsumerRackAware(t *testing.T) {
	h, topics := newConsumerHarness(t)
	topics.racks = map[string][][]string{"t": {{"z0"}, {"z1"}, {"z2"}, {"z0"}, {"z1"}, {"z2"}}}
	var ms []*cmemberClient
	for i, zone := range []string{"z0", "z1", "z2"} {
		m := h.member("g", string(rune('a'+i)), "t")
		m.rack = zone
		m.join()
		ms = append(ms, m)
	}
	settle(t, ms...)
	for i, m := range ms {
		if !slices.Equal(m.owned["t"], []int32{int32(i), int32(i + 3)}) {
			t.Errorf("member in %s owns %v", m.rack, m.owned)
		}
	}
}

// TestConsumerOffsetsWithEpochs: OffsetCommit v9+ and OffsetFetch v9+ of
// a consumer-protocol member must carry its current epoch.
func TestConsumerOffsetsWithEpochs(t *testing.T) {
	h, _ := newConsumerHarness(t)
	m := h.member("g", "m", "t")
	m.join()
	commitPartition := func(v int16, member string, epoch, partition int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = v, "g", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = partition, 42
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return h.c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode
	}
	commit := func(v int16, member string, epoch int32) int16 { return commitPartition(v, member, epoch, 0) }
	wantCode(t, "current epoch", commit(9, "m", m.epoch), nil)
	wantCode(t, "epoch before the partition was assigned", commit(9, "m", m.epoch-1), kerr.StaleMemberEpoch)
	wantCode(t, "epoch from the future", commit(9, "m", m.epoch+1), kerr.StaleMemberEpoch)
	wantCode(t, "unknown member", commit(9, "x", m.epoch), kerr.UnknownMemberID)
	wantCode(t, "v8 from a consumer-protocol member", commit(8, "m", m.epoch), kerr.UnsupportedVersion)
	wantCode(t, "admin commit to a non-empty group", commit(9, "", -1), kerr.UnknownMemberID)

	// KIP-1251: after m2 joins and m revokes half, m is at epoch 2; a
	// commit still carrying epoch 1 (it raced the heartbeat) is accepted
	// for the partitions m has held since epoch 1, not for those it gave
	// up; m2's partitions, given at epoch 2, need epoch 2.
	m2 := h.member("g", "m2", "t")
	m2.join()
	settle(t, m, m2)
	if m.epoch != 2 || m2.epoch != 2 {
		t.Fatalf("epochs %d, %d", m.epoch, m2.epoch)
	}
	kept, gone := m.owned["t"][0], m2.owned["t"][0]
	wantCode(t, "older epoch, partition held since then", commitPartition(9, "m", 1, kept), nil)
	wantCode(t, "older epoch, partition given up", commitPartition(9, "m", 1, gone), kerr.StaleMemberEpoch)
	wantCode(t, "older epoch, partition assigned later", commitPartition(9, "m2", 1, gone), kerr.StaleMemberEpoch)
	wantCode(t, "current epoch, new partition", commitPartition(9, "m2", 2, gone), nil)

	fetch := func(member *string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberID, rg.MemberEpoch = "g", member, epoch
		req.Groups = append(req.Groups, rg)
		return h.c.OffsetFetch(context.Background(), req).Groups[0].ErrorCode
	}
	id := "m"
	wantCode(t, "fetch with the current epoch", fetch(&id, m.epoch), nil)
	wantCode(t, "fetch with a stale epoch", fetch(&id, m.epoch+5), kerr.StaleMemberEpoch)
	wantCode(t, "admin fetch", fetch(nil, -1), nil)
}

// TestConsumerClassicCoexistence: classic and consumer protocols do not
// mix in one group; empty groups convert either way with their offsets.
func TestConsumerClassicCoexistence(t *testing.T) {
	h, _ := newConsumerHarness(t)
	// An empty classic group with offsets upgrades and keeps them.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 9, "g", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = 7
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	wantCode(t, "simple commit", h.c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode, nil)
	m := h.member("g", "m", "t")
	m.join()
	h.inspect("g", func(g *group) {
		if g.offsets[TopicPartition{"t", 0}].Offset != 7 {
			t.Errorf("offsets lost on upgrade: %v", g.offsets)
		}
	})
	// A classic member cannot join a non-empty consumer group, nor use
	// the other classic APIs on it.
	j := h.join(joinReq(9, "g", "", ""))
	wantCode(t, "classic join", j.ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "classic heartbeat", h.heartbeat(4, "g", "m", "", m.epoch), kerr.UnknownMemberID)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	if lr := h.c.LeaveGroup(context.Background(), leave); lr.ErrorCode != 0 || lr.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("classic leave of a consumer member: %+v", lr)
	}
	// Once empty, a classic join turns it back into a classic group.
	h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, m.request(-1))
	j = h.join(joinReq(9, "g", "", ""))
	wantCode(t, "classic join to the emptied group", j.ErrorCode, kerr.MemberIDRequired)

	// A consumer member cannot join a classic group with members.
	h.stableGroup("classic", 1, false)
	wantCode(t, "consumer join to classic group", h.member("classic", "c", "t").send(h.member("classic", "c", "t").request(0)).ErrorCode, kerr.GroupIDNotFound)
}

// TestConsumerStateSurvivesRestart: a coordinator started on the store
// (a restart, or the broker taking the group over) keeps member epochs
// and assignments: the members heartbeat on without rejoining.
func TestConsumerStateSurvivesRestart(t *testing.T) {
	store := NewMemoryStore()
	h, topics := newConsumerHarness(t, func(c *Config) { c.Store = store })
	m1, m2 := h.member("g", "m1", "t"), h.member("g", "m2", "t")
	m1.join()
	m2.join()
	settle(t, m1, m2)
	h.c.Close()

	h2 := newHarness(t, func(c *Config) { c.Store = store; c.Topics = topics })
	m1.h, m2.h = h2, h2
	for _, m := range []*cmemberClient{m1, m2} {
		before := m.owned
		resp := m.heartbeat()
		wantCode(t, "heartbeat after restart "+m.id, resp.ErrorCode, nil)
		if !maps2Equal(before, m.owned) || m.epoch != 2 {
			t.Fatalf("%s after restart: epoch %d owns %v, had %v", m.id, m.epoch, m.owned, before)
		}
	}
	noDoubleOwnership(t, m1, m2)
}

// FuzzConsumerReconciliation drives a consumer group with an arbitrary
// sequence of joins, heartbeats (applying or ignoring responses, as slow
// clients do), leaves, static restarts, subscription changes, new
// partitions and clock advances. After every step no partition may be held
// (assigned or pending revocation) by two members, nor owned by two
// clients; member epochs never pass the target assignment epoch. At the
// end, heartbeating everyone to a fixed point must leave every partition
// of every subscribed topic with exactly one member.
func FuzzConsumerReconciliation(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0, 16, 32, 1, 17, 33, 2, 18, 34, 7, 23, 39, 5, 21, 37})
	f.Add([]byte{0, 16, 8, 24, 9, 25, 10, 26, 3, 19, 3, 19, 11, 27})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		h, topics := newConsumerHarness(t)
		topics.set("u", 3)
		ms := make([]*cmemberClient, 3)
		for i := range ms {
			ms[i] = h.member("g", string(rune('a'+i)), "t")
			if i == 2 {
				ms[i].instance = "static"
			}
		}
		joined := make([]bool, len(ms))
		for _, op := range ops {
			m, i := ms[int(op>>4)%len(ms)], int(op>>4)%len(ms)
			switch op % 12 {
			case 0, 1:
				if !joined[i] {
					m.owned = map[string][]int32{}
					if m.send(m.request(0)).ErrorCode == 0 {
						joined[i] = true
					}
				}
			case 2, 3, 4:
				if joined[i] {
					if resp := m.heartbeat(); resp.ErrorCode != 0 {
						joined[i] = false
						m.owned = map[string][]int32{}
					}
				}
			case 5: // a heartbeat whose response is lost
				if joined[i] {
					h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, m.request(m.epoch))
				}
			case 6:
				if joined[i] {
					epoch := int32(-1)
					if m.instance != "" {
						epoch = -2
					}
					m.send(m.request(epoch))
					joined[i] = false
					m.owned = map[string][]int32{}
					if m.instance != "" {
						m.id += "'" // the restart comes with a new member id
					}
				}
			case 7:
				if len(m.topics) == 1 {
					m.topics = []string{"t", "u"}
				} else {
					m.topics = []string{"t"}
				}
			case 8:
				topics.set("u", 3+int32(op>>4)%3)
			case 9:
				h.clock.Advance(testMemberRebalance / 2)
			case 10:
				h.clock.Advance(testConsumerSession / 2)
			case 11:
				m.assignor = []string{"", "uniform", "range"}[int(op>>4)%3]
			}
			checkHeld(t, h)
			// A client the coordinator removed (session or rebalance
			// timeout) is a zombie until its next heartbeat tells it:
			// Kafka's fencing, not a double assignment.
			noDoubleOwnership(t, members(h, ms)...)
		}
		// Every client (re)joins if it is not in the group (a static one
		// takes its old place), then all heartbeat until nothing changes.
		live := ms
		for i, m := range ms {
			if joined[i] && m.heartbeat().ErrorCode == 0 {
				continue
			}
			m.owned = map[string][]int32{}
			wantCode(t, "final join of "+m.id, m.send(m.request(0)).ErrorCode, nil)
		}
		settle(t, live...)
		noDoubleOwnership(t, live...)
		want := 6
		for _, m := range live {
			if len(m.topics) == 2 {
				want += int(topics.topics["u"])
				break
			}
		}
		got := 0
		for _, m := range live {
			got += m.ownedCount()
		}
		if got != want {
			t.Fatalf("after settling %d partitions owned, want %d", got, want)
		}
	})
}

// members returns the clients the coordinator still has as members.
func members(h *harness, ms []*cmemberClient) []*cmemberClient {
	var out []*cmemberClient
	h.inspect("g", func(g *group) {
		for _, m := range ms {
			if g != nil && g.consumer != nil && g.consumer.members[m.id] != nil {
				out = append(out, m)
			}
		}
	})
	return out
}

// checkHeld fails if two members hold one partition, or a member's epoch
// passed the target assignment epoch.
func checkHeld(t *testing.T, h *harness) {
	t.Helper()
	h.inspect("g", func(g *group) {
		if g == nil || g.consumer == nil {
			return
		}
		held := map[TopicPartition]string{}
		for _, m := range g.consumer.members {
			if m.epoch > g.consumer.assignmentEpoch {
				t.Fatalf("member %s at epoch %d past the assignment epoch %d", m.id, m.epoch, g.consumer.assignmentEpoch)
			}
			for _, set := range []topicParts{m.assigned, m.revoking} {
				for tp := range set.set() {
					if o, ok := held[tp]; ok {
						t.Fatalf("%v held by %s and %s", tp, o, m.id)
					}
					held[tp] = m.id
				}
			}
		}
	})
}

// BenchmarkConsumerHeartbeat measures a keepalive heartbeat (nothing
// changed) of a member of a settled 100-member group on a 1000-partition
// topic: the per-heartbeat cost of checking subscriptions and metadata.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	// The harness takes a *testing.T; a zero one serves the setup here
	// (fake clock, no goroutines; its cleanups never run, and failing
	// setup stops the benchmark's goroutine like b.Fatal would).
	t := &testing.T{}
	h, topics := newConsumerHarness(t)
	topics.set("t", 1000)
	h.t = t
	var ms []*cmemberClient
	for i := range 100 {
		m := h.member("g", fmt.Sprintf("m%03d", i), "t")
		m.join()
		ms = append(ms, m)
	}
	settle(t, ms...)
	m := ms[0]
	req := m.request(m.epoch)
	req.Topics, req.SubscribedTopicNames, req.RebalanceTimeoutMillis, req.ServerAssignor = nil, nil, -1, nil
	b.ResetTimer()
	for range b.N {
		if resp := h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req); resp.ErrorCode != 0 || resp.Assignment != nil {
			b.Fatalf("keepalive: %+v", resp)
		}
	}
}
