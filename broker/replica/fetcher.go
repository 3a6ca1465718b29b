package replica

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/notify"
	"github.com/strata-dev/strata/broker/wal"
)

// FetchVersion is the Fetch version replica fetches use: v12 carries
// LastFetchedEpoch and DivergingEpoch and still names topics by name. The
// follower's broker epoch travels in the ReplicaState tagged field that
// Kafka defines for v15+: a leader of an older Strata version ignores it
// (and would read a v15 request's ReplicaID as -1, a consumer), so v12
// keeps mixed versions replicating during a rolling upgrade.
const FetchVersion = 12

// fetcher replicates every partition this broker follows from one leader
// broker, with one long-poll Fetch at a time over one connection.
type fetcher struct {
	m      *Manager
	leader int32
	wake   chan struct{}
	conn   *wireConn
	// session is the fetch session (KIP-227) on conn: after the first
	// answer, requests name only the partitions whose position changed
	// and answers only those with news (broker/protocol/fetch_session.go).
	session fetchSessionState
	// authWarned is when the leader last refused this broker's replica
	// fetch for want of CLUSTER_ACTION (logged once a minute at most).
	authWarned time.Time
	// appendedAt is when the last round appended downloaded WAL data
	// (zero: none since the last fetch was sent; stage next_fetch).
	appendedAt time.Time
	// leaderInline: the leader said, on this connection, that it
	// replicates inline by wal.policy; fetches go without pointer tags
	// (walsignal.go).
	leaderInline bool
	// walBucket is the bucket the leader's last pointers named (its
	// zone's): while the downloader backs off from it after a download
	// timeout, fetches go without pointer tags (inline) instead of
	// spending the download budget on every round.
	walBucket string
	// following is the partitions that followed this leader when the
	// manager's roles were at generation followingGen (items).
	following    []*Partition
	followingGen uint64
	// itemsBuf and want are the last round's item list and its index,
	// reused: with many partitions, allocating them at every round was
	// a tenth of a broker's allocations (and of its GC). Between full
	// walks (items) they are updated in place for the changed partitions.
	itemsBuf []fetchItem
	want     map[meta.TopicPartition]fetchItem
	// at is each partition's place in itemsBuf; pointerItems counts the
	// items that ask for WAL pointers.
	at           map[*Partition]int
	pointerItems int
	// changes holds the followed partitions that changed since the last
	// round took them (package notify): a role, epoch, ISR or HWM change,
	// a truncation (Partition.Subscribe), and every partition of an
	// answer (marked by the fetcher itself). subs are the subscriptions,
	// ended when a partition stops following this leader and when the
	// fetcher ends.
	changes *notify.Set[*Partition]
	subs    map[*Partition]func()
	taken   []*Partition
	changed []fetchItem
	// steady: the last full walk found every followed partition fetching
	// (none suspended, held, throttled or hydrating), at walkedAt, with
	// the leader's inline signal and the downloader's backoff as they
	// were then: until one of these changes (or fullWalkEvery passes), a
	// round updates only the changed partitions' items.
	steady        bool
	walkedAt      time.Time
	walkedInline  bool
	walkedBackoff bool
}

// fullWalkEvery bounds how long a round may reuse the positions of the
// partitions that signalled no change: what changes without a signal (a
// log start moved by retention, a throttle configuration) reaches the
// leader within it.
const fullWalkEvery = time.Second

// fetchSessionState is the follower's side of a fetch session.
type fetchSessionState struct {
	id, epoch int32
	// sent is what the leader's session holds for each partition.
	sent map[meta.TopicPartition]sentPosition
	// following is plan's scratch set, reused between rounds.
	following map[meta.TopicPartition]bool
}

type sentPosition struct {
	epoch, lastEpoch int32
	offset, logStart int64
	pointers         bool
	hwmWake          bool
}

// position is what the leader's session must hold for the item. The HWM
// an HWM wake request carries is not part of it: in a session the leader
// knows the HWM it answered with.
func (it fetchItem) position() sentPosition {
	return sentPosition{epoch: it.epoch, lastEpoch: it.lastEpoch, offset: it.offset, logStart: it.logStart, pointers: it.pointers, hwmWake: it.hwmWake}
}

// plan returns the items a request must name (all of them without a
// session, else those whose position the leader's session does not hold)
// and the partitions to forget (in the session, no longer fetched).
func (s *fetchSessionState) plan(items []fetchItem) (named []fetchItem, forgotten []meta.TopicPartition) {
	if s.id == 0 {
		return items, nil
	}
	if s.following == nil {
		s.following = make(map[meta.TopicPartition]bool, len(items))
	} else {
		clear(s.following)
	}
	following := s.following
	for _, it := range items {
		following[it.p.TP] = true
		if prev, ok := s.sent[it.p.TP]; !ok || prev != it.position() {
			named = append(named, it)
		}
	}
	for tp := range s.sent {
		if !following[tp] {
			forgotten = append(forgotten, tp)
		}
	}
	return named, forgotten
}

// planChanged is plan for a round that knows which items changed since
// the last answered request (every other item's position is what the
// leader's session holds): those of them whose position moved.
func (s *fetchSessionState) planChanged(changed []fetchItem) (named []fetchItem) {
	for _, it := range changed {
		if prev, ok := s.sent[it.p.TP]; !ok || prev != it.position() {
			named = append(named, it)
		}
	}
	return named
}

// answered records what the leader's session holds after it answered a
// request that named named and forgot forgotten; sessionID is the
// answer's (a full fetch opens the session).
func (s *fetchSessionState) answered(sessionID int32, named []fetchItem, forgotten []meta.TopicPartition) {
	switch {
	case s.id == 0 && sessionID == 0:
		return // the leader keeps no session: fetch in full again
	case s.id == 0:
		*s = fetchSessionState{id: sessionID, epoch: 1, sent: map[meta.TopicPartition]sentPosition{}, following: s.following}
	default:
		s.epoch++
	}
	for _, it := range named {
		s.sent[it.p.TP] = it.position()
	}
	for _, tp := range forgotten {
		delete(s.sent, tp)
	}
}

// wakeFetcher wakes the fetcher of a leader, starting it if needed. The
// poke happens under m.mu, so a fetcher retiring (retire) either sees it
// and stays, or is gone from the map and a new one starts here.
func (m *Manager) wakeFetcher(leader int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.fetchers[leader]; ok {
		f.poke()
		return
	}
	f := &fetcher{m: m, leader: leader, wake: make(chan struct{}, 1)}
	m.fetchers[leader] = f
	f.poke()
	if !m.closed {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			f.run(m.ctx)
		}()
	}
}

// pokeFetcher wakes the fetcher of a leader if there is one.
func (m *Manager) pokeFetcher(leader int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.fetchers[leader]; ok {
		f.poke()
	}
}

// retire removes f from the manager when nothing woke it since it found
// no partition to fetch: the caller then returns (closing its connection
// and with it the leader's fetch session). A fetcher for a leader this
// broker no longer follows would otherwise park forever.
func (m *Manager) retire(f *fetcher) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(f.wake) > 0 {
		return false
	}
	if m.fetchers[f.leader] == f {
		delete(m.fetchers, f.leader)
	}
	return true
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

type fetchItem struct {
	p         *Partition
	epoch     int32
	offset    int64
	lastEpoch int32
	logStart  int64
	pointers  bool // ask for WAL pointers
	// hwmWake: consumers read the partition here (KIP-392); ask the
	// leader to answer at an HWM move, telling it hwm (hwmwake.go).
	hwmWake bool
	hwm     int64
	// throttled: the bytes fetched count against the follower quota
	// (a throttled replica not in the ISR, throttle.go).
	throttled bool
}

// items lists the partitions to fetch from f.leader now, those of them
// whose item changed since the last round (all of them after a full
// walk: full), whether some are suspended (so the loop must come back
// after the backoff), and whether some are held back by the follower
// quota (the loop comes back when it has room).
//
// A round walks every followed partition only when it must (a role or
// leader changed, no fetch session, something to wait for at the last
// walk, every fullWalkEvery); otherwise it updates the partitions that
// signalled a change (fetcher.changes): with 1,200 partitions, walking
// all of them at every round was a tenth of the brokers' CPU.
func (f *fetcher) items() (items, changed []fetchItem, full, suspended, held bool) {
	f.init()
	backoff := f.downloadBackoff()
	now := time.Now()
	if f.steady && f.rolesGen() == f.followingGen && f.session.id != 0 && f.untagged() == f.walkedInline &&
		backoff == f.walkedBackoff && now.Sub(f.walkedAt) < fullWalkEvery {
		if changed, ok := f.changedItems(backoff); ok {
			return f.itemsBuf, changed, false, false, false
		}
	}
	items, suspended, held = f.walk(backoff, now)
	return items, items, true, suspended, held
}

func (f *fetcher) init() {
	if f.changes == nil {
		f.changes = notify.NewSet[*Partition]()
		f.subs = map[*Partition]func(){}
	}
}

func (f *fetcher) rolesGen() uint64 { return f.m.rolesGen.Load() }

// index makes want, at and pointerItems those of items (a full round's).
func (f *fetcher) index(items []fetchItem) {
	if f.want == nil {
		f.want = make(map[meta.TopicPartition]fetchItem, len(items))
		f.at = make(map[*Partition]int, len(items))
	} else {
		clear(f.want)
		clear(f.at)
	}
	f.pointerItems = 0
	for i, it := range items {
		f.want[it.p.TP] = it
		f.at[it.p] = i
		if it.pointers {
			f.pointerItems++
		}
	}
}

// downloadBackoff: the downloader backs off from the bucket of the
// leader's last pointers (fetch inline meanwhile).
func (f *fetcher) downloadBackoff() bool {
	return f.m.wal != nil && f.m.wal.down != nil && f.m.wal.down.Backoff(f.walBucket)
}

// changedItems updates the items of the partitions that signalled a
// change and returns them, flushed. ok is false when one of them has
// something to wait for now (suspended, hydrating, throttled) or its
// flush failed: the round then walks them all.
func (f *fetcher) changedItems(backoff bool) (changed []fetchItem, ok bool) {
	f.taken = f.changes.Take(f.taken[:0])
	defer func() { clear(f.taken) }()
	changed = f.changed[:0]
	for _, p := range f.taken {
		i, followed := f.at[p]
		if !followed {
			continue // a mark from before its subscription ended
		}
		it, st := f.itemOf(p, backoff)
		if st != itemFetch {
			return nil, false
		}
		f.setItem(i, it)
		changed = append(changed, it)
	}
	changed, failed := flushFetchPositions(changed)
	f.changed = changed
	return changed, !failed
}

func (f *fetcher) setItem(i int, it fetchItem) {
	if f.itemsBuf[i].pointers {
		f.pointerItems--
	}
	if it.pointers {
		f.pointerItems++
	}
	f.itemsBuf[i] = it
	f.want[it.p.TP] = it
}

// itemState is what a followed partition's round holds for it.
type itemState int

const (
	itemFetch     itemState = iota // fetch it
	itemOther                      // not a follower of f.leader now
	itemSuspended                  // in its backoff, or hydrating
	itemThrottled                  // fetch it, counted against the follower quota
)

// itemOf is p's item for this round.
func (f *fetcher) itemOf(p *Partition, backoff bool) (fetchItem, itemState) {
	p.mu.Lock()
	following := p.role == RoleFollower && p.state.Leader == f.leader
	skipUntil := p.walSkipUntil
	throttled := p.followerThrottledLocked()
	p.mu.Unlock()
	leader, epoch, ok := p.fetchPosition()
	if !ok {
		if following {
			return fetchItem{}, itemSuspended
		}
		return fetchItem{}, itemOther
	}
	if leader != f.leader {
		return fetchItem{}, itemOther
	}
	if f.m.hydrating(p, leader, epoch) {
		// Copying history from the slow tier first (hydrate.go):
		// the hydration pokes this fetcher when it is done.
		return fetchItem{}, itemSuspended
	}
	leo := p.Log.EndOffset()
	// Without pointer tags while the leader said it replicates inline by
	// policy (walsignal.go).
	pointers := f.m.wal != nil && f.m.wal.down != nil && leo >= skipUntil && !backoff && !f.untagged()
	it := fetchItem{p: p, epoch: epoch, offset: leo, lastEpoch: p.Log.LatestEpoch(), logStart: p.Log.StartOffset(), pointers: pointers, throttled: throttled}
	if p.servesConsumers(p.now()) {
		it.hwmWake, it.hwm = true, p.HighWatermark()
	}
	if throttled {
		return it, itemThrottled
	}
	return it, itemFetch
}

// walk lists the items of every partition that follows f.leader.
func (f *fetcher) walk(backoff bool, now time.Time) (items []fetchItem, suspended, held bool) {
	// A change from here on is in the next round's changes.
	f.taken = f.changes.Take(f.taken[:0])
	clear(f.taken)
	// Only the partitions that follow this leader, listed again when a
	// role or leader changed.
	if gen := f.rolesGen(); f.following == nil || gen != f.followingGen {
		f.following = f.following[:0]
		for _, p := range f.m.partitions() {
			p.mu.Lock()
			if p.role == RoleFollower && p.state.Leader == f.leader {
				f.following = append(f.following, p)
			}
			p.mu.Unlock()
		}
		f.followingGen = gen
		f.subscribe()
	}
	steady := true
	quotaFull := false
	items = f.itemsBuf[:0]
	for _, p := range f.following {
		it, st := f.itemOf(p, backoff)
		switch st {
		case itemOther:
			continue
		case itemSuspended:
			suspended = true
			continue
		case itemThrottled:
			// Kafka's shouldFollowerThrottle: left out while the quota is
			// exceeded (checked once per round, counted per partition).
			steady = false
			if !quotaFull {
				quotaFull = f.m.followerQuota.Exceeded()
			} else {
				f.m.followerQuota.held.Inc()
			}
			if quotaFull {
				held = true
				continue
			}
		}
		items = append(items, it)
	}
	// In topic-partition order, as partitions returns them.
	items, failed := flushFetchPositions(items)
	suspended = suspended || failed
	f.itemsBuf = items
	f.steady = steady && !suspended && !held
	f.walkedAt, f.walkedInline, f.walkedBackoff = now, f.untagged(), backoff
	return items, suspended, held
}

// subscribe keeps f.subs to the partitions of f.following: new ones
// subscribed, the others' subscriptions ended.
func (f *fetcher) subscribe() {
	keep := make(map[*Partition]bool, len(f.following))
	for _, p := range f.following {
		keep[p] = true
		if _, ok := f.subs[p]; !ok {
			f.subs[p] = p.Subscribe(func() { f.changes.Mark(p, false) }, nil)
		}
	}
	for p, cancel := range f.subs {
		if !keep[p] {
			cancel()
			delete(f.subs, p)
		}
	}
}

// unsubscribe ends every subscription (the fetcher ends).
func (f *fetcher) unsubscribe() {
	for p, cancel := range f.subs {
		cancel()
		delete(f.subs, p)
	}
}

// flushFetchPositions makes every item's fetch offset durable before the
// fetch reports it to the leader as this replica's LEO: the leader counts
// it towards the HWM, which acknowledges acks=all writes, and a power loss
// must not take what was acknowledged (a last ISR member elected after a
// machine crash would otherwise make every replica truncate it away). The
// fsyncs of several partitions run together. Items whose log cannot be
// flushed (disk failure: the broker stops, see Config.OnStorageFailure)
// are left out; failed reports that some were.
func flushFetchPositions(items []fetchItem) ([]fetchItem, bool) {
	var errs []error // allocated once a flush is needed
	var wg sync.WaitGroup
	for i, it := range items {
		if it.p.Log.DurableEnd() >= it.offset {
			continue
		}
		if errs == nil {
			errs = make([]error, len(items))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = it.p.Log.FlushTo(it.offset)
		}()
	}
	wg.Wait()
	if errs == nil {
		return items, false
	}
	out := items[:0]
	failed := false
	for i, it := range items {
		if errs[i] != nil {
			failed = true
			continue
		}
		out = append(out, it)
	}
	return out, failed
}

func (f *fetcher) run(ctx context.Context) {
	log := f.m.cfg.Log.WithValues("leader", f.leader)
	defer func() {
		if f.conn != nil {
			f.conn.Close()
		}
		f.unsubscribe()
	}()
	backoff := f.m.cfg.Backoff
	for ctx.Err() == nil {
		items, changed, full, suspended, held := f.items()
		if len(items) > 0 && !f.m.selfRegistered() {
			// Leaders refuse fetches without this broker's current epoch
			// (restart, lost lease): wait for SetBrokers to bring it (it
			// pokes every fetcher). Suspended, not idle: an idle fetcher
			// retires, and nothing would start it again.
			items, suspended = nil, true
			f.steady = false // this round's changes are not sent: walk them all
		}
		if len(items) == 0 {
			if !suspended && !held && f.m.retire(f) {
				return
			}
			var timer *time.Timer
			var tc <-chan time.Time
			switch {
			case suspended:
				timer = time.NewTimer(backoff)
				tc = timer.C
			case held:
				// Every partition left is throttled: come back when
				// the quota has room (or a rate change pokes).
				timer = time.NewTimer(max(f.m.followerQuota.Delay(), time.Millisecond))
				tc = timer.C
			}
			select {
			case <-ctx.Done():
			case <-f.wake:
			case <-tc:
			}
			if timer != nil {
				timer.Stop()
			}
			continue
		}
		if err := f.fetch(ctx, items, changed, full); err != nil {
			f.steady = false // what the leader's session holds is unknown
			if ctx.Err() != nil {
				return
			}
			log.V(1).Info("replica fetch failed, retrying", "error", err.Error())
			if f.conn != nil {
				f.conn.Close()
				f.conn = nil
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// fetch makes one replica fetch of items; changed are those whose item
// changed since the last round (all of them: full).
func (f *fetcher) fetch(ctx context.Context, items, changed []fetchItem, full bool) error {
	cfg := f.m.cfg
	if f.conn == nil {
		info, ok := f.m.Broker(f.leader)
		if !ok || len(info.Listeners) == 0 {
			return fmt.Errorf("leader %d is not registered", f.leader)
		}
		l := info.Listeners[0]
		for _, cand := range info.Listeners {
			if cand.Name == cfg.Listener {
				l = cand
			}
		}
		c, err := dialWire(ctx, cfg.Dial, net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), "strata-replica-"+strconv.Itoa(int(cfg.NodeID)))
		if err != nil {
			return err
		}
		f.conn = c
		f.session = fetchSessionState{} // sessions live on a connection
		f.leaderInline = false          // and so does the policy signal
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(FetchVersion)
	req.ReplicaID = cfg.NodeID
	// KIP-903's ReplicaState (a tagged field, decoded at any flexible
	// version) carries this broker's registration epoch, and
	// TagReplicaToken its registration's secret; the leader refuses
	// replica fetches without the current ones (Manager.CheckReplicaFetcher).
	epoch, token := f.m.replicaIdentity()
	req.ReplicaState.ID, req.ReplicaState.Epoch = cfg.NodeID, epoch
	if token != nil {
		req.UnknownTags.Set(TagReplicaToken, token)
	}
	req.MaxWaitMillis = int32(cfg.FetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = cfg.FetchMaxBytes
	req.SessionID, req.SessionEpoch = f.session.id, f.session.epoch // 0, 0 asks for a session
	var named []fetchItem
	var forgotten []meta.TopicPartition
	f.init()
	if full {
		f.index(items)
	}
	if full || f.session.id == 0 {
		named, forgotten = f.session.plan(items)
	} else {
		named = f.session.planChanged(changed)
	}
	byTopic := map[string]int{}
	for _, it := range named {
		i, ok := byTopic[it.p.TP.Topic]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = it.p.TP.Topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[it.p.TP.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = it.p.TP.Partition
		rp.CurrentLeaderEpoch = it.epoch
		rp.FetchOffset = it.offset
		rp.LastFetchedEpoch = it.lastEpoch
		rp.LogStartOffset = it.logStart
		rp.PartitionMaxBytes = cfg.PartitionMaxBytes
		if it.pointers {
			rp.UnknownTags.Set(TagWALPointers, []byte{1})
		}
		if it.hwmWake {
			askHWMWake(&rp, it.hwm)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	forgottenAt := map[string]int{}
	for _, tp := range forgotten {
		i, ok := forgottenAt[tp.Topic]
		if !ok {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic = tp.Topic
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
			i = len(req.ForgottenTopics) - 1
			forgottenAt[tp.Topic] = i
		}
		req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
	}
	asked := f.pointerItems > 0
	if asked {
		askCompactPointers(req)
		askForeignPointers(req)
	}
	// Stop the round trip when the manager closes.
	conn := f.conn
	if f.m.wal != nil && !f.appendedAt.IsZero() {
		f.m.wal.stages.observe(StageNextFetch, time.Since(f.appendedAt))
		f.appendedAt = time.Time{}
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.nc.SetDeadline(time.Now()) })
	resp, sent, received, err := conn.roundTrip(req, cfg.FetchMaxWait+30*time.Second)
	stop()
	var fr *kmsg.FetchResponse
	if err == nil {
		fr = resp.(*kmsg.FetchResponse)
	}
	if cfg.Traffic != nil && sent > 0 {
		cfg.Traffic.ReplicaFetch(f.leader, sent, received, asked && fr != nil && RecordBytes(fr) == 0)
	}
	if err != nil {
		return err
	}
	f.heedWALPolicy(fr)
	switch fr.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code:
		// The leader evicted or lost the session: start a new one.
		cfg.Log.V(1).Info("replica fetch session reset by the leader", "leader", f.leader, "error", kerr.ErrorForCode(fr.ErrorCode).Error())
		f.session = fetchSessionState{}
		return nil
	default:
		return fmt.Errorf("fetch from leader %d: %w", f.leader, kerr.ErrorForCode(fr.ErrorCode))
	}
	f.session.answered(fr.SessionID, named, forgotten)
	want := f.want // items, by partition (items)
	downloaded := f.download(ctx, fr, want)
	var appendStart time.Time
	if len(downloaded) > 0 {
		appendStart = time.Now()
	}
	for _, rt := range fr.Topics {
		for _, rp := range rt.Partitions {
			tp := meta.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			it, ok := want[tp]
			if !ok {
				continue
			}
			// Its item changes with what follows (an append, a new HWM,
			// a backoff, a range to fetch inline): the next round reads it.
			f.changes.Mark(it.p, false)
			res := FetchResult{HighWatermark: rp.HighWatermark, LogStart: rp.LogStartOffset, Records: rp.RecordBatches}
			if d, ok := downloaded[tp]; ok && len(rp.RecordBatches) == 0 {
				res.Records = d
			}
			if rp.ErrorCode != 0 {
				res.Err = kerr.ErrorForCode(rp.ErrorCode)
			}
			if rp.ErrorCode == kerr.TopicAuthorizationFailed.Code && time.Since(f.authWarned) > time.Minute {
				// A misconfiguration, not a transient: say what fixes it.
				f.authWarned = time.Now()
				cfg.Log.Info("the leader refuses this broker's replica fetches: its principal needs CLUSTER_ACTION on the cluster (list it in super.users)",
					"leader", f.leader, "partition", tp)
			}
			res.Diverging = divergenceFromWire(rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)
			if it.throttled {
				f.m.followerQuota.Record(len(res.Records))
			}
			if _, err := it.p.applyFetch(f.leader, it.epoch, res, cfg.Backoff); err != nil {
				cfg.Log.V(1).Info("replica fetch of a partition failed", "partition", tp, "leader", f.leader, "error", err.Error())
			}
			if res.Diverging != nil {
				cfg.Log.Info("truncated to the leader's divergence point", "partition", tp, "leader", f.leader,
					"epoch", res.Diverging.Epoch, "endOffset", res.Diverging.EndOffset, "from", it.offset, "to", it.p.Log.EndOffset())
			}
		}
	}
	if !appendStart.IsZero() {
		// The whole round's applies: the next fetch, which reports the
		// downloaded data, waits for all of them.
		f.appendedAt = time.Now()
		f.m.wal.stages.observe(StageFollowerAppend, f.appendedAt.Sub(appendStart))
	}
	return nil
}

// RecordBytes is the number of record bytes in a Fetch response (0: the
// answer carried only metadata, e.g. WAL pointers).
func RecordBytes(fr *kmsg.FetchResponse) int {
	n := 0
	for _, rt := range fr.Topics {
		for _, rp := range rt.Partitions {
			n += len(rp.RecordBatches)
		}
	}
	return n
}

// download fetches the WAL ranges the leader answered with pointers (one
// Downloader call, so ranges of one object merge into one GET) and
// returns per partition the verified batches that continue its log end.
// At the first range that fails, the rest of that partition is dropped
// and the partition fetches inline until its log end passes the range.
func (f *fetcher) download(ctx context.Context, fr *kmsg.FetchResponse, want map[meta.TopicPartition]fetchItem) map[meta.TopicPartition][]byte {
	w := f.m.wal
	if w == nil || w.down == nil {
		return nil
	}
	objects, compact, tableErr := compactObjects(fr)
	if tableErr != nil {
		// Nothing in this answer's pointers can be trusted: fetch every
		// partition that got some inline from its offset.
		f.m.cfg.Log.Info("leader sent a malformed WAL object table; fetching inline", "leader", f.leader, "error", tableErr.Error())
	}
	var all []wal.Pointer
	for _, rt := range fr.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			raw := tagValue(&rp.UnknownTags, TagWALPointers)
			tp := meta.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			it, ok := want[tp]
			if raw == nil || !ok || !it.pointers {
				continue
			}
			if !it.p.followsAt(f.leader, it.epoch) {
				// Leadership moved while the fetch was parked (a deposed
				// leader answering late): applyFetch would drop the data,
				// so do not download it either.
				continue
			}
			var ptrs []wal.Pointer
			var err error
			switch {
			case tableErr != nil:
				err = tableErr
			case compact:
				ptrs, err = decodeCompactPointers(raw, objects, tp.Topic, tp.Partition)
			default:
				ptrs, err = DecodePointers(raw)
			}
			if err == nil {
				err = markRebase(rp, ptrs)
			}
			if err != nil {
				f.m.cfg.Log.Info("leader sent malformed WAL pointers; fetching inline", "partition", tp, "leader", f.leader, "error", err.Error())
				it.p.skipWAL(it.offset + 1)
				continue
			}
			use, refused, err := usablePointers(ptrs, tp, it.epoch, it.lastEpoch)
			all = append(all, use...)
			if err != nil {
				f.m.cfg.Log.Info("WAL pointer refused; fetching inline", "partition", tp, "leader", f.leader, "pointer", refused.String(), "reason", err.Error())
				it.p.skipWAL(refused.LastOffset + 1)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	out := map[meta.TopicPartition][]byte{}
	failed := map[meta.TopicPartition]bool{}
	next := map[meta.TopicPartition]int64{}
	f.walBucket = all[0].Bucket
	getStart := time.Now()
	fetched := w.down.Fetch(ctx, all)
	w.stages.observe(StageGet, time.Since(getStart))
	for _, fe := range fetched {
		tp := meta.TopicPartition{Topic: fe.Pointer.Topic, Partition: fe.Pointer.Partition}
		if failed[tp] {
			continue
		}
		n, ok := next[tp]
		if !ok {
			n = want[tp].offset
		}
		if fe.Err != nil || fe.Pointer.BaseOffset != n {
			failed[tp] = true
			reason := "pointer does not continue the log"
			if fe.Err != nil {
				reason = fe.Err.Error()
			}
			f.m.cfg.Log.Info("WAL range not usable; fetching it inline", "partition", tp, "leader", f.leader, "pointer", fe.Pointer.String(), "reason", reason)
			want[tp].p.skipWAL(fe.Pointer.LastOffset + 1)
			continue
		}
		if prev, ok := out[tp]; ok {
			out[tp] = append(prev, fe.Data...)
		} else {
			// The common case, one range per partition: the GET's own
			// buffer, not a copy of every replicated byte.
			out[tp] = fe.Data
		}
		next[tp] = fe.Pointer.LastOffset + 1
	}
	return out
}

// skipWAL makes the follower fetch inline until its log end reaches off.
func (p *Partition) skipWAL(off int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.walSkipUntil = max(p.walSkipUntil, off)
}

// wireConn is a minimal Kafka client connection: one request at a time,
// byte counts exact (frames included) for the traffic accounting.
type wireConn struct {
	nc   net.Conn
	rd   *bufio.Reader
	fmtr *kmsg.RequestFormatter
	corr int32
	buf  []byte
}

func dialWire(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, clientID string) (*wireConn, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nc, err := dial(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &wireConn{nc: nc, rd: bufio.NewReaderSize(nc, 64<<10), fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}, nil
}

func (c *wireConn) Close() error { return c.nc.Close() }

// roundTrip sends req and reads its response. sent and received count
// every byte written and read, size prefixes included.
func (c *wireConn) roundTrip(req kmsg.Request, timeout time.Duration) (resp kmsg.Response, sent, received int, err error) {
	c.corr++
	c.buf = c.fmtr.AppendRequest(c.buf[:0], req, c.corr)
	if err := c.nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, 0, 0, err
	}
	n, err := c.nc.Write(c.buf)
	sent = n
	if err != nil {
		return nil, sent, 0, fmt.Errorf("write request: %w", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.rd, size[:]); err != nil {
		return nil, sent, 0, fmt.Errorf("read response size: %w", err)
	}
	length := int32(binary.BigEndian.Uint32(size[:]))
	if length < 4 || length > 256<<20 {
		return nil, sent, 4, fmt.Errorf("bad response size %d", length)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(c.rd, body); err != nil {
		return nil, sent, 4, fmt.Errorf("read response: %w", err)
	}
	received = 4 + int(length)
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, sent, received, fmt.Errorf("response correlation ID %d, want %d", corr, c.corr)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		if body, err = skipTags(body); err != nil {
			return nil, sent, received, err
		}
	}
	resp = req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, sent, received, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, sent, received, nil
}

var errBadTags = errors.New("malformed tagged fields in response header")

func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errBadTags
	}
	b = b[l:]
	for range n {
		_, l := binary.Uvarint(b)
		if l <= 0 {
			return nil, errBadTags
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errBadTags
		}
		b = b[l+int(size):]
	}
	return b, nil
}
