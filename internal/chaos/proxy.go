package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-dev/strata/broker/protocol"
)

// TCP proxy modes (etcd-cut, network partitions).
const (
	ModePass  = "pass"
	ModeDrop  = "drop"  // close every connection, refuse new ones (accept and close)
	ModeStall = "stall" // keep connections open, forward nothing
)

// linkRule is how a proxied connection's two directions behave: up is
// what the connecting side sends (requests), down what it receives
// (responses). Drop in either direction closes the connection; stall in
// one direction only is an asymmetric partition (requests arrive, answers
// do not, or the reverse).
type linkRule struct{ up, down string }

var passRule = linkRule{ModePass, ModePass}

// tcpProxy forwards connections to one target: between a broker and etcd
// (etcd-cut), in front of a broker's client listener (client partitions)
// and in front of its replication listener (broker partitions). With a
// classifier it names each connection's source from its first Kafka
// request (the client ID: "broker:<id>" for another broker's replica
// fetcher or inter-broker client, "fetcher:<id>" for the chaos consumer of
// broker <id>, "client" for the rest) and applies that source's rule,
// else the default one.
type tcpProxy struct {
	target   string
	classify func(first []byte) string
	addr     string

	mu    sync.Mutex
	ln    net.Listener // nil while down
	def   linkRule
	rules map[string]linkRule
	conns map[net.Conn]string // both ends of every connection, by source
	// changed is closed and replaced whenever a rule changes, waking
	// stalled copies.
	changed chan struct{}
	wg      sync.WaitGroup
}

func startTCPProxy(target string, classify func([]byte) string) (*tcpProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	p := &tcpProxy{ln: ln, addr: ln.Addr().String(), target: target, classify: classify, def: passRule, rules: map[string]linkRule{},
		conns: map[net.Conn]string{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

func (p *tcpProxy) Addr() string { return p.addr }

// Down closes the proxy's listener and connections: while a broker's
// process is down its address refuses connections, as a dead host's
// would (a proxy accepting and closing looks to clients like a broker
// failing the handshake, which they do not retry the same way).
func (p *tcpProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	p.ln.Close()
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
}

// Up listens again on the same address after Down.
func (p *tcpProxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	var ln net.Listener
	var err error
	for range 50 { // the port may linger a moment after the close
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // a retry, not synchronisation
	}
	if err != nil {
		return fmt.Errorf("proxy %s up again: %w", p.addr, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// SetMode sets the default rule of both directions and forgets the
// per-source rules; drop closes the open connections at once.
func (p *tcpProxy) SetMode(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.def = linkRule{mode, mode}
	clear(p.rules)
	p.changedLocked()
}

// SetDefault sets the rule of sources without their own.
func (p *tcpProxy) SetDefault(r linkRule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.def = r
	p.changedLocked()
}

// SetRule sets source's own rule (passRule included: it then passes
// whatever the default).
func (p *tcpProxy) SetRule(source string, r linkRule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules[source] = r
	p.changedLocked()
}

// ClearRule removes source's rule: the default applies again.
func (p *tcpProxy) ClearRule(source string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.rules, source)
	p.changedLocked()
}

func (p *tcpProxy) ruleLocked(source string) linkRule {
	if r, ok := p.rules[source]; ok {
		return r
	}
	return p.def
}

// changedLocked wakes stalled copies and closes the connections whose
// rule now drops.
func (p *tcpProxy) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
	for c, src := range p.conns {
		if r := p.ruleLocked(src); r.up == ModeDrop || r.down == ModeDrop {
			c.Close()
		}
	}
}

func (p *tcpProxy) Close() {
	p.Down()
	p.SetMode(ModeDrop)
	p.wg.Wait()
}

func (p *tcpProxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers c under source unless the proxy is down (a connection
// accepted just before Down) or source's rule drops.
func (p *tcpProxy) track(c net.Conn, source string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	if r := p.ruleLocked(source); r.up == ModeDrop || r.down == ModeDrop {
		return false
	}
	p.conns[c] = source
	return true
}

// relabel files c under source once classified; false when c was closed
// meanwhile or source's rule drops.
func (p *tcpProxy) relabel(c net.Conn, source string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.conns[c]; !ok {
		return false
	}
	if r := p.ruleLocked(source); r.up == ModeDrop || r.down == ModeDrop {
		return false
	}
	p.conns[c] = source
	return true
}

func (p *tcpProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *tcpProxy) serve(c net.Conn) {
	defer p.wg.Done()
	// Tracked from the start, so that Down and drops close it while it is
	// being classified too.
	source := ""
	if !p.track(c, source) {
		c.Close()
		return
	}
	defer p.untrack(c)
	var first []byte
	if p.classify != nil {
		var err error
		if first, err = readKafkaRequest(c); err != nil {
			return
		}
		source = p.classify(first)
		if !p.relabel(c, source) {
			return
		}
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(up, source) {
		up.Close()
		return
	}
	defer p.untrack(up)
	if len(first) > 0 {
		if !p.passable(source, true) {
			return
		}
		if _, err := up.Write(first); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c, source, true); done <- struct{}{} }()
	go func() { p.copy(c, up, source, false); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// copy forwards src to dst, holding each chunk while its direction
// stalls.
func (p *tcpProxy) copy(dst, src net.Conn, source string, upward bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.passable(source, upward) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// passable waits while source's direction stalls; false once it drops.
func (p *tcpProxy) passable(source string, upward bool) bool {
	for {
		p.mu.Lock()
		r, changed := p.ruleLocked(source), p.changed
		p.mu.Unlock()
		mode := r.down
		if upward {
			mode = r.up
		}
		switch {
		case r.up == ModeDrop || r.down == ModeDrop:
			return false
		case mode == ModePass:
			return true
		}
		<-changed
	}
}

// readKafkaRequest reads one size-prefixed Kafka request (at most 1 MiB,
// within 10 s).
func readKafkaRequest(c net.Conn) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("request of %d bytes", n)
	}
	buf := make([]byte, 4+n)
	copy(buf, size[:])
	if _, err := io.ReadFull(c, buf[4:]); err != nil {
		return nil, err
	}
	return buf, nil
}

// kafkaClientID returns the client ID of a request (size, api key,
// version, correlation ID, then the nullable client ID string).
func kafkaClientID(req []byte) string {
	if len(req) < 14 {
		return ""
	}
	n := int16(binary.BigEndian.Uint16(req[12:14]))
	if n < 0 || len(req) < 14+int(n) {
		return ""
	}
	return string(req[14 : 14+int(n)])
}

// classifySource names a connection's source from its first request's
// client ID: the replica fetcher ("strata-replica-<id>") and inter-broker
// client ("strata-broker-<id>", also with ",strata_az=<zone>": the
// connection on which broker <id> forwards zone-local produce) of broker
// <id> are "broker:<id>", the chaos consumer of broker <id>
// ("chaos-fetcher-<id>") "fetcher:<id>", a client that names its zone
// ("strata_az=<zone>", zone-local produce) "zone-client:<zone>", anything
// else "client".
func classifySource(first []byte) string {
	id := kafkaClientID(first)
	head, _, _ := strings.Cut(id, ",")
	for prefix, label := range map[string]string{"strata-replica-": "broker:", "strata-broker-": "broker:", "chaos-fetcher-": "fetcher:"} {
		if n, ok := strings.CutPrefix(head, prefix); ok {
			if _, err := strconv.Atoi(n); err == nil {
				return label + n
			}
		}
	}
	if zone := protocol.ClientIDZone(id); zone != "" {
		return zoneClientSource(zone)
	}
	return "client"
}

// zoneClientSource is the source label of a zone's zone-local clients.
func zoneClientSource(zone string) string { return "zone-client:" + zone }

// bucketFault is the state of a zone bucket's fault point.
type bucketFault struct {
	outage   bool
	latency  time.Duration
	fraction float64 // of requests answered 500
}

// s3Proxy sits between the brokers and one zone's bucket (all zones'
// buckets live on one Versity Gateway; each zone's endpoint is its own
// proxy). It forwards requests unchanged, Host included, so SigV4
// signatures made for the proxy's address stay valid.
type s3Proxy struct {
	srv       *http.Server
	ln        net.Listener
	transport *http.Transport

	mu    sync.Mutex
	fault bucketFault
	rng   *rand.Rand
	// requests counts every request; injected those answered by the
	// proxy itself (outage, errors); forwardErrors those the server did
	// not answer.
	requests, injected, forwardErrors atomic.Int64
	// zlPut, zlGet and zlFailed count the requests for zone-local produce
	// objects (zoneLocalObject): PUTs and GETs answered 2xx, and those
	// answered otherwise.
	zlPut, zlGet, zlFailed atomic.Int64

	// armed, when set, damages the WAL object of the next GET (a
	// download a follower has not made yet) before forwarding it;
	// tampered are the keys damaged so far, met the GETs of those keys
	// forwarded after the damage, by answer status.
	armed    func(key, rangeHeader string) error
	fired    chan tamperResult
	tampered map[string]bool
	met      map[int]int
}

// tamperResult is what an armed proxy did with the download it caught.
type tamperResult struct {
	key string
	err error
}

// armTamper makes the next GET of a WAL object through the proxy first
// damage it with do (on the S3 server itself); the returned channel gets
// the result. Only one arm at a time (the bucket is the fault point).
func (p *s3Proxy) armTamper(do func(key, rangeHeader string) error) <-chan tamperResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = do
	p.fired = make(chan tamperResult, 1)
	return p.fired
}

func (p *s3Proxy) disarm() {
	p.mu.Lock()
	p.armed = nil
	p.mu.Unlock()
}

// objectFaultsMet returns the GETs of damaged objects answered after the
// damage, by status.
func (p *s3Proxy) objectFaultsMet() map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.met)
}

// walKey returns the object key of a path-style WAL GET
// ("/<bucket>/wal/..."), or "".
func walKey(r *http.Request) string {
	if r.Method != http.MethodGet {
		return ""
	}
	_, key, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !ok || !strings.HasPrefix(key, "wal/") {
		return ""
	}
	return key
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// tamperGet damages the object of a WAL GET when the proxy is armed, and
// counts the answer when the object was damaged; it then forwards.
func (p *s3Proxy) tamperGet(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key := walKey(r)
	if key == "" {
		next.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	do, fired := p.armed, p.fired
	p.armed = nil
	p.mu.Unlock()
	if do != nil {
		err := do(key, r.Header.Get("Range"))
		p.mu.Lock()
		if err == nil {
			p.tampered[key] = true
		}
		p.mu.Unlock()
		fired <- tamperResult{key: key, err: err}
	}
	p.mu.Lock()
	damaged := p.tampered[key]
	p.mu.Unlock()
	if !damaged {
		next.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	next.ServeHTTP(sw, r)
	p.mu.Lock()
	p.met[sw.status]++
	p.mu.Unlock()
}

func startS3Proxy(endpoint string, seed uint64) (*s3Proxy, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3 proxy: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("s3 proxy: %w", err)
	}
	p := &s3Proxy{ln: ln, rng: rand.New(rand.NewPCG(seed, 0xb0c4e7)), transport: http.DefaultTransport.(*http.Transport).Clone(),
		tampered: map[string]bool{}, met: map[int]int{}}
	rp := &httputil.ReverseProxy{
		Transport: p.transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // signed by the client
		},
		// A client that gave up (a killed broker, a cancelled GET) is
		// not news; the broker sees its own error.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			p.forwardErrors.Add(1)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *s3Proxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *s3Proxy) Set(f bucketFault) {
	p.mu.Lock()
	p.fault = f
	p.mu.Unlock()
}

func (p *s3Proxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		p.srv.Close()
	}
	p.transport.CloseIdleConnections()
}

func (p *s3Proxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if op := zoneLocalObject(r); op != "" {
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			w = sw
			defer func() { p.countZoneLocal(op, sw.status) }()
		}
		p.mu.Lock()
		f := p.fault
		fail := f.fraction > 0 && p.rng.Float64() < f.fraction
		p.mu.Unlock()
		if f.latency > 0 {
			t := time.NewTimer(f.latency) // the injected fault, not synchronisation
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		switch {
		case f.outage:
			p.injected.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			s3Error(w, http.StatusServiceUnavailable, "ServiceUnavailable", "chaos: bucket outage")
			return
		case fail:
			p.injected.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			s3Error(w, http.StatusInternalServerError, "InternalError", "chaos: injected error")
			return
		}
		p.tamperGet(w, r, next)
	})
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>`+msg+`</Message></Error>`)
}
