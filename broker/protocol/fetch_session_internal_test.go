package protocol

import (
	"encoding/binary"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/notify"
	"github.com/strata-dev/strata/broker/replica"
)

// replicaFetch is a Fetch v12 replica request for partitions of topic t at
// the given offsets (partition → offset).
func replicaFetch(id, epoch int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = 2
	req.SessionID, req.SessionEpoch = id, epoch
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		for _, p := range slices.Sorted(maps.Keys(offsets)) {
			off := offsets[p]
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic = "t"
		ft.Partitions = forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// answer is a response to the effective request: every partition with
// the given high watermark (partition → HWM) and records for those in
// data.
func answer(req *kmsg.FetchRequest, hwm map[int32]int64, data map[int32]bool) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset = hwm[rp.Partition], hwm[rp.Partition]
			if data[rp.Partition] {
				sp.RecordBatches = []byte{1}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func partitions(req *kmsg.FetchRequest) map[int32]int64 {
	out := map[int32]int64{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			out[rp.Partition] = rp.FetchOffset
		}
	}
	return out
}

func answered(resp *kmsg.FetchResponse) []int32 {
	var out []int32
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out = append(out, rp.Partition)
		}
	}
	return out
}

func TestFetchSessions(t *testing.T) {
	s := &fetchSessions{byID: map[int32]*fetchSession{}}
	now := time.Unix(1_800_000_000, 0)

	// A new session: a full fetch, answered in full with the session ID.
	sf, code := s.open(replicaFetch(0, 0, map[int32]int64{0: 10, 1: 20, 2: 30}), now)
	if code != 0 || sf.session == nil || !sf.full {
		t.Fatalf("new session: code %d, session %v, full %v", code, sf.session, sf.full)
	}
	resp := answer(whole(sf), map[int32]int64{0: 10, 1: 20, 2: 30}, nil)
	sf.finish(resp)
	sf.release() // as the handler does once it answered
	id := resp.SessionID
	if id == 0 || len(answered(resp)) != 3 {
		t.Fatalf("full answer: session %d, partitions %v; want an ID and all 3", id, answered(resp))
	}

	// Incremental: partition 1 moved; the effective request still has
	// all three, the answer only what changed.
	sf, code = s.open(replicaFetch(id, 1, map[int32]int64{1: 25}), now)
	if code != 0 || sf.full {
		t.Fatalf("incremental: code %d, full %v", code, sf.full)
	}
	if got := partitions(whole(sf)); len(got) != 3 || got[0] != 10 || got[1] != 25 || got[2] != 30 {
		t.Fatalf("effective request %v, want 0:10 1:25 2:30", got)
	}
	resp = answer(whole(sf), map[int32]int64{0: 10, 1: 25, 2: 31}, map[int32]bool{1: true})
	sf.finish(resp)
	sf.release() // as the handler does once it answered
	if got := answered(resp); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("incremental answer has partitions %v, want 1 (records) and 2 (HWM moved)", got)
	}
	// Nothing new: an empty answer.
	sf, _ = s.open(replicaFetch(id, 2, nil), now)
	resp = answer(whole(sf), map[int32]int64{0: 10, 1: 25, 2: 31}, nil)
	sf.finish(resp)
	sf.release() // as the handler does once it answered
	if got := answered(resp); len(got) != 0 {
		t.Fatalf("answer without news has partitions %v", got)
	}

	// Wrong epoch, unknown ID, another replica's ID.
	if _, code = s.open(replicaFetch(id, 2, nil), now); code != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("replayed epoch: code %d, want INVALID_FETCH_SESSION_EPOCH", code)
	}
	if _, code = s.open(replicaFetch(id+100, 1, nil), now); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: code %d, want FETCH_SESSION_ID_NOT_FOUND", code)
	}
	other := replicaFetch(id, 3, nil)
	other.ReplicaID = 3
	if _, code = s.open(other, now); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("another replica's session: code %d, want FETCH_SESSION_ID_NOT_FOUND", code)
	}

	// Forgotten partitions leave the session.
	sf, code = s.open(replicaFetch(id, 3, nil, 0), now)
	if code != 0 {
		t.Fatalf("forget: code %d", code)
	}
	if got := partitions(whole(sf)); len(got) != 2 {
		t.Fatalf("after forgetting partition 0 the session has %v", got)
	}
	sf.finish(answer(whole(sf), map[int32]int64{1: 25, 2: 31}, nil))
	sf.release() // as the handler does once it answered

	// Epoch -1 closes it and fetches without a session.
	sf, code = s.open(replicaFetch(id, -1, map[int32]int64{0: 1}), now)
	if code != 0 || sf.session != nil {
		t.Fatalf("close: code %d, session %v", code, sf.session)
	}
	if _, code = s.open(replicaFetch(id, 4, nil), now); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: code %d, want FETCH_SESSION_ID_NOT_FOUND", code)
	}

	// A full cache evicts the least recently used session.
	for i := 0; i < defaultFetchSessionSlots+1; i++ {
		sf, code := s.open(replicaFetch(0, 0, map[int32]int64{0: 0}), now.Add(time.Duration(i)*time.Millisecond))
		if code != 0 || sf.session == nil {
			t.Fatalf("session %d: code %d", i, code)
		}
		sf.finish(answer(whole(sf), nil, nil))
		sf.release() // as the handler does once it answered
	}
	if n := len(s.byID); n != defaultFetchSessionSlots {
		t.Fatalf("%d sessions cached, want at most %d", n, defaultFetchSessionSlots)
	}
}

// TestFetchSessionBounds: a session holds at most
// Limits.FetchSessionMaxPartitions partitions (a full fetch naming more is
// served without a session, an incremental one growing past it closes the
// session), max.incremental.fetch.session.cache.slots=0 keeps none, and a
// session idle for fetchSessionIdle is dropped when another one opens.
// Before, sessions took any number of partitions and never expired.
func TestFetchSessionBounds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := (&Env{Limits: Limits{FetchSessionMaxPartitions: 4}}).fetchSessions()

	sf, code := s.open(replicaFetch(0, 0, map[int32]int64{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}), now)
	if code != 0 || sf.session != nil {
		t.Fatalf("a full fetch of 5 partitions (limit 4): code %d, session %v; want served without a session", code, sf.session)
	}
	sf, code = s.open(replicaFetch(0, 0, map[int32]int64{0: 1, 1: 1, 2: 1}), now)
	if code != 0 || sf.session == nil {
		t.Fatalf("a full fetch of 3 partitions: code %d, no session", code)
	}
	resp := answer(whole(sf), map[int32]int64{0: 1, 1: 1, 2: 1}, nil)
	sf.finish(resp)
	sf.release()
	id := resp.SessionID
	// Partition 2 again and 3: 4 in all, fine; then 4 and 5: over.
	sf, code = s.open(replicaFetch(id, 1, map[int32]int64{2: 2, 3: 1}), now)
	if code != 0 || sf.session == nil {
		t.Fatalf("growing the session to 4 partitions: code %d", code)
	}
	sf.finish(answer(whole(sf), nil, nil))
	sf.release()
	if _, code = s.open(replicaFetch(id, 2, map[int32]int64{4: 1, 5: 1}), now); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("growing the session to 6 partitions: code %d, want FETCH_SESSION_ID_NOT_FOUND", code)
	}
	if _, ok := s.byID[id]; ok {
		t.Fatal("the session that grew past the limit is still cached")
	}

	// Idle expiry.
	sf, _ = s.open(replicaFetch(0, 0, map[int32]int64{0: 1}), now)
	resp = answer(whole(sf), map[int32]int64{0: 1}, nil)
	sf.finish(resp)
	sf.release()
	idle := resp.SessionID
	later := now.Add(fetchSessionIdle + time.Second)
	sf, _ = s.open(replicaFetch(0, 0, map[int32]int64{1: 1}), later)
	sf.release()
	if _, code = s.open(replicaFetch(idle, 1, nil), later); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("a session idle for %v: code %d, want FETCH_SESSION_ID_NOT_FOUND", fetchSessionIdle+time.Second, code)
	}

	// No slots: every fetch is sessionless.
	none := (&Env{Limits: Limits{FetchSessionSlots: -1}}).fetchSessions()
	if sf, code := none.open(replicaFetch(0, 0, map[int32]int64{0: 1}), now); code != 0 || sf.session != nil {
		t.Fatalf("with no session slots: code %d, session %v", code, sf.session)
	}
}

// fakeSource is a session partition's source in these tests: append
// signals a change that wakes a parked fetch, move one that does not (an
// HWM move).
type fakeSource struct{ appends, moves notify.List }

func (s *fakeSource) subscribe(mark func(wake bool)) func() {
	c1, c2 := s.appends.Subscribe(func() { mark(true) }), s.moves.Subscribe(func() { mark(false) })
	return func() { c1(); c2() }
}

func (s *fakeSource) append() { s.appends.Signal() }
func (s *fakeSource) move()   { s.moves.Signal() }

func (s *fakeSource) subscribers() int { return s.appends.Len() + s.moves.Len() }

// sessionRig plays the rounds of one follower's fetches against a
// session of n partitions of topic t, offsets 0 to n-1.
type sessionRig struct {
	t       *testing.T
	s       *fetchSessions
	src     []*fakeSource
	hwm     map[int32]int64
	refresh time.Duration
	id      int32
	epoch   int32
}

func newSessionRig(t *testing.T, n int) *sessionRig {
	r := &sessionRig{t: t, s: &fetchSessions{byID: map[int32]*fetchSession{}}, hwm: map[int32]int64{}, refresh: time.Second}
	for p := range int32(n) {
		r.src = append(r.src, &fakeSource{})
		r.hwm[p] = int64(p)
	}
	return r
}

// round plays one read of sf: reads what active picks, answers those
// with the rig's HWMs (records for data), records the visits. It returns
// what was read, the channel that wakes the fetch and the next refresh.
func (r *sessionRig) round(sf *sessionFetch, at time.Time, data, unread map[int32]bool) ([]int32, <-chan struct{}, time.Time) {
	r.t.Helper()
	eff, changed, due := sf.active(sf.req, at, r.refresh)
	resp := answer(eff, r.hwm, data)
	var visits []partVisit
	for _, p := range answered(resp) {
		visits = append(visits, partVisit{park: []<-chan struct{}{make(chan struct{})}, src: r.src[p], unread: unread[p]})
	}
	sf.visited(resp, visits, at)
	return answered(resp), changed, due
}

// open starts the session with a full fetch of every partition.
func (r *sessionRig) open(at time.Time) {
	r.t.Helper()
	sf, code := r.s.open(replicaFetch(0, 0, r.hwm), at)
	if code != 0 {
		r.t.Fatalf("opening the session: code %d", code)
	}
	if read, _, _ := r.round(&sf, at, nil, nil); len(read) != len(r.src) {
		r.t.Fatalf("a new session's full fetch read %d partitions, want %d", len(read), len(r.src))
	}
	resp := answer(whole(sf), r.hwm, nil)
	sf.finish(resp)
	sf.release()
	r.id, r.epoch = resp.SessionID, 1
}

// fetch starts the next incremental fetch, naming the given partitions.
func (r *sessionRig) fetch(at time.Time, named map[int32]int64) *sessionFetch {
	r.t.Helper()
	sf, code := r.s.open(replicaFetch(r.id, r.epoch, named), at)
	if code != 0 {
		r.t.Fatalf("incremental fetch at epoch %d: code %d", r.epoch, code)
	}
	return &sf
}

// end answers sf with what its last round read and releases it.
func (r *sessionRig) end(sf *sessionFetch, resp *kmsg.FetchResponse) {
	sf.finish(resp)
	sf.release()
	r.epoch++
}

func signalled(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestQuietSessionPartitions: an incremental fetch reads only the
// partitions of its session that are not quiet (the last read found
// nothing new). A quiet one is read again when the follower names it,
// when its source signals (an append, which wakes the parked fetch; an
// HWM move, which does not), and once the refresh interval passed; a
// partition whose read the response budget cut short never turns quiet,
// nor one whose subscription came after its read.
func TestQuietSessionPartitions(t *testing.T) {
	r := newSessionRig(t, 4)
	now := time.Unix(1_800_000_000, 0)
	r.open(now)

	// The first incremental round reads them all once more (subscribed
	// after the full fetch's read); then every partition is quiet.
	sf := r.fetch(now, nil)
	if read, _, _ := r.round(sf, now, nil, nil); len(read) != 4 {
		t.Fatalf("first incremental round read %v, want all 4 (subscribed after their first read)", read)
	}
	read, changed, due := r.round(sf, now.Add(10*time.Millisecond), nil, nil)
	if len(read) != 0 || changed == nil || !due.Equal(now.Add(r.refresh)) {
		t.Fatalf("quiet session read %v, wake channel %v, refresh due %v; want none read, a channel, due at %v", read, changed, due, now.Add(r.refresh))
	}
	if signalled(changed) {
		t.Fatal("the wake channel fired with nothing changed")
	}

	// An HWM move alone does not wake a parked fetch; an append does.
	r.src[2].move()
	if signalled(changed) {
		t.Fatal("an HWM move woke the parked fetch")
	}
	r.src[1].append()
	if !signalled(changed) {
		t.Fatal("an append did not wake the parked fetch")
	}
	r.hwm[0], r.hwm[2] = 12, 31
	r.end(sf, answer(&kmsg.FetchRequest{}, nil, nil))

	// Named (its follower moved), appended, HWM moved: read, in order.
	at := now.Add(20 * time.Millisecond)
	sf = r.fetch(at, map[int32]int64{0: 12})
	read, _, _ = r.round(sf, at, map[int32]bool{1: true}, map[int32]bool{2: true})
	if !slices.Equal(read, []int32{0, 1, 2}) {
		t.Fatalf("read %v, want 0 (named), 1 (appended), 2 (HWM moved)", read)
	}
	// In the same fetch, a second round: none quiet yet (0 and 2 have an
	// HWM to tell, 1 records, and 2 was cut short).
	read, _, _ = r.round(sf, at.Add(time.Millisecond), map[int32]bool{1: true}, nil)
	if !slices.Equal(read, []int32{0, 1, 2}) {
		t.Fatalf("second round read %v, want 0, 1 and 2", read)
	}
	r.end(sf, answer(&kmsg.FetchRequest{Topics: []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}, {Partition: 1}, {Partition: 2}}}}}, r.hwm, map[int32]bool{1: true}))

	// Once answered: 0 and 2 quiet (their HWM told), 1 read until the
	// follower names it (records went).
	at = now.Add(30 * time.Millisecond)
	sf = r.fetch(at, map[int32]int64{1: 21})
	if read, _, _ = r.round(sf, at, nil, nil); !slices.Equal(read, []int32{1}) {
		t.Fatalf("read %v, want 1 (named)", read)
	}
	if read, _, _ = r.round(sf, at.Add(time.Millisecond), nil, nil); len(read) != 0 {
		t.Fatalf("read %v with nothing new, want none", read)
	}
	// Then the refresh reads the one not read for a second (3, quiet
	// since the first incremental round).
	if read, _, _ = r.round(sf, now.Add(r.refresh+5*time.Millisecond), nil, nil); !slices.Equal(read, []int32{3}) {
		t.Fatalf("after the refresh interval read %v, want 3 (last read at the start)", read)
	}
}

// TestSessionChangeNotification: in a session of many quiet partitions,
// a change to any one of them wakes the parked fetch and the next round
// reads exactly that one; a change to a partition while a round reads it
// is not lost (the next round reads it again); forgetting a partition,
// closing or evicting the session ends its subscriptions, and a fetch
// still in flight for a closed session subscribes nothing.
func TestSessionChangeNotification(t *testing.T) {
	const n = 1000
	r := newSessionRig(t, n)
	now := time.Unix(1_800_000_000, 0)
	r.open(now)
	sf := r.fetch(now, nil)
	if read, _, _ := r.round(sf, now, nil, nil); len(read) != n {
		t.Fatalf("first incremental round read %d, want %d", len(read), n)
	}
	at := now
	for _, p := range []int32{0, 617, n - 1} {
		at = at.Add(time.Millisecond)
		read, changed, _ := r.round(sf, at, nil, nil)
		if len(read) != 0 {
			t.Fatalf("quiet session read %v", read)
		}
		r.src[p].append()
		if !signalled(changed) {
			t.Fatalf("an append to partition %d did not wake the fetch", p)
		}
		if read, _, _ = r.round(sf, at, nil, nil); !slices.Equal(read, []int32{p}) {
			t.Fatalf("after an append to %d read %v, want exactly it", p, read)
		}
	}

	// A change while the round reading it is in flight: active took the
	// mark, the read saw the old state (nothing new: quiet), the append
	// lands before visited.
	at = at.Add(time.Millisecond)
	r.src[5].append()
	eff, changed, _ := sf.active(sf.req, at, r.refresh)
	if got := answered(answer(eff, r.hwm, nil)); !slices.Equal(got, []int32{5}) {
		t.Fatalf("round reads %v, want 5", got)
	}
	if signalled(changed) {
		t.Fatal("the round took the change and left its signal: the next park would wake for nothing")
	}
	r.src[5].append()
	resp := answer(eff, r.hwm, nil)
	sf.visited(resp, []partVisit{{park: []<-chan struct{}{make(chan struct{})}, src: r.src[5]}}, at)
	if !signalled(changed) {
		t.Fatal("an append during the round did not wake the fetch")
	}
	if read, _, _ := r.round(sf, at, nil, nil); !slices.Equal(read, []int32{5}) {
		t.Fatalf("after an append during the previous round read %v, want 5 again", read)
	}
	r.end(sf, answer(&kmsg.FetchRequest{}, nil, nil))

	// Forgotten: its subscription ends, the others stay.
	forget, code := r.s.open(replicaFetch(r.id, r.epoch, nil, 3), at)
	sf = &forget
	if code != 0 {
		t.Fatalf("forgetting partition 3: code %d", code)
	}
	if got := r.src[3].subscribers(); got != 0 {
		t.Fatalf("forgotten partition has %d subscribers, want 0", got)
	}
	if got := r.src[4].subscribers(); got != 2 {
		t.Fatalf("partition 4 has %d subscribers, want 2", got)
	}
	r.src[3].append()
	if read, _, _ := r.round(sf, at, nil, nil); len(read) != 0 {
		t.Fatalf("read %v after an append to a forgotten partition, want none", read)
	}

	// Closed (epoch -1) while this fetch is in flight: no subscription
	// left, and the fetch's late visits add none.
	closing, code := r.s.open(replicaFetch(r.id, -1, nil), at)
	if code != 0 || closing.session != nil {
		t.Fatalf("closing the session: code %d, session %v", code, closing.session)
	}
	r.src[7].append()
	resp = answer(&kmsg.FetchRequest{Topics: []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 7}}}}}, r.hwm, nil)
	sf.visited(resp, []partVisit{{park: []<-chan struct{}{make(chan struct{})}, src: &fakeSource{}}}, at)
	sf.release()
	for p, src := range r.src {
		if got := src.subscribers(); got != 0 {
			t.Fatalf("after the session closed partition %d has %d subscribers, want 0", p, got)
		}
	}

	// Evicted for a new session (one slot): its subscriptions end too.
	r = newSessionRig(t, 3)
	r.s.slots = 1
	r.open(now)
	sf = r.fetch(now, nil)
	r.round(sf, now, nil, nil)
	r.end(sf, answer(&kmsg.FetchRequest{}, nil, nil))
	other, _ := r.s.open(replicaFetch(0, 0, map[int32]int64{0: 0}), now.Add(time.Second))
	other.release()
	for p, src := range r.src {
		if got := src.subscribers(); got != 0 {
			t.Fatalf("after the session was evicted partition %d has %d subscribers, want 0", p, got)
		}
	}
}

// whole is sf's effective request with every partition of its session
// (an incremental fetch's is built from the session at each read).
func whole(sf sessionFetch) *kmsg.FetchRequest {
	if sf.session == nil || sf.full {
		return sf.req
	}
	sf.s.mu.Lock()
	defer sf.s.mu.Unlock()
	return requestOf(sf.req, sf.session.parts)
}

// consumerFetch is replicaFetch as a consumer's (ReplicaID -1).
func consumerFetch(id, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	req := replicaFetch(id, epoch, offsets)
	req.ReplicaID = -1
	return req
}

// TestFetchSessionSlotsPreferFollowers: consumers and followers share the
// slots, but a consumer's new session evicts only a consumer's, and a
// follower's evicts consumers' first; a consumer session answers only its
// owner, and only with the topic naming it was opened with.
func TestFetchSessionSlotsPreferFollowers(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := (&Env{Limits: Limits{FetchSessionSlots: 2}}).fetchSessions()
	open := func(req *kmsg.FetchRequest, owner string) int32 {
		t.Helper()
		now = now.Add(time.Second)
		sf, code := s.openAs(req, owner, now)
		if code != 0 {
			t.Fatalf("opening a session: code %d", code)
		}
		defer sf.release()
		if sf.session == nil {
			return 0
		}
		if sf.session.consumer != (req.ReplicaID < 0) {
			t.Fatalf("session of replica %d: consumer %v", req.ReplicaID, sf.session.consumer)
		}
		return sf.session.id
	}
	held := func() []int32 { return slices.Sorted(maps.Keys(s.byID)) }
	ids := func(ids ...int32) []int32 { return slices.Sorted(slices.Values(ids)) }

	follower1 := open(replicaFetch(0, 0, map[int32]int64{0: 1}), "")
	consumer1 := open(consumerFetch(0, 0, map[int32]int64{0: 1}), "User:a")
	consumer2 := open(consumerFetch(0, 0, map[int32]int64{0: 1}), "User:a")
	if got := held(); !slices.Equal(got, ids(follower1, consumer2)) {
		t.Fatalf("sessions %v, want the follower's %d and the newer consumer's %d (the older consumer's, %d, evicted)", got, follower1, consumer2, consumer1)
	}
	follower2 := open(replicaFetch(0, 0, map[int32]int64{1: 1}), "")
	if got := held(); !slices.Equal(got, ids(follower1, follower2)) {
		t.Fatalf("sessions %v, want both followers' (%d, %d): a follower evicts a consumer first", got, follower1, follower2)
	}
	if id := open(consumerFetch(0, 0, map[int32]int64{0: 1}), "User:a"); id != 0 {
		t.Fatalf("a consumer got session %d with every slot a follower's; want none (sessionless)", id)
	}
	if got := held(); !slices.Equal(got, ids(follower1, follower2)) {
		t.Fatalf("sessions %v after a consumer asked, want the followers' still", got)
	}
	// A follower's new session evicts the least recently used follower's
	// when no consumer holds a slot.
	follower3 := open(replicaFetch(0, 0, map[int32]int64{2: 1}), "")
	if got := held(); !slices.Equal(got, ids(follower2, follower3)) {
		t.Fatalf("sessions %v, want %d and %d", got, follower2, follower3)
	}

	// Owner and topic naming.
	s = (&Env{}).fetchSessions()
	mine := open(consumerFetch(0, 0, map[int32]int64{0: 1}), "User:a")
	if _, code := s.openAs(consumerFetch(mine, 1, nil), "User:b", now); code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("another principal's incremental fetch on the session: code %d, want FETCH_SESSION_ID_NOT_FOUND", code)
	}
	if _, code := s.openAs(consumerFetch(mine, -1, nil), "User:b", now); code != 0 || s.byID[mine] == nil {
		t.Fatalf("another principal closing the session: code %d, session held %v; want a sessionless fetch and the session kept", code, s.byID[mine] != nil)
	}
	byID := consumerFetch(mine, 1, nil)
	byID.SetVersion(13)
	if _, code := s.openAs(byID, "User:a", now); code != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("a v13 fetch on a session opened at v12: code %d, want FETCH_SESSION_TOPIC_ID_ERROR", code)
	}
	sf, code := s.openAs(consumerFetch(mine, 1, nil), "User:a", now)
	if code != 0 || sf.session == nil || sf.session.id != mine {
		t.Fatalf("the owner's incremental fetch: code %d", code)
	}
	sf.release()

	// Starting over with the ID of a session that is gone (a restart, an
	// eviction) and epoch 0, as franz-go does: a new session, no error.
	gone := mine + 1
	for _, taken := s.byID[gone]; taken; _, taken = s.byID[gone] {
		gone++
	}
	sf, code = s.openAs(consumerFetch(gone, 0, map[int32]int64{0: 1}), "User:a", now)
	if code != 0 || sf.session == nil || sf.session.id == gone {
		t.Fatalf("epoch 0 naming an unknown session: code %d, session %v; want a new session", code, sf.session)
	}
	sf.release()
}

// TestConsumerSessionRotation: a consumer session's partition that got
// records goes to the end of the session's order (Kafka's rotation), so
// that a response's byte budget does not starve the partitions after it.
func TestConsumerSessionRotation(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := &fetchSessions{byID: map[int32]*fetchSession{}}
	sf, _ := s.open(consumerFetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}), now)
	resp := answer(whole(sf), map[int32]int64{0: 5, 1: 5, 2: 5}, map[int32]bool{0: true})
	sf.finish(resp)
	sf.release()
	sf, _ = s.open(consumerFetch(resp.SessionID, 1, map[int32]int64{0: 5}), now)
	defer sf.release()
	eff, _, _ := sf.active(sf.req, now, time.Second)
	if got := answered(answer(eff, nil, nil)); !slices.Equal(got, []int32{1, 2, 0}) {
		t.Fatalf("session order %v after partition 0 got records, want 1 2 0", got)
	}
}

// TestSessionHWMWake: an HWM move alone wakes a parked replica fetch
// only for a partition whose follower asked for it (replica.TagHWMWake:
// it serves consumers of it), and answers the fetch only while the HWM
// is above what the follower has: the HWM it said it has, or the one the
// session last answered it with. A partition without the tag is neither
// woken nor answered for an HWM move: a follower that serves no consumer
// gets no extra round.
func TestSessionHWMWake(t *testing.T) {
	r := newSessionRig(t, 2)
	now := time.Unix(1_800_000_000, 0)
	r.open(now)
	// The follower asks for HWM wakes of partition 1 (its HWM 1, its log
	// end 10), not of 0.
	req := replicaFetch(r.id, r.epoch, map[int32]int64{1: 10})
	req.Topics[0].Partitions[0].UnknownTags.Set(replica.TagHWMWake, binary.AppendUvarint(nil, 1))
	sf, code := r.s.open(req, now)
	if code != 0 {
		t.Fatalf("naming partition 1 with the tag: code %d", code)
	}
	visits := func(resp *kmsg.FetchResponse) []partVisit {
		var out []partVisit
		for _, p := range answered(resp) {
			v := partVisit{park: []<-chan struct{}{make(chan struct{})}, src: r.src[p], fetchOffset: 10}
			if p == 1 {
				v.wakeHWM, v.followerHWM = true, 1
			}
			out = append(out, v)
		}
		return out
	}
	read := func(at time.Time) (*kmsg.FetchResponse, <-chan struct{}) {
		t.Helper()
		eff, changed, _ := sf.active(sf.req, at, r.refresh)
		resp := answer(eff, r.hwm, nil)
		sf.visited(resp, visits(resp), at)
		return resp, changed
	}
	// Both read (subscribed now); the HWMs are those of the full answer
	// (0 and 1): nothing for the follower.
	resp, _ := read(now)
	if got := answered(resp); len(got) != 2 {
		t.Fatalf("first round read %v, want both", got)
	}
	if sf.hwmNews(resp, visits(resp)) {
		t.Fatal("HWM news with the HWMs the follower has")
	}
	_, changed := read(now.Add(time.Millisecond))

	// Partition 0 (no tag): its HWM move neither wakes the fetch nor,
	// read, answers it.
	r.hwm[0] = 7
	r.src[0].move()
	if signalled(changed) {
		t.Fatal("an HWM move of a partition without the tag woke the parked fetch")
	}
	resp, changed = read(now.Add(2 * time.Millisecond))
	if got := answered(resp); !slices.Equal(got, []int32{0}) {
		t.Fatalf("read %v, want 0 (its HWM moved)", got)
	}
	if sf.hwmNews(resp, visits(resp)) {
		t.Fatal("an HWM move of a partition without the tag answers the fetch")
	}

	// Partition 1 (tagged): its HWM move wakes the fetch and answers it.
	r.hwm[1] = 5
	r.src[1].move()
	if !signalled(changed) {
		t.Fatal("an HWM move of a tagged partition did not wake the parked fetch")
	}
	resp, _ = read(now.Add(3 * time.Millisecond))
	if got := answered(resp); !slices.Contains(got, 1) {
		t.Fatalf("read %v, want 1 among them (its HWM moved)", got)
	}
	if !sf.hwmNews(resp, visits(resp)) {
		t.Fatal("the HWM of a tagged partition moved past the follower's and does not answer the fetch")
	}
	// Only up to the follower's log end: an HWM beyond it is nothing the
	// follower can take yet.
	short := visits(resp)
	for i := range short {
		short[i].fetchOffset = 1
	}
	if sf.hwmNews(resp, short) {
		t.Fatal("an HWM move above the follower's log end answers the fetch")
	}
	sf.finish(resp)
	sf.release()
	r.epoch++

	// Answered with HWM 5: the next fetch (naming nothing, the tag still
	// in the session) is not answered for the same HWM, only for the next
	// move.
	sf = *r.fetch(now.Add(4*time.Millisecond), nil)
	resp = answer(&kmsg.FetchRequest{Topics: []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 1}}}}}, r.hwm, nil)
	if sf.hwmNews(resp, visits(resp)) {
		t.Fatal("the HWM the session already answered with answers the fetch again")
	}
	r.hwm[1] = 6
	resp = answer(&kmsg.FetchRequest{Topics: []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 1}}}}}, r.hwm, nil)
	if !sf.hwmNews(resp, visits(resp)) {
		t.Fatal("the next HWM move does not answer the fetch")
	}
	sf.release()

	// Named again without the tag (its consumers left): an HWM move no
	// longer wakes the fetch. (The last fetch went unanswered: the
	// follower retries at the same epoch.)
	sf = *r.fetch(now.Add(5*time.Millisecond), map[int32]int64{1: 10})
	read(now.Add(5 * time.Millisecond))
	_, changed = read(now.Add(6 * time.Millisecond))
	r.src[1].move()
	if signalled(changed) {
		t.Fatal("an HWM move woke the fetch after the follower dropped the tag")
	}
	sf.release()
}
