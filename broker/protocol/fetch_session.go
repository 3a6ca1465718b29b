package protocol

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/notify"
	"github.com/strata-dev/strata/broker/replica"
)

// Fetch sessions (KIP-227) for replica and consumer fetches.
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
// Consumers (ReplicaID < 0) get sessions too, with the same machinery:
// a consumer of many partitions otherwise names them all at every fetch
// and gets them all back, so that the work per fetch grows with the
// partitions, not the bytes. What is news differs: records become visible
// to a consumer when the high watermark moves (the last stable offset
// moves only with it), not at the leader's append, so a consumer
// session's partitions subscribe to the replica's changes (HWM, role, a
// follower's appends; consumerSource) and each wakes a parked fetch. On a
// follower serving consumers (KIP-392) that is when the follower learns
// the HWM from its leader. The fetch offset is the one the client last
// named (KIP-227: a client names a partition when its position moves), a
// partition that got records is read again until then, and an error is
// news at every answer (Kafka includes partitions with errors in every
// incremental response). ACLs are checked at every read of a partition,
// remembered or named (deniedFetchTopics runs over each round's
// partitions). A consumer session answers only fetches of the principal
// that opened it, and session IDs are random: a client cannot land on
// another's session by mistake (a session of the broker's previous run)
// nor close or disturb another principal's. librdkafka never asks for one (SessionEpoch -1):
// it fetches in full, as before.
//
// The protocol is Kafka's: SessionID 0 + SessionEpoch 0 asks for a new
// session (full fetch, answered with its ID), then epochs 1, 2, ... are
// incremental; SessionEpoch -1 closes the session (and fetches in full
// without one); a wrong epoch is INVALID_FETCH_SESSION_EPOCH, an unknown
// or evicted ID FETCH_SESSION_ID_NOT_FOUND, after which the client starts
// over. From v13 partitions are named by topic ID: a session keeps the
// naming it was opened with, and a fetch using the other one gets
// FETCH_SESSION_TOPIC_ID_ERROR (Kafka's answer).

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
//
// Replica and consumer sessions share the slots, but a consumer's new
// session may evict only another consumer's (every slot held by
// followers: the consumer fetches without a session), and a follower's
// evicts the least recently used consumer session before any follower's.
// Many consumers thus cannot push followers out of their sessions (which
// would turn replication back to full fetches), as Kafka keeps
// "privileged" (follower) sessions over consumers'. The slot bound stays
// the bound on the state kept.

// Defaults of the fetch session bounds.
const (
	defaultFetchSessionSlots = 1000
	fetchSessionIdle         = 2 * time.Minute
)

type fetchSessions struct {
	mu       sync.Mutex
	byID     map[int32]*fetchSession
	slots    int // < 0: no sessions
	maxParts int // 0: unbounded
}

// sessionKey names a session partition: by topic name up to v12, by
// topic ID from v13 (topic is then empty).
type sessionKey struct {
	topic     string
	id        [16]byte
	partition int32
}

type sessionPart struct {
	key sessionKey
	rp  kmsg.FetchRequestTopicPartition
	// seq is the partition's place in the session: a round reads its
	// partitions in this order.
	seq uint64
	// What the last answer that carried the partition said.
	sent              bool
	hwm, logStart     int64
	lastStable        int64
	preferredReplica  int32
	lastAnsweredError int16
	// Quiet: the last visit (a read of the partition for a fetch of this
	// session) found nothing to tell the follower. Until the follower
	// names it again, its source signals a change (the session's changes)
	// or the refresh interval passes, the session's incremental fetches
	// leave it out (active).
	quiet bool
	// canQuiet: the last visit read all it could, its waits are all
	// signalled through the subscription, which was in place before the
	// read.
	canQuiet bool
	visited  time.Time
	// queuedAt is the visit time of its last entry in the session's
	// refresh queue.
	queuedAt time.Time
	// src is what the partition is subscribed to (nil: nothing), cancel
	// ends the subscription.
	src    partSource
	cancel func()
	// gone: forgotten, or its session closed (a change still marked for
	// it is dropped).
	gone bool
	// round is the last round of the session that picked it (active).
	round uint64
	// wakeHWM: the follower serves consumers of the partition and asked
	// for HWM wakes (replica.TagHWMWake): a change its source marks
	// without waking (an HWM move) wakes a parked fetch all the same.
	// Read by the subscription, under the replica's lock.
	wakeHWM atomic.Bool
}

// partSource is what a session partition subscribes to, to learn of its
// changes: subscribe calls mark(true) at a change a parked fetch answers
// (an append, an upload) and mark(false) at one the next round reads
// without waking for it (an HWM move, a role change, as a parked Kafka
// replica fetch is not answered for an HWM alone), unless the follower
// asked for HWM wakes of the partition (sessionPart.wakeHWM). Sources
// compare equal when they are the same partition's.
type partSource interface {
	subscribe(mark func(wake bool)) (cancel func())
}

// replicaSource is a partition's log and replica on this broker.
type replicaSource struct {
	log *log.Log
	rep *replica.Partition
}

func (s replicaSource) subscribe(mark func(wake bool)) func() {
	c1 := s.log.Subscribe(func() { mark(true) })
	c2 := s.rep.Subscribe(func() { mark(false) }, func() { mark(true) })
	return func() { c1(); c2() }
}

// consumerSource is a partition as its consumers see it on this broker
// (leader or follower): records become visible to them when the HWM
// moves, and the LSO moves only with it (a transaction is stable once its
// marker is below the HWM); a role change makes the next read answer an
// error or a preferred replica. Each wakes a parked consumer fetch. The
// leader's appends are not signalled: nothing a consumer may read yet.
type consumerSource struct{ rep *replica.Partition }

func (s consumerSource) subscribe(mark func(wake bool)) func() {
	return s.rep.Subscribe(func() { mark(true) }, nil)
}

// standaloneSource is a standalone broker's partition, whose HWM is its
// log end: an append wakes a parked consumer fetch.
type standaloneSource struct{ log *log.Log }

func (s standaloneSource) subscribe(mark func(wake bool)) func() {
	return s.log.Subscribe(func() { mark(true) })
}

// partVisit is what a fetch's read of one partition waits on: the
// channels it parks on, and the source its changes come from.
type partVisit struct {
	park []<-chan struct{}
	src  partSource
	// unread: the response's byte budget left records of it unread.
	unread bool
	// unsignalled: it parks on something no source signals (the leader
	// quota's room).
	unsignalled bool
	// wakeHWM: a replica fetch partition that asks for HWM wakes
	// (replica.TagHWMWake); followerHWM is the HWM it says the follower
	// has (-1: unknown), fetchOffset its log end (what bounds the HWM
	// it can take).
	wakeHWM     bool
	followerHWM int64
	fetchOffset int64
}

type fetchSession struct {
	id      int32
	replica int32
	// consumer: a consumer's session (replica < 0), held by owner.
	consumer bool
	owner    string
	// topicIDs: opened at v13+, its partitions named by topic ID.
	topicIDs bool
	epoch    int32 // the next incremental request's epoch
	used     time.Time
	busy     bool
	closed   bool
	parts    []*sessionPart
	index    map[sessionKey]*sessionPart
	nextSeq  uint64
	// loud holds the partitions that are not quiet: read at every round.
	loud map[*sessionPart]struct{}
	// changes holds the partitions whose source signalled since the last
	// round took them; its channel wakes a parked fetch.
	changes *notify.Set[*sessionPart]
	// refreshQ holds the quiet partitions in the order visited (rounds
	// run one at a time, so visit times only grow): the head is the next
	// due for its refresh. Entries whose partition was visited again or
	// turned loud since are skipped.
	refreshQ []refreshEntry
	qHead    int
	round    uint64
	// pointerParts counts the partitions whose position asks for WAL
	// pointers (asksPointers).
	pointerParts int
	// kept and taken are active's scratch lists.
	kept  []*sessionPart
	taken []*sessionPart
}

type refreshEntry struct {
	p  *sessionPart
	at time.Time
}

func newFetchSession(id, replicaID int32, now time.Time) *fetchSession {
	return &fetchSession{id: id, replica: replicaID, consumer: replicaID < 0, epoch: 1, used: now, busy: true,
		index: map[sessionKey]*sessionPart{}, loud: map[*sessionPart]struct{}{}, changes: notify.NewSet[*sessionPart]()}
}

// close ends the session's subscriptions. A fetch still serving it
// subscribes nothing more (visited).
func (fs *fetchSession) close() {
	fs.closed = true
	for _, p := range fs.parts {
		p.leave()
	}
}

// leave ends the partition's subscription.
func (p *sessionPart) leave() {
	p.gone = true
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
	p.src = nil
}

// setQuiet marks p quiet or loud, keeping the loud set and the refresh
// queue.
func (fs *fetchSession) setQuiet(p *sessionPart, quiet bool) {
	p.quiet = quiet
	if !quiet {
		fs.loud[p] = struct{}{}
		return
	}
	delete(fs.loud, p)
	if !p.queuedAt.Equal(p.visited) {
		fs.refreshQ = append(fs.refreshQ, refreshEntry{p, p.visited})
		p.queuedAt = p.visited
	}
}

// drop removes a session from the cache and ends its subscriptions.
func (s *fetchSessions) drop(fs *fetchSession) {
	delete(s.byID, fs.id)
	fs.close()
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

// open resolves req (a replica or consumer fetch, v7+) against the
// session cache; owner is the principal of a consumer fetch. A non-nil
// error code is the whole answer.
func (s *fetchSessions) open(req *kmsg.FetchRequest, now time.Time) (sessionFetch, int16) {
	return s.openAs(req, "", now)
}

func (s *fetchSessions) openAs(req *kmsg.FetchRequest, owner string, now time.Time) (sessionFetch, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sf := sessionFetch{s: s, req: req, full: true}
	if req.SessionID != 0 {
		old, ok := s.byID[req.SessionID]
		mine := ok && old.replica == req.ReplicaID && old.owner == owner
		switch {
		case req.SessionEpoch == -1 || req.SessionEpoch == 0:
			// Close it if it is still there; epoch 0 then starts a new
			// one below. As in Kafka, an ID not found is no error here:
			// a client starting over after FETCH_SESSION_ID_NOT_FOUND
			// (franz-go) names the ID it lost with epoch 0.
			if mine {
				s.drop(old)
			}
		case !mine:
			return sf, kerr.FetchSessionIDNotFound.Code
		case old.topicIDs != (req.Version >= 13):
			return sf, kerr.FetchSessionTopicIDError.Code
		default:
			if old.busy || req.SessionEpoch != old.epoch {
				return sf, kerr.InvalidFetchSessionEpoch.Code
			}
			if s.maxParts > 0 && len(old.parts)+old.added(req) > s.maxParts {
				s.drop(old)
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
					sf.named[sessionKey{rt.Topic, rt.TopicID, rp.Partition}] = true
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
	for _, x := range s.byID {
		if !x.busy && now.Sub(x.used) > fetchSessionIdle {
			s.drop(x)
		}
	}
	if len(s.byID) >= cmp.Or(s.slots, defaultFetchSessionSlots) {
		lru := s.evictable(req.ReplicaID < 0)
		if lru == nil {
			return sf, 0 // every slot busy or a follower's: sessionless
		}
		s.drop(lru)
	}
	// A random ID, as Kafka's: a client that still holds a session of
	// this broker's previous run (a restart) or an evicted one must not
	// land on another client's session, as it would with IDs counted
	// from 1 again.
	id := rand.Int32()
	for _, taken := s.byID[id]; id == 0 || taken; _, taken = s.byID[id] {
		id = rand.Int32()
	}
	fs := newFetchSession(id, req.ReplicaID, now)
	fs.owner, fs.topicIDs = owner, req.Version >= 13
	fs.update(req)
	s.byID[fs.id] = fs
	sf.session = fs
	return sf, 0
}

// evictable is the session a new one takes the slot of: the least
// recently used consumer session not serving a fetch, or for a follower's
// new session (consumer false), when there is none, the least recently
// used follower session. Nil: none may go.
func (s *fetchSessions) evictable(consumer bool) *fetchSession {
	var lru, lruReplica *fetchSession
	for _, x := range s.byID {
		switch {
		case x.busy:
		case x.consumer:
			if lru == nil || x.used.Before(lru.used) {
				lru = x
			}
		case !consumer:
			if lruReplica == nil || x.used.Before(lruReplica.used) {
				lruReplica = x
			}
		}
	}
	if lru == nil {
		return lruReplica
	}
	return lru
}

// added is the number of req's partitions the session does not hold.
func (fs *fetchSession) added(req *kmsg.FetchRequest) int {
	n := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if _, ok := fs.index[sessionKey{rt.Topic, rt.TopicID, rp.Partition}]; !ok {
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
// forgotten ones. A new partition is loud: read at the next round.
func (fs *fetchSession) update(req *kmsg.FetchRequest) {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := sessionKey{rt.Topic, rt.TopicID, rp.Partition}
			if p, ok := fs.index[k]; ok {
				fs.countPointers(&p.rp, -1)
				p.rp = rp
				fs.countPointers(&p.rp, 1)
				p.noteWakeHWM(fs)
				continue
			}
			p := &sessionPart{key: k, rp: rp, seq: fs.nextSeq}
			p.noteWakeHWM(fs)
			fs.nextSeq++
			fs.index[k] = p
			fs.parts = append(fs.parts, p)
			fs.countPointers(&p.rp, 1)
			fs.setQuiet(p, false)
		}
	}
	forgotten := map[*sessionPart]bool{}
	for _, ft := range req.ForgottenTopics {
		for _, part := range ft.Partitions {
			k := sessionKey{ft.Topic, ft.TopicID, part}
			if p, ok := fs.index[k]; ok {
				forgotten[p] = true
				delete(fs.index, k)
				delete(fs.loud, p)
				fs.countPointers(&p.rp, -1)
				p.leave()
			}
		}
	}
	if len(forgotten) > 0 {
		kept := fs.parts[:0]
		for _, p := range fs.parts {
			if !forgotten[p] {
				kept = append(kept, p)
			}
		}
		clear(fs.parts[len(kept):])
		fs.parts = kept
	}
}

// noteWakeHWM takes the partition's HWM wake request from its position
// (a follower's only: a consumer session wakes at HWM moves anyway).
func (p *sessionPart) noteWakeHWM(fs *fetchSession) {
	_, wake := replica.HWMWake(&p.rp)
	p.wakeHWM.Store(wake && !fs.consumer)
}

func (fs *fetchSession) countPointers(rp *kmsg.FetchRequestTopicPartition, n int) {
	if replica.WantsPointers(rp) {
		fs.pointerParts += n
	}
}

// requestOf is req with parts in place of its own partitions. The
// partitions are counted per topic first so that each topic's list is
// allocated once at its size.
func requestOf(req *kmsg.FetchRequest, parts []*sessionPart) *kmsg.FetchRequest {
	eff := *req
	eff.Topics = nil
	eff.ForgottenTopics = nil
	type topicKey struct {
		name string
		id   [16]byte
	}
	count := map[topicKey]int{}
	for _, p := range parts {
		count[topicKey{p.key.topic, p.key.id}]++
	}
	at := make(map[topicKey]int, len(count))
	for _, p := range parts {
		tk := topicKey{p.key.topic, p.key.id}
		i, ok := at[tk]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.key.topic, p.key.id
			rt.Partitions = make([]kmsg.FetchRequestTopicPartition, 0, count[tk])
			eff.Topics = append(eff.Topics, rt)
			i = len(eff.Topics) - 1
			at[tk] = i
		}
		eff.Topics[i].Partitions = append(eff.Topics[i].Partitions, p.rp)
	}
	return &eff
}

// active is the request one read of an incremental fetch makes, the
// channel that wakes the fetch when a partition left out changes, and
// the time the first partition left out is due for a refresh (zero if
// none). Any other fetch reads req whole (and has no such channel).
//
// A round reads the loud partitions, those the follower named (its
// position moved) and not read yet in this fetch, those whose source
// signalled a change since the last round (package notify: an append,
// an upload, an HWM move, a role change) and those due for a refresh,
// in the session's order; it leaves the quiet ones out without looking
// at them. With many partitions and a few of them written, checking
// every partition at each round and parking on each one's channels was
// a fifth of the brokers' CPU at 1,200 partitions (docs/bench.md). The
// refresh, at least every refresh interval, reports the follower caught
// up again (replica.lag.time.max.ms is counted from such reads) and
// carries what changes without a signal (the log start offset).
func (sf *sessionFetch) active(req *kmsg.FetchRequest, now time.Time, refresh time.Duration) (*kmsg.FetchRequest, <-chan struct{}, time.Time) {
	if sf.session == nil || sf.full {
		return req, nil, time.Time{}
	}
	sf.s.mu.Lock()
	defer sf.s.mu.Unlock()
	fs := sf.session
	fs.round++
	kept := fs.kept[:0]
	pick := func(p *sessionPart) {
		if !p.gone && p.round != fs.round {
			p.round = fs.round
			kept = append(kept, p)
		}
	}
	for p := range fs.loud {
		pick(p)
	}
	for k := range sf.named {
		if p := fs.index[k]; p != nil {
			pick(p)
		}
	}
	fs.taken = fs.changes.Take(fs.taken[:0])
	for _, p := range fs.taken {
		pick(p)
	}
	clear(fs.taken)
	var due time.Time
	for fs.qHead < len(fs.refreshQ) {
		e := fs.refreshQ[fs.qHead]
		if e.p.gone || !e.p.quiet || !e.p.visited.Equal(e.at) {
			fs.qHead++ // visited again or loud since
			continue
		}
		if now.Sub(e.at) < refresh {
			due = e.at.Add(refresh)
			break
		}
		pick(e.p)
		fs.qHead++
	}
	if fs.qHead > 64 && fs.qHead > len(fs.refreshQ)/2 {
		n := copy(fs.refreshQ, fs.refreshQ[fs.qHead:])
		clear(fs.refreshQ[n:])
		fs.refreshQ, fs.qHead = fs.refreshQ[:n], 0
	}
	slices.SortFunc(kept, func(a, b *sessionPart) int { return cmp.Compare(a.seq, b.seq) })
	eff := requestOf(sf.req, kept)
	clear(kept) // no partition kept alive by the scratch list
	fs.kept = kept[:0]
	return eff, fs.changes.Wake(), due
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
	return sf.session.pointerParts > 0
}

// visited records the reads of one round: resp answers them in order,
// visits holds what each waits on. A partition with nothing new for the
// follower turns quiet; any other is read at every round until it is.
//
// A partition is subscribed to its source here, after its first read: a
// change between that read and the subscription would go unseen, so it
// stays loud for one more round, read again with the subscription in
// place.
func (sf *sessionFetch) visited(resp *kmsg.FetchResponse, visits []partVisit, now time.Time) {
	if sf.session == nil {
		return
	}
	sf.s.mu.Lock()
	defer sf.s.mu.Unlock()
	fs := sf.session
	i := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if i >= len(visits) {
				return
			}
			v := visits[i]
			i++
			k := sessionKey{rt.Topic, rt.TopicID, rp.Partition}
			p := fs.index[k]
			if p == nil {
				continue
			}
			delete(sf.named, k)
			p.visited = now
			subscribed := v.src != nil && v.src == p.src
			if !subscribed {
				if p.cancel != nil {
					p.cancel()
				}
				p.src, p.cancel = nil, nil
				if v.src != nil && !fs.closed {
					p.src = v.src
					p.cancel = v.src.subscribe(func(wake bool) { fs.changes.Mark(p, wake || p.wakeHWM.Load()) })
				}
			}
			p.canQuiet = subscribed && len(v.park) > 0 && !v.unread && !v.unsignalled
			fs.setQuiet(p, !p.news(&rp) && p.canQuiet)
		}
	}
}

// hwmNews reports whether resp, a round's answer with visits in its
// order, carries for a partition that asks for HWM wakes a high
// watermark its follower can take (up to its log end) above the one it
// has: the one it said it has or, in a session, the one the session last
// answered it with. Such a partition answers a parked fetch
// (replica.TagHWMWake); without a session (every partition named at
// every fetch) only the follower's word counts.
func (sf *sessionFetch) hwmNews(resp *kmsg.FetchResponse, visits []partVisit) bool {
	var fs *fetchSession
	if sf.session != nil {
		sf.s.mu.Lock()
		defer sf.s.mu.Unlock()
		fs = sf.session
	}
	i := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if i >= len(visits) {
				return false
			}
			v := visits[i]
			i++
			if !v.wakeHWM || rp.ErrorCode != 0 {
				continue
			}
			has := v.followerHWM
			if fs != nil {
				if p := fs.index[sessionKey{rt.Topic, rt.TopicID, rp.Partition}]; p != nil && p.sent {
					has = max(has, p.hwm)
				}
			}
			if has >= 0 && min(rp.HighWatermark, v.fetchOffset) > has {
				return true
			}
		}
	}
	return false
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
			p := fs.index[sessionKey{rt.Topic, rt.TopicID, rp.Partition}]
			if p == nil {
				continue
			}
			if !p.news(&rp) && !sf.full {
				continue
			}
			if fs.consumer && len(rp.RecordBatches) > 0 {
				// Kafka's rotation: a partition that got records goes
				// to the end of the session's order, so that under a
				// response's byte budget the ones after it are not
				// starved.
				p.seq = fs.nextSeq
				fs.nextSeq++
			}
			p.sent = true
			p.hwm, p.logStart, p.lastStable = rp.HighWatermark, rp.LogStartOffset, rp.LastStableOffset
			p.preferredReplica, p.lastAnsweredError = rp.PreferredReadReplica, rp.ErrorCode
			// Told (an HWM, a log start): quiet from its read on, unless
			// records went (read again until the follower names it) or
			// an error or a divergence (read again at once).
			fs.setQuiet(p, len(rp.RecordBatches) == 0 && rp.ErrorCode == 0 && rp.DivergingEpoch.Epoch < 0 && rp.DivergingEpoch.EndOffset < 0 && p.canQuiet)
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

// count is the number of sessions held, replicas' and consumers'.
func (s *fetchSessions) count() (replicas, consumers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fs := range s.byID {
		if fs.consumer {
			consumers++
		} else {
			replicas++
		}
	}
	return replicas, consumers
}

// FetchSessionCollector reports the fetch sessions held, by kind:
// strata_fetch_sessions{kind="replica"|"consumer"}.
func (e *Env) FetchSessionCollector() prometheus.Collector {
	return sessionCollector{e: e, desc: prometheus.NewDesc("strata_fetch_sessions",
		"Fetch sessions (KIP-227) held, by kind: replica (followers) or consumer.", []string{"kind"}, nil)}
}

type sessionCollector struct {
	e    *Env
	desc *prometheus.Desc
}

func (c sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c sessionCollector) Collect(ch chan<- prometheus.Metric) {
	replicas, consumers := c.e.fetchSessions().count()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(replicas), "replica")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(consumers), "consumer")
}
