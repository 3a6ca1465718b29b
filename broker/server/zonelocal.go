package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/wal"
)

// zoneLocal is the broker's side of zone-local produce
// (protocol.ZoneLocal; docs/wal.md "Zone-local produce"): objects of
// forwarded Produce requests in this zone's WAL bucket, a pipelined
// connection per leader on the inter-broker listener for the forwarded
// requests, the leader's GETs of other brokers' objects, and the deletion
// of this broker's objects once their leaders answered.
//
// The record sets go back to back (the forwarded Produce names each
// partition's range and its CRC-32C) into the broker's next WAL object,
// after its chunks (share, wal.Uploader.AppendRaw: one PUT for the
// broker's own appends and what it forwards). While the uploader refuses
// them they get objects of their own, keys
// wal/<cluster>/<zone>/<brokerID>/zl-<incarnation>/<seq:020d>, not WAL
// objects: the "zl-" incarnation makes wal.ParseKey (and so the
// operator's sweep) skip them, while the bucket's wal/ lifecycle rule
// still covers them. They live for
// one round trip to the leader and then keep (wal.zonelocal.object.keep.ms),
// for the leaders' followers to read them (a leader points them at the
// forwarded ranges instead of uploading the records again); a broker that
// dies in between leaves them to that rule (docs/wal.md "Zone-local
// produce").
//
// Group commit (PutRecords, for objects of their own; shared ones are cut
// by the WAL policy's plan): a call that finds no forwarded PUT in flight
// starts its own at once; calls arriving while one is in flight queue,
// and go out together, as one object, when it finishes. So a busy broker
// PUTs about one object per PUT duration, however many client requests
// it forwards. A PUT slower than putSlowDelayLocked lets the queue start a
// second PUT beside it (up to maxPuts in flight), so one PUT's tail does
// not hold up every forwarded request of the broker. An object is shared
// by the calls in it: users counts, per key, the calls that have not
// called Done yet; the last one queues the key for deletion.
//
// Locks: putMu guards the queue, the calls' states and the PUT slots;
// delMu guards users and toDelete. putMu may be held while taking delMu,
// never the reverse.
type zoneLocal struct {
	log         logr.Logger
	s           *Server
	forwarding  bool
	own         objstore.Store
	stores      func(bucket string) (objstore.Store, error)
	prefix      string
	seq         atomic.Uint64
	putTimeout  time.Duration
	readTimeout time.Duration

	mu     sync.Mutex
	conns  map[int32]*ibConn // by leader ID
	closed bool

	// maxPuts (wal.zonelocal.put.concurrency) bounds forwarded PUTs in
	// flight; maxObjectBytes caps a shared object (a single call larger
	// than it gets an object of its own).
	maxPuts        int
	maxObjectBytes int
	putCtx         context.Context // cancelled by close
	putCancel      context.CancelFunc
	putWG          sync.WaitGroup
	putMu          sync.Mutex
	queue          []*zlCall // waiting for a PUT, in arrival order
	putting        int       // PUTs in flight
	lastPutStart   time.Time // of the newest PUT in flight
	putAvg         time.Duration
	slowTimer      *time.Timer // armed while the queue waits for a slow PUT
	putClosed      bool

	delMu    sync.Mutex
	users    map[string]int // by key: calls in the object not Done yet
	toDelete []zlDeletion   // in the order they became deletable
	// keep is how long an object stays once every call in it is Done
	// (0: deleted at once); set before the first request.
	keep time.Duration
	stop chan struct{}
	done chan struct{}

	// Counters (also strata_zonelocal_*): partitions this broker
	// forwarded, and partitions it appended from other brokers' objects.
	forwardedParts atomic.Int64
	appendedParts  atomic.Int64
	inlineParts    atomic.Int64
	metrics        *prometheus.CounterVec
	objects        prometheus.Counter
	objectRequests prometheus.Histogram

	// The bucket path's breaker: after a failure, forwarded records go
	// inline until outUntil (unix nanoseconds), then the bucket is tried
	// again (BucketOut, BucketFailed).
	outUntil atomic.Int64
	outFor   time.Duration

	// router chooses between the bucket and inline by cost
	// (wal.zonelocal.produce.policy, zonelocalpolicy.go).
	router *zlRouter
	gauges []prometheus.Collector

	// pool is the broker's WAL uploader, whose objects forwarded records
	// share (share; nil: objects of their own, putGroup). shared counts
	// the objects that carried this broker's own WAL chunks too.
	pool   zlPool
	nudge  func()
	shared prometheus.Counter
}

// zlPool is what zone-local produce needs of the WAL uploader to put
// forwarded records into its objects (wal.Uploader.AppendRaw).
type zlPool interface {
	AppendRaw(sets [][]byte, call any) error
	Release(keys []string) []string
}

// zlDeletion is an object whose calls are all Done, since at.
type zlDeletion struct {
	key string
	at  time.Time
}

// DefaultZoneLocalKeep is wal.zonelocal.object.keep.ms's default. A
// follower in the ISR reads a forwarded range within milliseconds of the
// leader's append (it fetches continuously, and a leader answers a
// follower's fetch at once with the pointer); the time covers a follower
// that restarts or lags for a while, and costs a bucket a few seconds
// more of the objects' bytes stored. A follower that comes later finds
// the object gone and fetches the range inline: nothing is lost, it only
// crosses zones.
const DefaultZoneLocalKeep = 30 * time.Second

// zoneLocalKeep resolves wal.zonelocal.object.keep.ms's setting (0:
// default, < 0: off).
func zoneLocalKeep(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultZoneLocalKeep
	case d < 0:
		return 0
	}
	return d
}

// KeepObjects implements protocol.ZoneLocal.
func (z *zoneLocal) KeepObjects() time.Duration { return z.keep }

// DefaultZoneLocalPutConcurrency is wal.zonelocal.put.concurrency's
// default: one PUT at a time, a second one only beside a slow PUT
// (putSlowDelayLocked).
const DefaultZoneLocalPutConcurrency = 2

// zoneLocalMaxObjectBytes caps a shared forwarded object: queued calls
// join a group while it stays at most this large.
const zoneLocalMaxObjectBytes = 4 << 20

// minZoneLocalSlowPut bounds putSlowDelayLocked from below (S3 Express's PUT
// floor is about 5 ms).
const minZoneLocalSlowPut = 10 * time.Millisecond

func newZoneLocal(s *Server, forwarding bool, inlineFor time.Duration, router *zlRouter, own objstore.Store, stores func(string) (objstore.Store, error), cluster, zone string, maxPuts int) *zoneLocal {
	if maxPuts <= 0 {
		maxPuts = DefaultZoneLocalPutConcurrency
	}
	switch {
	case inlineFor == 0:
		inlineFor = defaultZoneLocalInline
	case inlineFor < 0:
		inlineFor = 0
	}
	z := &zoneLocal{
		log: s.log.WithName("zonelocal"), s: s, forwarding: forwarding, own: own, stores: stores,
		prefix:     fmt.Sprintf("%s%s/%s/%d/zl-%d/", wal.KeyPrefix, cluster, zone, s.cfg.Broker.NodeID, time.Now().UnixNano()),
		putTimeout: 5 * time.Second, readTimeout: 5 * time.Second, outFor: inlineFor, router: router,
		maxPuts: maxPuts, maxObjectBytes: zoneLocalMaxObjectBytes,
		conns: map[int32]*ibConn{}, users: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{}),
		metrics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_zonelocal_partitions_total",
			Help: "Partitions of zone-local produce requests (wal.zonelocal.produce.enable): forwarded by this broker to their leader through an object of its zone's bucket (role=forwarded), forwarded inline because that path failed lately (role=inline), appended by this broker as leader from another broker's object (role=appended).",
		}, []string{"role"}),
		objects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_zonelocal_objects_total",
			Help: "Objects this broker PUT into its zone's bucket for zone-local produce (each holds the forwarded records of one or more client Produce requests; strata_zonelocal_object_requests).",
		}),
		shared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_zonelocal_shared_objects_total",
			Help: "Of strata_zonelocal_objects_total, the objects that also carried this broker's own WAL chunks: forwarded records and the broker's WAL uploads share objects (one PUT for both).",
		}),
		objectRequests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_zonelocal_object_requests",
			Help:    "Client Produce requests per object of zone-local produce (group commit: requests that arrive while a PUT is in flight share the next object).",
			Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64},
		}),
	}
	z.putCtx, z.putCancel = context.WithCancel(context.Background())
	if forwarding {
		z.gauges = z.pathGauges()
	}
	go z.deleteLoop()
	return z
}

// pathGauges are the gauges of the path forwarded requests take.
func (z *zoneLocal) pathGauges() []prometheus.Collector {
	var gauges []prometheus.Collector
	for _, path := range []string{zlPathBucket, zlPathInlineCost, zlPathInlineOutage} {
		gauges = append(gauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "strata_zonelocal_path",
			Help:        "1 for the path this broker's next forwarded zone-local produce takes, 0 for the others: bucket (an object of its zone's bucket), inline-cost (in the Produce to the leader, across zones, because wal.zonelocal.produce.policy=auto found an object dearer than the transfer it saves), inline-outage (in the Produce, because the bucket path failed lately; wal.zonelocal.produce.inline.ms).",
			ConstLabels: prometheus.Labels{"path": path},
		}, func() float64 {
			if z.path() == path {
				return 1
			}
			return 0
		}))
	}
	return append(gauges,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strata_zonelocal_expected_object_bytes",
			Help: "The forwarded object size wal.zonelocal.produce.policy=auto expects at the current forwarded byte rate (the bytes forwarded during one PUT), which it compares with strata_zonelocal_break_even_bytes; 0 with policy=bucket.",
		}, func() float64 {
			_, e := z.router.state()
			return e
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strata_zonelocal_break_even_bytes",
			Help: "The forwarded object size at which the bucket path of zone-local produce costs what sending its bytes across zones costs, from the price table (cost.price.*); -1 when no size does.",
		}, func() float64 {
			if z.router.breakEven == math.MaxInt64 {
				return -1
			}
			return float64(z.router.breakEven)
		}))
}

// Paths of strata_zonelocal_path.
const (
	zlPathBucket       = "bucket"
	zlPathInlineCost   = "inline-cost"
	zlPathInlineOutage = "inline-outage"
)

// path is the path the next forwarded request takes.
func (z *zoneLocal) path() string {
	switch bucket, _ := z.router.state(); {
	case z.BucketOut():
		return zlPathInlineOutage
	case !bucket:
		return zlPathInlineCost
	}
	return zlPathBucket
}

// Inline says whether a forwarded request of n bytes goes to its leaders
// inline: the bucket path failed lately, or the policy finds an object
// dearer than the transfer it saves.
func (z *zoneLocal) Inline(n int) bool {
	bucket := z.router.viaBucket(n, time.Now())
	return z.BucketOut() || !bucket
}

// collectors are the metrics to register.
func (z *zoneLocal) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{z.metrics, z.objects, z.shared, z.objectRequests}, z.gauges...)
}

func (z *zoneLocal) Forwarding() bool { return z.forwarding }

// defaultZoneLocalInline is wal.zonelocal.produce.inline.ms's default:
// long enough that a bucket outage costs one failed PUT per period, not
// one per request; short enough that a passing fault does not keep the
// records crossing zones for long.
const defaultZoneLocalInline = 10 * time.Second

// BucketOut reports whether the bucket path failed within outFor.
func (z *zoneLocal) BucketOut() bool { return time.Now().UnixNano() < z.outUntil.Load() }

// InlineFallback reports whether a failed bucket path sends the records
// inline (wal.zonelocal.produce.inline.ms > 0).
func (z *zoneLocal) InlineFallback() bool { return z.outFor > 0 }

// BucketFailed opens the breaker for outFor (logged when it opens): a
// bucket outage then costs one failed PUT (up to putTimeout) per period,
// not one per request.
func (z *zoneLocal) BucketFailed(err error) {
	if z.outFor <= 0 {
		return
	}
	until := time.Now().Add(z.outFor).UnixNano()
	if prev := z.outUntil.Swap(until); prev < time.Now().UnixNano() {
		z.log.Info("zone-local produce: the bucket path failed; forwarding records inline (across zones) for a while", "for", z.outFor, "error", err.Error())
	}
}

// ForwardedInline counts partitions forwarded inline.
func (z *zoneLocal) ForwardedInline(n int) {
	z.inlineParts.Add(int64(n))
	z.metrics.WithLabelValues("inline").Add(float64(n))
}

// InlineStats returns the partitions forwarded inline.
func (z *zoneLocal) InlineStats() int64 { return z.inlineParts.Load() }

// Stats returns the partitions forwarded and appended from objects.
func (z *zoneLocal) Stats() (forwarded, appended int64) {
	return z.forwardedParts.Load(), z.appendedParts.Load()
}

func (z *zoneLocal) Appended(n int) {
	z.appendedParts.Add(int64(n))
	z.metrics.WithLabelValues("appended").Add(float64(n))
}

// share makes forwarded records ride in the WAL uploader's objects
// (AppendRaw) instead of objects of their own: one PUT carries both the
// broker's own WAL chunks and the records it forwards, cut by the WAL
// policy's plan, nudge (replica.Manager.WALProduced) after each call as
// after a produce request (docs/wal.md "Zone-local produce"). When the
// uploader refuses (degraded, buffer full, closed), a call gets an
// object of its own as before.
func (z *zoneLocal) share(up interface {
	zlPool
	SetRawDone(func(wal.RawUpload))
}, nudge func()) {
	up.SetRawDone(z.rawDone)
	z.pool, z.nudge = up, nudge
}

// SharesWAL implements protocol.ZoneLocal.
func (z *zoneLocal) SharesWAL() bool { return z.pool != nil }

// zlCall is one PutRecords call.
type zlCall struct {
	sets  [][]byte
	crcs  []uint32
	bytes int
	state zlCallState // under putMu
	done  chan struct{}
	refs  []protocol.ZoneLocalRef // set before done is closed
	err   error
}

type zlCallState uint8

const (
	zlQueued    zlCallState = iota // waiting for a PUT
	zlWriting                      // in an object being PUT
	zlAbandoned                    // its caller's ctx ended first
	zlAnswered                     // refs or err set, done closed
)

var errZoneLocalClosed = errors.New("zone-local produce is shut down")

// PutRecords writes the sets back to back into an object, shared with
// the calls that queue beside it (group commit, above), and returns
// where each set is. A call whose ctx ends while it waits returns the
// ctx's error at once: taken out of the queue if it is still there,
// otherwise its bytes are in the object but nobody waits for them (and
// the object does not wait for its Done).
func (z *zoneLocal) PutRecords(ctx context.Context, sets [][]byte) ([]protocol.ZoneLocalRef, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &zlCall{sets: sets, crcs: make([]uint32, len(sets)), done: make(chan struct{})}
	for i, s := range sets {
		c.bytes += len(s)
		c.crcs[i] = protocol.ZoneLocalCRC(s)
	}
	z.putMu.Lock()
	if z.putClosed {
		z.putMu.Unlock()
		return nil, errZoneLocalClosed
	}
	if z.pool != nil {
		c.state = zlWriting
		z.putMu.Unlock()
		// The uploader answers through rawDone, which takes putMu.
		err := z.pool.AppendRaw(sets, c)
		z.putMu.Lock()
		if err == nil {
			z.putMu.Unlock()
			if z.nudge != nil {
				z.nudge()
			}
			return z.wait(ctx, c)
		}
		c.state = zlQueued
		if z.putClosed {
			z.putMu.Unlock()
			return nil, errZoneLocalClosed
		}
	}
	z.queue = append(z.queue, c)
	if z.putting == 0 {
		z.startLocked()
	} else {
		z.armSlowLocked()
	}
	z.putMu.Unlock()
	return z.wait(ctx, c)
}

// wait waits for c's answer or ctx's end (see PutRecords).
func (z *zoneLocal) wait(ctx context.Context, c *zlCall) ([]protocol.ZoneLocalRef, error) {
	select {
	case <-c.done:
		return c.refs, c.err
	case <-ctx.Done():
	}
	z.putMu.Lock()
	defer z.putMu.Unlock()
	switch c.state {
	case zlAnswered:
		return c.refs, c.err
	case zlQueued:
		z.queue = slices.DeleteFunc(z.queue, func(q *zlCall) bool { return q == c })
	}
	c.state = zlAbandoned
	return nil, ctx.Err()
}

// startLocked takes the queue's head, as much as fits in one object, and
// PUTs it on a new goroutine.
func (z *zoneLocal) startLocked() {
	group := z.takeLocked()
	z.putWG.Add(1)
	go z.putGroups(group)
}

// takeLocked takes a group off the queue (not empty) and a PUT slot.
func (z *zoneLocal) takeLocked() []*zlCall {
	n, size := 1, z.queue[0].bytes
	for n < len(z.queue) && size+z.queue[n].bytes <= z.maxObjectBytes {
		size += z.queue[n].bytes
		n++
	}
	group := z.queue[:n:n]
	z.queue = z.queue[n:]
	if len(z.queue) == 0 {
		z.queue = nil
	}
	for _, c := range group {
		c.state = zlWriting
	}
	z.putting++
	z.lastPutStart = time.Now()
	return group
}

// putSlowDelayLocked is how long the newest PUT in flight may run before
// the queue gets a PUT of its own beside it: twice the recent average,
// at least minZoneLocalSlowPut.
func (z *zoneLocal) putSlowDelayLocked() time.Duration {
	return max(minZoneLocalSlowPut, 2*z.putAvg)
}

// armSlowLocked arms the timer that starts the queue beside a slow PUT,
// when a slot is free and it is not armed.
func (z *zoneLocal) armSlowLocked() {
	if z.slowTimer != nil || z.putting >= z.maxPuts || len(z.queue) == 0 {
		return
	}
	wait := time.Until(z.lastPutStart.Add(z.putSlowDelayLocked()))
	z.slowTimer = time.AfterFunc(max(wait, 0), func() {
		z.putMu.Lock()
		defer z.putMu.Unlock()
		z.slowTimer = nil
		if z.putClosed || len(z.queue) == 0 || z.putting >= z.maxPuts {
			return
		}
		if time.Since(z.lastPutStart) < z.putSlowDelayLocked() {
			z.armSlowLocked() // a newer PUT started meanwhile
			return
		}
		z.startLocked()
	})
}

// putGroups PUTs group, then the queue's next groups while there are.
func (z *zoneLocal) putGroups(group []*zlCall) {
	defer z.putWG.Done()
	for group != nil {
		z.putGroup(group)
		z.putMu.Lock()
		z.putting--
		group = nil
		if len(z.queue) > 0 {
			group = z.takeLocked()
			z.armSlowLocked() // what did not fit waits for a PUT to end, or to be slow
		}
		z.putMu.Unlock()
	}
}

// putGroup writes one object with the group's sets and answers its calls.
func (z *zoneLocal) putGroup(group []*zlCall) {
	size := 0
	for _, c := range group {
		size += c.bytes
	}
	data := make([]byte, 0, size)
	key := z.prefix + fmt.Sprintf("%020d", z.seq.Add(1)-1)
	bucket := z.own.Bucket()
	refs := make([][]protocol.ZoneLocalRef, len(group))
	for i, c := range group {
		refs[i] = make([]protocol.ZoneLocalRef, len(c.sets))
		for j, s := range c.sets {
			refs[i][j] = protocol.ZoneLocalRef{Bucket: bucket, Key: key, Offset: int64(len(data)), Length: int64(len(s)), CRC: c.crcs[j]}
			data = append(data, s...)
		}
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(z.putCtx, z.putTimeout)
	err := z.own.Put(pctx, key, data)
	cancel()
	if err != nil {
		err = fmt.Errorf("put %s: %w", key, err)
	}
	z.answer(group, key, refs, err, time.Since(start))
}

// rawDone answers the calls of an object of the WAL uploader's that held
// forwarded records (share).
func (z *zoneLocal) rawDone(ru wal.RawUpload) {
	group := make([]*zlCall, len(ru.Calls))
	refs := make([][]protocol.ZoneLocalRef, len(ru.Calls))
	for i, call := range ru.Calls {
		c := call.(*zlCall)
		group[i] = c
		if ru.Err != nil {
			continue
		}
		refs[i] = make([]protocol.ZoneLocalRef, len(c.sets))
		for j, s := range c.sets {
			refs[i][j] = protocol.ZoneLocalRef{Bucket: ru.Bucket, Key: ru.Key, Offset: ru.Offsets[i][j], Length: int64(len(s)), CRC: c.crcs[j]}
		}
	}
	if ru.Err == nil && ru.Shared {
		z.shared.Inc()
	}
	z.answer(group, ru.Key, refs, ru.Err, ru.Elapsed)
}

// answer answers the calls of one object's PUT, which took took: refs
// on success (a call's own, by group index), err otherwise.
func (z *zoneLocal) answer(group []*zlCall, key string, refs [][]protocol.ZoneLocalRef, err error, took time.Duration) {
	if err == nil {
		z.objects.Inc()
		z.objectRequests.Observe(float64(len(group)))
	}
	z.putMu.Lock()
	defer z.putMu.Unlock()
	if err == nil {
		z.router.observePut(took)
		if z.putAvg == 0 {
			z.putAvg = took
		} else {
			z.putAvg = (4*z.putAvg + took) / 5
		}
	}
	parts, users := 0, 0
	for i, c := range group {
		if c.state == zlAbandoned {
			continue
		}
		if err == nil {
			c.refs = refs[i]
			parts += len(c.sets)
			users++
		}
		c.err = err
		c.state = zlAnswered
	}
	if err == nil {
		// Before any caller can call Done.
		z.delMu.Lock()
		if users > 0 {
			z.users[key] = users
		} else {
			z.toDelete = append(z.toDelete, zlDeletion{key, time.Now()}) // every caller left
		}
		z.delMu.Unlock()
		z.forwardedParts.Add(int64(parts))
		z.metrics.WithLabelValues("forwarded").Add(float64(parts))
	}
	for _, c := range group {
		if c.state == zlAnswered {
			close(c.done)
		}
	}
}

// Read GETs the refs, one GET per object covering its refs.
func (z *zoneLocal) Read(ctx context.Context, refs []protocol.ZoneLocalRef) ([][]byte, []error) {
	out := make([][]byte, len(refs))
	errs := make([]error, len(refs))
	type object struct{ bucket, key string }
	groups := map[object][]int{}
	var order []object
	for i, r := range refs {
		o := object{r.Bucket, r.Key}
		if _, ok := groups[o]; !ok {
			order = append(order, o)
		}
		groups[o] = append(groups[o], i)
	}
	rctx, cancel := context.WithTimeout(ctx, z.readTimeout)
	defer cancel()
	for _, o := range order {
		idx := groups[o]
		lo, hi := refs[idx[0]].Offset, int64(0)
		for _, i := range idx {
			lo = min(lo, refs[i].Offset)
			hi = max(hi, refs[i].Offset+refs[i].Length)
		}
		var data []byte
		st, err := z.stores(o.bucket)
		if err == nil {
			data, err = st.Get(rctx, o.key, lo, hi-lo)
		}
		for _, i := range idx {
			switch {
			case err != nil:
				errs[i] = err
			case int64(len(data)) < refs[i].Offset-lo+refs[i].Length:
				errs[i] = fmt.Errorf("object shorter (%d bytes from %d) than the range %d+%d", len(data), lo, refs[i].Offset, refs[i].Length)
			default:
				out[i] = data[refs[i].Offset-lo : refs[i].Offset-lo+refs[i].Length : refs[i].Offset-lo+refs[i].Length]
			}
		}
	}
	return out, errs
}

// Done tells that the caller of PutRecords that got refs is done with
// them; an object is queued for deletion (batched, deleteLoop) once
// every caller in it is, and deleted keep later.
func (z *zoneLocal) Done(refs []protocol.ZoneLocalRef) {
	z.delMu.Lock()
	defer z.delMu.Unlock()
	for i, r := range refs {
		if slices.ContainsFunc(refs[:i], func(o protocol.ZoneLocalRef) bool { return o.Key == r.Key }) {
			continue
		}
		n, ok := z.users[r.Key]
		switch {
		case !ok:
			// Not a key of PutRecords's, or already released.
		case n > 1:
			z.users[r.Key] = n - 1
		default:
			delete(z.users, r.Key)
			z.toDelete = append(z.toDelete, zlDeletion{r.Key, time.Now()})
		}
	}
}

func (z *zoneLocal) deleteLoop() {
	defer close(z.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-z.stop:
			// Shutting down: what followers have not read yet they
			// fetch inline.
			z.deleteNow(time.Time{})
			return
		case now := <-t.C:
			z.deleteNow(now)
		}
	}
}

// deleteNow deletes the objects Done keep before now (every one: zero
// now).
func (z *zoneLocal) deleteNow(now time.Time) {
	z.delMu.Lock()
	n := len(z.toDelete)
	if !now.IsZero() {
		// In time order: appended under delMu with the time of then.
		n = 0
		for n < len(z.toDelete) && !z.toDelete[n].at.After(now.Add(-z.keep)) {
			n++
		}
	}
	keys := make([]string, n)
	for i, d := range z.toDelete[:n] {
		keys[i] = d.key
	}
	z.toDelete = slices.Delete(z.toDelete, 0, n)
	z.delMu.Unlock()
	if z.pool != nil {
		// A shared object goes when the leader's deletion lets it go too.
		keys = z.pool.Release(keys)
	}
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := objstore.DeleteAll(ctx, z.own, keys); err != nil {
		z.log.Info("deleting forwarded objects failed; the bucket's lifecycle rule removes them", "objects", len(keys), "error", err.Error())
	}
}

// Send writes build's request to broker id on this broker's connection
// to it, telling build what that connection learnt of the broker's
// forms of forwarded records.
func (z *zoneLocal) Send(ctx context.Context, id int32, build func(compact bool) kmsg.Request) (func(context.Context) (kmsg.Response, error), error) {
	c, err := z.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	call, err := c.send(build(c.compact))
	if err != nil {
		return nil, err
	}
	return call.wait, nil
}

// Forward sends req to broker id and waits for its answer.
func (z *zoneLocal) Forward(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	wait, err := z.Send(ctx, id, func(bool) kmsg.Request { return req })
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// conn returns the live connection to broker id, dialing one when there
// is none or the broker's address changed.
func (z *zoneLocal) conn(ctx context.Context, id int32) (*ibConn, error) {
	ib, kp := z.s.interBroker()
	addr := ""
	for _, bi := range z.s.broker.BrokersOn(ib.Name) {
		if bi.ID == id {
			addr = net.JoinHostPort(bi.Host, strconv.Itoa(int(bi.Port)))
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("broker %d is not live", id)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		return nil, errZoneLocalClosed
	}
	if c := z.conns[id]; c != nil {
		if c.addr == addr && c.broken() == nil {
			return c, nil
		}
		c.close(errors.New("replaced"))
		delete(z.conns, id)
	}
	// Dialing under the lock keeps the order of this broker's sends to
	// the leader; it is bounded and rare (a new or restarted leader).
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := secureDial(nil, ib, kp, z.s.cfg.Security.InterBroker)(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial broker %d at %s: %w", id, addr, err)
	}
	clientID := fmt.Sprintf("%s%d,%s%s", protocol.BrokerClientIDPrefix, z.s.cfg.Broker.NodeID, protocol.ClientIDZonePrefix, z.s.cfg.Broker.Rack)
	c := newIBConn(nc, addr, clientID)
	compact, err := c.readsCompactRefs(dctx)
	if err != nil {
		c.close(err)
		return nil, fmt.Errorf("broker %d at %s: %w", id, addr, err)
	}
	c.compact = compact
	z.conns[id] = c
	return c, nil
}

// readsCompactRefs asks the broker (ApiVersions) whether it reads the
// second form of forwarded records (protocol.TagZoneLocalForms): an
// older broker, mid rolling upgrade, is sent the first.
func (c *ibConn) readsCompactRefs(ctx context.Context) (bool, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-broker", "1"
	call, err := c.send(req)
	if err != nil {
		return false, err
	}
	kresp, err := call.wait(ctx)
	if err != nil {
		return false, fmt.Errorf("ApiVersions: %w", err)
	}
	resp := kresp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return false, fmt.Errorf("ApiVersions: %w", err)
	}
	forms := 0
	resp.UnknownTags.Each(func(t uint32, v []byte) {
		if t == protocol.TagZoneLocalForms && len(v) == 1 {
			forms = int(v[0])
		}
	})
	return forms >= protocol.ZoneLocalFormsRead, nil
}

func (z *zoneLocal) close() {
	z.mu.Lock()
	z.closed = true
	for id, c := range z.conns {
		c.close(errors.New("shutting down"))
		delete(z.conns, id)
	}
	z.mu.Unlock()
	z.putMu.Lock()
	z.putClosed = true
	if z.slowTimer != nil {
		z.slowTimer.Stop()
		z.slowTimer = nil
	}
	z.putMu.Unlock()
	z.putCancel() // the PUTs in flight and queued fail at once
	z.putWG.Wait()
	close(z.stop)
	<-z.done
}

// ibConn is a pipelined Kafka client connection: requests are written in
// the order send is called, answers are read in that order by one reader
// goroutine. The leader appends a connection's produce requests in the
// order they arrive, which is how a client's ordering (idempotent
// sequences) survives the hop.
type ibConn struct {
	nc   net.Conn
	addr string
	f    *kmsg.RequestFormatter
	// compact: the broker reads the second form of forwarded records
	// (set once, before the connection is shared).
	compact bool

	wmu     sync.Mutex // write order: corr, pending and the write together
	corr    int32
	pmu     sync.Mutex
	pending []*ibCall
	err     error // set once broken (under pmu)
}

type ibCall struct {
	corr int32
	req  kmsg.Request
	done chan struct{}
	resp kmsg.Response
	err  error
}

func (c *ibCall) wait(ctx context.Context) (kmsg.Response, error) {
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func newIBConn(nc net.Conn, addr, clientID string) *ibConn {
	c := &ibConn{nc: nc, addr: addr, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	go c.readLoop()
	return c
}

func (c *ibConn) broken() error {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.err
}

func (c *ibConn) send(req kmsg.Request) (*ibCall, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.corr++
	call := &ibCall{corr: c.corr, req: req, done: make(chan struct{})}
	c.pmu.Lock()
	if c.err != nil {
		err := c.err
		c.pmu.Unlock()
		return nil, err
	}
	c.pending = append(c.pending, call)
	c.pmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(c.f.AppendRequest(nil, req, call.corr)); err != nil {
		c.close(fmt.Errorf("write: %w", err))
		return nil, err
	}
	return call, nil
}

func (c *ibConn) readLoop() {
	rd := bufio.NewReader(c.nc)
	for {
		var size [4]byte
		if _, err := io.ReadFull(rd, size[:]); err != nil {
			c.close(fmt.Errorf("read: %w", err))
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n < 4 || n > 64<<20 {
			c.close(fmt.Errorf("bad response size %d", n))
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(rd, body); err != nil {
			c.close(fmt.Errorf("read: %w", err))
			return
		}
		c.pmu.Lock()
		if len(c.pending) == 0 {
			c.pmu.Unlock()
			c.close(errors.New("response without a request"))
			return
		}
		call := c.pending[0]
		c.pending = c.pending[1:]
		c.pmu.Unlock()
		if corr := int32(binary.BigEndian.Uint32(body)); corr != call.corr {
			call.err = fmt.Errorf("response correlation ID %d, want %d", corr, call.corr)
			close(call.done)
			c.close(call.err)
			return
		}
		b := body[4:]
		var err error
		if call.req.IsFlexible() && call.req.Key() != kmsg.ApiVersions.Int16() {
			// ApiVersions answers with a v0 header at every version.
			b, err = skipHeaderTags(b)
		}
		if err == nil {
			resp := call.req.ResponseKind()
			resp.SetVersion(call.req.GetVersion())
			if err = resp.ReadFrom(b); err == nil {
				call.resp = resp
			}
		}
		call.err = err
		close(call.done)
	}
}

// close breaks the connection: pending calls fail with err.
func (c *ibConn) close(err error) {
	c.pmu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("connection to %s: %w", c.addr, err)
	}
	pending := c.pending
	c.pending = nil
	err = c.err
	c.pmu.Unlock()
	_ = c.nc.Close()
	for _, call := range pending {
		call.err = err
		close(call.done)
	}
}

var errBadHeaderTags = errors.New("malformed tagged fields in response header")

// skipHeaderTags skips a flexible response header's tagged fields.
func skipHeaderTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errBadHeaderTags
	}
	b = b[l:]
	for range n {
		_, l := binary.Uvarint(b)
		if l <= 0 {
			return nil, errBadHeaderTags
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errBadHeaderTags
		}
		b = b[l+int(size):]
	}
	return b, nil
}
