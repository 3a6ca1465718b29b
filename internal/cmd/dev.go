package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/server"
)

func newDevCmd() *cobra.Command {
	var (
		f              brokerFlags
		keepDir        string
		zones          []string
		brokersPerZone int
		replication    string
		s3Dir          string
		putLatency     time.Duration
		getLatency     time.Duration
		zoneLatency    time.Duration
		security       bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local 3-zone cluster (embedded etcd, brokers on 127.0.0.1:9092-9094, WAL buckets on a local S3 server) with a throw-away data dir",
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

--replication wal (the default) replicates through per-zone fast buckets
(wal.enable, docs/replication.md): a local Versity Gateway is started with
one bucket per zone (strata-wal-<zone>), from $STRATA_VERSITYGW (make dev
builds it into bin/), else from the user cache directory, else built there
with "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0". Before
the ready line dev prints the endpoint, the credentials and each zone's
bucket and directory; once the first WAL object is uploaded it prints a
ready-to-paste "strata wal inspect" command for it (that object is kept
until exit; the others are deleted once replicated). --s3-put-latency and
--s3-get-latency make every PUT / GET take at least that long, the
gateway's own time included (emulating S3 Express One Zone). --s3-dir
puts the gateway's directory elsewhere (strata bench puts it on a tmpfs:
an S3 service's storage does not run on the brokers' machine, a local
gateway's file system work does). dev runs
wal.policy=latency unless --set (or --config) gives one: every append goes
through an object, as a demo of the WAL path should show; the broker's own
default, auto, replicates inline until the throughput makes objects cheaper
than sending the bytes to the other zones (--set wal.policy=auto).
--replication classic replicates broker to broker without any object store.

--zone-latency D delays every replica fetch connection between brokers of
different zones by D in each direction (a fetch round trip pays 2 x D), in
both modes, and in WAL mode every GET from another zone's bucket by 2 x D;
clients are not delayed. Each broker exports what was delayed as
strata_dev_zone_latency_* on its /metrics.

--security serves SASL_SSL with SCRAM-SHA-256/512 instead of PLAINTEXT,
brokers included (they replicate as the SCRAM user strata-broker): a CA
and a broker certificate (for 127.0.0.1, localhost and the host name) are
generated into <data dir>/security/, and before the ready line dev prints
"strata dev security: ca=<file> mechanism=SCRAM-SHA-512 user=admin
password=<secret>" (a random password; docs/security.md shows client
settings). ACLs are enforced: admin and strata-broker are super users,
other users need ACLs (kafka-acls.sh, kadm) granted by admin.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, flush, err := newLogger(f.logFormat, f.logLevel)
			if err != nil {
				return err
			}
			defer flush()
			if brokersPerZone < 1 || len(zones) == 0 {
				return errors.New("need at least one zone and one broker per zone")
			}
			if zoneLatency < 0 || putLatency < 0 || getLatency < 0 {
				return errors.New("--zone-latency, --s3-put-latency and --s3-get-latency must not be negative")
			}
			if replication != "classic" && replication != "wal" {
				return fmt.Errorf("--replication %q: want wal or classic", replication)
			}
			if replication == "classic" && s3Dir != "" {
				return errors.New("--s3-dir needs --replication wal (the default)")
			}
			if replication == "classic" && (putLatency != 0 || getLatency != 0) {
				return errors.New("--s3-put-latency and --s3-get-latency need --replication wal (the default)")
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
			if replication == "wal" {
				if err := f.devWALPolicy(); err != nil {
					return err
				}
			}
			base, err := f.serverConfig(cmd, log)
			if err != nil {
				return err
			}
			var w *devWAL
			if replication == "wal" {
				if w, err = startDevWAL(cmd, &base, root, s3Dir, zones, putLatency, getLatency, log); err != nil {
					return err
				}
				defer w.Stop()
			}
			return runDev(cmd, devOptions{base: base, root: root, zones: zones, perZone: brokersPerZone,
				shutdownTimeout: f.shutdownTimeout, zoneLatency: zoneLatency, wal: w, security: security}, log)
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
	cmd.Flags().StringVar(&replication, "replication", "wal", "replication path: wal (per-zone fast buckets on a local Versity Gateway) or classic (broker-to-broker)")
	cmd.Flags().StringVar(&s3Dir, "s3-dir", "", "with --replication wal: the local gateway's directory (buckets, credentials; default s3/ in the data directory), kept at exit; a tmpfs (e.g. under /dev/shm) keeps the gateway's file system work off the brokers' CPUs")
	cmd.Flags().DurationVar(&putLatency, "s3-put-latency", 0, "with --replication wal: each bucket PUT takes at least this long, the local server's own time included")
	cmd.Flags().DurationVar(&getLatency, "s3-get-latency", 0, "with --replication wal: each bucket GET takes at least this long, the local server's own time included")
	cmd.Flags().DurationVar(&zoneLatency, "zone-latency", 0, "one-way delay on each direction of replica connections between zones (and per GET from another zone's bucket: 2x)")
	cmd.Flags().BoolVar(&security, "security", false, "serve SASL_SSL with SCRAM only (also between brokers): a CA and broker certificate are generated into the data dir, a client user with a random password is created and printed")
	cmd.Flags().Lookup("log-format").DefValue = "console"
	_ = cmd.Flags().Set("log-format", "console")
	return cmd
}

// devOptions is what runDev needs besides the command.
type devOptions struct {
	base            server.Config
	root            string
	zones           []string
	perZone         int
	shutdownTimeout time.Duration
	zoneLatency     time.Duration
	wal             *devWAL // nil: classic replication
	security        bool
}

func runDev(cmd *cobra.Command, o devOptions, log logr.Logger) error {
	base, root := o.base, o.root
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
	n := len(o.zones) * o.perZone
	if base.Broker.DefaultReplicationFactor <= 1 {
		base.Broker.DefaultReplicationFactor = int16(min(3, n))
	}
	base.Cluster.EtcdEndpoints = etcd.Endpoints
	if base.Cluster.Name == "" {
		base.Cluster.Name = "dev"
	}
	var sec *devSecurity
	if o.security {
		if sec, err = setupDevSecurity(ctx, &base, root, host, etcd.Endpoints); err != nil {
			return fmt.Errorf("--security: %w", err)
		}
	}

	var servers []*server.Server
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout+base.ControlledShutdownTimeout())
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
	zoneOf := newDevZones()
	defer zoneOf.allStarted()
	var addrs []string
	id := int32(0)
	for _, zone := range o.zones {
		for range o.perZone {
			cfg := base
			cfg.Broker.NodeID = id
			cfg.Broker.Rack = zone
			cfg.Broker.DataDir = filepath.Join(root, fmt.Sprintf("broker-%d", id))
			// The brokers share this process's open-files limit.
			cfg.Broker.FDHeadroom = server.FDHeadroomShare(len(o.zones) * o.perZone)
			var zs *zoneStats
			if o.zoneLatency > 0 {
				zs = &zoneStats{}
				cfg.Cluster.Replica.Dial = zoneOf.replicaDialer(zone, o.zoneLatency, zs, log.WithValues("broker", id))
			}
			if o.wal != nil {
				cfg.Cluster.WAL.Bucket.Bucket = devBucketPrefix + zone
				cfg.Cluster.WAL.WrapStore = o.wal.wrapper(zone, o.zoneLatency, zs)
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
			zoneOf.add(s.Addr(), zone)
			if _, p, err := net.SplitHostPort(s.Addr()); err == nil {
				zoneOf.add(net.JoinHostPort(host, p), zone) // as registered when --listen names a host
			}
			if zs != nil {
				if err := registerZoneMetrics(s.Metrics().Registry, o.zoneLatency, zs); err != nil {
					return errors.Join(fmt.Errorf("broker %d: zone latency metrics: %w", id, err), shutdown())
				}
			}
			addrs = append(addrs, s.Addr())
			id++
		}
	}
	zoneOf.allStarted()
	if o.wal != nil {
		o.wal.printWhere()
	}
	if o.zoneLatency > 0 {
		also := ""
		if o.wal != nil {
			also = " and per GET from another zone's bucket"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "strata dev: inter-zone latency %v one-way on replica fetches between zones (+%v per round trip)%s; see strata_dev_zone_latency_* in /metrics\n",
			o.zoneLatency, 2*o.zoneLatency, also)
	}
	if sec != nil {
		fmt.Fprintln(cmd.OutOrStdout(), sec.line())
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

// devWALPolicy makes dev's WAL replication show objects from the first
// record: wal.policy=latency unless the user chose a policy (--set or the
// config file). The broker default, auto, starts inline and turns objects
// on only at a throughput where they cost less than inline replication —
// at a demo's few records, never.
func (f *brokerFlags) devWALPolicy() error {
	for _, s := range f.set {
		if k, _, _ := strings.Cut(s, "="); strings.TrimSpace(k) == "wal.policy" {
			return nil
		}
	}
	if f.configFile != "" {
		kv, err := server.ReadConfigFile(f.configFile)
		if err != nil {
			return err
		}
		if _, ok := kv["wal.policy"]; ok {
			return nil
		}
	}
	f.set = append([]string{"wal.policy=" + string(cost.PolicyLatency)}, f.set...)
	return nil
}
