package brokertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/server"
)

// Option changes the broker configuration before it starts.
type Option func(*options)

type options struct {
	dir      string
	dirUnder string
	logger   *logr.Logger
	settings map[string]string
	mutate   []func(*server.Config)
	args     []string
	// stableAddr: a restarted subprocess listens on its first address
	// again (WithStableAddr).
	stableAddr bool
}

// WithStableAddr makes a subprocess started again (Process.Start after
// Stop or Kill) listen on the address it had before instead of a new free
// port, as a Kubernetes pod keeps its DNS name across restarts: clients
// that know only the old addresses find it again (subprocess only).
func WithStableAddr() Option { return func(o *options) { o.stableAddr = true } }

// WithDir uses dir as the data directory (default: a t.TempDir()).
func WithDir(dir string) Option { return func(o *options) { o.dir = dir } }

// WithDirUnder makes the data directory a fresh directory under root
// (removed when the test ends) instead of under the test's temporary
// directory: a test that needs a particular volume (free space, tmpfs).
func WithDirUnder(root string) Option { return func(o *options) { o.dirUnder = root } }

// WithLogger logs to l instead of the test log (default: testr at V(0)).
func WithLogger(l logr.Logger) Option { return func(o *options) { o.logger = &l } }

// WithSetting sets a broker config key as a config file would
// (e.g. "log.flush.interval.ms", "0"; "num.partitions", "3").
func WithSetting(key, value string) Option {
	return func(o *options) {
		if o.settings == nil {
			o.settings = map[string]string{}
		}
		o.settings[key] = value
	}
}

// WithConfig edits the server configuration directly (in-process only).
func WithConfig(f func(*server.Config)) Option {
	return func(o *options) { o.mutate = append(o.mutate, f) }
}

// WithArgs adds command-line arguments (subprocess only).
func WithArgs(args ...string) Option { return func(o *options) { o.args = append(o.args, args...) } }

func buildOptions(t testing.TB, opts []Option) *options {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	switch {
	case o.dir != "":
	case o.dirUnder != "":
		dir, err := os.MkdirTemp(o.dirUnder, "brokertest-")
		if err != nil {
			t.Fatalf("brokertest: data directory under %s: %v", o.dirUnder, err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		o.dir = dir
	default:
		o.dir = t.TempDir()
	}
	return o
}

// Broker is an in-process broker.
type Broker struct {
	t    testing.TB
	opts *options
	cfg  server.Config
	srv  *server.Server
}

// Start starts an in-process broker on 127.0.0.1 with a random port and a
// temporary data directory. It is stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	o := buildOptions(t, opts)
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Broker.DataDir = o.dir
	unknown, err := server.ApplySettings(&cfg, o.settings)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	if len(unknown) > 0 {
		t.Fatalf("brokertest: unknown settings %v", unknown)
	}
	if _, ok := o.settings["wal.policy"]; !ok {
		// Test brokers replicate through WAL objects whatever their
		// (low) throughput: tests of the WAL path check its mechanics;
		// a test of wal.policy sets it.
		cfg.Cluster.WAL.Policy = cost.PolicyLatency
	}
	for _, f := range o.mutate {
		f(&cfg)
	}
	b := &Broker{t: t, opts: o, cfg: cfg}
	b.start()
	t.Cleanup(b.Stop)
	return b
}

func (b *Broker) logger() logr.Logger {
	if b.opts.logger != nil {
		return *b.opts.logger
	}
	return testr.NewWithInterface(b.t, testr.Options{Verbosity: 0, LogTimestamp: true})
}

func (b *Broker) start() {
	b.t.Helper()
	srv, err := server.Start(context.Background(), b.cfg, b.logger())
	if err != nil {
		b.t.Fatalf("brokertest: start broker: %v", err)
	}
	b.srv = srv
	// Keep the port across Restart so that clients reconnect to the same
	// address.
	b.cfg.Listen = srv.Addr()
}

// Addr returns the broker's address (host:port) to use as bootstrap.
func (b *Broker) Addr() string { return b.srv.Addr() }

// Dir returns the data directory.
func (b *Broker) Dir() string { return b.cfg.Broker.DataDir }

// Server returns the running server (nil after Stop).
func (b *Broker) Server() *server.Server { return b.srv }

// Stop shuts the broker down gracefully. Safe to call more than once.
func (b *Broker) Stop() {
	if b.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		b.t.Errorf("brokertest: shutdown: %v", err)
	}
	b.srv = nil
}

// Restart stops the broker gracefully and starts it again on the same data
// directory and port.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Stop()
	b.start()
}

// waitReady polls until addr answers an ApiVersions request or the
// deadline passes. A bare TCP connect is not enough: the listener is bound
// (and the kernel accepts connections) before the data directory has been
// recovered.
func waitReady(addr string, deadline time.Time) error {
	for {
		err := apiVersions(addr, deadline)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func apiVersions(addr string, deadline time.Time) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	// ApiVersions v0, correlation ID 1, client ID "brokertest".
	req := []byte{0, 0, 0, 20, 0, 18, 0, 0, 0, 0, 0, 1, 0, 10, 'b', 'r', 'o', 'k', 'e', 'r', 't', 'e', 's', 't'}
	if _, err := c.Write(req); err != nil {
		return err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	if cid := binary.BigEndian.Uint32(hdr[4:]); cid != 1 {
		return fmt.Errorf("ApiVersions answered with correlation ID %d", cid)
	}
	return nil
}
