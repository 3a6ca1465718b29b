package meta

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ClientConfig is what a broker's configuration says about etcd.
type ClientConfig struct {
	// Endpoints are etcd client URLs (http://host:2379, https://...).
	Endpoints []string
	// Cluster names the Strata cluster: its keys live under /strata/<Cluster>/.
	Cluster string
	// DialTimeout bounds connecting and the first read (default 10s).
	DialTimeout time.Duration
	// Username and Password for etcd authentication (optional).
	Username, Password string
	// TLS for https:// endpoints: the client certificate etcd's
	// --client-cert-auth asks for and the CA its certificate chains to
	// (optional; nil uses the system roots and no client certificate).
	TLS *tls.Config
	// MaxTxnOps is the etcd server's --max-txn-ops (default 128).
	MaxTxnOps int
	// Logger receives the etcd client's own logs (nil: discarded).
	Logger *zap.Logger
}

// Connect opens an etcd client for cfg, checks that etcd answers within
// DialTimeout, and returns the cluster's Store. Close the Store's client
// (Store.Close) when done.
func Connect(ctx context.Context, cfg ClientConfig) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints configured")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
		Logger:      cfg.Logger,
		Context:     context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", cfg.Endpoints, err)
	}
	var opts []Option
	if cfg.MaxTxnOps > 0 {
		opts = append(opts, WithMaxTxnOps(cfg.MaxTxnOps))
	}
	s, err := New(client, cfg.Cluster, opts...)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	// The client connects lazily; a read proves the endpoints answer.
	rctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := client.Get(rctx, s.keys.version()); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("etcd at %v does not answer: %w", cfg.Endpoints, err)
	}
	return s, nil
}

// Close closes the etcd client. Registrations, controllers and watches
// using it end.
func (s *Store) Close() error { return s.client.Close() }
