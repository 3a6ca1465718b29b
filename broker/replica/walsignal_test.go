package replica

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta"
)

// policyFollower is a fetcher of leader 2 whose connections are pipes to
// fake leaders: each dial starts a new one (leaders[i] for the i-th).
type policyFollower struct {
	f       *fetcher
	leaders chan *fakeLeader
	items   []fetchItem
}

func newPolicyFollower(t *testing.T, walOn bool) *policyFollower {
	pf := &policyFollower{leaders: make(chan *fakeLeader, 4)}
	dial := func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		t.Cleanup(func() { client.Close(); server.Close() })
		l := &fakeLeader{nc: server, reqs: make(chan *kmsg.FetchRequest, 1), resp: make(chan *kmsg.FetchResponse, 1), frames: make(chan []byte, 1)}
		go l.serve(t)
		pf.leaders <- l
		return client, nil
	}
	m := &Manager{
		cfg:     Config{NodeID: 1, Log: logr.Discard(), FetchMaxWait: 10 * time.Millisecond, PartitionMaxBytes: 1 << 20, FetchMaxBytes: 1 << 20, Dial: dial},
		brokers: map[int32]meta.BrokerInfo{2: {ID: 2, Listeners: []meta.Listener{{Host: "leader", Port: 9092}}}},
	}
	if walOn {
		m.wal = &walRep{stages: newStageMetrics()}
	}
	pf.f = &fetcher{m: m, leader: 2}
	for i := range int32(2) {
		p := NewPartition(meta.TopicPartition{Topic: "t", Partition: i}, openLog(t), 1, nil)
		// What items() asks for: pointers when the broker downloads.
		pf.items = append(pf.items, fetchItem{p: p, epoch: 3, offset: 10 + int64(i), lastEpoch: -1, pointers: walOn})
	}
	return pf
}

// round runs one fetch against the current fake leader (dialling a new
// one if the connection was dropped), answers it with resp and returns
// the request, its frame and the fake leader that answered.
func (pf *policyFollower) round(t *testing.T, l *fakeLeader, resp *kmsg.FetchResponse) (*kmsg.FetchRequest, []byte, *fakeLeader) {
	t.Helper()
	errc := make(chan error, 1)
	items := append([]fetchItem(nil), pf.items...) // as items() builds them each round:
	for i := range items {
		items[i].pointers = items[i].pointers && !pf.f.untagged()
	}
	go func() { errc <- pf.f.fetch(context.Background(), items, items, true) }()
	if l == nil {
		l = <-pf.leaders
	}
	frame := <-l.frames
	req := <-l.reqs
	l.resp <- resp
	if err := <-errc; err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return req, frame, l
}

// sessionless answers in full and keeps no fetch session, so that every
// request names every partition.
func sessionless(signal ...byte) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	if len(signal) > 0 {
		r.UnknownTags.Set(TagWALPolicy, signal)
	}
	return r
}

func tagged(req *kmsg.FetchRequest) (top bool, parts int) {
	for _, rt := range req.Topics {
		for i := range rt.Partitions {
			if WantsPointers(&rt.Partitions[i]) {
				parts++
			}
		}
	}
	return AsksCompactPointers(req), parts
}

// TestFollowerFetchesAsClassicWhileLeaderInline: once the leader says it
// replicates inline by policy, a WAL follower's replica fetches are byte
// for byte a classic follower's (no pointer tags, not even the top-level
// one), until the leader says objects again, when the very next fetch
// asks for pointers; a new connection starts asking again.
func TestFollowerFetchesAsClassicWhileLeaderInline(t *testing.T) {
	classic, walF := newPolicyFollower(t, false), newPolicyFollower(t, true)
	var classicFrames [][]byte
	var lc *fakeLeader
	for range 4 {
		var frame []byte
		_, frame, lc = classic.round(t, lc, sessionless())
		classicFrames = append(classicFrames, frame)
	}

	req, frame, l := walF.round(t, nil, sessionless(WALPolicyInline))
	if top, parts := tagged(req); !top || parts != 2 {
		t.Fatalf("first fetch of a connection: top-level tag %v, %d partitions tagged; want pointers asked for everywhere", top, parts)
	}
	if bytes.Equal(frame, classicFrames[0]) {
		t.Fatal("a pointer-asking fetch has a classic follower's bytes: the test cannot tell them apart")
	}
	// Told once: the next fetches, with or without a new signal, are
	// classic ones.
	for i := 1; i <= 2; i++ {
		answer := sessionless()
		if i == 2 {
			answer = sessionless(WALPolicyObjects)
		}
		req, frame, _ = walF.round(t, l, answer)
		if !bytes.Equal(frame, classicFrames[i]) {
			top, parts := tagged(req)
			t.Fatalf("fetch %d while the leader is inline by policy: %d bytes (top-level tag %v, %d partitions tagged), a classic follower's: %d bytes",
				i+1, len(frame), top, parts, len(classicFrames[i]))
		}
	}
	// The last answer said objects: the next fetch asks for pointers.
	req, _, _ = walF.round(t, l, sessionless(WALPolicyInline))
	if top, parts := tagged(req); !top || parts != 2 {
		t.Fatalf("fetch after the leader said objects: top-level tag %v, %d partitions tagged; want pointers asked for", top, parts)
	}
	// The connection breaks while told inline: the next one asks again.
	walF.f.conn.Close()
	walF.f.conn = nil
	req, _, _ = walF.round(t, nil, sessionless())
	if top, parts := tagged(req); !top || parts != 2 {
		t.Fatalf("first fetch of a new connection: top-level tag %v, %d partitions tagged; want pointers asked for", top, parts)
	}
}

// TestSignalWALPolicy: the leader says inline once to a follower that
// asks for pointers, nothing while nothing changes, and objects once when
// it leaves inline; a connection without memory, or a follower that never
// asked, hears nothing.
func TestSignalWALPolicy(t *testing.T) {
	asking := kmsg.NewPtrFetchRequest()
	askCompactPointers(asking)
	oldAsking := kmsg.NewPtrFetchRequest() // tags partitions only
	rt := kmsg.NewFetchRequestTopic()
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.UnknownTags.Set(TagWALPointers, []byte{1})
	rt.Partitions = append(rt.Partitions, rp)
	oldAsking.Topics = append(oldAsking.Topics, rt)
	plain := kmsg.NewPtrFetchRequest()

	type step struct {
		req    *kmsg.FetchRequest
		inline bool
		want   []byte // the signal; nil: none
	}
	tests := []struct {
		name  string
		noMem bool
		steps []step
	}{
		{"inline once, then objects once", false, []step{
			{asking, true, []byte{WALPolicyInline}},
			{plain, true, nil},
			{plain, true, nil},
			{plain, false, []byte{WALPolicyObjects}},
			{asking, false, nil},
			{asking, true, []byte{WALPolicyInline}},
		}},
		{"a follower tagging partitions only", false, []step{
			{oldAsking, true, []byte{WALPolicyInline}},
			{oldAsking, true, nil}, // it ignores the signal: said once
			{oldAsking, false, []byte{WALPolicyObjects}},
		}},
		{"a classic follower is never told", false, []step{
			{plain, true, nil},
			{plain, false, nil},
		}},
		{"objects: nothing to say", false, []step{
			{asking, false, nil},
		}},
		{"no connection memory", true, []step{
			{asking, true, nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var said *atomic.Bool
			if !tt.noMem {
				said = new(atomic.Bool)
			}
			for i, s := range tt.steps {
				resp := kmsg.NewPtrFetchResponse()
				SignalWALPolicy(s.req, resp, s.inline, said)
				if got := tagValue(&resp.UnknownTags, TagWALPolicy); !bytes.Equal(got, s.want) {
					t.Fatalf("step %d: signal %v, want %v", i, got, s.want)
				}
			}
		})
	}
}
