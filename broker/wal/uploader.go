package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
)

// Defaults of UploaderConfig.
const (
	DefaultMaxObjectBytes   = 256 << 10
	DefaultUploadInterval   = 10 * time.Millisecond
	DefaultMaxInFlight      = 4
	DefaultMaxBufferedBytes = 32 << 20
	DefaultFailureThreshold = 3
	DefaultRetryAfter       = time.Second
	DefaultCutBurst         = 4
	DefaultGroupInFlight    = 2
)

// Errors Append returns; the broker then replicates the batch inline.
var (
	// ErrBufferFull: accepted but not yet uploaded bytes reached
	// MaxBufferedBytes (the store is slow or failing).
	ErrBufferFull = errors.New("wal: upload buffer full")
	// ErrDegraded: recent uploads failed; the uploader refuses data until
	// RetryAfter has passed, then lets one object through as a probe. A
	// degraded uploader that gets no data probes the bucket itself (a
	// HEAD, every RetryAfter) and takes data again once it answers, so
	// an idle broker does not report a bucket that is back as degraded.
	ErrDegraded = errors.New("wal: uploader degraded")
	// ErrClosed: the uploader was closed.
	ErrClosed = errors.New("wal: uploader closed")
)

// UploaderConfig configures an Uploader.
type UploaderConfig struct {
	Store       objstore.Store
	Cluster     string
	Zone        string
	BrokerID    int32
	Incarnation uint64
	// FirstSequence numbers the first object.
	FirstSequence uint64

	// MaxObjectBytes cuts an object once this many batch bytes are pending
	// (wal.object.max.bytes).
	MaxObjectBytes int
	// UploadInterval (wal.upload.interval.ms) bounds the wait and the rate
	// of cuts: an object is cut at the latest this long after its first
	// byte, and Nudge cuts earlier only while the average spacing of cuts
	// stays at least this long (a token bucket of CutBurst tokens, one
	// added per interval). So a broker PUTs at most about one object per
	// interval plus the size cuts, as with a plain timer, but a lightly
	// loaded or bursty broker does not make every byte wait the interval.
	// While GroupInFlight uploads are busy, a due object keeps filling
	// until one finishes (size cuts excepted): a busy broker or a slow
	// store gets fewer, larger objects rather than a queue of small ones.
	UploadInterval time.Duration
	// CutBurst is the token bucket's depth (DefaultCutBurst).
	CutBurst int
	// GroupInFlight is the group commit: while this many uploads are in
	// flight (or queued), an object whose time came (a Nudge with a
	// token, or its interval) is not cut but keeps filling until one of
	// them finishes; then the nudge rule applies again (token, interval).
	// At low rates no upload is in flight when a produce request ends, so
	// each is cut at once as before; at high rates cuts follow the PUTs'
	// completions, so objects get larger and their count stops growing
	// with the rate (at most about GroupInFlight per PUT duration). The
	// size cut (cutBytes) is not held back. Default DefaultGroupInFlight;
	// at most MaxInFlight.
	GroupInFlight int
	// MaxInFlight bounds concurrent PUTs.
	MaxInFlight int
	// MaxBufferedBytes bounds accepted bytes not yet uploaded (pending,
	// queued and in flight); beyond it Append fails fast.
	MaxBufferedBytes int
	// FailureThreshold consecutive failed uploads make the uploader
	// degraded; RetryAfter later it accepts data again as a probe.
	FailureThreshold int
	RetryAfter       time.Duration

	// ReplicaSetKey groups chunks in an object by destination (see
	// SortChunks); nil orders by topic and partition only. It is called
	// from upload goroutines and must be safe for concurrent use.
	ReplicaSetKey func(topic string, partition int32) string
	// OnUpload receives every object's outcome, in sequence order, from
	// one goroutine; so a partition's pointers arrive in offset order.
	// It must not call Close.
	OnUpload func(UploadResult)
	// Clock defaults to the wall clock.
	Clock Clock
	// HedgeAfter: a PUT that has not answered after this long gets a
	// twin, a second PUT of the same key and bytes, and the first
	// success wins (the other is cancelled). A WAL object's key names
	// this uploader's incarnation and sequence and its bytes never
	// change, so the twin is idempotent: whichever lands, the object is
	// the same. An object store's slow tail (a request stuck behind
	// others, a slow node) then costs every acks=all produce waiting on
	// the object one hedge delay instead of the whole tail, for one more
	// PUT now and then. 0: adaptive, three times the average of recent
	// PUTs (at least MinPutHedgeDelay; 100 ms before the first); < 0:
	// never. The delay runs on the wall clock, not Clock. A twin comes on
	// top of MaxInFlight: at most one per PUT in flight.
	HedgeAfter time.Duration
}

// MinPutHedgeDelay bounds the adaptive PUT hedge delay from below: a
// twin PUT is the priciest request of the WAL path, so PUTs that are
// merely a little slow do not get one.
const MinPutHedgeDelay = 10 * time.Millisecond

// UploadResult is the outcome of one object's upload.
type UploadResult struct {
	Sequence uint64
	Bucket   string
	Key      string
	// Bytes is the object's size.
	Bytes int
	// Pointers has one pointer per chunk; on failure they say which ranges
	// are not in the fast tier.
	Pointers []Pointer
	// Err is nil when the object is stored.
	Err error
	// Elapsed is the PUT's duration.
	Elapsed time.Duration
	// FirstByte is when the object's first batch was appended and
	// PutStart when its PUT began (wall clock, for the per-stage latency
	// breakdown: PutStart-FirstByte is the wait for the cut and for an
	// upload slot).
	FirstByte, PutStart time.Time
}

// UploaderStats are counters for metrics.
type UploaderStats struct {
	Objects, Failed uint64
	UploadedBytes   uint64
	// Hedged counts the PUTs that got a twin after the hedge delay.
	Hedged                         uint64
	RejectedFull, RejectedDegraded uint64
	// IdleProbes counts the HEADs a degraded uploader without data sent
	// to see whether its bucket is back.
	IdleProbes uint64
	// RawBytes counts the bytes AppendRaw took.
	RawBytes      uint64
	BufferedBytes int
	// PendingBytes are in the object being filled (not cut yet).
	PendingBytes int
	InFlight     int
	Degraded     bool
}

// Uploader turns the appends of every partition a broker leads into WAL
// objects in the broker's zone bucket.
//
// Concurrency: one mutex guards the pending object and the queue; Append
// and the cut timer take it briefly and never wait for I/O. The run
// goroutine starts uploads (at most MaxInFlight goroutines) and the
// deliver goroutine calls OnUpload in sequence order.
type Uploader struct {
	cfg UploaderConfig

	mu        sync.Mutex
	closed    bool
	pending   *pendingObject
	timerStop func() bool
	timerGen  uint64
	ready     []*pendingObject // cut, waiting for an upload slot
	inFlight  int
	buffered  int
	nextSeq   uint64
	done      map[uint64]UploadResult // finished, not yet delivered
	deliverAt uint64                  // next sequence to deliver
	tat       time.Time               // token bucket: theoretical arrival time of the next cut
	failures  int                     // consecutive
	state     breakerState
	since     time.Time
	probeStop func() bool // the idle probe's timer (armProbeLocked)
	stats     UploaderStats
	// interval, cutBytes and noNudge are the cut plan (SetCut; from the
	// config until then): wal.policy changes them at run time.
	interval time.Duration
	cutBytes int
	noNudge  bool

	kick      chan struct{} // run: ready queue or slots changed
	delivered chan struct{} // deliver: done changed
	stop      chan struct{}
	wg        sync.WaitGroup
	uploads   sync.WaitGroup
	work      chan *pendingObject // to the upload workers
	workers   sync.WaitGroup
	ctx       context.Context
	cancel    context.CancelFunc

	// rawDone gets the objects with AppendRaw sets (SetRawDone); shared
	// counts, by key, the holders of a stored one that have not called
	// Release yet.
	rawDone func(RawUpload)
	shared  map[string]int

	// hedges counts twin PUTs; putAvg: successful PUT durations, for
	// the adaptive hedge delay.
	hedges atomic.Uint64
	putAvg hedgeAvg
}

type breakerState int

const (
	stateHealthy breakerState = iota
	stateDegraded
	stateProbing
)

type pendingObject struct {
	seq    uint64
	bytes  int
	chunks []ChunkInput
	index  map[tp]int // partition → its last chunk in chunks
	// cutAt is when the armed timer cuts it: UploadInterval after its
	// first byte, or earlier when a Nudge waits for a token.
	cutAt time.Time
	// due: the object's cut time came while every upload slot was busy;
	// the next finished upload cuts it.
	due bool
	// grouped: its cut time came while GroupInFlight uploads were busy
	// (the group commit); the next finished upload applies the nudge
	// rule to it again.
	grouped bool
	// firstByte is the wall-clock time of its first append of a chunk
	// (stage metrics; the cut itself runs on cfg.Clock); zero while it
	// holds raw sets only.
	firstByte time.Time
	// raw are AppendRaw's sets, after the chunks, of rawCalls in order.
	raw      [][]byte
	rawCalls []rawCall
}

// NewUploader starts an uploader. Close it to flush and stop.
func NewUploader(cfg UploaderConfig) (*Uploader, error) {
	if cfg.Store == nil {
		return nil, errors.New("wal: uploader needs a store")
	}
	if cfg.MaxObjectBytes <= 0 {
		cfg.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if cfg.UploadInterval <= 0 {
		cfg.UploadInterval = DefaultUploadInterval
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if cfg.CutBurst <= 0 {
		cfg.CutBurst = DefaultCutBurst
	}
	if cfg.GroupInFlight <= 0 {
		cfg.GroupInFlight = DefaultGroupInFlight
	}
	cfg.GroupInFlight = min(cfg.GroupInFlight, cfg.MaxInFlight)
	if cfg.FailureThreshold <= 0 {
		cfg.FailureThreshold = DefaultFailureThreshold
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.OnUpload == nil {
		cfg.OnUpload = func(UploadResult) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &Uploader{
		cfg:       cfg,
		interval:  cfg.UploadInterval,
		cutBytes:  cfg.MaxObjectBytes,
		nextSeq:   cfg.FirstSequence,
		deliverAt: cfg.FirstSequence,
		done:      map[uint64]UploadResult{},
		shared:    map[string]int{},
		kick:      make(chan struct{}, 1),
		delivered: make(chan struct{}, 1),
		stop:      make(chan struct{}),
		ctx:       ctx,
		cancel:    cancel,
	}
	// Long-lived upload workers: a PUT runs deep in the SDK, and a fresh
	// goroutine per object spent ~6 % of a broker's CPU growing stacks.
	u.work = make(chan *pendingObject, cfg.MaxInFlight)
	u.workers.Add(cfg.MaxInFlight)
	for range cfg.MaxInFlight {
		go func() {
			defer u.workers.Done()
			for obj := range u.work {
				u.upload(obj)
			}
		}()
	}
	u.wg.Add(2)
	go func() {
		defer close(u.work)
		u.run()
	}()
	go u.deliver()
	return u, nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Append queues one record batch the broker appended as leader: offsets
// baseOffset..lastOffset of topic-partition, stamped with leaderEpoch.
// The bytes are copied. It never blocks on I/O: it fails with
// ErrBufferFull, ErrDegraded or ErrClosed instead, and the caller
// replicates that batch inline.
func (u *Uploader) Append(topic string, partition, leaderEpoch int32, baseOffset, lastOffset int64, batch []byte) error {
	if len(batch) == 0 || lastOffset < baseOffset || baseOffset < 0 {
		return fmt.Errorf("wal: append %s-%d: invalid batch (offsets [%d,%d], %d bytes)", topic, partition, baseOffset, lastOffset, len(batch))
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.admitLocked(len(batch)); err != nil {
		return err
	}
	p := u.pendingForLocked(len(batch))
	if p.firstByte.IsZero() {
		p.firstByte = time.Now()
	}
	k := tp{topic, partition}
	b := append([]byte(nil), batch...)
	if i, ok := p.index[k]; ok && p.chunks[i].LeaderEpoch == leaderEpoch && p.chunks[i].LastOffset+1 == baseOffset {
		p.chunks[i].Batches = append(p.chunks[i].Batches, b)
		p.chunks[i].LastOffset = lastOffset
	} else {
		p.index[k] = len(p.chunks)
		p.chunks = append(p.chunks, ChunkInput{Topic: topic, Partition: partition, LeaderEpoch: leaderEpoch, BaseOffset: baseOffset, LastOffset: lastOffset, Batches: [][]byte{b}})
	}
	p.bytes += len(b)
	u.buffered += len(b)
	if p.bytes >= u.cutBytes {
		u.cutLocked()
	}
	return nil
}

// admitLocked refuses n more bytes when the uploader is closed, degraded
// (see ErrDegraded) or its buffer is full.
func (u *Uploader) admitLocked(n int) error {
	if u.closed {
		return ErrClosed
	}
	switch u.state {
	case stateDegraded:
		if u.cfg.Clock.Now().Sub(u.since) < u.cfg.RetryAfter {
			u.stats.RejectedDegraded++
			return ErrDegraded
		}
		u.state = stateProbing
	}
	if u.buffered+n > u.cfg.MaxBufferedBytes {
		u.stats.RejectedFull++
		return ErrBufferFull
	}
	return nil
}

// pendingForLocked returns the object that n more bytes go into: the
// pending one, or a new one when there is none or they do not fit it
// (then the pending one is cut).
func (u *Uploader) pendingForLocked(n int) *pendingObject {
	if u.pending != nil && u.pending.bytes > 0 && u.pending.bytes+n > u.cutBytes {
		u.cutLocked()
	}
	if u.pending == nil {
		u.pending = &pendingObject{index: map[tp]int{}}
		u.armLocked(u.cfg.Clock.Now(), u.interval)
	}
	return u.pending
}

// RawUpload is the outcome of an object that carried AppendRaw calls'
// byte sets.
type RawUpload struct {
	Bucket, Key string
	// Calls are the AppendRaw calls in the object, in the order they were
	// made; Offsets[i][j] is where call i's set j starts in the object.
	Calls   []any
	Offsets [][]int64
	// Shared: the object held this broker's own chunks too (the raw sets
	// rode on a WAL upload, or it on theirs).
	Shared bool
	// Err is nil when the object is stored; Elapsed is its PUT's time.
	Err     error
	Elapsed time.Duration
}

// rawCall is one AppendRaw call in a pending object.
type rawCall struct {
	call any
	sets int
}

// SetRawDone sets the function that gets each object holding AppendRaw
// calls once its PUT ended (from the upload goroutine, before the object's
// OnUpload). Set it once, before the first AppendRaw.
func (u *Uploader) SetRawDone(f func(RawUpload)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rawDone = f
}

// AppendRaw adds opaque byte sets (zone-local produce's forwarded records,
// docs/wal.md "Zone-local produce") to the pending object, after its
// chunks (EncodeWithTail), so that they share one PUT with the broker's
// own WAL uploads instead of taking one of their own. The bytes are
// copied. They are cut as the broker's own appends are, by the cut plan
// (SetCut): the size cut here, then the interval, or the caller's Nudge
// or NudgeAtLeast once its request is in, as after a produce request.
// So forwarding adds bytes to the broker's objects, not objects. The
// call's outcome comes to the SetRawDone function, with call.
//
// An object stored with raw sets has two holders, the leader's deletion
// (the Tracker, for its chunks) and the raw sets' writer; each calls
// Release when it is done with it and deletes only what Release returns.
//
// It fails like Append (ErrClosed, ErrDegraded, ErrBufferFull); the caller
// then writes the sets some other way.
func (u *Uploader) AppendRaw(sets [][]byte, call any) error {
	n := 0
	for _, s := range sets {
		n += len(s)
	}
	if n == 0 {
		return errors.New("wal: append raw: no bytes")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.rawDone == nil {
		return errors.New("wal: append raw: no SetRawDone function")
	}
	if err := u.admitLocked(n); err != nil {
		return err
	}
	p := u.pendingForLocked(n)
	for _, s := range sets {
		p.raw = append(p.raw, append([]byte(nil), s...))
	}
	p.rawCalls = append(p.rawCalls, rawCall{call: call, sets: len(sets)})
	u.stats.RawBytes += uint64(n)
	p.bytes += n
	u.buffered += n
	if p.bytes >= u.cutBytes {
		u.cutLocked()
	}
	return nil
}

// Release says that one holder of an object with raw sets (AppendRaw) is
// done with the keys, and returns those that nobody holds any longer:
// the caller deletes them. Keys of objects without raw sets are returned
// as they are.
func (u *Uploader) Release(keys []string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.shared) == 0 {
		return keys
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if n, ok := u.shared[k]; ok {
			if n > 1 {
				u.shared[k] = n - 1
				continue
			}
			delete(u.shared, k)
		}
		out = append(out, k)
	}
	return out
}

// Holders is the number of objects with raw sets that a holder has not
// released yet (for tests and metrics).
func (u *Uploader) Holders() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.shared)
}

// armLocked (re)arms the pending object's cut timer to fire after d.
func (u *Uploader) armLocked(now time.Time, d time.Duration) {
	u.disarmLocked()
	u.pending.cutAt = now.Add(d)
	gen := u.timerGen
	u.timerStop = u.cfg.Clock.AfterFunc(d, func() { u.timerFired(gen) })
}

// disarmLocked stops the cut timer; a firing already under way is
// ignored (its generation is stale).
func (u *Uploader) disarmLocked() {
	if u.timerStop != nil {
		u.timerStop()
		u.timerStop = nil
	}
	u.timerGen++
}

func (u *Uploader) timerFired(gen uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if gen == u.timerGen && u.pending != nil {
		u.groupCutLocked()
	}
}

// groupCutLocked cuts the pending object, whose time has come, unless
// GroupInFlight uploads are busy: then it keeps filling (grouped) until
// an upload finishes (see UploaderConfig.GroupInFlight).
func (u *Uploader) groupCutLocked() { u.cutUnlessBusyLocked(u.cfg.GroupInFlight, &u.pending.grouped) }

// cutUnlessBusyLocked cuts the pending object if fewer than limit uploads
// are busy (in flight or queued); otherwise it sets *held, disarms the
// object's timer and lets it keep filling until an upload finishes.
func (u *Uploader) cutUnlessBusyLocked(limit int, held *bool) {
	if u.inFlight+len(u.ready) < limit {
		u.cutLocked()
		return
	}
	*held = true
	u.disarmLocked()
}

// nudgeLocked is the nudge rule: cut now (group commit permitting) if the
// token bucket has a token or the object's interval has passed, else arm
// the cut for the token.
func (u *Uploader) nudgeLocked() {
	now := u.cfg.Clock.Now()
	allowed := u.tat.Add(-time.Duration(u.cfg.CutBurst-1) * u.interval)
	if !now.Before(allowed) || !now.Before(u.pending.cutAt) {
		u.groupCutLocked()
		return
	}
	if allowed.Before(u.pending.cutAt) {
		u.armLocked(now, allowed.Sub(now)) // cut when the token comes
	}
}

// dueCutLocked cuts the pending object, whose time has come, if an upload
// slot is free; otherwise the object keeps filling and is cut when an
// upload finishes. So when the store is slow, objects grow instead of
// queueing: fewer, larger PUTs, the natural batching of a group commit.
func (u *Uploader) dueCutLocked() { u.cutUnlessBusyLocked(u.cfg.MaxInFlight, &u.pending.due) }

// Nudge says the caller finished a unit of appends (a produce request):
// the pending object is cut now if the cut rate allows, else as soon as
// it does (and never later than UploadInterval after its first byte);
// in both cases only once an upload slot is free (see dueCutLocked).
func (u *Uploader) Nudge() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil || u.closed || u.noNudge || u.pending.due || u.pending.grouped {
		return
	}
	u.nudgeLocked()
}

// NudgeAtLeast is Nudge for a size-based cut (wal.policy cost and auto):
// the caller finished a produce request, and the pending object is cut now
// if it holds at least n bytes (once an upload slot is free, see
// dueCutLocked), whatever the token bucket says. So such objects end at a
// request boundary as soon as they are large enough, instead of being cut
// short by the size cut or waiting for the interval. It reports whether it
// cut (or marked the object due).
func (u *Uploader) NudgeAtLeast(n int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if n <= 0 || u.pending == nil || u.closed || u.pending.bytes < n {
		return false
	}
	u.dueCutLocked()
	return true
}

// SetCut changes when objects are cut (wal.policy): at the latest interval
// after an object's first byte, at cutBytes (at most MaxObjectBytes), and
// on Nudge at the rate of one cut per interval unless nudge is false. An
// object being filled keeps its armed cut time unless the new interval
// makes it due sooner.
func (u *Uploader) SetCut(interval time.Duration, cutBytes int, nudge bool) {
	if interval <= 0 {
		interval = u.cfg.UploadInterval
	}
	if cutBytes <= 0 || cutBytes > u.cfg.MaxObjectBytes {
		cutBytes = u.cfg.MaxObjectBytes
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.cfg.Clock.Now()
	// The token bucket's debt was counted in old intervals: rescale it,
	// or a shorter interval would wait out the longer one's debt.
	if debt := u.tat.Sub(now); debt > 0 && interval != u.interval {
		u.tat = now.Add(time.Duration(float64(debt) * float64(interval) / float64(u.interval)))
	}
	u.interval, u.cutBytes, u.noNudge = interval, cutBytes, !nudge
	if u.pending == nil || u.closed || u.pending.due || u.pending.grouped {
		return
	}
	if u.pending.bytes >= cutBytes {
		u.cutLocked()
		return
	}
	if at := now.Add(interval); at.Before(u.pending.cutAt) {
		u.armLocked(now, interval)
	}
}

// Flush cuts the pending object now.
func (u *Uploader) Flush() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending != nil {
		u.cutLocked()
	}
}

func (u *Uploader) cutLocked() {
	u.disarmLocked()
	now := u.cfg.Clock.Now()
	if u.tat.Before(now) {
		u.tat = now
	}
	u.tat = u.tat.Add(u.interval)
	u.pending.seq = u.nextSeq
	u.nextSeq++
	u.ready = append(u.ready, u.pending)
	u.pending = nil
	signal(u.kick)
}

// run starts uploads as slots free up, until Close has drained the queue.
func (u *Uploader) run() {
	defer u.wg.Done()
	for {
		u.mu.Lock()
		for len(u.ready) > 0 && u.inFlight < u.cfg.MaxInFlight {
			obj := u.ready[0]
			u.ready = u.ready[1:]
			u.inFlight++
			u.uploads.Add(1)
			u.work <- obj // a worker is free: inFlight < MaxInFlight workers
		}
		finished := u.closed && u.pending == nil && len(u.ready) == 0
		u.mu.Unlock()
		if finished {
			return
		}
		select {
		case <-u.kick:
		case <-u.stop:
			// Close cut the pending object; keep dispatching until the
			// queue is empty.
			u.mu.Lock()
			empty := len(u.ready) == 0
			u.mu.Unlock()
			if empty {
				return
			}
			<-u.kick
		}
	}
}

func (u *Uploader) upload(obj *pendingObject) {
	defer u.uploads.Done()
	SortChunks(obj.chunks, u.cfg.ReplicaSetKey)
	bucket := u.cfg.Store.Bucket()
	key := ObjectKey(u.cfg.Cluster, u.cfg.Zone, u.cfg.BrokerID, u.cfg.Incarnation, obj.seq)
	h := Header{
		Version: Version, Cluster: u.cfg.Cluster, Zone: u.cfg.Zone, BrokerID: u.cfg.BrokerID,
		Incarnation: u.cfg.Incarnation, Sequence: obj.seq, CreatedAt: u.cfg.Clock.Now(),
	}
	res := UploadResult{Sequence: obj.seq, Bucket: bucket, Key: key, FirstByte: obj.firstByte}
	data, table, tail, err := EncodeWithTail(h, obj.chunks, obj.raw)
	if err == nil {
		res.Bytes = len(data)
		res.Pointers = make([]Pointer, len(table))
		for i, c := range table {
			res.Pointers[i] = PointerTo(bucket, key, c)
		}
		res.PutStart = time.Now()
		err = u.put(key, data)
		res.Elapsed = time.Since(res.PutStart)
	} else {
		for _, c := range obj.chunks {
			res.Pointers = append(res.Pointers, Pointer{Bucket: bucket, Key: key, Topic: c.Topic, Partition: c.Partition, BaseOffset: c.BaseOffset, LastOffset: c.LastOffset, LeaderEpoch: c.LeaderEpoch})
		}
	}
	if err != nil {
		res.Err = fmt.Errorf("wal: upload %s: %w", key, err)
	}
	if len(obj.rawCalls) > 0 {
		u.finishRaw(obj, res, tail)
	}

	u.mu.Lock()
	u.inFlight--
	u.buffered -= obj.bytes
	u.done[obj.seq] = res
	if u.pending != nil && u.pending.due {
		u.cutLocked()
	} else if u.pending != nil && u.pending.grouped {
		// Group commit: the object waited for this upload; its cut
		// follows the nudge rule (token, interval) from here.
		u.pending.grouped = false
		if u.noNudge {
			u.groupCutLocked() // its interval had passed
		} else {
			u.nudgeLocked()
		}
	}
	u.mu.Unlock()
	signal(u.kick)
	signal(u.delivered)
}

// finishRaw hands the outcome of an object with raw sets to rawDone; a
// stored one gets its two holders first (AppendRaw).
func (u *Uploader) finishRaw(obj *pendingObject, res UploadResult, tail []int64) {
	ru := RawUpload{Bucket: res.Bucket, Key: res.Key, Shared: len(obj.chunks) > 0, Err: res.Err, Elapsed: res.Elapsed,
		Calls: make([]any, len(obj.rawCalls)), Offsets: make([][]int64, len(obj.rawCalls))}
	i := 0
	for j, c := range obj.rawCalls {
		ru.Calls[j] = c.call
		if res.Err == nil {
			ru.Offsets[j] = tail[i : i+c.sets : i+c.sets]
		}
		i += c.sets
	}
	u.mu.Lock()
	if res.Err == nil {
		u.shared[res.Key] = 2
	}
	done := u.rawDone
	u.mu.Unlock()
	done(ru)
}

// putHedgeDelay is how long a PUT may take before it gets a twin (<= 0:
// never).
func (u *Uploader) putHedgeDelay() time.Duration {
	return u.putAvg.delay(u.cfg.HedgeAfter, MinPutHedgeDelay)
}

// observePut feeds a successful PUT's duration to the average.
func (u *Uploader) observePut(took time.Duration) { u.putAvg.observe(took) }

// put stores one object, hedged (HedgeAfter). The first PUT runs on the
// worker's goroutine (its stack already grown to the SDK's depth); a
// twin runs on the timer's goroutine only when it is due. put returns
// only once both have returned, so no request of this object is still
// running when its result is delivered (and the object may be deleted).
func (u *Uploader) put(key string, data []byte) error {
	delay := u.putHedgeDelay()
	start := time.Now()
	if delay <= 0 {
		err := u.cfg.Store.Put(u.ctx, key, data)
		if err == nil {
			u.observePut(time.Since(start))
		}
		return err
	}
	pctx, cancelPrimary := context.WithCancel(u.ctx)
	defer cancelPrimary()
	hctx, cancelHedge := context.WithCancel(u.ctx)
	defer cancelHedge()
	var hedgeErr error
	hedgeDone := make(chan struct{})
	timer := time.AfterFunc(delay, func() {
		defer close(hedgeDone)
		u.hedges.Add(1)
		hedgeErr = u.cfg.Store.Put(hctx, key, data)
		if hedgeErr == nil {
			cancelPrimary() // the twin won
		}
	})
	err := u.cfg.Store.Put(pctx, key, data)
	if timer.Stop() {
		// Answered before the hedge delay: no twin.
		if err == nil {
			u.observePut(time.Since(start))
		}
		return err
	}
	if err == nil {
		cancelHedge()
		<-hedgeDone
		u.observePut(time.Since(start))
		return nil
	}
	<-hedgeDone
	if hedgeErr == nil {
		u.observePut(time.Since(start))
		return nil
	}
	return err
}

// deliver calls OnUpload in sequence order and runs the breaker on the
// outcomes in that order.
func (u *Uploader) deliver() {
	defer u.wg.Done()
	for {
		u.mu.Lock()
		res, ok := u.done[u.deliverAt]
		if ok {
			delete(u.done, u.deliverAt)
			u.deliverAt++
			u.recordLocked(res)
		}
		finished := !ok && u.closed && u.pending == nil && len(u.ready) == 0 && u.inFlight == 0 && len(u.done) == 0
		u.mu.Unlock()
		if ok {
			u.cfg.OnUpload(res)
			continue
		}
		if finished {
			return
		}
		<-u.delivered
	}
}

func (u *Uploader) recordLocked(res UploadResult) {
	if res.Err == nil {
		u.stats.Objects++
		u.stats.UploadedBytes += uint64(res.Bytes)
		u.failures = 0
		u.state = stateHealthy
		return
	}
	u.stats.Failed++
	u.failures++
	if u.state == stateProbing || u.failures >= u.cfg.FailureThreshold {
		if u.state != stateDegraded {
			u.since = u.cfg.Clock.Now()
			u.armProbeLocked()
		}
		u.state = stateDegraded
	}
}

// probeTimeout bounds an idle probe's HEAD.
const probeTimeout = 5 * time.Second

// armProbeLocked arms the idle probe RetryAfter from now. Data arriving
// meanwhile makes the probe moot: Append lets an object through as the
// probe once RetryAfter has passed.
func (u *Uploader) armProbeLocked() {
	if u.closed {
		return
	}
	if u.probeStop != nil {
		u.probeStop()
	}
	u.probeStop = u.cfg.Clock.AfterFunc(u.cfg.RetryAfter, u.idleProbe)
}

// idleProbe asks the bucket for the next object's key while the uploader
// is still degraded (no data came to probe with). Any answer from the
// bucket, "not found" included, shows it reachable: the uploader takes
// data again (probing, so one failed upload makes it degraded at once).
// No answer keeps it degraded and arms the next probe; an object of data
// that came meanwhile is probing on its own. A bucket that
// answers HEADs but refuses PUTs (a policy that allows reads only) makes
// the uploader go between degraded and probing while data comes; every
// batch refused is replicated inline meanwhile, as in any degradation.
func (u *Uploader) idleProbe() {
	u.mu.Lock()
	if u.closed || u.state != stateDegraded {
		u.mu.Unlock()
		return
	}
	key := ObjectKey(u.cfg.Cluster, u.cfg.Zone, u.cfg.BrokerID, u.cfg.Incarnation, u.nextSeq)
	u.mu.Unlock()
	ctx, cancel := context.WithTimeout(u.ctx, probeTimeout)
	_, err := u.cfg.Store.Head(ctx, key)
	cancel()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.state != stateDegraded {
		return
	}
	u.stats.IdleProbes++
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		u.state = stateProbing
		return
	}
	// since stays: data arriving now still goes through as a probe.
	u.armProbeLocked()
}

// Degraded reports whether the uploader refuses data because uploads fail.
func (u *Uploader) Degraded() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state == stateDegraded
}

// Stats returns a snapshot of the counters.
func (u *Uploader) Stats() UploaderStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.stats
	s.BufferedBytes = u.buffered
	if u.pending != nil {
		s.PendingBytes = u.pending.bytes
	}
	s.InFlight = u.inFlight
	s.Hedged = u.hedges.Load()
	s.Degraded = u.state == stateDegraded
	return s
}

// Close uploads what is pending, waits for every upload and its OnUpload
// call, and stops. If ctx ends first, uploads in flight are cancelled
// (they report errors) and Close returns ctx's error after they finished.
func (u *Uploader) Close(ctx context.Context) error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return ErrClosed
	}
	u.closed = true
	if u.pending != nil {
		u.cutLocked()
	}
	if u.probeStop != nil {
		u.probeStop()
	}
	u.mu.Unlock()
	close(u.stop)
	signal(u.kick)
	signal(u.delivered)

	finished := make(chan struct{})
	go func() {
		u.wg.Wait()
		u.uploads.Wait()
		u.workers.Wait()
		close(finished)
	}()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		u.cancel()
		<-finished
		err = ctx.Err()
	}
	u.cancel()
	return err
}
