package replica

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta"
)

// fakeLeader answers replica fetches on one end of a pipe: it hands each
// decoded request to the test and writes the response the test returns.
type fakeLeader struct {
	nc   net.Conn
	reqs chan *kmsg.FetchRequest
	resp chan *kmsg.FetchResponse
	// frames, when set, gets each request frame as read (size included).
	frames chan []byte
}

func (l *fakeLeader) serve(t *testing.T) {
	rd := bufio.NewReader(l.nc)
	for {
		var size [4]byte
		if _, err := io.ReadFull(rd, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(rd, body); err != nil {
			return
		}
		if l.frames != nil {
			l.frames <- append(size[:], body...)
		}
		corr := binary.BigEndian.Uint32(body[4:])
		clientLen := int(int16(binary.BigEndian.Uint16(body[8:])))
		rest, err := skipTags(body[10+clientLen:])
		if err != nil {
			t.Errorf("fake leader: request header: %v", err)
			return
		}
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(FetchVersion)
		if err := req.ReadFrom(rest); err != nil {
			t.Errorf("fake leader: decode fetch: %v", err)
			return
		}
		l.reqs <- req
		resp := <-l.resp
		resp.SetVersion(FetchVersion)
		out := binary.BigEndian.AppendUint32(nil, corr)
		out = append(out, 0) // response header tags
		out = resp.AppendTo(out)
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(out)))
		if _, err := l.nc.Write(append(frame, out...)); err != nil {
			return
		}
	}
}

func requested(req *kmsg.FetchRequest) (parts []int32, forgotten []int32) {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			parts = append(parts, rp.Partition)
		}
	}
	for _, ft := range req.ForgottenTopics {
		forgotten = append(forgotten, ft.Partitions...)
	}
	return parts, forgotten
}

// TestFollowerFetchSession: the follower asks for a session, then names
// only the partitions whose position changed, forgets the ones it stops
// following, and starts over when the leader lost the session.
func TestFollowerFetchSession(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	l := &fakeLeader{nc: server, reqs: make(chan *kmsg.FetchRequest, 1), resp: make(chan *kmsg.FetchResponse, 1)}
	go l.serve(t)

	m := &Manager{cfg: Config{NodeID: 1, Log: logr.Discard(), FetchMaxWait: 10 * time.Millisecond, PartitionMaxBytes: 1 << 20, FetchMaxBytes: 1 << 20}}
	f := &fetcher{m: m, leader: 2, conn: &wireConn{nc: client, rd: bufio.NewReader(client), fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("strata-replica-1"))}}
	p0 := NewPartition(meta.TopicPartition{Topic: "t", Partition: 0}, openLog(t), 1, nil)
	p1 := NewPartition(meta.TopicPartition{Topic: "t", Partition: 1}, openLog(t), 1, nil)
	items := []fetchItem{{p: p0, epoch: 3, offset: 10}, {p: p1, epoch: 3, offset: 20}}

	round := func(items []fetchItem, answer *kmsg.FetchResponse) *kmsg.FetchRequest {
		t.Helper()
		errc := make(chan error, 1)
		go func() { errc <- f.fetch(context.Background(), items, items, true) }()
		req := <-l.reqs
		l.resp <- answer
		if err := <-errc; err != nil {
			t.Fatalf("fetch: %v", err)
		}
		return req
	}
	empty := func(session int32) *kmsg.FetchResponse {
		r := kmsg.NewPtrFetchResponse()
		r.SessionID = session
		return r
	}

	req := round(items, empty(7))
	if parts, _ := requested(req); req.SessionID != 0 || req.SessionEpoch != 0 || len(parts) != 2 {
		t.Fatalf("first fetch: session %d epoch %d partitions %v; want a full fetch asking for a session", req.SessionID, req.SessionEpoch, parts)
	}
	req = round(items, empty(7))
	if parts, _ := requested(req); req.SessionID != 7 || req.SessionEpoch != 1 || len(parts) != 0 {
		t.Fatalf("unchanged positions: session %d epoch %d partitions %v; want an empty incremental fetch", req.SessionID, req.SessionEpoch, parts)
	}
	items[1].offset = 25
	req = round(items, empty(7))
	if parts, _ := requested(req); req.SessionEpoch != 2 || len(parts) != 1 || parts[0] != 1 {
		t.Fatalf("partition 1 moved: epoch %d partitions %v; want only partition 1", req.SessionEpoch, parts)
	}
	lost := empty(0)
	lost.ErrorCode = kerr.FetchSessionIDNotFound.Code
	req = round(items[1:], lost)
	if parts, forgotten := requested(req); req.SessionEpoch != 3 || len(parts) != 0 || len(forgotten) != 1 || forgotten[0] != 0 {
		t.Fatalf("partition 0 no longer followed: epoch %d partitions %v forgotten %v", req.SessionEpoch, parts, forgotten)
	}
	req = round(items[1:], empty(8))
	if parts, _ := requested(req); req.SessionID != 0 || req.SessionEpoch != 0 || len(parts) != 1 {
		t.Fatalf("after the leader lost the session: session %d epoch %d partitions %v; want a new full fetch", req.SessionID, req.SessionEpoch, parts)
	}
}

// TestFollowerNamesChangedPartitions: between full walks a follower's
// round updates only the partitions that signalled a change: with many
// partitions followed and one changed (here its leader epoch), the
// request names exactly that one; a change that lands while a fetch is
// in flight is named by the next; a partition the answer made wait (an
// error: its backoff) sends the round back to a full walk; the fetcher
// leaves no subscription behind.
func TestFollowerNamesChangedPartitions(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	l := &fakeLeader{nc: server, reqs: make(chan *kmsg.FetchRequest, 1), resp: make(chan *kmsg.FetchResponse, 1)}
	go l.serve(t)

	const n = 20
	m := &Manager{cfg: Config{NodeID: 1, Log: logr.Discard(), FetchMaxWait: 10 * time.Millisecond, PartitionMaxBytes: 1 << 20, FetchMaxBytes: 1 << 20, Backoff: time.Hour},
		parts: map[meta.TopicPartition]*Partition{}}
	follow := func(p *Partition, epoch int32) {
		p.becomeFollower(meta.PartitionState{Replicas: []int32{1, 2}, Leader: 2, LeaderEpoch: epoch, ISR: []int32{1, 2}})
	}
	var parts []*Partition
	for i := range int32(n) {
		p := NewPartition(meta.TopicPartition{Topic: "t", Partition: i}, openLog(t), 1, nil)
		follow(p, 3)
		m.parts[p.TP] = p
		parts = append(parts, p)
	}
	f := &fetcher{m: m, leader: 2, conn: &wireConn{nc: client, rd: bufio.NewReader(client), fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("strata-replica-1"))}}

	// round runs items and one fetch; during, if set, runs while the
	// leader holds the request.
	round := func(answer *kmsg.FetchResponse, during func()) (req *kmsg.FetchRequest, full, suspended bool) {
		t.Helper()
		items, changed, full, suspended, _ := f.items()
		errc := make(chan error, 1)
		go func() { errc <- f.fetch(context.Background(), items, changed, full) }()
		req = <-l.reqs
		if during != nil {
			during()
		}
		l.resp <- answer
		if err := <-errc; err != nil {
			t.Fatalf("fetch: %v", err)
		}
		return req, full, suspended
	}
	empty := func() *kmsg.FetchResponse {
		r := kmsg.NewPtrFetchResponse()
		r.SessionID = 7
		return r
	}
	epochs := func(req *kmsg.FetchRequest) map[int32]int32 {
		out := map[int32]int32{}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				out[rp.Partition] = rp.CurrentLeaderEpoch
			}
		}
		return out
	}

	if req, full, _ := round(empty(), nil); !full || len(epochs(req)) != n {
		t.Fatalf("first round: full %v, %d partitions named; want a full walk naming all %d", full, len(epochs(req)), n)
	}
	if req, full, _ := round(empty(), nil); full || len(epochs(req)) != 0 {
		t.Fatalf("nothing changed: full %v, named %v; want an incremental round naming none", full, epochs(req))
	}
	follow(parts[13], 4)
	if req, full, _ := round(empty(), nil); full || len(epochs(req)) != 1 || epochs(req)[13] != 4 {
		t.Fatalf("partition 13's epoch moved: full %v, named %v; want only 13 at epoch 4", full, epochs(req))
	}
	// Changed while the fetch is in flight: the next round names it.
	if req, _, _ := round(empty(), func() { follow(parts[5], 4) }); len(epochs(req)) != 0 {
		t.Fatalf("named %v before the change; want none", epochs(req))
	}
	if req, _, _ := round(empty(), nil); len(epochs(req)) != 1 || epochs(req)[5] != 4 {
		t.Fatalf("partition 5 changed during the last fetch: named %v; want only 5 at epoch 4", epochs(req))
	}
	// An error for partition 9: it backs off, which no source signals;
	// the fetcher marks the partitions of each answer itself.
	failed := empty()
	st := kmsg.NewFetchResponseTopic()
	st.Topic = "t"
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition, sp.ErrorCode = 9, kerr.NotLeaderForPartition.Code
	st.Partitions = append(st.Partitions, sp)
	failed.Topics = append(failed.Topics, st)
	round(failed, nil)
	req, full, suspended := round(empty(), nil)
	if _, forgotten := requested(req); !full || !suspended || len(forgotten) != 1 || forgotten[0] != 9 {
		t.Fatalf("after an error for 9: full %v, suspended %v, forgotten %v; want a full walk, suspended, 9 forgotten", full, suspended, forgotten)
	}

	f.unsubscribe()
	for _, p := range parts {
		if got := p.changes.Len() + p.uploads.Len(); got != 0 {
			t.Fatalf("partition %d has %d subscribers after the fetcher ended; want 0", p.TP.Partition, got)
		}
	}
}

// TestFollowerAsksHWMWakes: a follower tags (TagHWMWake, with its HWM)
// only the partitions a consumer read on it within ConsumerServeWindow,
// names a partition again when that flips, and never tags the others:
// a follower that serves no consumer asks for no extra round.
func TestFollowerAsksHWMWakes(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	l := &fakeLeader{nc: server, reqs: make(chan *kmsg.FetchRequest, 1), resp: make(chan *kmsg.FetchResponse, 1)}
	go l.serve(t)

	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	m := &Manager{cfg: Config{NodeID: 1, Log: logr.Discard(), FetchMaxWait: 10 * time.Millisecond, PartitionMaxBytes: 1 << 20, FetchMaxBytes: 1 << 20, Backoff: time.Hour},
		parts: map[meta.TopicPartition]*Partition{}}
	var parts []*Partition
	for i := range int32(2) {
		p := NewPartition(meta.TopicPartition{Topic: "t", Partition: i}, openLog(t), 1, clock)
		p.becomeFollower(meta.PartitionState{Replicas: []int32{1, 2}, Leader: 2, LeaderEpoch: 3, ISR: []int32{1, 2}})
		m.parts[p.TP] = p
		parts = append(parts, p)
	}
	f := &fetcher{m: m, leader: 2, conn: &wireConn{nc: client, rd: bufio.NewReader(client), fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("strata-replica-1"))}}
	defer f.unsubscribe()

	// round runs one fetch, answered with the HWM of the given
	// partitions (the fetcher looks at a partition again after an answer
	// that carries it), and returns the tags of the partitions named:
	// partition → the HWM tagged, -1 when named without the tag.
	round := func(answered ...int32) map[int32]int64 {
		t.Helper()
		items, changed, full, _, _ := f.items()
		errc := make(chan error, 1)
		go func() { errc <- f.fetch(context.Background(), items, changed, full) }()
		req := <-l.reqs
		resp := kmsg.NewPtrFetchResponse()
		resp.SessionID = 7
		if len(answered) > 0 {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = "t"
			for _, p := range answered {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark = p, 0
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		l.resp <- resp
		if err := <-errc; err != nil {
			t.Fatalf("fetch: %v", err)
		}
		named := map[int32]int64{}
		for _, rt := range req.Topics {
			for i := range rt.Partitions {
				rp := &rt.Partitions[i]
				named[rp.Partition] = -1
				if h, ok := HWMWake(rp); ok {
					named[rp.Partition] = h
				}
			}
		}
		return named
	}

	if named := round(); len(named) != 2 || named[0] != -1 || named[1] != -1 {
		t.Fatalf("no consumer: named %v; want both partitions without the tag", named)
	}
	parts[1].NoteConsumerRead()
	round(1) // in flight when the consumer read: the next fetch names it
	if named := round(); len(named) != 1 || named[1] != 0 {
		t.Fatalf("a consumer read partition 1: named %v; want only 1, tagged with HWM 0", named)
	}
	if named := round(1); len(named) != 0 {
		t.Fatalf("nothing changed: named %v; want none (the session holds the flag)", named)
	}
	now = now.Add(ConsumerServeWindow)
	if named := round(); len(named) != 1 || named[1] != -1 {
		t.Fatalf("no consumer read for ConsumerServeWindow: named %v; want 1 without the tag", named)
	}
}
