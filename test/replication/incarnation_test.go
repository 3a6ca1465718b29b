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
	b.SetOwnRegistration(reg.Info().Epoch)
	replicas.SetOwnRegistration(reg.Info())

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
	stopCtrl := reelect(ctx, t, store, reg, b)
	defer stopCtrl()
	if p.Replica.Role() != replica.RoleLeader {
		t.Fatalf("role %v after the new election, want leader", p.Replica.Role())
	}
	if _, epoch, err := p.Append(batch); err != nil || epoch < 1 {
		t.Fatalf("append after the new election: epoch %d, %v", epoch, err)
	}
}

// TestRestartedBeforeLeaseExpiry: a broker restarted before the lease of
// its previous run expired (a power loss shorter than the session
// timeout) finds that run's registration in the metadata, under its ID
// and with its listeners, and the partitions that run led still elected
// under it. It must not lead them, nor fetch in that run's name, until it
// has registered itself: it may have lost a tail its followers have, and
// leading in the same leader epoch it would write other records at their
// offsets, which the followers cannot detect (chaos seed 42, session 25:
// two records acknowledged at one offset).
func TestRestartedBeforeLeaseExpiry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := meta.New(metatest.Start(t), "incarnation")
	if err != nil {
		t.Fatal(err)
	}
	info := meta.BrokerInfo{ID: 1, Zone: "a", FetchEpoch: true, Listeners: []meta.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 1, SecurityProtocol: "PLAINTEXT"}}}
	// The previous run: registered (its lease still alive), leader of x-0.
	old, err := store.RegisterBroker(ctx, info, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(context.Background())
	if _, err := store.CreateTopic(ctx, meta.TopicSpec{Name: "x", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}

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
	// The new process has not registered yet (what server does at start).
	b.SetOwnRegistration(0)
	replicas.SetOwnRegistration(meta.BrokerInfo{})

	st, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := st.Partition(meta.TopicPartition{Topic: "x"}); ps.Leader != 1 || ps.LeaderBrokerEpoch != old.Info().Epoch {
		t.Fatalf("setup: partition state %+v, want leader 1 of the old registration", ps)
	}
	if bi := st.Brokers[1]; bi.Epoch != old.Info().Epoch {
		t.Fatalf("setup: broker 1 registered under %d, want the old registration %d", bi.Epoch, old.Info().Epoch)
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
		t.Fatalf("append under the previous run's registration: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if p.Replica.Role() == replica.RoleLeader {
		t.Fatal("leads a partition elected under the previous run's registration")
	}
	if e := replicas.BrokerEpoch(); e != -1 {
		t.Fatalf("replica fetches would carry broker epoch %d (the previous run's is %d), want -1 until registered", e, old.Info().Epoch)
	}

	// A process that registered under another epoch while the metadata
	// still shows the old one does not take the old run's identity either.
	b.SetOwnRegistration(old.Info().Epoch + 1000)
	replicas.SetOwnRegistration(meta.BrokerInfo{ID: 1, Epoch: old.Info().Epoch + 1000})
	if err := b.ApplyClusterState(st); err != nil {
		t.Fatal(err)
	}
	if p.Replica.Role() == replica.RoleLeader {
		t.Fatal("leads under a registration that is not its own")
	}
	if e := replicas.BrokerEpoch(); e != -1 {
		t.Fatalf("replica fetches would carry broker epoch %d, want -1 while the metadata shows another registration", e)
	}

	// Its own registration in the metadata: it fetches in its own name, and
	// leads once the controller elected it under it.
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	reg, err := store.RegisterBroker(ctx, info, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	b.SetOwnRegistration(reg.Info().Epoch)
	replicas.SetOwnRegistration(reg.Info())
	stopCtrl := reelect(ctx, t, store, reg, b)
	defer stopCtrl()
	if e := replicas.BrokerEpoch(); e != reg.Info().Epoch {
		t.Fatalf("replica fetches carry broker epoch %d, want its own %d", e, reg.Info().Epoch)
	}
	if p.Replica.Role() != replica.RoleLeader {
		t.Fatalf("role %v after the new election, want leader", p.Replica.Role())
	}
	if _, epoch, err := p.Append(batch); err != nil || epoch < 1 {
		t.Fatalf("append after the new election: epoch %d, %v", epoch, err)
	}
}

// reelect runs a controller under reg until it elected broker 1 leader of
// x-0 under reg's epoch, and applies that snapshot to b. The returned
// function stops the controller.
func reelect(ctx context.Context, t *testing.T, store *meta.Store, reg *meta.Registration, b *broker.Broker) (stop func()) {
	t.Helper()
	cctx, stopCtrl := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- store.NewController(reg, meta.ControllerOptions{}).Run(cctx) }()
	stop = func() { stopCtrl(); <-done }
	for {
		st, err := store.Snapshot(ctx)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		if ps, _ := st.Partition(meta.TopicPartition{Topic: "x"}); ps.Leader == 1 && ps.LeaderBrokerEpoch == reg.Info().Epoch {
			if err := b.ApplyClusterState(st); err != nil {
				stop()
				t.Fatal(err)
			}
			return stop
		}
		if ctx.Err() != nil {
			stop()
			t.Fatal("the controller did not re-elect the restarted broker")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
