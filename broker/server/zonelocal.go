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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/wal"
)

// zoneLocal is the broker's side of zone-local produce
// (protocol.ZoneLocal; docs/wal.md "Zone-local produce"): one object per
// forwarded Produce in this zone's WAL bucket, a pipelined connection per
// leader on the inter-broker listener for the forwarded requests, the
// leader's GETs of other brokers' objects, and the deletion of this
// broker's objects once their leaders answered.
//
// Objects are keys wal/<cluster>/<zone>/<brokerID>/zl-<incarnation>/<seq:020d>
// holding the request's record sets back to back (the forwarded Produce
// names each partition's range and its CRC-32C), not WAL objects: the
// "zl-" incarnation makes wal.ParseKey (and so the operator's sweep) skip
// them, while the bucket's wal/ lifecycle rule still covers them. They
// live for one round trip to the leader; a broker that dies in between
// leaves them to that rule (docs/wal.md "Zone-local produce").
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

	delMu    sync.Mutex
	toDelete []string
	stop     chan struct{}
	done     chan struct{}

	// Counters (also strata_zonelocal_*): partitions this broker
	// forwarded, and partitions it appended from other brokers' objects.
	forwardedParts atomic.Int64
	appendedParts  atomic.Int64
	inlineParts    atomic.Int64
	metrics        *prometheus.CounterVec

	// The bucket path's breaker: after a failure, forwarded records go
	// inline until outUntil (unix nanoseconds), then the bucket is tried
	// again (BucketOut, BucketFailed).
	outUntil atomic.Int64
	outFor   time.Duration

	// router chooses between the bucket and inline by cost
	// (wal.zonelocal.produce.policy, zonelocalpolicy.go).
	router *zlRouter
	gauges []prometheus.Collector
}

func newZoneLocal(s *Server, forwarding bool, inlineFor time.Duration, router *zlRouter, own objstore.Store, stores func(string) (objstore.Store, error), cluster, zone string) *zoneLocal {
	switch {
	case inlineFor == 0:
		inlineFor = defaultZoneLocalInline
	case inlineFor < 0:
		inlineFor = 0
	}
	z := &zoneLocal{
		log: s.log.WithName("zonelocal"), s: s, forwarding: forwarding, own: own, stores: stores,
		prefix:     fmt.Sprintf("%s%s/%s/%d/zl-%d/", wal.KeyPrefix, cluster, zone, s.cfg.Broker.NodeID, time.Now().UnixNano()),
		putTimeout: 5 * time.Second, readTimeout: 5 * time.Second, outFor: inlineFor,
		conns: map[int32]*ibConn{}, stop: make(chan struct{}), done: make(chan struct{}),
		metrics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_zonelocal_partitions_total",
			Help: "Partitions of zone-local produce requests (wal.zonelocal.produce.enable): forwarded by this broker to their leader through an object of its zone's bucket (role=forwarded), forwarded inline because that path failed lately (role=inline), appended by this broker as leader from another broker's object (role=appended).",
		}, []string{"role"}),
	}
	z.router = router
	if !forwarding {
		go z.deleteLoop()
		return z
	}
	for _, path := range []string{zlPathBucket, zlPathInlineCost, zlPathInlineOutage} {
		z.gauges = append(z.gauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
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
	z.gauges = append(z.gauges,
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
	go z.deleteLoop()
	return z
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

// collectors returns the zone-local metrics.
func (z *zoneLocal) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{z.metrics}, z.gauges...)
}

// Inline says whether a forwarded request of n bytes goes to its leaders
// inline: the bucket path failed lately, or the policy finds an object
// dearer than the transfer it saves.
func (z *zoneLocal) Inline(n int) bool {
	bucket := z.router.viaBucket(n, time.Now())
	return z.BucketOut() || !bucket
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

// PutRecords writes one object with the sets back to back.
func (z *zoneLocal) PutRecords(ctx context.Context, sets [][]byte) ([]protocol.ZoneLocalRef, error) {
	size := 0
	for _, s := range sets {
		size += len(s)
	}
	data := make([]byte, 0, size)
	refs := make([]protocol.ZoneLocalRef, len(sets))
	key := z.prefix + fmt.Sprintf("%020d", z.seq.Add(1)-1)
	for i, s := range sets {
		refs[i] = protocol.ZoneLocalRef{Bucket: z.own.Bucket(), Key: key, Offset: int64(len(data)), Length: int64(len(s)), CRC: protocol.ZoneLocalCRC(s)}
		data = append(data, s...)
	}
	pctx, cancel := context.WithTimeout(ctx, z.putTimeout)
	defer cancel()
	start := time.Now()
	if err := z.own.Put(pctx, key, data); err != nil {
		return nil, fmt.Errorf("put %s: %w", key, err)
	}
	z.router.observePut(time.Since(start))
	z.forwardedParts.Add(int64(len(sets)))
	z.metrics.WithLabelValues("forwarded").Add(float64(len(sets)))
	return refs, nil
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

// Done queues the refs' objects for deletion (batched, deleteLoop).
func (z *zoneLocal) Done(refs []protocol.ZoneLocalRef) {
	if len(refs) == 0 {
		return
	}
	z.delMu.Lock()
	z.toDelete = append(z.toDelete, refs[0].Key)
	z.delMu.Unlock()
}

func (z *zoneLocal) deleteLoop() {
	defer close(z.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-z.stop:
			z.deleteNow()
			return
		case <-t.C:
			z.deleteNow()
		}
	}
}

func (z *zoneLocal) deleteNow() {
	z.delMu.Lock()
	keys := z.toDelete
	z.toDelete = nil
	z.delMu.Unlock()
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := objstore.DeleteAll(ctx, z.own, keys); err != nil {
		z.log.Info("deleting forwarded objects failed; the bucket's lifecycle rule removes them", "objects", len(keys), "error", err.Error())
	}
}

// Send writes req to broker id on this broker's connection to it.
func (z *zoneLocal) Send(ctx context.Context, id int32, req kmsg.Request) (func(context.Context) (kmsg.Response, error), error) {
	c, err := z.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	call, err := c.send(req)
	if err != nil {
		return nil, err
	}
	return call.wait, nil
}

// Forward sends req to broker id and waits for its answer.
func (z *zoneLocal) Forward(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	wait, err := z.Send(ctx, id, req)
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
		return nil, errors.New("zone-local produce is shut down")
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
	z.conns[id] = c
	return c, nil
}

func (z *zoneLocal) close() {
	z.mu.Lock()
	z.closed = true
	for id, c := range z.conns {
		c.close(errors.New("shutting down"))
		delete(z.conns, id)
	}
	z.mu.Unlock()
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
		if call.req.IsFlexible() {
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
