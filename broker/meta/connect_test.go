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
	for _, bad := range []ClientConfig{{Cluster: "c"}, {Endpoints: e.Endpoints, Cluster: "a//b"}, {Endpoints: e.Endpoints, Cluster: "a b"}} {
		if _, err := Connect(context.Background(), bad); err == nil {
			t.Errorf("Connect(%+v) succeeded", bad)
		}
	}
}

func TestClusterID(t *testing.T) {
	c := newTestCluster(t)
	other, err := New(c.client, "other")
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan string, 4)
	for _, s := range []*Store{c.store, c.store, c.store, other} {
		go func() {
			id, err := s.ClusterID(c.ctx)
			if err != nil {
				t.Error(err)
			}
			ids <- id
		}()
	}
	got := map[string]int{}
	for range 4 {
		got[<-ids]++
	}
	if len(got) != 2 {
		t.Fatalf("cluster IDs %v: want one per cluster", got)
	}
	var mine string
	for id, n := range got {
		if len(id) != 22 {
			t.Errorf("cluster ID %q: want 22 characters", id)
		}
		if n == 3 {
			mine = id
		}
	}
	st := c.waitFor("cluster ID in the snapshot", func(st *ClusterState) bool { return st.ClusterID != "" })
	if st.ClusterID != mine {
		t.Errorf("snapshot cluster ID %q, want %q", st.ClusterID, mine)
	}
}
