package brokertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// S3Proxy is an HTTP proxy between brokers and an S3-compatible server
// (Versity Gateway in tests) that lets a process-level test control the
// object store the broker subprocesses talk to: it adds latency to PUTs,
// holds the PUTs of a bucket until released (uploads "in flight" for as
// long as the test wants, e.g. across a SIGKILL or SIGSTOP of the
// uploader), holds the object GETs of a bucket (a hanging download),
// counts requests and bytes per bucket, and records the bodies of PUTs
// while asked to.
//
// Requests are forwarded unchanged (method, path, query, headers, Host,
// body), so SigV4 signatures made for the proxy's address stay valid.
// A held PUT is forwarded when released even if its client is gone (a
// killed broker's late object really lands in the bucket).
type S3Proxy struct {
	t      testing.TB
	target string // host:port of the real server
	ln     net.Listener
	srv    *http.Server
	client *http.Client

	mu         sync.Mutex
	putLatency time.Duration
	hold       map[string]chan struct{} // bucket -> closed on release
	held       map[string]int           // bucket -> PUTs waiting now
	stats      map[string]*S3BucketStats
	recording  map[string]bool
	recorded   []S3Put
	getsOf     map[string]int           // "bucket/key" -> answered GETs
	getHold    map[string]chan struct{} // bucket -> closed on ReleaseGets
	heldGets   map[string]int           // bucket -> GETs held so far
	wg         sync.WaitGroup
}

// S3BucketStats counts one bucket's traffic through the proxy.
type S3BucketStats struct {
	// Puts counts object PUTs the server answered 2xx, PutBytes their body
	// bytes as sent by the client.
	Puts, PutBytes int64
	// Gets counts GETs of objects the server answered 2xx (ranged GETs
	// included), GetBytes the response bytes.
	Gets, GetBytes int64
	// InFlightPuts is the number of PUTs received and not yet answered.
	InFlightPuts int
}

// S3Put is a recorded PUT: its bucket, key, the payload (aws-chunked
// framing removed), whether it was held and the status the server
// answered.
type S3Put struct {
	Bucket, Key string
	Body        []byte
	Held        bool
	Status      int
}

// StartS3Proxy listens on 127.0.0.1 with a free port and forwards to
// endpoint (http://host:port). It is closed when the test ends (held PUTs
// are released first).
func StartS3Proxy(t testing.TB, endpoint string) *S3Proxy {
	t.Helper()
	target := strings.TrimPrefix(strings.TrimPrefix(endpoint, "http://"), "https://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("brokertest: s3 proxy: %v", err)
	}
	p := &S3Proxy{
		t: t, target: target, ln: ln,
		client:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		hold:      map[string]chan struct{}{},
		held:      map[string]int{},
		stats:     map[string]*S3BucketStats{},
		recording: map[string]bool{},
		getsOf:    map[string]int{},
		getHold:   map[string]chan struct{}{},
		heldGets:  map[string]int{},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln)
	}()
	t.Cleanup(p.close)
	return p
}

// Endpoint is the proxy's URL, to use as wal.bucket.endpoint.
func (p *S3Proxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

// SetPutLatency delays every PUT by d before it is forwarded.
func (p *S3Proxy) SetPutLatency(d time.Duration) {
	p.mu.Lock()
	p.putLatency = d
	p.mu.Unlock()
}

// Hold makes every PUT to bucket wait (after reaching the proxy) until
// Release(bucket). Held PUTs are always recorded (see Recorded).
func (p *S3Proxy) Hold(bucket string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold[bucket] == nil {
		p.hold[bucket] = make(chan struct{})
	}
}

// Release forwards the held PUTs of bucket and stops holding new ones.
func (p *S3Proxy) Release(bucket string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch := p.hold[bucket]; ch != nil {
		close(ch)
		delete(p.hold, bucket)
	}
}

// HoldGets makes every object GET of bucket wait (after reaching the
// proxy) until ReleaseGets(bucket) or until its client gives up (then it
// is never forwarded): a bucket whose downloads hang.
func (p *S3Proxy) HoldGets(bucket string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.getHold[bucket] == nil {
		p.getHold[bucket] = make(chan struct{})
	}
}

// ReleaseGets forwards the held GETs of bucket whose clients still wait,
// and stops holding new ones.
func (p *S3Proxy) ReleaseGets(bucket string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch := p.getHold[bucket]; ch != nil {
		close(ch)
		delete(p.getHold, bucket)
	}
}

// HeldGets is the number of GETs of bucket held so far (since the start).
func (p *S3Proxy) HeldGets(bucket string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldGets[bucket]
}

// Held is the number of PUTs to bucket waiting for Release now.
func (p *S3Proxy) Held(bucket string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[bucket]
}

// Record starts (on) or stops recording the PUTs to bucket that reach
// the proxy from now on (held PUTs are recorded anyway).
func (p *S3Proxy) Record(bucket string, on bool) {
	p.mu.Lock()
	p.recording[bucket] = on
	p.mu.Unlock()
}

// Recorded returns the recorded PUTs that were answered, in answer order.
func (p *S3Proxy) Recorded() []S3Put {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]S3Put(nil), p.recorded...)
}

// GetsOf is the number of answered GETs (ranged or not) of one object.
func (p *S3Proxy) GetsOf(bucket, key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.getsOf[bucket+"/"+key]
}

// Stats returns a copy of bucket's counters.
func (p *S3Proxy) Stats(bucket string) S3BucketStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.stats[bucket]; s != nil {
		return *s
	}
	return S3BucketStats{}
}

func (p *S3Proxy) close() {
	p.mu.Lock()
	for b, ch := range p.hold {
		close(ch)
		delete(p.hold, b)
	}
	for b, ch := range p.getHold {
		close(ch)
		delete(p.getHold, b)
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	p.wg.Wait()
	p.client.CloseIdleConnections()
}

func (p *S3Proxy) statsLocked(bucket string) *S3BucketStats {
	s := p.stats[bucket]
	if s == nil {
		s = &S3BucketStats{}
		p.stats[bucket] = s
	}
	return s
}

// splitPath returns the bucket and key of a path-style request.
func splitPath(path string) (bucket, key string) {
	path = strings.TrimPrefix(path, "/")
	bucket, key, _ = strings.Cut(path, "/")
	return bucket, key
}

func (p *S3Proxy) serve(w http.ResponseWriter, r *http.Request) {
	bucket, key := splitPath(r.URL.Path)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "proxy: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	isPut := r.Method == http.MethodPut && key != "" && r.URL.Query().Get("partNumber") == ""
	var record, held bool
	if isPut {
		p.mu.Lock()
		latency, hold := p.putLatency, p.hold[bucket]
		record = p.recording[bucket] || hold != nil
		p.statsLocked(bucket).InFlightPuts++
		if hold != nil {
			p.held[bucket]++
			held = true
		}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.statsLocked(bucket).InFlightPuts--
			p.mu.Unlock()
		}()
		if hold != nil {
			<-hold // released by the test or at cleanup, whatever the client does meanwhile
			p.mu.Lock()
			p.held[bucket]--
			p.mu.Unlock()
		}
		if latency > 0 {
			t := time.NewTimer(latency) // injected latency, not synchronisation
			<-t.C
		}
	}

	if r.Method == http.MethodGet && key != "" {
		p.mu.Lock()
		hold := p.getHold[bucket]
		if hold != nil {
			p.heldGets[bucket]++
		}
		p.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return // the client gave up: nothing to answer
			}
		}
	}

	// Forward with a context of its own: a held PUT lands even when the
	// client that sent it was killed meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, r.Method, "http://"+p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "proxy: "+err.Error(), http.StatusInternalServerError)
		return
	}
	out.Host = r.Host
	for k, vs := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Connection", "Keep-Alive", "Transfer-Encoding", "Te", "Trailer", "Upgrade", "Proxy-Connection":
			continue
		}
		out.Header[k] = append([]string(nil), vs...)
	}
	out.ContentLength = int64(len(body))
	resp, err := p.client.Do(out)
	if err != nil {
		http.Error(w, "proxy: forward: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	rbody, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, "proxy: read response: "+err.Error(), http.StatusBadGateway)
		return
	}
	ok := resp.StatusCode/100 == 2
	p.mu.Lock()
	s := p.statsLocked(bucket)
	switch {
	case isPut && ok:
		s.Puts++
		s.PutBytes += int64(len(body))
	case r.Method == http.MethodGet && key != "" && ok:
		s.Gets++
		s.GetBytes += int64(len(rbody))
		p.getsOf[bucket+"/"+key]++
	}
	if isPut && record {
		payload := body
		if strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
			if d, err := decodeAWSChunked(body); err == nil {
				payload = d
			}
		}
		p.recorded = append(p.recorded, S3Put{Bucket: bucket, Key: key, Body: payload, Held: held, Status: resp.StatusCode})
	}
	p.mu.Unlock()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(rbody)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(rbody)
}

// decodeAWSChunked removes the aws-chunked framing of a streaming upload:
// "<hex size>[;chunk-signature=...]\r\n<data>\r\n" ... "0...\r\n"
// followed by optional trailers.
func decodeAWSChunked(b []byte) ([]byte, error) {
	rd := bufio.NewReader(bytes.NewReader(b))
	var out []byte
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("aws-chunked: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		sizeHex, _, _ := strings.Cut(line, ";")
		n, err := strconv.ParseInt(strings.TrimSpace(sizeHex), 16, 64)
		if err != nil || n < 0 || n > int64(len(b)) {
			return nil, fmt.Errorf("aws-chunked: bad chunk size %q", line)
		}
		if n == 0 {
			return out, nil
		}
		chunk := make([]byte, n)
		if _, err := io.ReadFull(rd, chunk); err != nil {
			return nil, fmt.Errorf("aws-chunked: %w", err)
		}
		out = append(out, chunk...)
		if _, err := rd.ReadString('\n'); err != nil {
			return nil, fmt.Errorf("aws-chunked: %w", err)
		}
	}
}
