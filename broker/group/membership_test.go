package group

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestThreeMemberJoinSyncHeartbeat(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 3, false)
	leaders := 0
	for _, m := range ms {
		if m.gen != 1 {
			t.Fatalf("generation %d, want 1", m.gen)
		}
		if m.leader {
			leaders++
		}
		if !bytes.Equal(m.assignment, []byte("assignment-of-"+m.id)) {
			t.Fatalf("member %s got assignment %q", m.id, m.assignment)
		}
		if !strings.HasPrefix(m.id, "client-") {
			t.Fatalf("member id %q lacks client id prefix", m.id)
		}
		wantCode(t, "heartbeat", h.heartbeat(4, "g", m.id, "", 1), nil)
	}
	if leaders != 1 || !ms[0].leader {
		t.Fatalf("leaders=%d first-is-leader=%v, want exactly the first joiner", leaders, ms[0].leader)
	}
	d := h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}})
	g := d.Groups[0]
	if g.State != "Stable" || g.Protocol != "range" || g.ProtocolType != "consumer" || len(g.Members) != 3 {
		t.Fatalf("describe = %+v", g)
	}
	for _, m := range g.Members {
		if !bytes.Equal(m.MemberAssignment, []byte("assignment-of-"+m.MemberID)) || m.ClientID != "client" {
			t.Fatalf("described member %+v", m)
		}
	}
}

func TestInitialDelayCollectsMembersIntoOneGeneration(t *testing.T) {
	h := newHarness(t)
	a := h.joinAsync(context.Background(), joinReq(3, "g", "", ""))
	h.waitAwaiting("g", 1)
	h.clock.Advance(testDelay - time.Millisecond)
	if s := h.state("g"); s != statePreparingRebalance {
		t.Fatalf("state %v before the delay ended", s)
	}
	b := h.joinAsync(context.Background(), joinReq(3, "g", "", ""))
	h.waitAwaiting("g", 2)
	h.clock.Advance(time.Millisecond) // first delay ends, extended because b joined
	if s := h.state("g"); s != statePreparingRebalance {
		t.Fatalf("state %v: delay not extended for the new member", s)
	}
	h.clock.Advance(testDelay)
	ra, rb := recv(t, a), recv(t, b)
	if ra.resp.Generation != 1 || rb.resp.Generation != 1 || len(ra.resp.Members) != 2 {
		t.Fatalf("a=%+v b=%+v", ra.resp, rb.resp)
	}
}

func TestMemberIDRequired(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 0 })
	for _, v := range []int16{4, 5, 9} {
		group := "g" + string(rune('0'+v))
		first := h.join(joinReq(v, group, "", ""))
		wantCode(t, "first join", first.ErrorCode, kerr.MemberIDRequired)
		if !strings.HasPrefix(first.MemberID, "client-") || first.Generation != -1 {
			t.Fatalf("v%d: member id %q generation %d", v, first.MemberID, first.Generation)
		}
		second := h.join(joinReq(v, group, first.MemberID, ""))
		wantCode(t, "second join", second.ErrorCode, nil)
		if second.MemberID != first.MemberID || second.Generation != 1 || second.LeaderID != first.MemberID {
			t.Fatalf("v%d: rejoin = %+v", v, second)
		}
	}
	// v3 and below get a member id at once.
	old := h.join(joinReq(3, "old", "", ""))
	wantCode(t, "v3 join", old.ErrorCode, nil)
	if old.MemberID == "" || old.Generation != 1 {
		t.Fatalf("v3 join = %+v", old)
	}
}

func TestPendingMemberExpires(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 0 })
	first := h.join(joinReq(4, "g", "", ""))
	wantCode(t, "first", first.ErrorCode, kerr.MemberIDRequired)
	h.clock.Advance(testSession + time.Millisecond)
	h.inspect("g", func(g *group) {
		if len(g.pending) != 0 {
			t.Fatalf("pending member ids not expired: %v", g.pending)
		}
	})
	wantCode(t, "late rejoin", h.join(joinReq(4, "g", first.MemberID, "")).ErrorCode, kerr.UnknownMemberID)
}

func TestNewMemberTriggersRebalance(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 2, false)
	c := h.joinAsync(context.Background(), joinReq(3, "g", "", ""))
	eventually(t, "rebalance", func() bool { return h.state("g") == statePreparingRebalance })
	for _, m := range ms {
		wantCode(t, "heartbeat during rebalance", h.heartbeat(4, "g", m.id, "", 1), kerr.RebalanceInProgress)
	}
	noResult(t, c)
	a := h.joinAsync(context.Background(), joinReq(3, "g", ms[0].id, ""))
	b := h.joinAsync(context.Background(), joinReq(3, "g", ms[1].id, ""))
	ra, rb, rc := recv(t, a), recv(t, b), recv(t, c)
	for _, r := range []joinOut{ra, rb, rc} {
		if r.err != nil || r.resp.ErrorCode != 0 || r.resp.Generation != 2 {
			t.Fatalf("join after rebalance: %+v %v", r.resp, r.err)
		}
	}
	if ra.resp.LeaderID != ms[0].id || len(ra.resp.Members) != 3 || len(rb.resp.Members) != 0 {
		t.Fatalf("leader %s, leader sees %d members, follower sees %d", ra.resp.LeaderID, len(ra.resp.Members), len(rb.resp.Members))
	}
	wantCode(t, "old generation heartbeat", h.heartbeat(4, "g", ms[0].id, "", 1), kerr.IllegalGeneration)
	wantCode(t, "new generation heartbeat", h.heartbeat(4, "g", ms[0].id, "", 2), nil)
}

func TestSessionExpiryRebalances(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 2, false)
	h.clock.Advance(testSession / 2)
	wantCode(t, "a heartbeat", h.heartbeat(4, "g", ms[0].id, "", 1), nil)
	h.clock.Advance(testSession/2 + time.Millisecond) // b's session ends
	if s := h.state("g"); s != statePreparingRebalance {
		t.Fatalf("state %v after expiry", s)
	}
	wantCode(t, "expired member heartbeat", h.heartbeat(4, "g", ms[1].id, "", 1), kerr.UnknownMemberID)
	wantCode(t, "survivor heartbeat", h.heartbeat(4, "g", ms[0].id, "", 1), kerr.RebalanceInProgress)
	r := h.join(joinReq(3, "g", ms[0].id, ""))
	if r.ErrorCode != 0 || r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("rejoin = %+v", r)
	}
	// The last member expiring empties the group.
	h.clock.Advance(testRebalance + time.Second) // never syncs → removed
	if s := h.state("g"); s != stateEmpty {
		t.Fatalf("state %v, want Empty", s)
	}
}

func TestRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	// Sessions outlast the rebalance timeout, so only the rebalance
	// timeout can remove the silent member.
	h := newHarness(t)
	ms := h.stableGroup("g", 2, false)
	h.inspect("g", func(g *group) {
		for _, m := range g.members {
			m.sessionTimeout = 50 * time.Second
			g.resetSession(m, m.sessionTimeout)
		}
	})
	// The leader rejoins (e.g. a subscription change); b keeps silent.
	req := joinReq(3, "g", ms[0].id, "", proto("range", consumerMeta("t", "u")))
	req.SessionTimeoutMillis = 50000
	a := h.joinAsync(context.Background(), req)
	h.waitAwaiting("g", 1)
	h.clock.Advance(testRebalance - time.Millisecond)
	if s := h.state("g"); s != statePreparingRebalance {
		t.Fatalf("state %v before the rebalance timeout", s)
	}
	h.clock.Advance(time.Millisecond)
	r := recv(t, a)
	if r.resp.ErrorCode != 0 || r.resp.Generation != 2 || len(r.resp.Members) != 1 {
		t.Fatalf("join = %+v", r.resp)
	}
	wantCode(t, "removed member", h.heartbeat(4, "g", ms[1].id, "", 2), kerr.UnknownMemberID)
}

func TestSyncTimeoutRemovesMembersThatDoNotSync(t *testing.T) {
	// Sessions outlast the rebalance timeout, so only the pending-sync
	// expiry can remove the leader.
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 0 })
	long := func(r *kmsg.JoinGroupRequest) *kmsg.JoinGroupRequest {
		r.SessionTimeoutMillis = 50000
		return r
	}
	a := h.join(long(joinReq(3, "g", "", "")))
	out := recv(t, h.syncAsync(context.Background(), syncReq(3, "g", a.MemberID, "", 1, nil)))
	wantCode(t, "leader sync", out.resp.ErrorCode, nil)

	b := h.joinAsync(context.Background(), long(joinReq(3, "g", "", "")))
	eventually(t, "rebalance", func() bool { return h.state("g") == statePreparingRebalance })
	ra := h.join(long(joinReq(3, "g", a.MemberID, "")))
	rb := recv(t, b)
	if ra.Generation != 2 || rb.resp.Generation != 2 {
		t.Fatalf("generations %d %d", ra.Generation, rb.resp.Generation)
	}
	// b syncs and waits; the leader a never does.
	bs := h.syncAsync(context.Background(), syncReq(3, "g", rb.resp.MemberID, "", 2, nil))
	h.waitAwaitingSync("g", 1)
	h.clock.Advance(testRebalance)
	wantCode(t, "waiting follower", recv(t, bs).resp.ErrorCode, kerr.RebalanceInProgress)
	wantCode(t, "leader removed", h.heartbeat(4, "g", a.MemberID, "", 2), kerr.UnknownMemberID)
}

func TestStaticMemberRestartWithoutRebalance(t *testing.T) {
	for _, tc := range []struct {
		name      string
		restart   int // index of the member that restarts (0 = leader)
		version   int16
		skip      bool
		wantCount int // members the restarted one sees in its JoinGroup response
	}{
		{"follower v5", 1, 5, false, 0},
		{"leader v5", 0, 5, false, 0},
		{"leader v9 KIP-814", 0, 9, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ms := h.stableGroup("g", 2, true)
			old := ms[tc.restart]
			r := h.join(joinReq(tc.version, "g", "", old.instance))
			wantCode(t, "static rejoin", r.ErrorCode, nil)
			if r.MemberID == old.id || !strings.HasPrefix(r.MemberID, old.instance+"-") {
				t.Fatalf("new member id %q (old %q)", r.MemberID, old.id)
			}
			if r.Generation != 1 || r.SkipAssignment != tc.skip || len(r.Members) != tc.wantCount {
				t.Fatalf("rejoin = gen %d skip %v members %d", r.Generation, r.SkipAssignment, len(r.Members))
			}
			if s := h.state("g"); s != stateStable {
				t.Fatalf("state %v, want Stable (no rebalance)", s)
			}
			s := recv(t, h.syncAsync(context.Background(), syncReq(3, "g", r.MemberID, old.instance, 1, nil)))
			wantCode(t, "sync", s.resp.ErrorCode, nil)
			if !bytes.Equal(s.resp.MemberAssignment, old.assignment) {
				t.Fatalf("assignment %q, want the old %q", s.resp.MemberAssignment, old.assignment)
			}
			// The old incarnation is fenced everywhere.
			wantCode(t, "old heartbeat", h.heartbeat(4, "g", old.id, old.instance, 1), kerr.FencedInstanceID)
			wantCode(t, "old join", h.join(joinReq(5, "g", old.id, old.instance)).ErrorCode, kerr.FencedInstanceID)
			wantCode(t, "old sync", recv(t, h.syncAsync(context.Background(), syncReq(3, "g", old.id, old.instance, 1, nil))).resp.ErrorCode, kerr.FencedInstanceID)
			wantCode(t, "old commit", h.commit(7, "g", old.id, old.instance, 1, "t", 0, 5), kerr.FencedInstanceID)
			// Without the instance id the old id is simply unknown.
			wantCode(t, "old dynamic heartbeat", h.heartbeat(2, "g", old.id, "", 1), kerr.UnknownMemberID)
			wantCode(t, "new heartbeat", h.heartbeat(4, "g", r.MemberID, old.instance, 1), nil)
			for _, m := range ms {
				if m.id != old.id {
					wantCode(t, "other heartbeat", h.heartbeat(4, "g", m.id, m.instance, 1), nil)
				}
			}
		})
	}
}

func TestStaticMemberRestartWithNewSubscriptionRebalances(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 2, true)
	c := h.joinAsync(context.Background(), joinReq(5, "g", "", ms[1].instance, proto("range", consumerMeta("t", "other"))))
	eventually(t, "rebalance", func() bool { return h.state("g") == statePreparingRebalance })
	wantCode(t, "leader heartbeat", h.heartbeat(4, "g", ms[0].id, ms[0].instance, 1), kerr.RebalanceInProgress)
	a := h.join(joinReq(5, "g", ms[0].id, ms[0].instance))
	rc := recv(t, c)
	if a.Generation != 2 || rc.resp.Generation != 2 {
		t.Fatalf("generations %d %d", a.Generation, rc.resp.Generation)
	}
}

func TestStaticMemberLeaveByInstanceID(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 2, true)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 3
	req.Group = "g"
	unknown := "nope"
	req.Members = []kmsg.LeaveGroupRequestMember{
		{InstanceID: &ms[1].instance},
		{InstanceID: &unknown},
		{MemberID: "stale", InstanceID: &ms[0].instance},
	}
	resp := h.c.LeaveGroup(context.Background(), req)
	wantCode(t, "top", resp.ErrorCode, nil)
	wantCode(t, "by instance", resp.Members[0].ErrorCode, nil)
	wantCode(t, "unknown instance", resp.Members[1].ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "fenced", resp.Members[2].ErrorCode, kerr.FencedInstanceID)
	if s := h.state("g"); s != statePreparingRebalance {
		t.Fatalf("state %v", s)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 0 })
	base := h.join(joinReq(3, "g", "", "", proto("range", consumerMeta("t")), proto("roundrobin", consumerMeta("t"))))
	wantCode(t, "base", base.ErrorCode, nil)
	for _, tc := range []struct {
		name string
		mod  func(r *kmsg.JoinGroupRequest)
		want *kerr.Error
	}{
		{"other protocol type", func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "connect" }, kerr.InconsistentGroupProtocol},
		{"no common protocol", func(r *kmsg.JoinGroupRequest) {
			r.Protocols = []kmsg.JoinGroupRequestProtocol{proto("cooperative-sticky", nil)}
		}, kerr.InconsistentGroupProtocol},
		{"session too short", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 999 }, kerr.InvalidSessionTimeout},
		{"session too long", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 60001 }, kerr.InvalidSessionTimeout},
		{"empty group id", func(r *kmsg.JoinGroupRequest) { r.Group = "" }, kerr.InvalidGroupID},
		{"unknown member id", func(r *kmsg.JoinGroupRequest) { r.MemberID = "ghost" }, kerr.UnknownMemberID},
		{"unknown member of unknown group", func(r *kmsg.JoinGroupRequest) { r.Group, r.MemberID = "nogroup", "ghost" }, kerr.UnknownMemberID},
		{"new group without protocols", func(r *kmsg.JoinGroupRequest) { r.Group, r.Protocols = "fresh", nil }, kerr.InconsistentGroupProtocol},
		{"new group without type", func(r *kmsg.JoinGroupRequest) { r.Group, r.ProtocolType = "fresh2", "" }, kerr.InconsistentGroupProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := joinReq(3, "g", "", "")
			tc.mod(r)
			if r.Protocols == nil && tc.name != "new group without protocols" {
				r.Protocols = []kmsg.JoinGroupRequestProtocol{proto("range", nil)}
			}
			resp := h.join(r)
			wantCode(t, "join", resp.ErrorCode, tc.want)
			if resp.Generation != -1 {
				t.Fatalf("generation %d on error", resp.Generation)
			}
		})
	}
	// Failed joins of new groups leave nothing behind.
	for _, id := range []string{"nogroup", "fresh", "fresh2"} {
		if s := h.state(id); s != stateDead {
			t.Fatalf("group %s exists in state %v", id, s)
		}
	}
	if s := h.state("g"); s != stateCompletingRebalance {
		t.Fatalf("base group disturbed: %v", s)
	}
}

func TestProtocolSelection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members [][]string
		want    string
	}{
		{"single", [][]string{{"range"}}, "range"},
		{"first preference wins", [][]string{{"cooperative-sticky", "range"}, {"cooperative-sticky", "range"}}, "cooperative-sticky"},
		{"only common one", [][]string{{"a", "b"}, {"b", "c"}}, "b"},
		{"majority vote", [][]string{{"x", "y"}, {"y", "x"}, {"y", "x"}}, "y"},
		{"tie → oldest member's preference", [][]string{{"x", "y"}, {"y", "x"}}, "x"},
		{"none common", [][]string{{"a"}, {"b"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			g := h.c.newGroup("sel")
			for _, names := range tc.members {
				m := &member{id: newMemberID("m")}
				for _, n := range names {
					m.protocols = append(m.protocols, proto(n, nil))
				}
				g.add(m)
			}
			if got := g.selectProtocol(); got != tc.want {
				t.Fatalf("selected %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIllegalGeneration(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 2, false)
	wantCode(t, "heartbeat", h.heartbeat(0, "g", ms[0].id, "", 7), kerr.IllegalGeneration)
	wantCode(t, "sync", recv(t, h.syncAsync(context.Background(), syncReq(0, "g", ms[0].id, "", 0, nil))).resp.ErrorCode, kerr.IllegalGeneration)
	wantCode(t, "commit", h.commit(2, "g", ms[0].id, "", 2, "t", 0, 1), kerr.IllegalGeneration)
	wantCode(t, "unknown member heartbeat", h.heartbeat(0, "g", "ghost", "", 1), kerr.UnknownMemberID)
	wantCode(t, "unknown group heartbeat", h.heartbeat(0, "nope", "ghost", "", 1), kerr.UnknownMemberID)
	wantCode(t, "commit to unknown group with generation", h.commit(2, "nope", "m", "", 3, "t", 0, 1), kerr.IllegalGeneration)
}

func TestSyncGroupProtocolCheckV5(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 0 })
	a := h.join(joinReq(5, "g", "", "ia"))
	req := syncReq(5, "g", a.MemberID, "ia", a.Generation, nil)
	wrong := "roundrobin"
	req.Protocol = &wrong
	wantCode(t, "wrong protocol", recv(t, h.syncAsync(context.Background(), req)).resp.ErrorCode, kerr.InconsistentGroupProtocol)
	right := "range"
	pt := "consumer"
	req.Protocol, req.ProtocolType = &right, &pt
	out := recv(t, h.syncAsync(context.Background(), req)).resp
	wantCode(t, "right protocol", out.ErrorCode, nil)
	if out.Protocol == nil || *out.Protocol != "range" || out.ProtocolType == nil || *out.ProtocolType != "consumer" {
		t.Fatalf("v5 response protocol fields %v %v", out.Protocol, out.ProtocolType)
	}
}

func TestLeaveGroupVersions(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 3, false)
	v0 := kmsg.NewPtrLeaveGroupRequest()
	v0.Group, v0.MemberID = "g", ms[2].id
	wantCode(t, "v0 leave", h.c.LeaveGroup(context.Background(), v0).ErrorCode, nil)
	wantCode(t, "v0 leave again", h.c.LeaveGroup(context.Background(), v0).ErrorCode, kerr.UnknownMemberID)

	v3 := kmsg.NewPtrLeaveGroupRequest()
	v3.Version, v3.Group = 3, "g"
	v3.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ms[0].id}, {MemberID: ms[1].id}, {MemberID: "ghost"}}
	resp := h.c.LeaveGroup(context.Background(), v3)
	if resp.ErrorCode != 0 || len(resp.Members) != 3 || resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != 0 ||
		resp.Members[2].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("batch leave = %+v", resp)
	}
	if s := h.state("g"); s != stateEmpty {
		t.Fatalf("state after everyone left = %v", s)
	}
	v3.Group = "nope"
	resp = h.c.LeaveGroup(context.Background(), v3)
	if resp.ErrorCode != 0 || resp.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave unknown group = %+v", resp)
	}
}

func TestLeaveDuringJoinCompletesRebalance(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 2, false)
	a := h.joinAsync(context.Background(), joinReq(3, "g", ms[0].id, "", proto("range", consumerMeta("t", "u"))))
	h.waitAwaiting("g", 1)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "g", ms[1].id
	wantCode(t, "leave", h.c.LeaveGroup(context.Background(), leave).ErrorCode, nil)
	r := recv(t, a)
	if r.resp.Generation != 2 || len(r.resp.Members) != 1 {
		t.Fatalf("join = %+v", r.resp)
	}
}

func TestConsecutiveRebalances(t *testing.T) {
	// The cooperative-sticky flow: after a rebalance members revoke and
	// immediately rejoin, several times in a row.
	h := newHarness(t)
	ms := h.stableGroup("g", 2, false)
	gen := int32(1)
	for round := range 3 {
		meta := consumerMeta("t", strings.Repeat("x", round+1)) // changed metadata
		a := h.joinAsync(context.Background(), joinReq(3, "g", ms[0].id, "", proto("cooperative-sticky", meta), proto("range", meta)))
		eventually(t, "rebalance", func() bool { return h.state("g") == statePreparingRebalance })
		wantCode(t, "heartbeat", h.heartbeat(4, "g", ms[1].id, "", gen), kerr.RebalanceInProgress)
		b := h.join(joinReq(3, "g", ms[1].id, "", proto("cooperative-sticky", meta), proto("range", meta)))
		ra := recv(t, a)
		gen++
		if ra.resp.Generation != gen || b.Generation != gen || ra.resp.Protocol == nil || *ra.resp.Protocol != "cooperative-sticky" {
			t.Fatalf("round %d: %+v %+v", round, ra.resp, b)
		}
		bs := h.syncAsync(context.Background(), syncReq(3, "g", ms[1].id, "", gen, nil))
		h.waitAwaitingSync("g", 1)
		as := recv(t, h.syncAsync(context.Background(), syncReq(3, "g", ms[0].id, "", gen, map[string][]byte{ms[0].id: {1}, ms[1].id: {2}})))
		if !bytes.Equal(as.resp.MemberAssignment, []byte{1}) || !bytes.Equal(recv(t, bs).resp.MemberAssignment, []byte{2}) {
			t.Fatalf("round %d: assignments wrong", round)
		}
	}
}

func TestJoinReleasedByContextCancel(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	a := h.joinAsync(ctx, joinReq(3, "g", "", ""))
	h.waitAwaiting("g", 1)
	cancel()
	out := recv(t, a)
	if out.err == nil {
		t.Fatalf("JoinGroup returned %+v after cancel", out.resp)
	}
	// The member counts as joined; the group completes without it
	// blocking anything, and it expires after its session timeout.
	h.clock.Advance(2 * testDelay)
	if s := h.state("g"); s != stateCompletingRebalance {
		t.Fatalf("state %v", s)
	}
	h.clock.Advance(testRebalance)
	if s := h.state("g"); s != stateEmpty {
		t.Fatalf("state %v, want Empty after the silent member is removed", s)
	}
}

func TestSyncReleasedByContextCancelAndClose(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 2, false)
	b := h.joinAsync(context.Background(), joinReq(3, "g", ms[1].id, "", proto("range", consumerMeta("z"))))
	a := h.join(joinReq(3, "g", ms[0].id, ""))
	rb := recv(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	s := h.syncAsync(ctx, syncReq(3, "g", rb.resp.MemberID, "", a.Generation, nil))
	h.waitAwaitingSync("g", 1)
	cancel()
	if out := recv(t, s); out.err == nil {
		t.Fatalf("sync returned %+v after cancel", out.resp)
	}
	// A parked JoinGroup is answered NOT_COORDINATOR by Close.
	c := h.joinAsync(context.Background(), joinReq(3, "g", "", ""))
	eventually(t, "rebalance", func() bool { return h.state("g") == statePreparingRebalance })
	h.c.Close()
	wantCode(t, "join after close", recv(t, c).resp.ErrorCode, kerr.NotCoordinator)
	wantCode(t, "heartbeat after close", h.heartbeat(4, "g", ms[0].id, "", 2), kerr.NotCoordinator)
	if n := h.clock.pending(); n != 0 {
		t.Fatalf("%d timers armed after Close", n)
	}
}

func TestNotCoordinator(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Owns = func(g string) bool { return g != "elsewhere" } })
	wantCode(t, "join", h.join(joinReq(3, "elsewhere", "", "")).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "heartbeat", h.heartbeat(0, "elsewhere", "m", "", 1), kerr.NotCoordinator)
	wantCode(t, "commit", h.commit(2, "elsewhere", "", "", -1, "t", 0, 1), kerr.NotCoordinator)
}

func TestMaxGroupSize(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxGroupSize = 2 })
	h.stableGroup("g", 2, false)
	wantCode(t, "third member", h.join(joinReq(3, "g", "", "")).ErrorCode, kerr.GroupMaxSizeReached)
	if s := h.state("g"); s != stateStable {
		t.Fatalf("state %v", s)
	}
}

func TestHeartbeatOnEmptyGroup(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "commit", h.commit(2, "g", "", "", -1, "t", 0, 1), nil)
	wantCode(t, "heartbeat", h.heartbeat(0, "g", "m", "", 0), kerr.UnknownMemberID)
}

func TestStaticMemberRestartWithNewOwnedPartitionsDoesNotRebalance(t *testing.T) {
	// A cooperative consumer's metadata carries its owned partitions and
	// generation; after a restart they are empty. Same topics: no rebalance.
	h := newHarness(t)
	ms := h.stableGroup("g", 2, true)
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 1
	meta.Topics = []string{"t"}
	meta.UserData = []byte("restarted")
	r := h.join(joinReq(5, "g", "", ms[1].instance, proto("range", meta.AppendTo(nil))))
	wantCode(t, "static rejoin", r.ErrorCode, nil)
	if r.Generation != 1 {
		t.Fatalf("generation %d, want 1", r.Generation)
	}
	if s := h.state("g"); s != stateStable {
		t.Fatalf("state %v, want Stable", s)
	}
}
