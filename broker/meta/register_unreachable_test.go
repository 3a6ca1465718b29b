package meta

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// RegisterBroker returns when its ctx ends even if etcd cannot be reached.
// The e2e journey saw a broker hang in shutdown until SIGKILL: its managed
// etcd was being deleted, the registration's session was lost, Maintain
// registered again, and the lease grant ran on the client's context (never
// cancelled), so cancelling Maintain's ctx did not end it and the broker
// waited for it forever (goroutine dump: Maintain -> RegisterBroker ->
// concurrency.NewSession -> lessor.Grant).
func TestRegisterBrokerUnreachableEtcdHonoursContext(t *testing.T) {
	// An address nothing listens on: the connection is refused, again and
	// again.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s, err := New(client, "unreachable")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.RegisterBroker(ctx, BrokerInfo{ID: 1, Zone: "a"}, 2*time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("RegisterBroker = %v, want its context's deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("RegisterBroker still running 20 s after its 500 ms context ended: it does not honour ctx while etcd is unreachable")
	}
}

// A controller candidate's Run returns when its context ends even though
// etcd went away while it waited for the role. The e2e journey's
// delete-cluster step saw brokers never finish shutting down (SIGQUIT dump:
// Controller.Run -> Election.Campaign -> Election.Resign -> txn.Commit):
// the managed etcd was deleted first, and etcd's Campaign withdraws a
// cancelled candidacy with the client's own, never-cancelled context.
func TestControllerCandidateStopsWhenEtcdIsGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			e.Close()
		}
	}()
	client, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s, err := New(client, "gone")
	if err != nil {
		t.Fatal(err)
	}
	runs := map[int32]chan error{}
	cancels := map[int32]context.CancelFunc{}
	for _, id := range []int32{1, 2} {
		reg, err := s.RegisterBroker(ctx, BrokerInfo{ID: id, Zone: "a"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithCancel(ctx)
		cancels[id] = rcancel
		runs[id] = make(chan error, 1)
		ctrl := s.NewController(reg, ControllerOptions{})
		go func() { runs[id] <- ctrl.Run(rctx) }()
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	// Both candidacies are in etcd: one holds the role, the other waits.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(ctx, s.keys.controller(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two controller candidacies not in etcd after 30 s (count %v, err %v)", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.Close()
	stopped = true
	for id, c := range cancels {
		c()
		select {
		case <-runs[id]:
		case <-time.After(20 * time.Second):
			t.Fatalf("controller of broker %d still running 20 s after its context ended with etcd gone: campaign cleanup waits on the client's context", id)
		}
	}
}
