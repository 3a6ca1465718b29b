package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// devBucketPrefix + zone names the dev cluster's fast buckets.
const devBucketPrefix = "strata-wal-"

// versitygwModule is what dev builds when no gateway binary is given.
const versitygwModule = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// startDevBuckets starts a Versity Gateway with one bucket per zone and
// configures WAL replication on base. The returned function stops it.
func startDevBuckets(cmd *cobra.Command, base *server.Config, root string, zones []string, putLatency, getLatency time.Duration, log logr.Logger) (func(), error) {
	bin, err := versitygwBinary(cmd, log)
	if err != nil {
		return nil, err
	}
	if err := os.Setenv(s3server.EnvBinary, bin); err != nil {
		return nil, err
	}
	tb := &devTB{dir: filepath.Join(root, "s3"), log: log.WithName("s3")}
	stop := func() {
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
	}
	var buckets []string
	for _, z := range zones {
		buckets = append(buckets, devBucketPrefix+z)
	}
	srv, err := tb.start(buckets)
	if err != nil {
		stop()
		return nil, err
	}
	log.Info("WAL buckets ready", "endpoint", srv.Endpoint, "buckets", buckets, "dir", filepath.Join(tb.dir, "buckets"),
		"putLatency", putLatency, "getLatency", getLatency)
	w := &base.Cluster.WAL
	w.Enable = true
	w.Bucket.Region, w.Bucket.Endpoint, w.Bucket.ForcePathStyle = srv.Region, srv.Endpoint, true
	w.Bucket.Credentials = &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
	if putLatency != 0 || getLatency != 0 {
		w.WrapStore = func(st objstore.Store) objstore.Store {
			f := objstore.NewFaulty(st)
			f.SetPutLatency(putLatency)
			f.SetGetLatency(getLatency)
			return f
		}
	}
	return stop, nil
}

// versitygwBinary finds the gateway: $STRATA_VERSITYGW, else the cache
// directory, else it is built there with go install.
func versitygwBinary(cmd *cobra.Command, log logr.Logger) (string, error) {
	if bin := os.Getenv(s3server.EnvBinary); bin != "" {
		return bin, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no %s and no cache directory: %w", s3server.EnvBinary, err)
	}
	dir := filepath.Join(cache, "strata", "versitygw-v1.8.0")
	bin := filepath.Join(dir, "versitygw")
	if st, err := os.Stat(bin); err == nil && st.Mode()&0o111 != 0 {
		return bin, nil
	}
	log.Info("building Versity Gateway (once)", "module", versitygwModule, "into", dir)
	gi := exec.CommandContext(cmd.Context(), "go", "install", versitygwModule)
	gi.Env = append(os.Environ(), "GOBIN="+dir)
	gi.Stdout, gi.Stderr = os.Stderr, os.Stderr
	if err := gi.Run(); err != nil {
		return "", fmt.Errorf("build Versity Gateway (set %s to a versitygw binary instead): %w", s3server.EnvBinary, err)
	}
	return bin, nil
}

// devTB runs internal/testutil/s3server outside a test: Fatalf becomes
// an error returned by start, cleanups run when dev exits.
type devTB struct {
	dir      string
	log      logr.Logger
	cleanups []func()
	n        int
}

type devFatal struct{ err error }

func (d *devTB) Helper()                           {}
func (d *devTB) Logf(format string, args ...any)   { d.log.V(1).Info(fmt.Sprintf(format, args...)) }
func (d *devTB) Fatalf(format string, args ...any) { panic(devFatal{fmt.Errorf(format, args...)}) }
func (d *devTB) Cleanup(f func())                  { d.cleanups = append(d.cleanups, f) }
func (d *devTB) TempDir() string {
	d.n++
	dir := d.dir
	if d.n > 1 {
		dir = filepath.Join(d.dir, strconv.Itoa(d.n))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		d.Fatalf("%v", err)
	}
	return dir
}

func (d *devTB) start(buckets []string) (srv *s3server.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(devFatal)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	return s3server.Start(d, buckets...), nil
}

func newDevCmd() *cobra.Command {
	var (
		f              brokerFlags
		keepDir        string
		zones          []string
		brokersPerZone int
		replication    string
		putLatency     time.Duration
		getLatency     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local 3-zone cluster (embedded etcd, brokers on 127.0.0.1:9092-9094) with a throw-away data dir",
		Long: `Run a Strata cluster for development in one process: an embedded etcd on a
random loopback port and --brokers-per-zone brokers in each of --zones
(default a, b, c), listening on consecutive ports from --listen
(127.0.0.1:9092, 9093, 9094; port 0 picks random ports). Broker IDs are
0, 1, 2, ... in zone order; each broker's rack is its zone. Topics default
to replication factor min(3, brokers) (set default.replication.factor with
--set). Data goes to a temporary directory removed on exit, unless
--keep-dir names one to keep. Prints
"strata dev ready: bootstrap=<addr>,<addr>,..." once every broker accepts
connections (with --metrics-listen, each broker serves metrics on its own
port, consecutive from the given one or random for port 0, and the line
ends with " metrics=<url>,<url>,..."); Ctrl-C stops it cleanly.

--replication wal replicates through per-zone fast buckets (wal.enable,
docs/replication.md): a local Versity Gateway is started with one bucket
per zone (strata-wal-<zone>), from $STRATA_VERSITYGW, else from the cache
directory, else built there with "go install
github.com/versity/versitygw/cmd/versitygw@v1.8.0". --s3-put-latency and
--s3-get-latency add latency to every PUT / GET (emulating S3 Express One
Zone in front of the gateway).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, flush, err := newLogger(f.logFormat, f.logLevel)
			if err != nil {
				return err
			}
			defer flush()
			if brokersPerZone < 1 || len(zones) == 0 {
				return errors.New("need at least one zone and one broker per zone")
			}
			root := keepDir
			if root == "" {
				if root, err = os.MkdirTemp("", "strata-dev-"); err != nil {
					return err
				}
				defer os.RemoveAll(root)
			}
			if err := cmd.Flags().Set("data-dir", root); err != nil {
				return err
			}
			base, err := f.serverConfig(cmd, log)
			if err != nil {
				return err
			}
			switch replication {
			case "classic":
				if putLatency != 0 || getLatency != 0 {
					return errors.New("--s3-put-latency and --s3-get-latency need --replication wal")
				}
			case "wal":
				stopS3, err := startDevBuckets(cmd, &base, root, zones, putLatency, getLatency, log)
				if err != nil {
					return err
				}
				defer stopS3()
			default:
				return fmt.Errorf("--replication %q: want classic or wal", replication)
			}
			return runDev(cmd, base, root, zones, brokersPerZone, f.shutdownTimeout, log)
		},
	}
	f.register(cmd, "127.0.0.1:9092", "")
	// --data-dir of dev keeps the directory; hide the shared flag's meaning.
	cmd.Flags().Lookup("data-dir").Hidden = true
	cmd.Flags().Lookup("broker-id").Hidden = true
	cmd.Flags().Lookup("rack").Hidden = true
	cmd.Flags().StringVar(&keepDir, "keep-dir", "", "use (and keep) this data directory instead of a temporary one")
	cmd.Flags().StringSliceVar(&zones, "zones", []string{"a", "b", "c"}, "zones (racks) of the cluster")
	cmd.Flags().IntVar(&brokersPerZone, "brokers-per-zone", 1, "brokers in each zone")
	cmd.Flags().StringVar(&replication, "replication", "classic", "replication path: classic (broker-to-broker) or wal (per-zone fast buckets on a local Versity Gateway)")
	cmd.Flags().DurationVar(&putLatency, "s3-put-latency", 0, "with --replication wal: latency added to every bucket PUT")
	cmd.Flags().DurationVar(&getLatency, "s3-get-latency", 0, "with --replication wal: latency added to every bucket GET")
	cmd.Flags().Lookup("log-format").DefValue = "console"
	_ = cmd.Flags().Set("log-format", "console")
	return cmd
}

func runDev(cmd *cobra.Command, base server.Config, root string, zones []string, perZone int, shutdownTimeout time.Duration, log logr.Logger) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	etcd, err := meta.StartEmbedded(ctx, filepath.Join(root, "etcd"), nil)
	if err != nil {
		return err
	}
	defer etcd.Close()
	log.Info("embedded etcd started", "endpoints", etcd.Endpoints, "dir", filepath.Join(root, "etcd"))

	host, portStr, err := net.SplitHostPort(base.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", base.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", base.Listen, err)
	}
	n := len(zones) * perZone
	if base.Broker.DefaultReplicationFactor <= 1 {
		base.Broker.DefaultReplicationFactor = int16(min(3, n))
	}
	base.Cluster.EtcdEndpoints = etcd.Endpoints
	if base.Cluster.Name == "" {
		base.Cluster.Name = "dev"
	}

	var servers []*server.Server
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, len(servers))
		for i, s := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.Shutdown(sctx)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	var addrs []string
	id := int32(0)
	for _, zone := range zones {
		for range perZone {
			cfg := base
			cfg.Broker.NodeID = id
			cfg.Broker.Rack = zone
			cfg.Broker.DataDir = filepath.Join(root, fmt.Sprintf("broker-%d", id))
			if cfg.Cluster.WAL.Enable {
				cfg.Cluster.WAL.Bucket.Bucket = devBucketPrefix + zone
			}
			cfg.Listen = net.JoinHostPort(host, "0")
			if port != 0 {
				cfg.Listen = net.JoinHostPort(host, strconv.Itoa(port+int(id)))
			}
			if cfg.MetricsListen != "" {
				mh, mp, err := net.SplitHostPort(cfg.MetricsListen)
				if p, perr := strconv.Atoi(mp); err == nil && perr == nil && p != 0 {
					cfg.MetricsListen = net.JoinHostPort(mh, strconv.Itoa(p+int(id)))
				}
			}
			s, err := server.Start(ctx, cfg, log.WithValues("broker", id, "zone", zone))
			if err != nil {
				return errors.Join(fmt.Errorf("broker %d (zone %s): %w", id, zone, err), shutdown())
			}
			servers = append(servers, s)
			addrs = append(addrs, s.Addr())
			id++
		}
	}
	ready := "strata dev ready: bootstrap=" + strings.Join(addrs, ",")
	if base.MetricsListen != "" {
		// Only with --metrics-listen: the default line stays exactly the
		// bootstrap list.
		var urls []string
		for _, s := range servers {
			urls = append(urls, "http://"+s.MetricsAddr()+"/metrics")
		}
		ready += " metrics=" + strings.Join(urls, ",")
	}
	fmt.Fprintln(cmd.OutOrStdout(), ready)
	var serveErr error
	done := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			if err := <-s.Done(); err != nil {
				done <- err
			}
		}()
	}
	select {
	case <-ctx.Done():
		log.Info("signal received, shutting down")
	case serveErr = <-done:
		log.Error(serveErr, "a listener failed, shutting down")
	}
	stop() // a second signal kills the process the default way
	return errors.Join(serveErr, shutdown())
}
