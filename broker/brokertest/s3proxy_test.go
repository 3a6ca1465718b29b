package brokertest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestS3Proxy runs the broker's S3 client through the proxy to a real
// Versity Gateway: a held PUT does not reach the gateway until released,
// lands after release even when its client gave up meanwhile, and the
// counters and the recorded body match what was sent.
func TestS3Proxy(t *testing.T) {
	s3s := s3server.Start(t, "wal-a")
	proxy := StartS3Proxy(t, s3s.Endpoint)
	ctx := context.Background()
	open := func(endpoint string) *objstore.S3 {
		st, err := objstore.NewS3(ctx, objstore.Config{Bucket: "wal-a", Region: s3s.Region, Endpoint: endpoint, ForcePathStyle: true, MaxAttempts: 1,
			Credentials: &objstore.StaticCredentials{AccessKeyID: s3s.AccessKey, SecretAccessKey: s3s.SecretKey}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	viaProxy, direct := open(proxy.Endpoint()), open(s3s.Endpoint)
	data := bytes.Repeat([]byte("wal object "), 1000)

	// Not held, not recorded.
	if err := viaProxy.Put(ctx, "k0", data[:10]); err != nil {
		t.Fatal(err)
	}
	// Held, then released: the client's PUT completes.
	proxy.Hold("wal-a")
	done := make(chan error, 1)
	go func() { done <- viaProxy.Put(ctx, "k1", data) }()
	waitUntil(t, "the PUT held", func() bool { return proxy.Held("wal-a") == 1 })
	if _, err := direct.Head(ctx, "k1"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("held object visible on the gateway: %v", err)
	}
	proxy.Release("wal-a")
	if err := <-done; err != nil {
		t.Fatalf("released PUT: %v", err)
	}
	got, err := viaProxy.Get(ctx, "k1", 0, int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GET through the proxy: %d bytes, %v", len(got), err)
	}

	// Held while its client gives up: it still lands once released.
	proxy.Hold("wal-a")
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- viaProxy.Put(cctx, "k2", data[:100]) }()
	waitUntil(t, "the second PUT held", func() bool { return proxy.Held("wal-a") == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a PUT whose context was cancelled while held succeeded")
	}
	proxy.Release("wal-a")
	waitUntil(t, "the abandoned PUT forwarded", func() bool { return proxy.Stats("wal-a").InFlightPuts == 0 })
	if got, err := direct.Get(ctx, "k2", 0, 100); err != nil || !bytes.Equal(got, data[:100]) {
		t.Fatalf("abandoned PUT did not land: %d bytes, %v", len(got), err)
	}

	st := proxy.Stats("wal-a")
	if proxy.GetsOf("wal-a", "k1") != 1 || proxy.GetsOf("wal-a", "k2") != 0 {
		t.Fatalf("GETs of k1 %d, of k2 %d; want 1 and 0 (k2 was read directly)", proxy.GetsOf("wal-a", "k1"), proxy.GetsOf("wal-a", "k2"))
	}
	if st.Puts != 3 || st.Gets != 1 || st.GetBytes != int64(len(data)) {
		t.Fatalf("stats %+v, want 3 PUTs, 1 GET of %d bytes", st, len(data))
	}
	// Recording on: an unheld PUT is recorded too.
	proxy.Record("wal-a", true)
	if err := viaProxy.Put(ctx, "k3", data[:5]); err != nil {
		t.Fatal(err)
	}
	proxy.Record("wal-a", false)
	if err := viaProxy.Put(ctx, "k4", data[:5]); err != nil {
		t.Fatal(err)
	}
	rec := proxy.Recorded()
	if len(rec) != 3 || rec[0].Key != "k1" || !bytes.Equal(rec[0].Body, data) || !rec[0].Held || rec[0].Status != 200 ||
		rec[1].Key != "k2" || !bytes.Equal(rec[1].Body, data[:100]) || !rec[1].Held ||
		rec[2].Key != "k3" || !bytes.Equal(rec[2].Body, data[:5]) || rec[2].Held {
		t.Fatalf("recorded %d PUTs, want held k1 and k2 and unheld k3 with their bodies", len(rec))
	}
}

func TestDecodeAWSChunked(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
		ok       bool
	}{
		{"signed chunks", "5;chunk-signature=ab\r\nhello\r\n6;chunk-signature=cd\r\n world\r\n0;chunk-signature=ef\r\n\r\n", "hello world", true},
		{"unsigned with trailer", "b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", "hello world", true},
		{"bad size", "zz\r\nhello\r\n", "", false},
		{"truncated chunk", "a\r\nhello", "", false},
		{"no end", "5\r\nhello\r\n", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeAWSChunked([]byte(tc.in))
			if (err == nil) != tc.ok || string(got) != tc.want {
				t.Fatalf("decodeAWSChunked = %q, %v; want %q (ok %v)", got, err, tc.want, tc.ok)
			}
		})
	}
}

// TestS3ProxyHoldGets: a held GET does not answer until its client gives
// up (or the hold is released); after ReleaseGets GETs go through.
func TestS3ProxyHoldGets(t *testing.T) {
	s3s := s3server.Start(t, "wal-a")
	proxy := StartS3Proxy(t, s3s.Endpoint)
	ctx := context.Background()
	st, err := objstore.NewS3(ctx, objstore.Config{Bucket: "wal-a", Region: s3s.Region, Endpoint: proxy.Endpoint(), ForcePathStyle: true, MaxAttempts: 1,
		Credentials: &objstore.StaticCredentials{AccessKeyID: s3s.AccessKey, SecretAccessKey: s3s.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Put(ctx, "k", []byte("object")); err != nil {
		t.Fatal(err)
	}
	proxy.HoldGets("wal-a")
	gctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = st.Get(gctx, "k", 0, -1)
	cancel()
	if err == nil || proxy.HeldGets("wal-a") != 1 {
		t.Fatalf("held GET: err %v, %d held; want an error and 1 held", err, proxy.HeldGets("wal-a"))
	}
	proxy.ReleaseGets("wal-a")
	if b, err := st.Get(ctx, "k", 0, -1); err != nil || string(b) != "object" {
		t.Fatalf("GET after release: %q, %v", b, err)
	}
}
