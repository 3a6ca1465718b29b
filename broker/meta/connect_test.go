package meta

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestConnect(t *testing.T) {
	ctx := testCtx(t)
	e, err := StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := Connect(ctx, ClientConfig{Endpoints: e.Endpoints, Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A port where nothing listens: a clear error within the timeout.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	if _, err := Connect(ctx, ClientConfig{Endpoints: []string{dead}, Cluster: "c", DialTimeout: 500 * time.Millisecond}); err == nil {
		t.Error("Connect to a closed port succeeded")
	}
	for _, bad := range []ClientConfig{{Cluster: "c"}, {Endpoints: e.Endpoints, Cluster: "a/b"}} {
		if _, err := Connect(context.Background(), bad); err == nil {
			t.Errorf("Connect(%+v) succeeded", bad)
		}
	}
}
