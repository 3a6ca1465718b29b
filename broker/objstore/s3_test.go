package objstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

const bucket = "wal-zone-a"

func newStore(t testing.TB, srv *s3server.Server, mod func(*objstore.Config)) *objstore.S3 {
	t.Helper()
	cfg := objstore.Config{
		Bucket:         bucket,
		Region:         srv.Region,
		Zone:           "zone-a",
		Endpoint:       srv.Endpoint,
		ForcePathStyle: true,
		Credentials:    &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
		MaxBackoff:     20 * time.Millisecond,
		AttemptTimeout: 2 * time.Second,
		CallTimeout:    5 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := objstore.NewS3(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewS3: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestS3RoundTrip(t *testing.T) {
	srv := s3server.Start(t, bucket)
	reg := prometheus.NewRegistry()
	obs := objstore.NewPrometheusObserver(reg)
	s := newStore(t, srv, func(c *objstore.Config) { c.Observer = obs })
	ctx := context.Background()

	data := []byte("0123456789abcdefghij")
	if err := s.Put(ctx, "wal/c/z/1/1/00000000000000000001", data); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Put(ctx, "wal/c/z/1/1/00000000000000000002", []byte("x")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Put(ctx, "other/key", []byte("y")); err != nil {
		t.Fatalf("Put: %v", err)
	}

	for _, tc := range []struct {
		name           string
		offset, length int64
		want           string
	}{
		{"whole", 0, -1, string(data)},
		{"range", 3, 4, "3456"},
		{"from offset to end", 15, -1, "fghij"},
		{"range past the end is clipped", 18, 10, "ij"},
		{"first byte", 0, 1, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Get(ctx, "wal/c/z/1/1/00000000000000000001", tc.offset, tc.length)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if string(got) != tc.want {
				t.Fatalf("Get(%d,%d) = %q, want %q", tc.offset, tc.length, got, tc.want)
			}
		})
	}

	info, err := s.Head(ctx, "wal/c/z/1/1/00000000000000000001")
	if err != nil || info.Size != int64(len(data)) || info.LastModified.IsZero() {
		t.Fatalf("Head = %+v, %v; want size %d and a modification time", info, err, len(data))
	}

	objs, err := s.List(ctx, "wal/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(objs) != 2 || objs[0].Key != "wal/c/z/1/1/00000000000000000001" || objs[1].Key != "wal/c/z/1/1/00000000000000000002" || objs[0].Size != 20 {
		t.Fatalf("List(wal/) = %+v", objs)
	}

	if err := s.Delete(ctx, "wal/c/z/1/1/00000000000000000001"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(ctx, "wal/c/z/1/1/00000000000000000001"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if _, err := s.Get(ctx, "wal/c/z/1/1/00000000000000000001", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get after delete = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "wal/c/z/1/1/00000000000000000001", 2, 3); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ranged Get after delete = %v, want ErrNotFound", err)
	}
	if _, err := s.Head(ctx, "nope"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head of missing = %v, want ErrNotFound", err)
	}
	if objs, err := s.List(ctx, "none/"); err != nil || len(objs) != 0 {
		t.Fatalf("List(none/) = %v, %v", objs, err)
	}

	if got := promtest.ToFloat64(obs.Requests().WithLabelValues(bucket, "zone-a", "put", "ok")); got != 3 {
		t.Errorf("put ok count = %v, want 3", got)
	}
	if got := promtest.ToFloat64(obs.Bytes().WithLabelValues(bucket, "zone-a", "put")); got != 22 {
		t.Errorf("put bytes = %v, want 22", got)
	}
	if got := promtest.ToFloat64(obs.Requests().WithLabelValues(bucket, "zone-a", "get", "not_found")); got != 2 {
		t.Errorf("get not_found count = %v, want 2", got)
	}
	if got := promtest.ToFloat64(obs.Bytes().WithLabelValues(bucket, "zone-a", "get")); got != 20+4+5+2+1 {
		t.Errorf("get bytes = %v, want 32", got)
	}
}

func TestS3MissingBucket(t *testing.T) {
	srv := s3server.Start(t, bucket)
	s := newStore(t, srv, func(c *objstore.Config) { c.Bucket = "no-such-bucket" })
	err := s.Put(context.Background(), "k", []byte("v"))
	if err == nil {
		t.Fatal("Put into a missing bucket succeeded")
	}
	if err := s.Delete(context.Background(), "k"); err == nil {
		t.Fatal("Delete in a missing bucket succeeded")
	}
}

func TestS3WrongCredentials(t *testing.T) {
	srv := s3server.Start(t, bucket)
	s := newStore(t, srv, func(c *objstore.Config) {
		c.Credentials = &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: "wrong-secret"}
	})
	err := s.Put(context.Background(), "k", []byte("v"))
	if !errors.Is(err, objstore.ErrAccessDenied) {
		t.Fatalf("Put with a wrong secret = %v, want ErrAccessDenied", err)
	}
	if !strings.Contains(err.Error(), "credentials rejected") {
		t.Fatalf("error %q does not say the credentials were rejected", err)
	}
	s = newStore(t, srv, func(c *objstore.Config) {
		c.Credentials = &objstore.StaticCredentials{AccessKeyID: "unknown", SecretAccessKey: srv.SecretKey}
	})
	if err := s.Put(context.Background(), "k", []byte("v")); !errors.Is(err, objstore.ErrAccessDenied) {
		t.Fatalf("Put with an unknown key id = %v, want ErrAccessDenied", err)
	}
}

func TestS3CredentialSources(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()

	t.Run("env prefix", func(t *testing.T) {
		t.Setenv("STRATA_WAL_ACCESS_KEY_ID", srv.AccessKey)
		t.Setenv("STRATA_WAL_SECRET_ACCESS_KEY", srv.SecretKey)
		s := newStore(t, srv, func(c *objstore.Config) { c.Credentials = nil; c.EnvPrefix = "STRATA_WAL" })
		if err := s.Put(ctx, "env", []byte("v")); err != nil {
			t.Fatalf("Put: %v", err)
		}
	})
	t.Run("env prefix half set", func(t *testing.T) {
		t.Setenv("STRATA_TIER_ACCESS_KEY_ID", srv.AccessKey)
		t.Setenv("STRATA_TIER_SECRET_ACCESS_KEY", "")
		_, err := objstore.NewS3(ctx, objstore.Config{Bucket: bucket, Region: "us-east-1", EnvPrefix: "STRATA_TIER"})
		if err == nil || !strings.Contains(err.Error(), "STRATA_TIER_SECRET_ACCESS_KEY") {
			t.Fatalf("NewS3 = %v, want an error naming STRATA_TIER_SECRET_ACCESS_KEY", err)
		}
	})
	t.Run("mounted secret files", func(t *testing.T) {
		dir := t.TempDir()
		write := func(name, v string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(objstore.FileAccessKeyID, srv.AccessKey)
		write(objstore.FileSecretAccessKey, srv.SecretKey)
		s := newStore(t, srv, func(c *objstore.Config) { c.Credentials = nil; c.CredentialsDir = dir })
		if err := s.Put(ctx, "file", []byte("v")); err != nil {
			t.Fatalf("Put: %v", err)
		}
	})
	t.Run("mounted secret missing a file", func(t *testing.T) {
		dir := t.TempDir()
		_, err := objstore.NewS3(ctx, objstore.Config{Bucket: bucket, Region: "us-east-1", CredentialsDir: dir})
		if err == nil || !strings.Contains(err.Error(), objstore.FileAccessKeyID) {
			t.Fatalf("NewS3 = %v, want an error naming %s", err, objstore.FileAccessKeyID)
		}
	})
}

// TestS3ServerOutage: a stopped server fails calls (after the configured
// attempts) instead of hanging, and the same store works again once the
// server is back.
func TestS3ServerOutage(t *testing.T) {
	srv := s3server.Start(t, bucket)
	s := newStore(t, srv, func(c *objstore.Config) { c.MaxAttempts = 2; c.CallTimeout = 3 * time.Second })
	ctx := context.Background()
	if err := s.Put(ctx, "before", []byte("v")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	srv.Stop()
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, "during", []byte("v")) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Put while the server is stopped succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Put while the server is stopped did not return (hang)")
	}
	srv.Restart()
	if err := s.Put(ctx, "after", []byte("v")); err != nil {
		t.Fatalf("Put after restart: %v", err)
	}
	if got, err := s.Get(ctx, "before", 0, -1); err != nil || string(got) != "v" {
		t.Fatalf("Get after restart = %q, %v", got, err)
	}
}

// TestS3CallTimeout: an endpoint that accepts connections and never
// answers fails each call within the call timeout.
func TestS3CallTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	var accepted atomic.Int32
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c) // hold it open, never answer
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	for _, tc := range []struct {
		name                 string
		attempt, call        time.Duration
		attempts             int
		wantDeadlineExceeded bool
		wantConns            int32 // attempts made (each hung one is a connection); 0: not checked
	}{
		// Each attempt is cut after AttemptTimeout and retried, all
		// within the call timeout: three connections, and the error is
		// the attempts' timeout, not the call's.
		{"attempt timeout, retried", 100 * time.Millisecond, 10 * time.Second, 3, false, 3},
		{"call timeout cuts retries", 5 * time.Second, 200 * time.Millisecond, 3, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accepted.Store(0)
			s, err := objstore.NewS3(context.Background(), objstore.Config{
				Bucket: bucket, Region: "us-east-1", Endpoint: "http://" + l.Addr().String(), ForcePathStyle: true,
				Credentials:    &objstore.StaticCredentials{AccessKeyID: "a", SecretAccessKey: "b"},
				MaxAttempts:    tc.attempts,
				MaxBackoff:     time.Millisecond,
				AttemptTimeout: tc.attempt, CallTimeout: tc.call,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			done := make(chan error, 1)
			go func() { done <- s.Put(context.Background(), "k", []byte("v")) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Put to a silent endpoint succeeded")
				}
				if tc.wantDeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Put = %v, want context.DeadlineExceeded", err)
				}
				var ate *objstore.AttemptTimeoutError
				if tc.wantConns > 0 && !errors.As(err, &ate) {
					t.Fatalf("Put = %v, want an AttemptTimeoutError", err)
				}
				// The connection of the last attempt may still be on
				// its way through Accept.
				deadline := time.Now().Add(10 * time.Second)
				for tc.wantConns > 0 && accepted.Load() < tc.wantConns && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if n := accepted.Load(); tc.wantConns > 0 && n != tc.wantConns {
					t.Fatalf("%d attempts reached the server, want %d", n, tc.wantConns)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Put to a silent endpoint did not return")
			}
		})
	}
}

// TestS3Retries puts a proxy answering 503 SlowDown to the first N requests
// in front of the real server: the SDK's retryer absorbs fewer failures
// than MaxAttempts and reports more.
func TestS3Retries(t *testing.T) {
	srv := s3server.Start(t, bucket)
	target, _ := url.Parse(srv.Endpoint)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var failLeft, requests atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if failLeft.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	s := newStore(t, srv, func(c *objstore.Config) { c.Endpoint = front.URL; c.MaxAttempts = 3 })
	t.Cleanup(s.Close)
	ctx := context.Background()

	failLeft.Store(2)
	requests.Store(0)
	if err := s.Put(ctx, "k", []byte("retried")); err != nil {
		t.Fatalf("Put with 2 transient failures and 3 attempts: %v", err)
	}
	if n := requests.Load(); n != 3 {
		t.Fatalf("requests = %d, want 3", n)
	}
	failLeft.Store(3)
	requests.Store(0)
	if _, err := s.Get(ctx, "k", 0, -1); err == nil {
		t.Fatal("Get with 3 failures and 3 attempts succeeded")
	}
	if n := requests.Load(); n != 3 {
		t.Fatalf("requests = %d, want 3", n)
	}
	failLeft.Store(0)
	if got, err := s.Get(ctx, "k", 0, -1); err != nil || !bytes.Equal(got, []byte("retried")) {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

// TestS3RetriesBridgeRestart: a call that starts while the server is down
// succeeds once it is back, through the SDK's retries alone.
func TestS3RetriesBridgeRestart(t *testing.T) {
	srv := s3server.Start(t, bucket)
	t.Setenv("AWS_CA_BUNDLE", "") // a custom CA bundle needs the SDK's own HTTP client
	client := &countingClient{c: &http.Client{}}
	defer client.c.CloseIdleConnections()
	s := newStore(t, srv, func(c *objstore.Config) {
		c.MaxAttempts = 40
		c.MaxBackoff = 250 * time.Millisecond
		c.CallTimeout = time.Minute
		c.HTTPClient = client
	})
	srv.Stop()
	done := make(chan error, 1)
	go func() { done <- s.Put(context.Background(), "bridged", []byte("v")) }()
	// Restart only once the first attempt has been sent to the dead port.
	deadline := time.Now().Add(30 * time.Second)
	for client.n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no attempt was made")
		}
		time.Sleep(time.Millisecond)
	}
	srv.Restart()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Put across a restart: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Put across a restart did not return")
	}
	if n := client.n.Load(); n < 2 {
		t.Fatalf("%d HTTP attempts, want retries", n)
	}
	if got, err := s.Get(context.Background(), "bridged", 0, -1); err != nil || string(got) != "v" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

type countingClient struct {
	c *http.Client
	n atomic.Int32
}

func (c *countingClient) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.c.Do(r)
}

func TestS3DeleteMany(t *testing.T) {
	srv := s3server.Start(t, bucket)
	var calls []objstore.Op
	var mu sync.Mutex
	s := newStore(t, srv, func(c *objstore.Config) {
		c.Observer = objstore.ObserverFunc(func(op objstore.Op, _, _ string, _ int64, _ time.Duration, _ error) {
			mu.Lock()
			calls = append(calls, op)
			mu.Unlock()
		})
	})
	ctx := context.Background()
	var keys []string
	for i := range 5 {
		k := fmt.Sprintf("wal/c/z/1/1/%020d", i)
		if err := s.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	mu.Lock()
	calls = nil
	mu.Unlock()
	// Four existing keys and one that never existed, in one request.
	if err := objstore.DeleteAll(ctx, s, append(keys[:4:4], "wal/c/z/1/1/missing")); err != nil {
		t.Fatalf("DeleteAll: %v", err)
	}
	mu.Lock()
	got := append([]objstore.Op(nil), calls...)
	mu.Unlock()
	if len(got) != 1 || got[0] != objstore.OpDeleteMany {
		t.Fatalf("DeleteAll of 5 keys made calls %v, want one %s", got, objstore.OpDeleteMany)
	}
	left, err := s.List(ctx, "wal/")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Key != keys[4] {
		t.Fatalf("left after DeleteAll: %v, want only %s", left, keys[4])
	}
	if err := s.DeleteMany(ctx, make([]string, objstore.MaxDeleteBatch+1)); err == nil {
		t.Fatal("DeleteMany over the batch limit succeeded")
	}
	srv.Stop()
	if err := objstore.DeleteAll(ctx, s, keys[4:]); err == nil {
		t.Fatal("DeleteAll against a stopped server succeeded")
	}
}

// headerRecorder records the checksum headers of the PUTs it sends.
type headerRecorder struct {
	mu   sync.Mutex
	puts []string // each PUT's x-amz-checksum-* and x-amz-sdk-checksum-algorithm headers
}

func (h *headerRecorder) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		var sums []string
		for k := range req.Header {
			if k := strings.ToLower(k); strings.HasPrefix(k, "x-amz-checksum-") || k == "x-amz-sdk-checksum-algorithm" || k == "x-amz-trailer" {
				sums = append(sums, k)
			}
		}
		h.mu.Lock()
		h.puts = append(h.puts, strings.Join(sums, ","))
		h.mu.Unlock()
	}
	return http.DefaultClient.Do(req)
}

// TestS3OwnChecksums: with Config.OwnChecksums (the WAL's stores) a PUT
// carries no SDK checksum, and every operation the WAL uses still works
// (ranged and whole GETs, conditional PUT, HEAD, LIST, DeleteObjects,
// which requires a checksum and still gets one); by default the SDK
// sends one.
func TestS3OwnChecksums(t *testing.T) {
	srv := s3server.Start(t, bucket)
	t.Setenv("AWS_CA_BUNDLE", "") // a custom CA bundle needs the SDK's own HTTP client
	ctx := context.Background()
	for _, own := range []bool{false, true} {
		rec := &headerRecorder{}
		s := newStore(t, srv, func(c *objstore.Config) { c.OwnChecksums = own; c.HTTPClient = rec })
		prefix := fmt.Sprintf("wal/own-%v/", own)
		data := []byte("0123456789abcdefghij")
		if err := s.Put(ctx, prefix+"a", data); err != nil {
			t.Fatalf("own=%v: Put: %v", own, err)
		}
		rec.mu.Lock()
		sums := rec.puts[0]
		rec.mu.Unlock()
		if own != (sums == "") {
			t.Fatalf("own=%v: PUT checksum headers %q", own, sums)
		}
		if got, err := s.Get(ctx, prefix+"a", 3, 4); err != nil || string(got) != "3456" {
			t.Fatalf("own=%v: ranged Get = %q, %v", own, got, err)
		}
		if got, err := s.Get(ctx, prefix+"a", 0, -1); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("own=%v: Get = %q, %v", own, got, err)
		}
		if err := s.PutIfAbsent(ctx, prefix+"b", []byte("b")); err != nil {
			t.Fatalf("own=%v: PutIfAbsent: %v", own, err)
		}
		if info, err := s.Head(ctx, prefix+"b"); err != nil || info.Size != 1 {
			t.Fatalf("own=%v: Head = %+v, %v", own, info, err)
		}
		if objs, err := s.List(ctx, prefix); err != nil || len(objs) != 2 {
			t.Fatalf("own=%v: List = %v, %v", own, objs, err)
		}
		if err := objstore.DeleteAll(ctx, s, []string{prefix + "a", prefix + "b"}); err != nil {
			t.Fatalf("own=%v: DeleteAll: %v", own, err)
		}
		if objs, err := s.List(ctx, prefix); err != nil || len(objs) != 0 {
			t.Fatalf("own=%v: List after DeleteAll = %v, %v", own, objs, err)
		}
	}
}

// requestRecorder records the headers of every request it sends.
type requestRecorder struct {
	mu   sync.Mutex
	reqs []http.Header // by request, with the method under ":method"
}

func (r *requestRecorder) Do(req *http.Request) (*http.Response, error) {
	h := req.Header.Clone()
	h.Set(":method", req.Method)
	r.mu.Lock()
	r.reqs = append(r.reqs, h)
	r.mu.Unlock()
	return http.DefaultClient.Do(req)
}

func (r *requestRecorder) last(method string) http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.reqs) - 1; i >= 0; i-- {
		if r.reqs[i].Get(":method") == method {
			return r.reqs[i]
		}
	}
	return nil
}

// TestS3LeanRequests: a WAL store (OwnChecksums) PUTs with an unsigned
// payload over plain http, and Versity stores exactly what was put; its
// requests carry no SDK telemetry (invocation ID, SDK user agent). A
// default store keeps the payload's SHA-256 and the SDK's headers.
func TestS3LeanRequests(t *testing.T) {
	srv := s3server.Start(t, bucket)
	t.Setenv("AWS_CA_BUNDLE", "") // a custom CA bundle needs the SDK's own HTTP client
	ctx := context.Background()
	data := make([]byte, 70<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := sha256.Sum256(data)
	for _, own := range []bool{false, true} {
		rec := &requestRecorder{}
		s := newStore(t, srv, func(c *objstore.Config) { c.OwnChecksums = own; c.HTTPClient = rec })
		key := fmt.Sprintf("wal/lean-%v", own)
		if err := s.Put(ctx, key, data); err != nil {
			t.Fatalf("own=%v: Put: %v", own, err)
		}
		put := rec.last(http.MethodPut)
		wantHash := hex.EncodeToString(sum[:])
		if own {
			wantHash = "UNSIGNED-PAYLOAD"
		}
		if got := put.Get("X-Amz-Content-Sha256"); got != wantHash {
			t.Errorf("own=%v: PUT x-amz-content-sha256 = %q, want %q", own, got, wantHash)
		}
		// Read back through a default store: what the server stored.
		got, err := newStore(t, srv, nil).Get(ctx, key, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("own=%v: stored object (%d bytes, %v) differs from the %d bytes put", own, len(got), err, len(data))
		}
		if got, err := s.Get(ctx, key, 1000, 5000); err != nil || !bytes.Equal(got, data[1000:6000]) {
			t.Fatalf("own=%v: ranged Get = %d bytes, %v", own, len(got), err)
		}
		for _, h := range []http.Header{put, rec.last(http.MethodGet)} {
			ua := h.Get("User-Agent")
			if sdkUA := strings.Contains(ua, "aws-sdk-go-v2"); sdkUA == own {
				t.Errorf("own=%v: %s User-Agent %q", own, h.Get(":method"), ua)
			}
			if id := h.Get("Amz-Sdk-Invocation-Id"); (id == "") != own {
				t.Errorf("own=%v: %s amz-sdk-invocation-id %q", own, h.Get(":method"), id)
			}
			if h.Get("Authorization") == "" {
				t.Errorf("own=%v: %s request is not signed", own, h.Get(":method"))
			}
		}
	}
}

// TestS3AttemptTimeoutCoversBody: a server that sends a GET's headers and
// part of its body, then stalls, fails the Get after AttemptTimeout (the
// attempt's deadline lasts until the body is read), not the call timeout.
func TestS3AttemptTimeoutCoversBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(make([]byte, 100))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	s, err := objstore.NewS3(context.Background(), objstore.Config{
		Bucket: bucket, Region: "us-east-1", Endpoint: srv.URL, ForcePathStyle: true,
		Credentials:    &objstore.StaticCredentials{AccessKeyID: "a", SecretAccessKey: "b"},
		AttemptTimeout: 100 * time.Millisecond, CallTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() { _, err := s.Get(context.Background(), "k", 0, -1); done <- err }()
	select {
	case err := <-done:
		var ate *objstore.AttemptTimeoutError
		if !errors.As(err, &ate) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get from a stalled body = %v, want an AttemptTimeoutError", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Get from a stalled body did not return within the attempt timeout")
	}
}
