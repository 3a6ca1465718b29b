package group

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newShareHarness(t *testing.T, cfg ShareConfig, mods ...func(*Config)) (*harness, *fakeTopics, *ShareCoordinator) {
	t.Helper()
	h, topics := newConsumerHarness(t, mods...)
	return h, topics, NewShareCoordinator(h.c, cfg)
}

func shareHB(s *ShareCoordinator, group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	return s.ShareGroupHeartbeat(context.Background(), Client{ID: "client-" + member, Host: "127.0.0.1"}, req)
}

// assignment renders a heartbeat's assignment as "topic:partitions".
func assignment(resp *kmsg.ShareGroupHeartbeatResponse) string {
	if resp.Assignment == nil {
		return "none"
	}
	var out []string
	for _, tp := range resp.Assignment.TopicPartitions {
		name := fmt.Sprintf("%x", tp.TopicID[:2])
		for _, n := range []string{"t", "u", "one"} {
			if topicID(n) == tp.TopicID {
				name = n
			}
		}
		out = append(out, fmt.Sprintf("%s:%v", name, tp.Partitions))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

func TestShareGroupHeartbeatValidation(t *testing.T) {
	_, _, s := newShareHarness(t, ShareConfig{})
	empty := ""
	tests := []struct {
		name string
		mod  func(*kmsg.ShareGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"no group", func(r *kmsg.ShareGroupHeartbeatRequest) { r.GroupID = "" }, kerr.InvalidRequest},
		{"no member id", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"empty rack", func(r *kmsg.ShareGroupHeartbeatRequest) { r.RackID = &empty }, kerr.InvalidRequest},
		{"epoch below -1", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest},
		{"join without topics", func(r *kmsg.ShareGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest},
		{"unknown member", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberEpoch = 3 }, kerr.UnknownMemberID},
		{"unknown member leaving", func(r *kmsg.ShareGroupHeartbeatRequest) { r.MemberEpoch = -1 }, kerr.UnknownMemberID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.Version, req.GroupID, req.MemberID, req.SubscribedTopicNames = 1, "g", "m", []string{"t"}
			tt.mod(req)
			resp := s.ShareGroupHeartbeat(context.Background(), Client{}, req)
			wantCode(t, tt.name, resp.ErrorCode, tt.want)
		})
	}
}

// TestShareGroupMembership: assignment by the simple assignor, epochs,
// fencing, leaving and session expiry.
func TestShareGroupMembership(t *testing.T) {
	h, topics, s := newShareHarness(t, ShareConfig{SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second})
	topics.set("t", 3)
	topics.set("one", 1)

	a := shareHB(s, "g", "a", 0, "t", "one")
	wantCode(t, "a joins", a.ErrorCode, nil)
	if a.MemberEpoch != 1 || assignment(a) != "[one:[0] t:[0 1 2]]" || a.HeartbeatIntervalMillis != 1000 {
		t.Fatalf("a joined at epoch %d with %s, interval %d", a.MemberEpoch, assignment(a), a.HeartbeatIntervalMillis)
	}
	b := shareHB(s, "g", "b", 0, "t", "one")
	if b.MemberEpoch != 2 || assignment(b) != "[one:[0] t:[1]]" {
		t.Fatalf("b joined at epoch %d with %s", b.MemberEpoch, assignment(b))
	}
	// a learns the new assignment with its next heartbeat; partition
	// "one" is shared (more members than partitions).
	a = shareHB(s, "g", "a", 1, nil...)
	if a.MemberEpoch != 2 || assignment(a) != "[one:[0] t:[0 2]]" {
		t.Fatalf("a at epoch %d with %s", a.MemberEpoch, assignment(a))
	}
	if again := shareHB(s, "g", "a", 2, nil...); again.Assignment != nil || again.ErrorCode != 0 {
		t.Fatalf("unchanged heartbeat: %s, %s", assignment(again), errName(again.ErrorCode))
	}
	wantCode(t, "stale epoch", shareHB(s, "g", "a", 1, nil...).ErrorCode, kerr.FencedMemberEpoch)

	d := s.ShareGroupDescribe(context.Background(), &kmsg.ShareGroupDescribeRequest{Version: 1, GroupIDs: []string{"g", "nope"}})
	if g := d.Groups[0]; g.ErrorCode != 0 || g.GroupState != "Stable" || g.GroupEpoch != 2 || g.Assignor != "simple" || len(g.Members) != 2 || g.Members[0].ClientID != "client-a" {
		t.Fatalf("describe: %+v", g)
	}
	wantCode(t, "describe unknown", d.Groups[1].ErrorCode, kerr.GroupIDNotFound)

	// b leaves: a gets everything back.
	if l := shareHB(s, "g", "b", -1, nil...); l.ErrorCode != 0 || l.MemberEpoch != -1 {
		t.Fatalf("leave: %s epoch %d", errName(l.ErrorCode), l.MemberEpoch)
	}
	a = shareHB(s, "g", "a", 2, nil...)
	if a.MemberEpoch != 3 || assignment(a) != "[one:[0] t:[0 1 2]]" {
		t.Fatalf("after b left: epoch %d, %s", a.MemberEpoch, assignment(a))
	}
	// New partitions are assigned with the next heartbeat.
	topics.set("t", 4)
	if a = shareHB(s, "g", "a", 3, nil...); assignment(a) != "[one:[0] t:[0 1 2 3]]" {
		t.Fatalf("after adding a partition: %s", assignment(a))
	}

	// c stops heartbeating: it is removed once its session timed out.
	shareHB(s, "g", "c", 0, "t")
	h.clock.Advance(6 * time.Second)
	a = shareHB(s, "g", "a", a.MemberEpoch, nil...)
	h.clock.Advance(5 * time.Second)
	wantCode(t, "a heartbeats", shareHB(s, "g", "a", a.MemberEpoch, nil...).ErrorCode, nil)
	wantCode(t, "expired c", shareHB(s, "g", "c", 6, nil...).ErrorCode, kerr.UnknownMemberID)
	// A member may rejoin with its id at epoch 0.
	wantCode(t, "c rejoins", shareHB(s, "g", "c", 0, "t").ErrorCode, nil)
	shareHB(s, "g2", "x", 0, "t")
	shareHB(s, "g2", "x", -1, nil...)
	if got, want := s.ListShareGroups(), []ShareGroupListing{{"g", "Stable"}, {"g2", "Empty"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ListShareGroups: %+v, want %+v", got, want)
	}
}

// TestShareGroupIDConflict: a classic group's id is not a share group.
// TestShareGroupMaxSize: group.share.max.size members at most.
func TestShareGroupMaxSize(t *testing.T) {
	_, _, s := newShareHarness(t, ShareConfig{MaxGroupSize: 2})
	wantCode(t, "a", shareHB(s, "g", "a", 0, "t").ErrorCode, nil)
	wantCode(t, "b", shareHB(s, "g", "b", 0, "t").ErrorCode, nil)
	wantCode(t, "c", shareHB(s, "g", "c", 0, "t").ErrorCode, kerr.GroupMaxSizeReached)
	wantCode(t, "a rejoining", shareHB(s, "g", "a", 0, "t").ErrorCode, nil)
}

func TestShareGroupIDConflict(t *testing.T) {
	h, _, s := newShareHarness(t, ShareConfig{})
	if err := h.c.store.Commit(context.Background(), "classic", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	h.c.mu.Lock()
	g := h.c.newGroup("classic")
	g.offsets[TopicPartition{"t", 0}] = OffsetCommit{Topic: "t", Offset: 1}
	h.c.groups["classic"] = g
	h.c.mu.Unlock()
	wantCode(t, "heartbeat", shareHB(s, "classic", "m", 0, "t").ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "admin", s.CheckShareGroupID("classic"), kerr.GroupIDNotFound)
}

func TestShareSessions(t *testing.T) {
	_, _, s := newShareHarness(t, ShareConfig{MaxSessions: 2})
	tp := func(p int32) TopicPartition { return TopicPartition{"t", p} }
	steps := []struct {
		member  string
		epoch   int32
		fetch   bool
		add     []TopicPartition
		forget  []TopicPartition
		want    []TopicPartition
		wantErr *kerr.Error
	}{
		{"a", 1, true, nil, nil, nil, kerr.ShareSessionNotFound},
		{"a", 0, false, nil, nil, nil, kerr.InvalidShareSessionEpoch},
		{"a", 0, true, []TopicPartition{tp(0), tp(1)}, nil, []TopicPartition{tp(0), tp(1)}, nil},
		{"a", 2, true, nil, nil, nil, kerr.InvalidShareSessionEpoch},
		{"a", 1, true, []TopicPartition{tp(2)}, []TopicPartition{tp(0)}, []TopicPartition{tp(1), tp(2)}, nil},
		{"a", 2, false, nil, nil, []TopicPartition{tp(1), tp(2)}, nil},
		{"a", 3, true, nil, nil, []TopicPartition{tp(1), tp(2)}, nil},
		{"b", 0, true, []TopicPartition{tp(0)}, nil, []TopicPartition{tp(0)}, nil},
		{"c", 0, true, []TopicPartition{tp(0)}, nil, nil, kerr.ShareSessionLimitReached},
		{"a", 0, true, []TopicPartition{tp(3)}, nil, []TopicPartition{tp(3)}, nil}, // replaces a's session
		{"a", -1, false, nil, nil, []TopicPartition{tp(3)}, nil},
	}
	for i, st := range steps {
		got, err := s.ShareSessionUpdate("g", st.member, st.epoch, st.fetch, st.add, st.forget)
		if st.wantErr != nil {
			if !errors.Is(err, st.wantErr) {
				t.Fatalf("step %d: %v, want %v", i, err, st.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, st.want) {
			t.Fatalf("step %d: %v %v, want %v", i, got, err, st.want)
		}
	}
	s.CloseShareSession("g", "a")
	if _, err := s.ShareSessionUpdate("g", "a", 1, true, nil, nil); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Fatalf("after close: %v", err)
	}
}

// TestShareCoordinatorDurable: acknowledged records stay acknowledged
// across a coordinator restart on the same FileStore, delivery counts are
// kept, and records acquired but not acknowledged come back available.
func TestShareCoordinatorDurable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := newFakeShareLog(10)
	open := func() (*FileStore, *ShareCoordinator) {
		fs, err := OpenFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _, s := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, func(c *Config) { c.Store = fs })
		return fs, s
	}
	fs, s := open()
	res, err := s.Acquire(ctx, "g", "a", "t", 0, -1, l, 6, 1<<20)
	if err != nil || !reflect.DeepEqual(res.Acquired, []AcquiredRange{{0, 5, 1}}) {
		t.Fatalf("acquire: %+v %v", res.Acquired, err)
	}
	if err := s.Acknowledge(ctx, "g", "a", "t", 0, -1, acks(0, 3, ShareAckAccept), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Acknowledge(ctx, "g", "a", "t", 0, -1, acks(0, 0, ShareAckAccept), false); !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("acknowledging twice: %v", err)
	}
	if start, done, err := s.ShareOffsets(ctx, "g", "t", 0, -1); start != 4 || done != 0 || err != nil {
		t.Fatalf("offsets: start %d done %d err %v", start, done, err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}

	_, s = open()
	if start, _, err := s.ShareOffsets(ctx, "g", "t", 0, -1); start != 4 || err != nil {
		t.Fatalf("offsets after restart (from the store): start %d err %v", start, err)
	}
	res, err = s.Acquire(ctx, "g", "b", "t", 0, -1, l, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if want := []AcquiredRange{{4, 5, 2}, {6, 9, 1}}; !reflect.DeepEqual(res.Acquired, want) {
		t.Fatalf("after restart acquired %+v, want %+v", res.Acquired, want)
	}
	// The session closing releases b's records.
	if _, err := s.ShareSessionUpdate("g", "b", 0, true, []TopicPartition{{"t", 0}}, nil); err != nil {
		t.Fatal(err)
	}
	s.CloseShareSession("g", "b")
	res, err = s.Acquire(ctx, "g", "c", "t", 0, -1, l, 100, 1<<20)
	if want := []AcquiredRange{{4, 5, 3}, {6, 9, 2}}; err != nil || !reflect.DeepEqual(res.Acquired, want) {
		t.Fatalf("after b's session closed acquired %+v %v, want %+v", res.Acquired, err, want)
	}
}

// TestShareCoordinatorLeaderEpoch: a partition whose leader epoch changed
// is read again from the store (another broker led it meanwhile).
func TestShareCoordinatorLeaderEpoch(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	l := newFakeShareLog(4)
	_, _, s := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, func(c *Config) { c.Store = store })
	if _, err := s.Acquire(ctx, "g", "a", "t", 0, 1, l, 4, 1<<20); err != nil {
		t.Fatal(err)
	}
	// Another leader accepted 0-2 and wrote the state.
	if err := store.SaveShareState(ctx, "g", "t", 0, ShareState{StartOffset: 3}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Acquire(ctx, "g", "b", "t", 0, 2, l, 4, 1<<20)
	if want := []AcquiredRange{{3, 3, 1}}; err != nil || !reflect.DeepEqual(res.Acquired, want) {
		t.Fatalf("under the new epoch acquired %+v %v, want %+v", res.Acquired, err, want)
	}
}

// recreatableTopics is a TopicMetadata whose topic ids can change (a topic
// deleted and created again).
type recreatableTopics struct {
	mu  sync.Mutex
	ids map[string][16]byte
}

func (r *recreatableTopics) TopicNames() []string { return []string{"t"} }

func (r *recreatableTopics) Topic(name string, _ bool) ([16]byte, int32, [][]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.ids[name]
	return id, 1, nil, ok
}

func (r *recreatableTopics) TopicName(id [16]byte) (string, bool) { return "t", true }

// TestShareStateOfRecreatedTopic: share state belongs to a topic id; a
// topic deleted and created again with the same name starts afresh.
func TestShareStateOfRecreatedTopic(t *testing.T) {
	ctx := context.Background()
	topics := &recreatableTopics{ids: map[string][16]byte{"t": {1}}}
	store := NewMemoryStore()
	_, _, s := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, func(c *Config) { c.Topics, c.Store = topics, store })
	l := newFakeShareLog(4)
	if _, err := s.Acquire(ctx, "g", "a", "t", 0, -1, l, 4, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.Acknowledge(ctx, "g", "a", "t", 0, -1, acks(0, 3, ShareAckAccept), false); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := store.LoadShareState(ctx, "g", "t", 0); st.TopicID != [16]byte{1} || st.StartOffset != 4 {
		t.Fatalf("stored %+v", st)
	}
	topics.mu.Lock()
	topics.ids["t"] = [16]byte{2}
	topics.mu.Unlock()
	l2 := newFakeShareLog(2) // the new topic's log
	res, err := s.Acquire(ctx, "g", "b", "t", 0, -1, l2, 10, 1<<20)
	if want := []AcquiredRange{{0, 1, 1}}; err != nil || !reflect.DeepEqual(res.Acquired, want) {
		t.Fatalf("on the new topic acquired %+v %v, want %+v", res.Acquired, err, want)
	}
}

func TestShareConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg ShareConfig
		ok  bool
	}{
		{ShareConfig{}, true},
		{ShareConfig{AutoOffsetReset: "earliest", DeliveryCountLimit: 10}, true},
		{ShareConfig{AutoOffsetReset: "none"}, false},
		{ShareConfig{IsolationLevel: "read_committed"}, true},
		{ShareConfig{IsolationLevel: "serializable"}, false},
		{ShareConfig{DeliveryCountLimit: 1}, false},
		{ShareConfig{DeliveryCountLimit: 11}, false},
	} {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: %v", tt.cfg, err)
		}
	}
}

// TestShareCoordinatorConcurrentMembers: eight members acquire and
// acknowledge the same partition concurrently (accepting most records,
// releasing some): every record ends accepted once or archived at the
// delivery limit, and the SPSO reaches the end. Run with -race.
func TestShareCoordinatorConcurrentMembers(t *testing.T) {
	ctx := context.Background()
	const total = 2000
	sizes := make([]int64, total/10)
	for i := range sizes {
		sizes[i] = 10
	}
	l := newFakeShareLog(sizes...)
	_, _, s := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, func(c *Config) { c.Store = NewMemoryStore() })
	var mu sync.Mutex
	accepted := map[int64]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		member := fmt.Sprintf("m%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if start, _, err := s.ShareOffsets(ctx, "g", "t", 0, -1); err != nil || start == total {
					return
				}
				res, err := s.Acquire(ctx, "g", member, "t", 0, -1, l, 7, 1<<20)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range res.Acquired {
					for off := r.First; off <= r.Last; off++ {
						typ := ShareAckAccept
						if (off+int64(i)+int64(w))%5 == 0 {
							typ = ShareAckRelease
						}
						if err := s.Acknowledge(ctx, "g", member, "t", 0, -1, acks(off, off, typ), false); err != nil {
							t.Errorf("%s acknowledging %d it acquired: %v", member, off, err)
							return
						}
						if typ == ShareAckAccept {
							mu.Lock()
							accepted[off]++
							mu.Unlock()
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	for off, n := range accepted {
		if n != 1 {
			t.Errorf("record %d accepted %d times", off, n)
		}
	}
	t.Logf("%d accepted, %d archived at the delivery limit", len(accepted), total-len(accepted))
	if len(accepted) < total*3/4 {
		t.Errorf("only %d of %d records accepted", len(accepted), total)
	}
}

// TestListShareGroupsStates: ListGroups sees a share group Stable while it
// has members and Empty once they left or their session timed out.
func TestListShareGroupsStates(t *testing.T) {
	h, _, s := newShareHarness(t, ShareConfig{SessionTimeout: 45 * time.Second})
	wantCode(t, "join a", shareHB(s, "left", "a", 0, "t").ErrorCode, nil)
	wantCode(t, "leave a", shareHB(s, "left", "a", -1).ErrorCode, nil)
	wantCode(t, "join b", shareHB(s, "quiet", "b", 0, "t").ErrorCode, nil)
	wantCode(t, "join c", shareHB(s, "busy", "c", 0, "t").ErrorCode, nil)
	list := func() string { return fmt.Sprint(s.ListShareGroups()) }
	if got, want := list(), "[{busy Stable} {left Empty} {quiet Stable}]"; got != want {
		t.Fatalf("listed %s, want %s", got, want)
	}
	h.clock.Advance(30 * time.Second)
	wantCode(t, "heartbeat c", shareHB(s, "busy", "c", 1).ErrorCode, nil)
	h.clock.Advance(20 * time.Second)
	if got, want := list(), "[{busy Stable} {left Empty} {quiet Empty}]"; got != want {
		t.Fatalf("after b's session timed out listed %s, want %s", got, want)
	}
}

// TestShareStateChangedByAnotherBroker: in a cluster the group's
// coordinator alters (AlterShareGroupOffsets) or deletes (DeleteGroups) a
// share group's state in the shared store while another broker leads the
// partition and keeps its state loaded under an unchanged leader epoch. A
// share session adding the partition makes the leader read the store
// again, so the consumers that come back see the change.
func TestShareStateChangedByAnotherBroker(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore() // the cluster's etcd
	withStore := func(c *Config) { c.Store = store }
	coordinator, _, coord := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, withStore)
	_, _, leader := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, withStore)
	l := newFakeShareLog(10)
	const leaderEpoch = 3
	consume := func(member string, n int) []AcquiredRange {
		t.Helper()
		if _, err := leader.ShareSessionUpdate("g", member, 0, true, []TopicPartition{{"t", 0}}, nil); err != nil {
			t.Fatal(err)
		}
		res, err := leader.Acquire(ctx, "g", member, "t", 0, leaderEpoch, l, n, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Acquired {
			if err := leader.Acknowledge(ctx, "g", member, "t", 0, leaderEpoch, acks(r.First, r.Last, ShareAckAccept), false); err != nil {
				t.Fatal(err)
			}
		}
		leader.CloseShareSession("g", member)
		return res.Acquired
	}
	if got, want := consume("m1", 4), []AcquiredRange{{0, 3, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first consumer acquired %+v, want %+v", got, want)
	}
	if err := coord.SetShareStartOffset(ctx, "g", "t", 0, 2); err != nil {
		t.Fatal(err)
	}
	if got, want := consume("m2", 2), []AcquiredRange{{2, 3, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the start offset moved back to 2 acquired %+v, want %+v", got, want)
	}
	resp := coordinator.c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"g"}})
	wantCode(t, "DeleteGroups", resp.Groups[0].ErrorCode, nil)
	if got, want := consume("m3", 100), []AcquiredRange{{0, 9, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the group was deleted acquired %+v, want %+v", got, want)
	}
	// Within a session the loaded state is used: no store read per fetch.
	if _, err := leader.ShareSessionUpdate("g", "m4", 0, true, []TopicPartition{{"t", 0}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Acquire(ctx, "g", "m4", "t", 0, leaderEpoch, l, 1, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveShareState(ctx, "g", "t", 0, ShareState{StartOffset: 7}); err != nil {
		t.Fatal(err)
	}
	if start, _, err := leader.ShareOffsets(ctx, "g", "t", 0, leaderEpoch); start != 10 || err != nil {
		t.Fatalf("start offset within the session %d (%v), want 10 (the loaded state)", start, err)
	}
}

// TestShareOffsetsAfterLeadershipMoved: the group's coordinator led a
// partition and still has its state loaded when another broker takes the
// partition over and moves on; DescribeShareGroupOffsets on the
// coordinator answers the store's state, not its old copy.
func TestShareOffsetsAfterLeadershipMoved(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	withStore := func(c *Config) { c.Store = store }
	_, _, old := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, withStore)
	_, _, current := newShareHarness(t, ShareConfig{AutoOffsetReset: "earliest"}, withStore)
	l := newFakeShareLog(10)
	consume := func(s *ShareCoordinator, leaderEpoch int32) {
		t.Helper()
		res, err := s.Acquire(ctx, "g", "m", "t", 0, leaderEpoch, l, 4, 1<<20)
		if err != nil || len(res.Acquired) != 1 {
			t.Fatalf("acquire: %+v %v", res.Acquired, err)
		}
		r := res.Acquired[0]
		if err := s.Acknowledge(ctx, "g", "m", "t", 0, leaderEpoch, acks(r.First, r.Last, ShareAckAccept), false); err != nil {
			t.Fatal(err)
		}
	}
	consume(old, 3)
	consume(current, 4)
	for _, tc := range []struct {
		name        string
		s           *ShareCoordinator
		leaderEpoch int32
		want        int64
	}{
		{"the leader", current, 4, 8},
		{"the former leader", old, NotLeaderEpoch, 8},
	} {
		if start, _, err := tc.s.ShareOffsets(ctx, "g", "t", 0, tc.leaderEpoch); start != tc.want || err != nil {
			t.Errorf("%s: start offset %d (%v), want %d", tc.name, start, err, tc.want)
		}
	}
}
