// Package metatest starts a real embedded etcd for tests of packages that use
// broker/meta: one single-member server per call on random loopback ports,
// with its data in the test's temp dir, stopped by t.Cleanup.
package metatest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-dev/strata/broker/meta"
)

// Start starts etcd and returns a client connected to it. Both are closed
// when the test ends.
func Start(t testing.TB) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := meta.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(e.Close)
	c, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
