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
