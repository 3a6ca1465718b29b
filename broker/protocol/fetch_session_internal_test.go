package protocol

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
		for p := int32(0); p < 16; p++ {
			off, ok := offsets[p]
			if !ok {
				continue
			}
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

// TestQuietSessionPartitions: an incremental fetch reads only the
// partitions of its session that are not quiet (the last read found
// nothing new). A quiet one is read again when the follower names it,
// when a channel taken at its read closes (park: an append; watch: an
// HWM move), and once the refresh interval passed; a partition whose read
// the response budget cut short never turns quiet.
func TestQuietSessionPartitions(t *testing.T) {
	s := &fetchSessions{byID: map[int32]*fetchSession{}}
	now := time.Unix(1_800_000_000, 0)
	const refresh = time.Second
	type chans struct{ park, watch chan struct{} }
	ch := map[int32]*chans{}
	fresh := func(p int32) { ch[p] = &chans{make(chan struct{}), make(chan struct{})} }
	for p := range int32(4) {
		fresh(p)
	}
	// visit plays one round: reads the active partitions, answers them
	// with the given HWMs (records for those in data) and records the
	// channels; it returns what was read and what it parks on.
	visit := func(sf *sessionFetch, at time.Time, hwm map[int32]int64, data map[int32]bool, unread map[int32]bool) ([]int32, int, time.Time) {
		t.Helper()
		eff, park, due := sf.active(sf.req, at, refresh)
		resp := answer(eff, hwm, data)
		var visits []partVisit
		for _, p := range answered(resp) {
			visits = append(visits, partVisit{park: []<-chan struct{}{ch[p].park}, watch: ch[p].watch, unread: unread[p]})
		}
		sf.visited(resp, visits, at)
		return answered(resp), len(park), due
	}
	hwm := map[int32]int64{0: 10, 1: 20, 2: 30, 3: 40}
	sf, _ := s.open(replicaFetch(0, 0, map[int32]int64{0: 10, 1: 20, 2: 30, 3: 40}), now)
	if read, _, _ := visit(&sf, now, hwm, nil, nil); len(read) != 4 {
		t.Fatalf("a new session's full fetch read %v, want all 4", read)
	}
	resp := answer(whole(sf), hwm, nil)
	sf.finish(resp)
	sf.release()
	id := resp.SessionID

	// Nothing changed since: every partition quiet, none read.
	sf, _ = s.open(replicaFetch(id, 1, nil), now)
	read, parked, due := visit(&sf, now.Add(10*time.Millisecond), hwm, nil, nil)
	if len(read) != 0 || parked != 4 || !due.Equal(now.Add(refresh)) {
		t.Fatalf("quiet session read %v, parks on %d channels, refresh due %v; want none read, 4 channels, due at %v", read, parked, due, now.Add(refresh))
	}

	// Named (its follower moved), its append signalled, its HWM moved.
	close(ch[1].park)
	close(ch[2].watch)
	fresh(1)
	fresh(2)
	hwm[0], hwm[2] = 12, 31
	sf.finish(answer(&kmsg.FetchRequest{}, nil, nil))
	sf.release()
	sf, _ = s.open(replicaFetch(id, 2, map[int32]int64{0: 12}), now.Add(20*time.Millisecond))
	read, parked, _ = visit(&sf, now.Add(20*time.Millisecond), hwm, map[int32]bool{1: true}, map[int32]bool{2: true})
	if len(read) != 3 || read[0] != 0 || read[1] != 1 || read[2] != 2 || parked != 1 {
		t.Fatalf("read %v and parked on %d channels, want 0 (named), 1 (appended), 2 (HWM moved) read and 3 parked", read, parked)
	}
	// In the same fetch, a second round: none quiet yet (0 and 2 have an
	// HWM to tell, 1 records, and 2 was cut short).
	read, _, _ = visit(&sf, now.Add(21*time.Millisecond), hwm, map[int32]bool{1: true}, nil)
	if len(read) != 3 {
		t.Fatalf("second round read %v, want 0, 1 and 2", read)
	}
	resp = answer(&kmsg.FetchRequest{Topics: []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}, {Partition: 1}, {Partition: 2}}}}}, hwm, map[int32]bool{1: true})
	sf.finish(resp)
	sf.release()

	// Then the refresh reads the ones not read for a second (3, quiet
	// since the start).
	// Once answered: 0 and 2 quiet (their HWM told), 1 read until the
	// follower names it (records went).
	sf, _ = s.open(replicaFetch(id, 3, map[int32]int64{1: 21}), now.Add(30*time.Millisecond))
	if read, _, _ = visit(&sf, now.Add(30*time.Millisecond), hwm, nil, nil); len(read) != 1 || read[0] != 1 {
		t.Fatalf("read %v, want 1 (named)", read)
	}
	read, _, _ = visit(&sf, now.Add(31*time.Millisecond), hwm, nil, nil)
	if len(read) != 0 {
		t.Fatalf("read %v with nothing new, want none", read)
	}
	read, _, _ = visit(&sf, now.Add(refresh+5*time.Millisecond), hwm, nil, nil)
	if len(read) != 1 || read[0] != 3 {
		t.Fatalf("after the refresh interval read %v, want 3 (last read at the start)", read)
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
	return sf.session.requestOf(sf.req, nil)
}
