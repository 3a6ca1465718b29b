package meta

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Embedded is a single-member etcd server listening on loopback, for
// `strata dev` and tests. Production clusters use the etcd the operator runs.
type Embedded struct {
	etcd *embed.Etcd
	// Endpoints are the client URLs to give clientv3.
	Endpoints []string
	// ClientAddr and PeerAddr are the bound host:port addresses, to restart
	// the server on the same ports (WithListenAddrs).
	ClientAddr, PeerAddr string
}

// EmbeddedOption adjusts the embedded server's configuration.
type EmbeddedOption func(*embed.Config)

// WithListenAddrs makes the server listen on the given host:port addresses
// instead of random ports (a restart on the same data directory).
func WithListenAddrs(client, peer string) EmbeddedOption {
	return func(cfg *embed.Config) {
		c := url.URL{Scheme: "http", Host: client}
		p := url.URL{Scheme: "http", Host: peer}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{c}, []url.URL{c}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{p}, []url.URL{p}
		cfg.InitialCluster = cfg.Name + "=" + p.String()
	}
}

// StartEmbedded starts etcd with its data in dir, on random free loopback
// ports, and waits until it serves or ctx ends. logger receives etcd's own
// logs (nil discards them).
func StartEmbedded(ctx context.Context, dir string, logger *zap.Logger, opts ...EmbeddedOption) (*Embedded, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg := embed.NewConfig()
	cfg.Name = "strata-dev"
	cfg.Dir = dir
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.Name + "=" + local.String()
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	// A single member elects itself; short ticks make startup quick.
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	// Topics with many partitions are written in one transaction when they fit.
	cfg.MaxTxnOps = 1024
	for _, o := range opts {
		o(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed while starting: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready: %w", ctx.Err())
	case <-time.After(time.Minute):
		e.Close()
		return nil, errors.New("embedded etcd not ready after a minute")
	}
	em := &Embedded{etcd: e}
	for _, l := range e.Clients {
		em.Endpoints = append(em.Endpoints, "http://"+l.Addr().String())
		em.ClientAddr = l.Addr().String()
	}
	for _, p := range e.Peers {
		em.PeerAddr = p.Addr().String()
	}
	return em, nil
}

// Close stops the server and waits for it.
func (e *Embedded) Close() { e.etcd.Close() }
