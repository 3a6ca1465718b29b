package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/replica"
)

// TestRestartedLeaderWaitsForElection: a broker that restarts and finds
// itself still named leader under its previous registration (it came back
// before the controller reacted to the lost lease) must not lead — it may
// have lost writes its followers have — until the controller elected it
// (or another replica) again under its new registration.
func TestRestartedLeaderWaitsForElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := meta.New(metatest.Start(t), "incarnation")
	if err != nil {
		t.Fatal(err)
	}
	info := meta.BrokerInfo{ID: 1, Zone: "a", Listeners: []meta.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 1, SecurityProtocol: "PLAINTEXT"}}}
	old, err := store.RegisterBroker(ctx, info, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateTopic(ctx, meta.TopicSpec{Name: "x", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	reg, err := store.RegisterBroker(ctx, info, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())

	cfg := broker.DefaultConfig()
	cfg.NodeID, cfg.DataDir, cfg.Clustered = 1, t.TempDir(), true
	b, err := broker.Open(ctx, cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	replicas := replica.NewManager(replica.Config{NodeID: 1, Store: store, Log: logr.Discard()})
	defer replicas.Close()
	b.EnableCluster(store, replicas)

	st, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := st.Partition(meta.TopicPartition{Topic: "x"}); ps.Leader != 1 || ps.LeaderBrokerEpoch != old.Info().Epoch {
		t.Fatalf("setup: partition state %+v, want leader 1 of the old registration", ps)
	}
	if err := b.ApplyClusterState(st); err != nil {
		t.Fatal(err)
	}
	p, err := b.Partition("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := record.Build(record.DefaultSpec(), []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Append(batch); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append before the new election: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}

	// The controller elects the restarted broker again, at a new epoch.
	cctx, stopCtrl := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- store.NewController(reg, meta.ControllerOptions{}).Run(cctx) }()
	defer func() { stopCtrl(); <-done }()
	for {
		if st, err = store.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		if ps, _ := st.Partition(meta.TopicPartition{Topic: "x"}); ps.Leader == 1 && ps.LeaderBrokerEpoch == reg.Info().Epoch {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the controller did not re-elect the restarted broker")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.ApplyClusterState(st); err != nil {
		t.Fatal(err)
	}
	if p.Replica.Role() != replica.RoleLeader {
		t.Fatalf("role %v after the new election, want leader", p.Replica.Role())
	}
	if _, epoch, err := p.Append(batch); err != nil || epoch < 1 {
		t.Fatalf("append after the new election: epoch %d, %v", epoch, err)
	}
}
