package protocol

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/replica"
)

// Fetch sessions (KIP-227) for replica fetches.
//
// A follower's replica fetch names every partition it follows from this
// leader, and the answer carries every one of them, at each long-poll
// round: with WAL replication that is one round per uploaded object, and
// with many partitions the listing, not the pointers, becomes the
// cross-zone traffic. With a session the leader remembers the partitions
// and what it last answered; the follower then sends only the partitions
// whose fetch position changed, and the leader answers only those with
// something new (records or pointers, an error, a divergence, a moved
// high watermark or log start).
//
// Sessions are kept for replica fetches (ReplicaID >= 0) only; consumers
// get SessionID 0 and keep fetching in full, as before. The protocol is
// Kafka's: SessionID 0 + SessionEpoch 0 asks for a new session (full
// fetch, answered with its ID), then epochs 1, 2, ... are incremental;
// SessionEpoch -1 closes the session (and fetches in full without one); a
// wrong epoch is INVALID_FETCH_SESSION_EPOCH, an unknown or evicted ID
// FETCH_SESSION_ID_NOT_FOUND, after which the follower starts over.

//
// Bounds (a fetch session is state a client makes the broker keep): at
// most max.incremental.fetch.session.cache.slots sessions (1000; 0 keeps
// none), the least recently used one evicted for a new one; at most
// Limits.FetchSessionMaxPartitions partitions in one (max.partitions: no
// follower follows more), a full fetch naming more is served without a
// session and an incremental one that would grow past it closes its
// session (FETCH_SESSION_ID_NOT_FOUND; the follower starts over); a
// session unused for fetchSessionIdle is dropped when a new session is
// opened. This is Kafka's eviction (min.incremental.fetch.session.eviction.ms,
// 2 min) simplified: Kafka keeps idle sessions until their slot is wanted
// and prefers evicting small ones.

// Defaults of the fetch session bounds.
const (
	defaultFetchSessionSlots = 1000
	fetchSessionIdle         = 2 * time.Minute
)

type fetchSessions struct {
	mu       sync.Mutex
	next     int32
	byID     map[int32]*fetchSession
	slots    int // < 0: no sessions
	maxParts int // 0: unbounded
}

type sessionKey struct {
	topic     string
	partition int32
}

type sessionPart struct {
	key sessionKey
	rp  kmsg.FetchRequestTopicPartition
	// What the last answer that carried the partition said.
	sent              bool
	hwm, logStart     int64
	lastStable        int64
	preferredReplica  int32
	lastAnsweredError int16
	// Quiet: the last visit (a read of the partition for a fetch of this
	// session) found nothing to tell the follower. Until the follower
	// names it again, one of the channels taken at that visit closes or
	// the refresh interval passes, the session's incremental fetches
	// leave it out (active) and park on its park channels instead.
	quiet   bool
	unread  bool // the last read was cut short by the response's budget
	visited time.Time
	park    []<-chan struct{} // appends, uploads, the leader quota: a parked fetch wakes
	watch   <-chan struct{}   // the replica's HWM, role and log end: visit again, no wake
}

// partVisit is what a fetch's read of one partition waits on: the
// channels it parks on, and the replica's change channel, taken before
// the read.
type partVisit struct {
	park  []<-chan struct{}
	watch <-chan struct{}
	// unread: the response's byte budget left records of it unread.
	unread bool
}

type fetchSession struct {
	id      int32
	replica int32
	epoch   int32 // the next incremental request's epoch
	used    time.Time
	busy    bool
	parts   []*sessionPart
	index   map[sessionKey]*sessionPart
	// kept is requestOf's scratch list.
	kept []*sessionPart
}

func (e *Env) fetchSessions() *fetchSessions {
	e.sessionsOnce.Do(func() {
		e.sessions = &fetchSessions{byID: map[int32]*fetchSession{}, slots: e.Limits.FetchSessionSlots, maxParts: e.Limits.FetchSessionMaxPartitions}
	})
	return e.sessions
}

// sessionFetch is a replica fetch resolved against its session.
type sessionFetch struct {
	s *fetchSessions
	// session is nil for a sessionless fetch.
	session *fetchSession
	// full: the answer carries every partition (new session).
	full bool
	// req is the effective request: every partition of the session.
	req *kmsg.FetchRequest
	// named: the partitions an incremental request named (the follower's
	// position moved) and this fetch has not read yet.
	named map[sessionKey]bool
}

// open resolves req (a replica fetch, v7+) against the session cache.
// A non-nil error code is the whole answer.
func (s *fetchSessions) open(req *kmsg.FetchRequest, now time.Time) (sessionFetch, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sf := sessionFetch{s: s, req: req, full: true}
	if req.SessionID != 0 {
		old, ok := s.byID[req.SessionID]
		if !ok || old.replica != req.ReplicaID {
			return sf, kerr.FetchSessionIDNotFound.Code
		}
		switch req.SessionEpoch {
		case -1, 0:
			// Close it; epoch 0 then starts a new one below.
			delete(s.byID, old.id)
		default:
			if old.busy || req.SessionEpoch != old.epoch {
				return sf, kerr.InvalidFetchSessionEpoch.Code
			}
			if s.maxParts > 0 && len(old.parts)+old.added(req) > s.maxParts {
				delete(s.byID, old.id)
				return sf, kerr.FetchSessionIDNotFound.Code
			}
			old.busy, old.used = true, now
			old.update(req)
			// The effective request of an incremental fetch is built at
			// each read from the session's partitions (active): only its
			// header is kept here, not a copy of every partition.
			hdr := *req
			hdr.Topics, hdr.ForgottenTopics = nil, nil
			sf.session, sf.full, sf.req = old, false, &hdr
			sf.named = map[sessionKey]bool{}
			for _, rt := range req.Topics {
				for _, rp := range rt.Partitions {
					sf.named[sessionKey{rt.Topic, rp.Partition}] = true
				}
			}
			return sf, 0
		}
	}
	switch req.SessionEpoch {
	case -1:
		return sf, 0 // sessionless
	case 0:
	default:
		return sf, kerr.InvalidFetchSessionEpoch.Code
	}
	if s.slots < 0 || s.maxParts > 0 && requestPartitions(req) > s.maxParts {
		return sf, 0 // sessionless
	}
	for id, x := range s.byID {
		if !x.busy && now.Sub(x.used) > fetchSessionIdle {
			delete(s.byID, id)
		}
	}
	if len(s.byID) >= cmp.Or(s.slots, defaultFetchSessionSlots) {
		var lru *fetchSession
		for _, x := range s.byID {
			if !x.busy && (lru == nil || x.used.Before(lru.used)) {
				lru = x
			}
		}
		if lru == nil {
			return sf, 0 // every slot busy: sessionless
		}
		delete(s.byID, lru.id)
	}
	for {
		s.next++
		if s.next <= 0 {
			s.next = 1
		}
		if _, taken := s.byID[s.next]; !taken {
			break
		}
	}
	fs := &fetchSession{id: s.next, replica: req.ReplicaID, epoch: 1, used: now, busy: true, index: map[sessionKey]*sessionPart{}}
	fs.update(req)
	s.byID[fs.id] = fs
	sf.session = fs
	return sf, 0
}

// added is the number of req's partitions the session does not hold.
func (fs *fetchSession) added(req *kmsg.FetchRequest) int {
	n := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if _, ok := fs.index[sessionKey{rt.Topic, rp.Partition}]; !ok {
				n++
			}
		}
	}
	return n
}

func requestPartitions(req *kmsg.FetchRequest) int {
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	return n
}

// update adds or replaces the request's partitions and drops the
// forgotten ones.
func (fs *fetchSession) update(req *kmsg.FetchRequest) {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := sessionKey{rt.Topic, rp.Partition}
			if p, ok := fs.index[k]; ok {
				p.rp = rp
				continue
			}
			p := &sessionPart{key: k, rp: rp}
			fs.index[k] = p
			fs.parts = append(fs.parts, p)
		}
	}
	forgotten := map[sessionKey]bool{}
	for _, ft := range req.ForgottenTopics {
		for _, part := range ft.Partitions {
			k := sessionKey{ft.Topic, part}
			if _, ok := fs.index[k]; ok {
				forgotten[k] = true
				delete(fs.index, k)
			}
		}
	}
	if len(forgotten) > 0 {
		kept := fs.parts[:0]
		for _, p := range fs.parts {
			if !forgotten[p.key] {
				kept = append(kept, p)
			}
		}
		fs.parts = kept
	}
}

// requestOf is req with the session's partitions in place of its own,
// only those keep keeps (all if nil),
// keep called once per partition. The partitions kept are gathered first
// (in fs.kept, reused: a session serves one fetch at a time) so that each
// topic's list is allocated once at its size.
func (fs *fetchSession) requestOf(req *kmsg.FetchRequest, keep func(*sessionPart) bool) *kmsg.FetchRequest {
	eff := *req
	eff.Topics = nil
	eff.ForgottenTopics = nil
	kept := fs.kept[:0]
	count := map[string]int{}
	for _, p := range fs.parts {
		if keep != nil && !keep(p) {
			continue
		}
		kept = append(kept, p)
		count[p.key.topic]++
	}
	at := make(map[string]int, len(count))
	for _, p := range kept {
		i, ok := at[p.key.topic]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = p.key.topic
			rt.Partitions = make([]kmsg.FetchRequestTopicPartition, 0, count[p.key.topic])
			eff.Topics = append(eff.Topics, rt)
			i = len(eff.Topics) - 1
			at[p.key.topic] = i
		}
		eff.Topics[i].Partitions = append(eff.Topics[i].Partitions, p.rp)
	}
	clear(kept) // no partition kept alive by the scratch list
	fs.kept = kept[:0]
	return &eff
}

// active is the request one read of an incremental fetch makes: the
// session's partitions but the quiet ones, whose park channels it returns
// to wait on as well, with the time the first of them is due for a
// refresh (zero if none is quiet). Any other fetch reads req whole.
//
// A quiet partition is skipped, not read, at each round of its session:
// with many partitions and a few of them written, a follower's fetch
// rounds read every partition of the session while nothing changed in
// almost all (1,200 partitions at 2,000 records/s: a leader's replica
// fetches took a fifth of the brokers' CPU). It is read again when the
// follower names it, when one of its channels closes (an append, an
// upload, a moved HWM, a role change) and at least every refresh: that
// read reports the follower caught up again (replica.lag.time.max.ms is
// counted from such reads), and carries what changes without a signal
// (the log start offset).
func (sf *sessionFetch) active(req *kmsg.FetchRequest, now time.Time, refresh time.Duration) (*kmsg.FetchRequest, []<-chan struct{}, time.Time) {
	if sf.session == nil || sf.full {
		return req, nil, time.Time{}
	}
	sf.s.mu.Lock()
	defer sf.s.mu.Unlock()
	var park []<-chan struct{}
	var due time.Time
	eff := sf.session.requestOf(sf.req, func(p *sessionPart) bool {
		if !p.quiet || sf.named[p.key] || now.Sub(p.visited) >= refresh || closed(p.watch) || anyClosed(p.park) {
			return true
		}
		park = append(park, p.park...)
		if d := p.visited.Add(refresh); due.IsZero() || d.Before(due) {
			due = d
		}
		return false
	})
	return eff, park, due
}

// asksPointers is asksPointers over the session's partitions for an
// incremental fetch, whose request (the header only) names none.
func (sf *sessionFetch) asksPointers(b *broker.Broker) bool {
	if sf.session == nil || sf.full {
		return false
	}
	if rm := b.Replicas(); rm == nil || !rm.WALEnabled() {
		return false
	}
	sf.s.mu.Lock()
	defer sf.s.mu.Unlock()
	return slices.ContainsFunc(sf.session.parts, func(p *sessionPart) bool { return replica.WantsPointers(&p.rp) })
}

// visited records the reads of one round: resp answers them in order,
// visits holds what each waits on. A partition with nothing new for the
// follower turns quiet; any other is read at every round until it is.
func (sf *sessionFetch) visited(resp *kmsg.FetchResponse, visits []partVisit, now time.Time) {
	if sf.session == nil {
		return
	}
	sf.s.mu.Lock()
	defer sf.s.mu.Unlock()
	i := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if i >= len(visits) {
				return
			}
			v := visits[i]
			i++
			k := sessionKey{rt.Topic, rp.Partition}
			p := sf.session.index[k]
			if p == nil {
				continue
			}
			delete(sf.named, k)
			p.visited = now
			p.park, p.watch, p.unread = v.park, v.watch, v.unread
			p.quiet = !p.news(&rp) && p.quietable()
		}
	}
}

// quietable: the last read took the channels that tell of a change and
// read all it could.
func (p *sessionPart) quietable() bool {
	return p.watch != nil && len(p.park) > 0 && !p.unread
}

// news reports whether rp tells the follower something the last answer
// carrying the partition did not.
func (p *sessionPart) news(rp *kmsg.FetchResponseTopicPartition) bool {
	return !p.sent || len(rp.RecordBatches) > 0 ||
		rp.ErrorCode != 0 || rp.ErrorCode != p.lastAnsweredError ||
		rp.HighWatermark != p.hwm || rp.LogStartOffset != p.logStart || rp.LastStableOffset != p.lastStable ||
		rp.PreferredReadReplica != p.preferredReplica ||
		rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 ||
		hasTags(&rp.UnknownTags)
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func anyClosed(cs []<-chan struct{}) bool {
	for _, c := range cs {
		if closed(c) {
			return true
		}
	}
	return false
}

// finish records what resp tells the follower and, for an incremental
// fetch, drops the partitions that have nothing new. It sets
// resp.SessionID. The handler releases the session after it.
func (sf sessionFetch) finish(resp *kmsg.FetchResponse) {
	fs := sf.session
	if fs == nil {
		return
	}
	sf.s.mu.Lock()
	defer sf.s.mu.Unlock()
	resp.SessionID = fs.id
	topics := resp.Topics[:0]
	for _, rt := range resp.Topics {
		parts := rt.Partitions[:0]
		for _, rp := range rt.Partitions {
			p := fs.index[sessionKey{rt.Topic, rp.Partition}]
			if p == nil {
				continue
			}
			if !p.news(&rp) && !sf.full {
				continue
			}
			p.sent = true
			p.hwm, p.logStart, p.lastStable = rp.HighWatermark, rp.LogStartOffset, rp.LastStableOffset
			p.preferredReplica, p.lastAnsweredError = rp.PreferredReadReplica, rp.ErrorCode
			// Told (an HWM, a log start): quiet from its read on, unless
			// records went (read again until the follower names it) or
			// an error or a divergence (read again at once).
			p.quiet = len(rp.RecordBatches) == 0 && rp.ErrorCode == 0 && rp.DivergingEpoch.Epoch < 0 && rp.DivergingEpoch.EndOffset < 0 && p.quietable()
			parts = append(parts, rp)
		}
		if len(parts) > 0 {
			rt.Partitions = parts
			topics = append(topics, rt)
		}
	}
	resp.Topics = topics
	if !sf.full {
		fs.epoch++
	}
}

// release frees the session once the fetch is answered (or ended without
// an answer: the follower then retries with the same epoch or starts
// over; both work).
func (sf sessionFetch) release() {
	if sf.session == nil {
		return
	}
	sf.s.mu.Lock()
	sf.session.busy = false
	sf.s.mu.Unlock()
}

func hasTags(t *kmsg.Tags) bool {
	found := false
	t.Each(func(uint32, []byte) { found = true })
	return found
}
