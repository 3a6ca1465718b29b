package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testSession   = 10 * time.Second
	testRebalance = 20 * time.Second
	testDelay     = 3 * time.Second
	waitLimit     = 10 * time.Second
)

type harness struct {
	t     *testing.T
	c     *Coordinator
	clock *fakeClock
}

func newHarness(t *testing.T, mods ...func(*Config)) *harness {
	t.Helper()
	clock := newFakeClock()
	cfg := Config{
		Clock:                 clock,
		MinSessionTimeout:     time.Second,
		MaxSessionTimeout:     time.Minute,
		InitialRebalanceDelay: testDelay,
	}
	for _, m := range mods {
		m(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return &harness{t: t, c: c, clock: clock}
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func proto(name string, meta []byte) kmsg.JoinGroupRequestProtocol {
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = name, meta
	return p
}

// joinReq builds a consumer JoinGroup; instance "" means dynamic.
func joinReq(v int16, group, member, instance string, protocols ...kmsg.JoinGroupRequestProtocol) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = v
	r.Group = group
	r.MemberID = member
	r.SessionTimeoutMillis = int32(testSession / time.Millisecond)
	r.RebalanceTimeoutMillis = int32(testRebalance / time.Millisecond)
	if instance != "" {
		r.InstanceID = &instance
	}
	r.ProtocolType = "consumer"
	if len(protocols) == 0 {
		protocols = []kmsg.JoinGroupRequestProtocol{proto("range", consumerMeta("t"))}
	}
	r.Protocols = protocols
	return r
}

type joinOut struct {
	resp *kmsg.JoinGroupResponse
	err  error
}

type syncOut struct {
	resp *kmsg.SyncGroupResponse
	err  error
}

func (h *harness) joinAsync(ctx context.Context, req *kmsg.JoinGroupRequest) <-chan joinOut {
	ch := make(chan joinOut, 1)
	go func() {
		resp, err := h.c.JoinGroup(ctx, Client{ID: "client", Host: "/127.0.0.1"}, req)
		ch <- joinOut{resp, err}
	}()
	return ch
}

// join runs a JoinGroup expected to answer without the clock moving.
func (h *harness) join(req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	h.t.Helper()
	out := recv(h.t, h.joinAsync(context.Background(), req))
	if out.err != nil {
		h.t.Fatalf("JoinGroup: %v", out.err)
	}
	return out.resp
}

func (h *harness) syncAsync(ctx context.Context, req *kmsg.SyncGroupRequest) <-chan syncOut {
	ch := make(chan syncOut, 1)
	go func() {
		resp, err := h.c.SyncGroup(ctx, req)
		ch <- syncOut{resp, err}
	}()
	return ch
}

func syncReq(v int16, group, member, instance string, gen int32, assign map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.MemberID, r.Generation = v, group, member, gen
	if instance != "" {
		r.InstanceID = &instance
	}
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		r.GroupAssignment = append(r.GroupAssignment, ga)
	}
	return r
}

func (h *harness) heartbeat(v int16, group, member, instance string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.Generation = v, group, member, gen
	if instance != "" {
		r.InstanceID = &instance
	}
	return h.c.Heartbeat(context.Background(), r).ErrorCode
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("no result within %v", waitLimit)
		panic("unreachable")
	}
}

func noResult[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected early result %+v", v)
	default:
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// inspect runs f on the group under its lock; f sees nil if absent.
func (h *harness) inspect(id string, f func(g *group)) {
	h.c.mu.Lock()
	g := h.c.groups[id]
	h.c.mu.Unlock()
	if g == nil {
		f(nil)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

func (h *harness) state(id string) groupState {
	s := stateDead
	h.inspect(id, func(g *group) {
		if g != nil {
			s = g.state
		}
	})
	return s
}

// waitAwaiting waits until n members of the group wait in JoinGroup.
func (h *harness) waitAwaiting(id string, n int) {
	h.t.Helper()
	eventually(h.t, "members awaiting join", func() bool {
		got := 0
		h.inspect(id, func(g *group) {
			if g == nil {
				return
			}
			for _, m := range g.members {
				if m.joinCh != nil {
					got++
				}
			}
		})
		return got == n
	})
}

func (h *harness) waitAwaitingSync(id string, n int) {
	h.t.Helper()
	eventually(h.t, "members awaiting sync", func() bool {
		got := 0
		h.inspect(id, func(g *group) {
			if g == nil {
				return
			}
			for _, m := range g.members {
				if m.syncCh != nil {
					got++
				}
			}
		})
		return got == n
	})
}

type joined struct {
	id, instance string
	gen          int32
	leader       bool
	assignment   []byte
}

// stableGroup brings n new members (JoinGroup v5, static when static is
// set) into one generation through the initial delay and syncs them.
func (h *harness) stableGroup(id string, n int, static bool) []joined {
	h.t.Helper()
	chans := make([]<-chan joinOut, n)
	for i := range n {
		inst := ""
		if static {
			inst = "inst-" + string(rune('a'+i))
		}
		req := joinReq(3, id, "", "", proto("range", consumerMeta("t")))
		if static {
			req = joinReq(5, id, "", inst, proto("range", consumerMeta("t")))
		}
		chans[i] = h.joinAsync(context.Background(), req)
		h.waitAwaiting(id, i+1) // deterministic join order
	}
	h.clock.Advance(2 * testDelay)
	ms := make([]joined, n)
	var leader string
	for i, ch := range chans {
		out := recv(h.t, ch)
		if out.err != nil || out.resp.ErrorCode != 0 {
			h.t.Fatalf("join %d: %v %v", i, out.err, kerr.ErrorForCode(out.resp.ErrorCode))
		}
		ms[i] = joined{id: out.resp.MemberID, gen: out.resp.Generation, leader: out.resp.LeaderID == out.resp.MemberID}
		if static {
			ms[i].instance = "inst-" + string(rune('a'+i))
		}
		leader = out.resp.LeaderID
	}
	assign := make(map[string][]byte)
	var syncs []<-chan syncOut
	var leaderIdx int
	for i, m := range ms {
		assign[m.id] = []byte("assignment-of-" + m.id)
		if m.id == leader {
			leaderIdx = i
			continue
		}
		syncs = append(syncs, h.syncAsync(context.Background(), syncReq(3, id, m.id, m.instance, m.gen, nil)))
	}
	h.waitAwaitingSync(id, n-1)
	lr := recv(h.t, h.syncAsync(context.Background(), syncReq(3, id, leader, ms[leaderIdx].instance, ms[leaderIdx].gen, assign)))
	if lr.err != nil || lr.resp.ErrorCode != 0 {
		h.t.Fatalf("leader sync: %v %v", lr.err, lr.resp)
	}
	ms[leaderIdx].assignment = lr.resp.MemberAssignment
	k := 0
	for i := range ms {
		if i == leaderIdx {
			continue
		}
		out := recv(h.t, syncs[k])
		k++
		if out.err != nil || out.resp.ErrorCode != 0 {
			h.t.Fatalf("sync %d: %v %v", i, out.err, out.resp)
		}
		ms[i].assignment = out.resp.MemberAssignment
	}
	if s := h.state(id); s != stateStable {
		h.t.Fatalf("state after sync = %v, want Stable", s)
	}
	return ms
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: error %s, want %s", what, errName(got), errName(w))
	}
}
