package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// TCP proxy modes (etcd-cut).
const (
	ModePass  = "pass"
	ModeDrop  = "drop"  // close every connection, refuse new ones (accept and close)
	ModeStall = "stall" // keep connections open, forward nothing
)

// tcpProxy sits between one broker and etcd: the fault point of etcd-cut.
type tcpProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  string
	conns map[net.Conn]struct{}
	// changed is closed and replaced whenever the mode changes, waking
	// stalled copies.
	changed chan struct{}
	wg      sync.WaitGroup
}

func startTCPProxy(target string) (*tcpProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("etcd proxy: %w", err)
	}
	p := &tcpProxy{ln: ln, target: target, mode: ModePass, conns: map[net.Conn]struct{}{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }

// SetMode switches the mode; drop closes the open connections at once.
func (p *tcpProxy) SetMode(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	close(p.changed)
	p.changed = make(chan struct{})
	if mode == ModeDrop {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *tcpProxy) Close() {
	p.ln.Close()
	p.SetMode(ModeDrop)
	p.wg.Wait()
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		drop := p.mode == ModeDrop
		if !drop {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if drop {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *tcpProxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, up)
		p.mu.Unlock()
		up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c); done <- struct{}{} }()
	go func() { p.copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

// copy forwards src to dst, holding each chunk while the mode is stall.
func (p *tcpProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.passable() {
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

// passable waits while the proxy stalls; false once it drops.
func (p *tcpProxy) passable() bool {
	for {
		p.mu.Lock()
		mode, changed := p.mode, p.changed
		p.mu.Unlock()
		switch mode {
		case ModePass:
			return true
		case ModeDrop:
			return false
		}
		<-changed
	}
}

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
	p := &s3Proxy{ln: ln, rng: rand.New(rand.NewPCG(seed, 0xb0c4e7)), transport: http.DefaultTransport.(*http.Transport).Clone()}
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
		next.ServeHTTP(w, r)
	})
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>`+msg+`</Message></Error>`)
}
