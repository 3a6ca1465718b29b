package meta

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcd goes away and comes back (same data, same ports): the watch resumes
// and delivers what changed, leases and the controller survive, and the
// controller still reacts to a broker loss afterwards.
func TestSurvivesEtcdRestart(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	e, err := StartEmbedded(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	client, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	store, err := New(client, "restart")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	c := &testCluster{t: t, ctx: ctx, client: client, store: store, brokers: map[int32]*testBroker{}, watch: store.Watch(wctx)}
	defer func() {
		for id := range c.brokers {
			c.stop(id)
		}
		cancel()
		for range c.watch {
		}
	}()
	for i, zone := range []string{"a", "b", "c"} {
		c.start(int32(i+1), zone)
	}
	c.createTopic(TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 3})
	st := c.waitFor("topic and controller", func(st *ClusterState) bool {
		return len(st.TopicPartitions("t")) == 3 && st.ControllerID > 0
	})
	version := st.Version

	e.Close()
	closed = true
	e, err = StartEmbedded(ctx, dir, nil, WithListenAddrs(e.ClientAddr, e.PeerAddr))
	if err != nil {
		t.Fatalf("restart etcd on the same ports: %v", err)
	}
	closed = false

	// A write after the restart reaches the old watch.
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	if _, err := store.UpdateTopicConfig(rctx, "t", func(cfg map[string]string) error {
		cfg["retention.ms"] = "1"
		return nil
	}); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
	st = c.waitFor("config change after restart", func(st *ClusterState) bool {
		return st.Topics["t"].Config["retention.ms"] == "1"
	})
	if st.Version <= version || len(st.Brokers) != 3 {
		t.Fatalf("after restart: version %d (was %d), brokers %d", st.Version, version, len(st.Brokers))
	}
	// Kill a non-controller broker: the controller still reacts.
	victim := int32(1)
	if st.ControllerID == victim {
		victim = 2
	}
	c.kill(victim)
	c.waitFor("reaction to a broker loss after the restart", func(st *ClusterState) bool {
		for _, ps := range st.TopicPartitions("t") {
			if ps.Leader == victim || slices.Contains(ps.ISR, victim) {
				return false
			}
		}
		return true
	})
}
