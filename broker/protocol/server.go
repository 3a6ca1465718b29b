package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/traffic"
)

// Observer receives per-request figures (for metrics). Implementations must
// be safe for concurrent use.
type Observer interface {
	ConnOpened()
	ConnClosed()
	// RequestStarted is called when a handler starts; Request follows when
	// it is done.
	RequestStarted(key int16)
	// Request is called once per handled request; bytesOut is 0 when no
	// response was sent.
	Request(key, version int16, bytesIn, bytesOut int, elapsed time.Duration, failed bool)
}

// Config configures a Server.
type Config struct {
	// Env is handed to every handler.
	Env *Env
	// MaxRequestBytes bounds a request frame (socket.request.max.bytes);
	// 0 means DefaultMaxRequestBytes.
	MaxRequestBytes int32
	// MaxNonProduceRequestBytes bounds frames of every API but Produce;
	// 0 means DefaultMaxNonProduceRequestBytes. Decoding multiplies the
	// size of requests made of many tiny array elements (up to ~20x in
	// memory), and only Produce has a reason to be large.
	MaxNonProduceRequestBytes int32
	// MaxInflightRequestMemory bounds the estimated memory of requests
	// read but not yet handled, across all connections (frame size times
	// the worst decode amplification), taken before a frame is allocated;
	// readers wait for room, fairly between connections (budget.go). A parked long poll gives
	// its share back when it parks (Request.ReleaseMemory). 0 means
	// DefaultMaxInflightRequestMemory.
	MaxInflightRequestMemory int64
	// Connection limits (connlimits.go). MaxConnections is
	// max.connections (0: DefaultMaxConnections); MaxConnectionsPerListener
	// listener.name.<l>.max.connections by lower-case listener name;
	// MaxConnectionsPerIP max.connections.per.ip (0:
	// DefaultMaxConnectionsPerIP, -1: unlimited) and
	// MaxConnectionsPerIPOverrides max.connections.per.ip.overrides by
	// address (CanonicalIP); InterBrokerListener the listener whose
	// connections may take the reserved slots; MaxConnectionCreationRate
	// and MaxConnectionCreationRatePerIP max.connection.creation.rate(.per.ip)
	// in connections per second (0: unlimited). A connection over any is
	// closed at accept.
	MaxConnections                 int
	MaxConnectionsPerListener      map[string]int
	MaxConnectionsPerIP            int
	MaxConnectionsPerIPOverrides   map[string]int
	InterBrokerListener            string
	MaxConnectionCreationRate      float64
	MaxConnectionCreationRatePerIP float64
	// IPConnectionCreationRate, if set, returns the connection_creation_rate
	// client quota (KIP-612's ip entity, AlterClientQuotas) of a client
	// address (CanonicalIP form): when ok, it replaces
	// MaxConnectionCreationRatePerIP for that address, and 0 refuses
	// every new connection from it. Called at each accept.
	IPConnectionCreationRate func(ip string) (rate float64, ok bool)
	// AuthenticationTimeout is connections.authentication.timeout.ms: a
	// new connection that has not finished its TLS handshake and SASL
	// authentication (SASL listeners), or sent its first complete request
	// (other listeners), by then is closed. 0: DefaultAuthenticationTimeout.
	AuthenticationTimeout time.Duration
	// IdleTimeout closes a connection that sends no request for this long
	// while none of its requests is being handled, and one that does not
	// read a response for this long (connections.max.idle.ms); 0 disables.
	IdleTimeout time.Duration
	// Observer may be nil.
	Observer Observer
	// Traffic counts request and response bytes per data path and peer
	// zone for the requests whose handler classified them
	// (Request.SetTraffic); nil disables.
	Traffic *traffic.Counter
	// Log receives connection-level log lines.
	Log logr.Logger
}

// Server serves the Kafka protocol on any number of listeners.
//
// Every connection has three goroutines: a reader that decodes frames, a
// handler loop that serves the connection's requests one at a time in
// order, and a writer. Server.mu guards listeners, conns and closing.
type Server struct {
	cfg Config

	// baseCtx is the parent of every handler context; it is cancelled when
	// Shutdown starts so that long polls answer at once.
	baseCtx    context.Context
	cancelBase context.CancelFunc

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	// Connection limit state (connlimits.go): admitted connections per
	// client IP and per lower-case listener name, creation rates.
	perIP       map[string]int
	perListener map[string]int
	ipRates     map[string]*tokenBucket
	rate        tokenBucket
	closing     bool
	// closed mirrors closing for lock-free reads on the request path.
	closed atomic.Bool

	connWG sync.WaitGroup
	nextID atomic.Uint64
	memory *budget
	// encodeSlots bound the large responses encoded at once (limits.go).
	encodeSlots chan struct{}
}

// NewServer returns a server; call Serve for each listener.
func NewServer(cfg Config) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxInflightRequestMemory <= 0 {
		cfg.MaxInflightRequestMemory = DefaultMaxInflightRequestMemory
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	switch {
	case cfg.MaxConnectionsPerIP == 0:
		cfg.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	case cfg.MaxConnectionsPerIP < 0:
		cfg.MaxConnectionsPerIP = -1
	}
	if cfg.MaxNonProduceRequestBytes <= 0 {
		cfg.MaxNonProduceRequestBytes = min(DefaultMaxNonProduceRequestBytes, cfg.MaxRequestBytes)
	}
	if cfg.Env == nil {
		cfg.Env = &Env{}
	}
	if cfg.Env.Log.GetSink() == nil {
		cfg.Env.Log = cfg.Log
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:         cfg,
		baseCtx:     ctx,
		cancelBase:  cancel,
		listeners:   map[net.Listener]struct{}{},
		conns:       map[*conn]struct{}{},
		perIP:       map[string]int{},
		perListener: map[string]int{},
		ipRates:     map[string]*tokenBucket{},
		memory:      newBudget(cfg.MaxInflightRequestMemory),
		encodeSlots: newEncodeSlots(),
	}
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("protocol: server closed")

// Serve accepts connections on l until Shutdown or Close. It always returns
// a non-nil error, ErrServerClosed after a shutdown.
func (s *Server) Serve(l net.Listener) error { return s.ServeListener(l, Listener{}) }

// ServeListener is Serve for a listener with security settings: l is
// already wrapped in TLS (tls.NewListener) for SSL and SASL_SSL listeners.
func (s *Server) ServeListener(l net.Listener, li Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept: %w", err)
			}
			// Out of file descriptors and the like: never give up the
			// listener; back off as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.cfg.Log.Error(err, "accept failed; retrying", "backoff", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.startConn(nc, li)
	}
}

func (s *Server) startConn(nc net.Conn, li Listener) {
	ctx, cancel := context.WithCancel(s.baseCtx)
	c := &conn{
		srv:    s,
		nc:     nc,
		ctx:    ctx,
		cancel: cancel,
		info:   ClientInfo{ConnID: s.nextID.Add(1), Remote: nc.RemoteAddr(), rack: new(atomic.Pointer[string]), walSaidInline: new(atomic.Bool), zoneLocal: &zlStreams{}, Listener: li.Name, session: newSession(li)},
		out:    newUnwritten(),
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		cancel()
		c.closeSocket() // a reset: see closeSocket
		return
	}
	if limit := s.admitConnLocked(nc.RemoteAddr(), li.Name, time.Now()); limit != "" {
		s.mu.Unlock()
		// Counted before the close, so that whoever sees the close sees
		// the count.
		s.connRefused(li.Name, limit)
		cancel()
		c.refused.Store(true)
		c.closeSocket()
		s.cfg.Log.V(1).Info("connection refused", "remote", nc.RemoteAddr().String(), "listener", li.Name, "limit", limit)
		return
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	if o := s.cfg.Observer; o != nil {
		o.ConnOpened()
	}
	go c.serve()
}

// Shutdown stops accepting connections, stops reading new requests, lets
// every connection finish the requests it has already read (long polls are
// told to answer now) and write their responses, then closes them. If ctx
// ends first, the remaining connections are closed hard.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.closed.Store(true)
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		// Unblock the reader; requests already read are still served.
		_ = c.nc.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	s.cancelBase()

	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close closes every listener and connection at once and waits for the
// connection goroutines to end.
func (s *Server) Close() {
	s.mu.Lock()
	s.closing = true
	s.closed.Store(true)
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancelBase()
	s.connWG.Wait()
}

// conn is one client connection.
type conn struct {
	srv    *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	info   ClientInfo
	// pending counts requests read and not yet handled; a connection is
	// only idle when it is zero.
	pending atomic.Int64
	// lastAnswered is when the last response was handed to the writer
	// (unix nanoseconds): idleness counts from it, not from the read.
	lastAnswered atomic.Int64
	// out counts responses encoded and not yet written (limits.go).
	out *unwritten
	// firstDeadline, while the connection's first request is being read
	// (listeners without SASL), is when connections.authentication.timeout.ms
	// ends: no frame deadline goes past it. Only the reader uses it.
	firstDeadline time.Time
	// dead: the peer closed the connection or a write failed, so no
	// response can reach it; requests already read other than Produce
	// (acks=0 batches sent before a close must be appended) are dropped
	// instead of handled (each unread Fetch would read up to
	// fetch.max.bytes for nothing).
	dead atomic.Bool
	// used: the reader has read a request other than ApiVersions, which
	// the connection answers before it closes (closeSocket).
	used atomic.Bool
	// refused: a limit closes the connection (a connection limit at
	// accept, connections.authentication.timeout.ms); closeSocket resets it.
	refused atomic.Bool
}

// refuse counts a connection closed by limit and marks it to be reset
// when its socket closes.
func (c *conn) refuse(limit string) {
	c.refused.Store(true)
	c.srv.connRefused(c.info.Listener, limit)
}

// closeSocket closes the connection. A connection that a graceful
// shutdown closes before it read anything but ApiVersions is reset
// (SO_LINGER 0) instead of closed in order: a client that sent its first
// real request just as the broker stopped reading then reads "connection
// reset", which every client retries, instead of an orderly close on its
// first request, which franz-go reads as a TLS or SASL misconfiguration
// and fails the producer's buffered records with (ErrFirstReadEOF; seen
// as 2,000 lost produces across a restart during InitProducerID). Nothing
// but an ApiVersions response can be in its send buffer, which the client
// asks for again on its next connection. A connection that answered real
// requests closes in order, after its responses.
//
// A connection a limit refuses (max.connections, the per-listener and
// per-address caps, the creation rates, connections.authentication.timeout.ms)
// is reset too, for the same reason: the refusal means "not now", and an
// orderly close on the first request reads to franz-go as a
// misconfiguration (ErrFirstReadEOF, not retried) where a reset is a
// network failure it retries after its backoff.
func (c *conn) closeSocket() {
	if c.refused.Load() || c.srv.isClosing() && !c.used.Load() {
		nc := c.nc
		if tc, ok := nc.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
			nc = tc.NetConn()
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	_ = c.nc.Close()
}

// inbound is one request read by the reader.
type inbound struct {
	req     *Request
	size    int
	reject  bool // ApiVersions with an unsupported version
	started time.Time
}

func (c *conn) log() logr.Logger {
	return c.srv.cfg.Log.WithValues("conn", c.info.ConnID, "remote", c.info.Remote.String())
}

func (c *conn) serve() {
	defer c.srv.connWG.Done()
	defer func() {
		c.srv.mu.Lock()
		delete(c.srv.conns, c)
		c.srv.releaseConnLocked(c.info.Remote, c.info.Listener)
		c.srv.mu.Unlock()
		if o := c.srv.cfg.Observer; o != nil {
			o.ConnClosed()
		}
	}()
	defer c.cancel()
	defer c.closeSocket()
	if !c.establish() { // TLS handshake, SASL (sasl.go)
		return
	}

	requests := make(chan inbound, 4)
	frames := make(chan []byte, 4)
	readerDone := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(requests)
		c.read(requests)
	}()
	go func() {
		defer close(writerDone)
		c.write(frames)
	}()

	c.handle(requests, frames)
	// Let the writer flush the responses already queued, then close the
	// socket, which also unblocks a reader waiting for the next request.
	close(frames)
	<-writerDone
	c.closeSocket()
	c.cancel() // unblocks a reader waiting for memory
	for item := range requests {
		item.req.mem.release()
	}
	<-readerDone
}

// read decodes frames until the connection fails or a request is bad.
func (c *conn) read(out chan<- inbound) {
	idle := c.srv.cfg.IdleTimeout
	fr := &frameStart{c: c} // one per connection: no allocation per frame
	// Until its first complete request, a connection of a listener without
	// SASL (where establish bounded the authentication) has
	// connections.authentication.timeout.ms, not the idle timeout.
	first := c.info.session == nil || !c.info.session.listener.SASL
	for {
		wait := idle
		if first {
			wait = c.srv.authenticationTimeout()
			if idle > 0 {
				wait = min(wait, idle)
			}
		}
		fr.timed = wait > 0
		c.firstDeadline = time.Time{}
		if first {
			// The frame may take the whole authentication timeout once it
			// started, even when the idle timeout is shorter
			// (frameStart).
			c.firstDeadline = time.Now().Add(c.srv.authenticationTimeout())
		}
		if wait > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(wait))
			// Checked after setting the deadline: Shutdown sets closing
			// before it moves the deadline to now, so one of the two wins.
			if c.srv.isClosing() {
				return
			}
		}
		// A fresh buffer per frame: the decoded request aliases it (Produce
		// record batches are appended to the log from it without a copy).
		// Its size and key are checked, and its memory taken from the
		// budget, before it is allocated.
		var mem *memHold
		fr.started = false
		frame, err := readFrame(fr, c.srv.cfg.MaxRequestBytes, c.checkFrame, func(key int16, size int32) (err error) {
			mem, err = c.admitFrame(key, size)
			return err
		})
		if errors.Is(err, errIdle) && !c.srv.isClosing() {
			if first {
				c.log().V(1).Info("closing connection: no request in time", "timeout", wait)
				c.refuse(ClosedAuthenticationTimeout)
				c.cancel()
				return
			}
			if c.pending.Load() > 0 || time.Since(time.Unix(0, c.lastAnswered.Load())) < idle {
				// A long poll or group join is still being served, or one
				// was answered less than idle ago (the deadline was set
				// while it was pending): not idle yet.
				continue
			}
			c.log().V(1).Info("closing idle connection", "idle", idle)
			c.cancel()
			return
		}
		if err != nil {
			mem.release()
			if first && errors.Is(err, os.ErrDeadlineExceeded) && !c.srv.isClosing() {
				c.log().V(1).Info("closing connection: first request not complete in time", "timeout", wait)
				c.refuse(ClosedAuthenticationTimeout)
			}
			c.readFailed(err)
			return
		}
		first = false
		if idle <= 0 {
			// Drop the admitted frame's deadline (admitFrame).
			_ = c.nc.SetReadDeadline(time.Time{})
			if c.srv.isClosing() {
				_ = c.nc.SetReadDeadline(time.Now())
			}
		}
		started := time.Now()
		h, msg, err := decodeRequest(frame, false)
		if errors.Is(err, ErrUnsupportedVersion) && h.Key == kmsg.ApiVersions.Int16() {
			c.pending.Add(1)
			out <- inbound{req: &Request{Header: h, Client: c.info, Env: c.srv.cfg.Env, mem: mem, size: len(frame) + 4}, size: len(frame) + 4, reject: true, started: started}
			continue
		}
		if err != nil {
			mem.release()
			c.log().Info("closing connection: bad request", "key", h.Key, "version", h.Version, "correlationID", h.CorrelationID, "err", err.Error())
			c.cancel()
			return
		}
		if h.ClientID != nil && *h.ClientID != c.info.ClientID {
			c.info.ClientID = *h.ClientID
			// A producer never sends Fetch, so its zone can only come from
			// the client ID convention (ClientIDZone).
			c.info.SetRack(ClientIDZone(*h.ClientID))
		}
		if h.Key != kmsg.ApiVersions.Int16() {
			c.used.Store(true)
		}
		c.pending.Add(1)
		out <- inbound{req: &Request{Header: h, Msg: msg, Client: c.info, Env: c.srv.cfg.Env, mem: mem, size: len(frame) + 4}, size: len(frame) + 4, started: started}
	}
}

func (s *Server) isClosing() bool { return s.closed.Load() }

// capFirst caps a read deadline at firstDeadline, if set.
func (c *conn) capFirst(d time.Time) time.Time {
	if !c.firstDeadline.IsZero() && c.firstDeadline.Before(d) {
		return c.firstDeadline
	}
	return d
}

// frameStart reads a frame from the connection and, at its first bytes,
// gives the rest of the frame's header frameGrace: the idle deadline only
// decides whether a frame comes at all. (Without it, a frame whose first
// bytes arrived just before the idle deadline had its size read and its
// API key read fail after it: "request frame not received in time" on a
// client that sent its request at once.) admitFrame then sets the body's
// deadline from the frame's size.
type frameStart struct {
	c       *conn
	started bool
	timed   bool // the frame has a deadline to extend
}

func (f *frameStart) Read(p []byte) (int, error) {
	n, err := f.c.nc.Read(p)
	if n > 0 && !f.started {
		f.started = true
		if f.timed {
			_ = f.c.nc.SetReadDeadline(f.c.capFirst(time.Now().Add(frameGrace)))
			if f.c.srv.isClosing() {
				// Shutdown moved the deadline to now before this one.
				_ = f.c.nc.SetReadDeadline(time.Now())
			}
		}
	}
	return n, err
}

func (c *conn) readFailed(err error) {
	closing := c.srv.isClosing()
	switch {
	case closing && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, errIdle)):
		// Shutdown: stop reading, serve what was read.
		return
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.dead.Store(true)
		c.log().V(1).Info("connection closed by peer")
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log().Info("closing connection: request frame not received in time", "err", err.Error())
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrBadFrame), errors.Is(err, io.ErrUnexpectedEOF):
		c.log().Info("closing connection: bad frame", "err", err.Error())
	default:
		c.log().V(1).Info("closing connection: read failed", "err", err.Error())
	}
	c.cancel()
}

// handle dispatches requests one at a time, in order. A handler may defer
// part of its work (Request.Defer: the acks=all wait of Produce) so that
// the next requests of the connection are dispatched while it waits;
// responses are written strictly in request order by finishLoop.
func (c *conn) handle(in <-chan inbound, out chan<- []byte) {
	obs := c.srv.cfg.Observer
	jobs := make(chan handled, maxDeferred)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		c.finishLoop(jobs, out)
	}()
	defer func() {
		close(jobs)
		<-finished
	}()
	var mutedUntil time.Time // a client quota's throttle (quota.go)
	for item := range in {
		var (
			resp kmsg.Response
			err  error
		)
		waitMuted(c.ctx, mutedUntil)
		// A client that does not read its responses gets no more of them
		// built (limits.go); a closing connection serves what it read.
		for c.out.full() && c.ctx.Err() == nil {
			select {
			case <-c.out.written:
			case <-c.ctx.Done():
			}
		}
		if c.dead.Load() && item.req.Header.Key != kmsg.Produce.Int16() {
			item.req.mem.release()
			c.pending.Add(-1)
			continue
		}
		if obs != nil {
			obs.RequestStarted(item.req.Header.Key)
		}
		dispatched := time.Now()
		if item.reject {
			resp = unsupportedAPIVersionsResponse()
		} else {
			resp, err = c.dispatch(item.req)
		}
		// The handler's time, for request_percentage: deferred work (an
		// acks=all wait) runs off this loop, and parked time (a long
		// poll, a group join) is waiting, not handling.
		spent := time.Since(dispatched) - item.req.parked
		item.req.mem.release()
		if err == nil {
			if d := c.quotaThrottle(item, resp, spent); d > 0 {
				mutedUntil = time.Now().Add(d)
			}
		}
		// Encoded here unless deferred work may still change it, so that
		// the wait above sees its size.
		var frame []byte
		if err == nil && resp != nil && item.req.finish == nil {
			frame = c.srv.encodeResponse(item.req.Header.CorrelationID, resp)
			c.out.add(frame)
		}
		// A plain send: finishLoop drains jobs until they are closed, and
		// every request read before the peer closed is still served
		// (acks=0 batches sent just before a close are appended).
		jobs <- handled{item: item, resp: resp, frame: frame, err: err}
		if err != nil {
			return
		}
	}
}

// maxDeferred bounds the responses of one connection waiting to be
// written (dispatched requests whose deferred work has not finished).
const maxDeferred = 16

type handled struct {
	item  inbound
	resp  kmsg.Response
	frame []byte // resp encoded, counted in conn.out; nil if not yet
	err   error
}

// finishLoop runs deferred work and writes responses in request order.
// After a failed request it stops writing (the connection closes).
func (c *conn) finishLoop(jobs <-chan handled, out chan<- []byte) {
	obs := c.srv.cfg.Observer
	failed := false
	for j := range jobs {
		if failed {
			if j.frame != nil {
				c.out.done(j.frame)
			}
			c.pending.Add(-1)
			continue
		}
		item, resp, frame, err := j.item, j.resp, j.frame, j.err
		if item.req.finish != nil && err == nil {
			err = runDeferred(item.req.finish)
		}
		if err != nil {
			c.log().Info("closing connection: request failed", "api", kmsg.NameForKey(item.req.Header.Key),
				"version", item.req.Header.Version, "correlationID", item.req.Header.CorrelationID, "err", err.Error())
			if obs != nil {
				obs.Request(item.req.Header.Key, item.req.Header.Version, item.size, 0, time.Since(item.started), true)
			}
			failed = true
			if frame != nil {
				c.out.done(frame)
			}
			c.cancel()
			continue
		}
		if frame == nil && resp != nil {
			frame = c.srv.encodeResponse(item.req.Header.CorrelationID, resp)
			c.out.add(frame)
		}
		// Count the request before handing its frame to the writer: a
		// client that has its answer must find it in the metrics.
		if t := c.srv.cfg.Traffic; t != nil && item.req.trafficPath != "" {
			zone := item.req.peerZone
			if zone == "" {
				// A client that told its rack on this connection before
				// (a Fetch with RackID; librdkafka produces and fetches
				// on one connection).
				zone = item.req.Client.Rack()
			}
			t.Add(zone, item.req.trafficPath, traffic.In, item.size)
			t.Add(zone, item.req.trafficPath, traffic.Out, len(frame))
		}
		if obs != nil {
			obs.Request(item.req.Header.Key, item.req.Header.Version, item.size, len(frame), time.Since(item.started), false)
		}
		if frame != nil {
			out <- frame
		}
		c.lastAnswered.Store(time.Now().UnixNano())
		c.pending.Add(-1)
	}
}

// runDeferred runs a handler's deferred work; a panic there drops the
// connection like a panic in the handler itself, never the broker.
func runDeferred(fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("deferred handler panic: %v", p)
		}
	}()
	fn()
	return nil
}

func (c *conn) dispatch(r *Request) (resp kmsg.Response, err error) {
	api, ok := Lookup(r.Header.Key)
	if !ok {
		return nil, fmt.Errorf("%w %d", ErrUnknownKey, r.Header.Key)
	}
	if err := c.checkSession(r); err != nil {
		return nil, err
	}
	defer func() {
		// A handler bug must not take the broker down: drop the connection.
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("handler panic: %v", p)
		}
	}()
	resp, err = api.Handle(c.ctx, r)
	if err == nil && resp != nil && resp.Key() != r.Header.Key {
		return nil, fmt.Errorf("handler returned %s for %s", kmsg.NameForKey(resp.Key()), kmsg.NameForKey(r.Header.Key))
	}
	return resp, err
}

// write writes frames until the channel closes; after a write error it keeps
// draining so that the handler loop never blocks.
func (c *conn) write(in <-chan []byte) {
	failed := false
	for frame := range in {
		if failed {
			c.out.done(frame)
			continue
		}
		if idle := c.srv.cfg.IdleTimeout; idle > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(idle))
		}
		_, err := c.nc.Write(frame)
		c.out.done(frame)
		if err != nil {
			failed = true
			c.dead.Store(true)
			c.log().V(1).Info("closing connection: write failed", "err", err.Error())
			c.cancel()
			c.nc.Close()
		}
	}
}
