package chaos

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// kafkaRequest builds a size-prefixed request header with clientID and a
// body.
func kafkaRequest(clientID, body string) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0, 0})              // size, below
	b.Write([]byte{0, 1, 0, 12, 0, 0, 0, 7}) // Fetch v12, correlation 7
	_ = binary.Write(&b, binary.BigEndian, int16(len(clientID)))
	b.WriteString(clientID)
	b.WriteString(body)
	out := b.Bytes()
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func TestClassifySource(t *testing.T) {
	tests := map[string]string{
		"strata-replica-2": "broker:2",
		"strata-broker-13": "broker:13",
		// The connection broker 1 forwards zone-local produce on.
		"strata-broker-1,strata_az=a":  "broker:1",
		"chaos-fetcher-3":              "fetcher:3",
		"chaos-producer-0":             "client",
		"chaos-producer-0,strata_az=b": "zone-client:b",
		"strata-replica-x":             "client",
		"":                             "client",
	}
	for id, want := range tests {
		if got := classifySource(kafkaRequest(id, "")); got != want {
			t.Errorf("client ID %q: %q, want %q", id, got, want)
		}
	}
	if got := classifySource([]byte{0, 0, 0, 1, 0}); got != "client" {
		t.Errorf("short request: %q", got)
	}
	null := kafkaRequest("", "")
	null[12], null[13] = 0xff, 0xff // null client ID
	if got := classifySource(null); got != "client" {
		t.Errorf("null client ID: %q", got)
	}
}

// echoServer answers every byte it receives with the same byte and keeps
// what it received.
type echoServer struct {
	ln   net.Listener
	mu   sync.Mutex
	got  bytes.Buffer
	wg   sync.WaitGroup
	conn []net.Conn
}

func startEcho(t *testing.T) *echoServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conn = append(e.conn, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						e.mu.Lock()
						e.got.Write(buf[:n])
						e.mu.Unlock()
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		for _, c := range e.conn {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echoServer) received() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return bytes.Clone(e.got.Bytes())
}

// roundTrip sends req over a new connection and reads the echo; ok is
// false when nothing came back within wait (held, closed or refused).
func roundTrip(t *testing.T, c net.Conn, req []byte, wait time.Duration) bool {
	t.Helper()
	if _, err := c.Write(req); err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	back := make([]byte, len(req))
	if _, err := io.ReadFull(c, back); err != nil {
		return false
	}
	if !bytes.Equal(back, req) {
		t.Fatalf("echo %q, want %q", back, req)
	}
	return true
}

func dial(t *testing.T, p *tcpProxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestProxyRules: per-source rules of the Kafka-aware proxy: a dropped
// source is cut (open connections closed, new ones refused) while others
// pass; a one-way rule lets requests through and holds the answers until
// healed; stall holds both ways.
func TestProxyRules(t *testing.T) {
	e := startEcho(t)
	p, err := startTCPProxy(e.ln.Addr().String(), classifySource)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	const held = 300 * time.Millisecond // how long "nothing arrives" is watched

	two := dial(t, p)
	if !roundTrip(t, two, kafkaRequest("strata-replica-2", "a"), 5*time.Second) {
		t.Fatal("broker 2 does not pass before any fault")
	}

	// drop broker 2: its open connection closes, a new one is refused;
	// broker 3 passes.
	p.SetRule("broker:2", linkRule{ModeDrop, ModeDrop})
	if roundTrip(t, two, []byte("more"), held) {
		t.Fatal("broker 2's open connection still passes after drop")
	}
	if roundTrip(t, dial(t, p), kafkaRequest("strata-replica-2", "b"), held) {
		t.Fatal("a new connection of broker 2 passes after drop")
	}
	three := dial(t, p)
	if !roundTrip(t, three, kafkaRequest("strata-replica-3", "c"), 5*time.Second) {
		t.Fatal("broker 3 cut by broker 2's drop")
	}
	p.ClearRule("broker:2")
	if !roundTrip(t, dial(t, p), kafkaRequest("strata-replica-2", "d"), 5*time.Second) {
		t.Fatal("broker 2 does not pass after healing")
	}

	// one-way for broker 3: its request reaches the server, the answer is
	// held until healed.
	p.SetRule("broker:3", linkRule{ModePass, ModeStall})
	req := kafkaRequest("strata-replica-3", "one-way")
	if roundTrip(t, three, req, held) {
		t.Fatal("an answer came back through a one-way rule")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Contains(e.received(), req) {
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the server through a one-way rule")
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	p.ClearRule("broker:3")
	_ = three.SetReadDeadline(time.Now().Add(5 * time.Second))
	back := make([]byte, len(req))
	if _, err := io.ReadFull(three, back); err != nil || !bytes.Equal(back, req) {
		t.Fatalf("held answer after healing: %q, %v", back, err)
	}

	// default stall for every source without a rule; a pass rule for a
	// fetcher keeps it going (zone isolation keeps the zone's consumers).
	p.SetDefault(linkRule{ModeStall, ModeStall})
	p.SetRule("fetcher:1", passRule)
	if roundTrip(t, dial(t, p), kafkaRequest("chaos-producer-0", "x"), held) {
		t.Fatal("a client passes a stalled default")
	}
	if !roundTrip(t, dial(t, p), kafkaRequest("chaos-fetcher-1", "y"), 5*time.Second) {
		t.Fatal("fetcher 1 held despite its pass rule")
	}
	p.SetMode(ModePass)

	// Down (the broker's process is down): connections are refused, not
	// accepted and closed; Up listens again on the same address.
	open := dial(t, p)
	p.Down()
	if roundTrip(t, open, kafkaRequest("client", "z"), held) {
		t.Fatal("an open connection passes a proxy that is down")
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("a proxy that is down accepted a connection")
	}
	if err := p.Up(); err != nil {
		t.Fatal(err)
	}
	if !roundTrip(t, dial(t, p), kafkaRequest("client", "up"), 5*time.Second) {
		t.Fatal("nothing passes after Up")
	}
	p.SetMode(ModePass)
}

func TestRangeOf(t *testing.T) {
	tests := []struct {
		h      string
		size   int64
		lo, hi int64
	}{
		{"", 100, 0, 99},
		{"bytes=10-19", 100, 10, 19},
		{"bytes=90-200", 100, 90, 99},
		{"bytes=150-160", 100, 0, 99},
		{"bytes=5-", 100, 0, 99},
		{"items=1-2", 100, 0, 99},
	}
	for _, tc := range tests {
		if lo, hi := rangeOf(tc.h, tc.size); lo != tc.lo || hi != tc.hi {
			t.Errorf("%q of %d: [%d, %d], want [%d, %d]", tc.h, tc.size, lo, hi, tc.lo, tc.hi)
		}
	}
}

// TestBucketProxyTamper: an armed bucket proxy damages the object of the
// next WAL GET (not of other requests) before forwarding it, once; GETs
// of damaged objects are counted by answer status.
func TestBucketProxyTamper(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/gone") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusPartialContent)
	}))
	defer backend.Close()
	p, err := startS3Proxy(backend.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	get := func(path, rng string) int {
		req, _ := http.NewRequest(http.MethodGet, p.Endpoint()+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	type call struct{ key, rng string }
	var calls []call
	fired := p.armTamper(func(key, rng string) error { calls = append(calls, call{key, rng}); return nil })
	get("/strata-wal-a/manifest/x", "")                                                   // not a WAL object
	put, _ := http.NewRequest(http.MethodPut, p.Endpoint()+"/strata-wal-a/wal/0001", nil) // not a GET
	if resp, err := http.DefaultClient.Do(put); err == nil {
		resp.Body.Close()
	}
	if len(calls) != 0 {
		t.Fatalf("armed proxy damaged %v on requests that are not WAL GETs", calls)
	}
	get("/strata-wal-a/wal/0002", "bytes=100-199")
	select {
	case r := <-fired:
		if r.key != "wal/0002" || r.err != nil {
			t.Fatalf("fired %+v", r)
		}
	default:
		t.Fatal("a WAL GET did not fire the armed proxy")
	}
	if want := []call{{"wal/0002", "bytes=100-199"}}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("damaged %v, want %v", calls, want)
	}
	get("/strata-wal-a/wal/0003", "") // the arm is spent
	get("/strata-wal-a/wal/0002", "bytes=0-99")
	if len(calls) != 1 {
		t.Fatalf("damaged %v: the arm fired twice", calls)
	}
	// A deleted object's GET is counted with its 404.
	p.armTamper(func(string, string) error { return nil })
	get("/strata-wal-a/wal/gone", "")
	if got, want := p.objectFaultsMet(), map[int]int{http.StatusPartialContent: 2, http.StatusNotFound: 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("met %v, want %v", got, want)
	}
}

// TestZoneLocalObjectCounts: the bucket proxy counts zone-local produce
// objects (keys with a zl- incarnation) by answer, and nothing else.
func TestZoneLocalObjectCounts(t *testing.T) {
	tests := []struct {
		method, path string
		want         string
	}{
		{http.MethodPut, "/strata-wal-a/wal/chaos/a/1/zl-1733/00000000000000000003", "put"},
		{http.MethodGet, "/strata-wal-a/wal/chaos/a/1/zl-1733/00000000000000000003", "get"},
		{http.MethodDelete, "/strata-wal-a/wal/chaos/a/1/zl-1733/00000000000000000003", ""},
		{http.MethodPut, "/strata-wal-a/wal/chaos/a/1/1733/00000000000000000003", ""}, // a WAL object
		{http.MethodGet, "/strata-chaos-tier/zl-1/x", ""},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if got := zoneLocalObject(r); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}

	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(backend.Close)
	p, err := startS3Proxy(backend.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	do := func(method, key string) {
		req, err := http.NewRequest(method, p.Endpoint()+"/strata-wal-b/"+key, strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	do(http.MethodPut, "wal/chaos/b/2/zl-9/00000000000000000000")
	do(http.MethodPut, "wal/chaos/b/2/zl-9/00000000000000000001")
	do(http.MethodGet, "wal/chaos/b/2/zl-9/00000000000000000000")
	do(http.MethodGet, "wal/chaos/b/2/zl-9/missing")
	do(http.MethodPut, "wal/chaos/b/2/9/00000000000000000000") // a WAL object: not counted
	p.Set(bucketFault{outage: true})
	do(http.MethodPut, "wal/chaos/b/2/zl-9/00000000000000000002")
	if put, get, failed := p.zlPut.Load(), p.zlGet.Load(), p.zlFailed.Load(); put != 2 || get != 1 || failed != 2 {
		t.Fatalf("put %d, get %d, failed %d; want 2, 1, 2", put, get, failed)
	}
}
