package cmd

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var (
		bootstrap, modes, metrics, racks, topicConfigs []string
		cl                                             bench.ClusterOptions
		asJSON, pin, storeTmpfs, defaultPoint          bool
		plot, fromJSON, pinLoad, metricsTokenFile      string
		pprofListen                                    string
		sweepSpec                                      string
		sec                                            clientSecurityFlags
	)
	lo := bench.DefaultLoadOptions()
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure latency, throughput and cross-zone traffic, classic vs WAL replication",
		Long: `Drive a franz-go load (producers, consumers) and report produce latency
p50/p99/p99.9, end-to-end latency p50/p99, throughput, inter-broker
cross-zone bytes per produced byte, object PUTs/s per broker and GETs/s,
broker CPU seconds per GB produced, and in WAL modes the latency of each
stage of the WAL path (p50/p99).

With --modes (default classic,wal) each mode gets its own embedded cluster,
started by running this binary's "dev" command; the table shows every mode
and the ratio of each mode to the first (wal/classic), all from one run.
With --bootstrap the load runs once against an existing cluster (mode
"external"); give its brokers' /metrics URLs with --metrics for the traffic
figures. A figure whose metric the brokers do not export is n/a.

--sweep key=v1,v2,... measures the latency/cost frontier of a WAL setting:
every wal mode of --modes runs once per value with key=value added to its
broker config, classic once as the reference (--modes defaults to
classic,wal+latency then: wal.policy=auto stretches the upload interval
itself). The report has a row per point (its setting, produce p50/p99,
end-to-end p99, PUTs/s per broker, USD per GB produced and its ratio to
classic's) and --plot draws p99 against cost. The default point comes
last: the plain wal mode once with the broker's defaults (wal.policy=auto
within its latency and cost bounds) and --broker-config, without the
swept key, so the plot shows where a user who tunes nothing sits
(--default-point=false leaves it out).`,
		Example: `  strata bench --modes classic --duration 10s --acks all --record-size 1024 --partitions 12
  strata bench --bootstrap 127.0.0.1:9092 --metrics http://127.0.0.1:9644/metrics --json
  strata bench --modes classic,wal --plot latency.svg
  strata bench --sweep wal.upload.interval.ms=5,10,20,40,80 --rate 2000 --plot frontier.svg`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(bootstrap) > 0 && cmd.Flags().Changed("modes") {
				return fmt.Errorf("--bootstrap and --modes exclude each other: --bootstrap measures one external cluster")
			}
			if ext := strings.ToLower(filepath.Ext(plot)); plot != "" && ext != ".svg" && ext != ".png" {
				return fmt.Errorf("--plot %q: want a .svg or .png file name", plot)
			}
			if fromJSON != "" {
				return rerender(cmd, fromJSON, plot, asJSON)
			}
			if pinLoad != bench.PinLoadWithStore && pinLoad != bench.PinLoadWithBrokers {
				return fmt.Errorf("--pin-load-generator %q: want %s or %s", pinLoad, bench.PinLoadWithStore, bench.PinLoadWithBrokers)
			}
			lo.ClientRacks = racks
			if len(bootstrap) > 0 && cmd.Flags().Changed("store-tmpfs") {
				return fmt.Errorf("--store-tmpfs is for the embedded clusters, not --bootstrap")
			}
			for _, kv := range cl.BrokerConfig {
				if k, _, ok := strings.Cut(kv, "="); !ok || strings.TrimSpace(k) == "" {
					return fmt.Errorf("--broker-config %q: want key=value", kv)
				}
				if len(bootstrap) > 0 {
					return fmt.Errorf("--broker-config is for the embedded clusters, not --bootstrap")
				}
			}
			if cmd.Flags().Changed("default-point") && !cmd.Flags().Changed("sweep") {
				return fmt.Errorf("--default-point is for --sweep: it adds the default's point to the frontier")
			}
			var sweep *bench.Sweep
			if cmd.Flags().Changed("sweep") {
				if len(bootstrap) > 0 {
					return fmt.Errorf("--sweep is for the embedded clusters, not --bootstrap: it sets their broker config")
				}
				if !cmd.Flags().Changed("modes") {
					modes = []string{bench.ModeClassic, bench.ModeWAL + "+latency"}
				}
				var err error
				if sweep, err = bench.ParseSweep(sweepSpec); err != nil {
					return err
				}
				sweep.Default = defaultPoint
				if err := checkSweepValues(sweep); err != nil {
					return err
				}
				if err := sweep.Validate(modes, cl.BrokerConfig); err != nil {
					return err
				}
			}
			if len(topicConfigs) > 0 {
				lo.TopicConfigs = map[string]string{}
				for _, kv := range topicConfigs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return fmt.Errorf("--topic-config %q: want key=value", kv)
					}
					lo.TopicConfigs[strings.TrimSpace(k)] = strings.TrimSpace(v)
				}
			}
			if err := lo.Validate(); err != nil {
				return err
			}
			security, err := sec.security()
			if err != nil {
				return err
			}
			if security != nil && len(bootstrap) == 0 {
				return fmt.Errorf("--tls-ca-file and --sasl-* are for --bootstrap (embedded clusters: mode suffix %s)", bench.SecuritySuffix)
			}
			lo.Security = security
			var storeNote string
			if storeTmpfs && len(bootstrap) == 0 {
				cl.StoreDir, storeNote = bench.StoreTmpfs()
			}
			cfg := bench.Config{Bootstrap: bootstrap, Modes: modes, MetricsURLs: metrics, Cluster: cl, Load: lo, Progress: cmd.ErrOrStderr(), Pin: pin, PinLoadWith: pinLoad, StoreNote: storeNote, Sweep: sweep}
			if metricsTokenFile != "" {
				b, err := os.ReadFile(metricsTokenFile)
				if err != nil {
					return fmt.Errorf("--metrics-token-file: %w", err)
				}
				cfg.MetricsToken = strings.TrimSpace(string(b))
			}
			if len(bootstrap) == 0 {
				if err := bench.ValidateModes(modes); err != nil {
					return err
				}
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("locate the strata binary for the embedded clusters: %w", err)
				}
				cfg.Starter = &bench.DevStarter{Binary: exe}
			}
			if pprofListen != "" {
				if err := servePprof(cmd, pprofListen); err != nil {
					return err
				}
			}
			// Ctrl-C or SIGTERM ends the run and stops the embedded clusters.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := bench.Run(ctx, cfg)
			if err != nil {
				return err
			}
			return writeReport(cmd, rep, plot, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&bootstrap, "bootstrap", nil, "measure an existing cluster at host:port,... (mode \"external\") instead of embedded ones")
	fl.StringSliceVar(&modes, "modes", []string{bench.ModeClassic, bench.ModeWAL}, "embedded cluster modes to measure, in order: classic, wal (wal.policy auto), wal+latency, wal+cost, wal+auto, a wal mode with "+bench.ZoneLocalSuffix+" (zone-local produce, wal.zonelocal.produce.enable; with --client-zones), each optionally with "+bench.SecuritySuffix)
	fl.StringSliceVar(&metrics, "metrics", nil, "brokers' Prometheus URLs (http://host:port/metrics,...) for the traffic figures")
	fl.StringVar(&metricsTokenFile, "metrics-token-file", "", "a file holding the bearer token of the brokers' /metrics (an operator's cluster: key token of Secret <cluster>-metrics-token)")
	fl.StringVar(&lo.Acks, "acks", lo.Acks, "producer acks: 0, 1 or all")
	fl.IntVar(&lo.RecordSize, "record-size", lo.RecordSize, "record value size in bytes")
	fl.Int32Var(&lo.Partitions, "partitions", lo.Partitions, "partitions of the bench topic")
	fl.Int16Var(&lo.ReplicationFactor, "replication-factor", 0, "replication factor of the bench topic (0: min(3, brokers))")
	fl.BoolVar(&storeTmpfs, "store-tmpfs", true, "wal modes: the local object store keeps its data on a tmpfs ("+bench.DefaultStoreDir+") where there is one, as an S3 service's storage is not on the brokers' machine (settings.object_store_data); false: on disk")
	fl.StringArrayVar(&cl.BrokerConfig, "broker-config", nil, "broker config key=value for every embedded cluster, repeatable (e.g. wal.upload.interval.ms=5); a mode's wal.policy wins")
	fl.StringArrayVar(&topicConfigs, "topic-config", nil, "topic config key=value, repeatable (e.g. min.insync.replicas=2)")
	fl.IntVar(&lo.Rate, "rate", 0, "target records/s over all producers (0: as fast as possible, --max-in-flight bounded)")
	fl.DurationVar(&lo.Duration, "duration", lo.Duration, "measured window per mode")
	fl.DurationVar(&lo.Warmup, "warmup", lo.Warmup, "load before the measured window (not counted)")
	fl.IntVar(&lo.Producers, "producers", lo.Producers, "producer clients")
	fl.IntVar(&lo.Consumers, "consumers", lo.Consumers, "consumer clients (partitions assigned round-robin; 0: no end-to-end latency)")
	fl.IntVar(&lo.MaxInFlight, "max-in-flight", lo.MaxInFlight, "records buffered or in flight per producer")
	fl.DurationVar(&lo.Linger, "linger", 0, "producer linger")
	fl.BoolVar(&lo.PrimePartitions, "prime-partitions", lo.PrimePartitions, "before the load, every producer sends one record to every partition and waits for its answer, as a producer that has run for minutes has had (false: the load starts on producers that never wrote to the topic, so at many partitions franz-go's one-request-per-partition-until-first-answer rule lands in the window; docs/bench.md)")
	fl.StringVar(&lo.Compression, "compression", lo.Compression, "producer compression: none, gzip, snappy, lz4, zstd")
	fl.DurationVar(&lo.DrainTimeout, "drain-timeout", lo.DrainTimeout, "how long consumers may take to read the window's records after it")
	fl.BoolVar(&lo.KeepTopic, "keep-topic", false, "do not delete the bench topic afterwards")
	fl.StringSliceVar(&racks, "client-zones", nil, "client zones given round-robin (e.g. a,b,c): client.rack of the consumers, strata_az=<zone> in the producers' client ID; the traffic and cost figures then count the clients' cross-zone bytes (total_cross_zone_bytes_per_produced_byte)")
	fl.StringSliceVar(&racks, "client-racks", nil, "the same as --client-zones (its earlier name)")
	fl.DurationVar(&cl.S3PutLatency, "s3-put-latency", 5*time.Millisecond, "wal mode: each object PUT takes at least this long, the local server's own time included (emulates S3 Express One Zone)")
	fl.DurationVar(&cl.S3GetLatency, "s3-get-latency", 3*time.Millisecond, "wal mode: each object GET takes at least this long, the local server's own time included")
	fl.DurationVar(&cl.ZoneLatency, "zone-latency", 0, "one-way delay on each direction of cross-zone connections: replica fetches and other-zone bucket GETs in the embedded clusters, and the bench clients' connections to brokers of other zones")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	sec.register(fl)
	fl.StringVar(&pinLoad, "pin-load-generator", bench.PinLoadWithStore, "with --pin: the CPUs of the load generator (this process): store (with the object store) or brokers (with the brokers: the object store's CPU, WAL mode only, then weighs on neither the brokers nor the clients)")
	fl.StringVar(&pprofListen, "pprof-listen", "", "serve the load generator's (this process's) Go profiles at http://<addr>/debug/pprof/ during the run, block and mutex profiles included (e.g. 127.0.0.1:6061; the brokers': --broker-config metrics.pprof.enable=true)")
	fl.BoolVar(&pin, "pin", true, "on Linux with 2+ CPUs: run the embedded brokers on one half of the CPUs, the object store and the load generator on the other (the same in every mode; settings.pin in the JSON)")
	fl.StringVar(&fromJSON, "from-json", "", "measure nothing: print (and --plot) the report a --json run wrote to this file")
	fl.StringVar(&plot, "plot", "", "write the latency distributions of all modes (with --sweep: acks p99 against cost per point) to this .svg or .png file")
	fl.BoolVar(&defaultPoint, "default-point", true, "with --sweep: run the plain wal mode once more with the broker's defaults (no swept key): the point a user who tunes nothing gets")
	fl.StringVar(&sweepSpec, "sweep", "", "key=v1,v2,...: run every wal mode once per value of this WAL broker setting (e.g. wal.upload.interval.ms=5,10,20,40,80), classic once; --modes defaults to classic,wal+latency")
	return cmd
}

// checkSweepValues runs the sweep's key and values through the broker's
// own config parser, which the embedded clusters (this binary's dev, its
// --set) use: a key it does not know would be ignored with a warning and
// every point would measure the same cluster; a value it refuses would
// fail a cluster after the earlier points were measured.
func checkSweepValues(sw *bench.Sweep) error {
	for _, v := range sw.Values {
		cfg := server.DefaultConfig()
		unknown, err := server.ApplySettings(&cfg, map[string]string{sw.Key: v})
		if err != nil {
			return fmt.Errorf("%w: %w", bench.ErrSweep, err)
		}
		if len(unknown) > 0 {
			return fmt.Errorf("%w %s: not a broker config key of this strata (its brokers would ignore it)", bench.ErrSweep, sw.Key)
		}
	}
	return nil
}

// writeReport writes the plot, if asked, and the report as text or JSON.
func writeReport(cmd *cobra.Command, rep *bench.Report, plot string, asJSON bool) error {
	if plot != "" {
		if err := bench.WritePlotFile(plot, rep); err != nil {
			return err
		}
		what := "latency"
		if rep.Sweep != nil {
			what = "frontier"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s plot written to %s\n", what, plot)
	}
	if asJSON {
		return rep.WriteJSON(cmd.OutOrStdout())
	}
	return rep.WriteText(cmd.OutOrStdout())
}

// rerender prints (and plots) a report a --json run saved.
func rerender(cmd *cobra.Command, path, plot string, asJSON bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := bench.ReadJSON(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeReport(cmd, rep, plot, asJSON)
}

// servePprof serves this process's profiles at addr for the rest of the
// run, with block and mutex sampling on.
func servePprof(cmd *cobra.Command, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-listen: %w", err)
	}
	runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	runtime.SetMutexProfileFraction(10)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	fmt.Fprintf(cmd.ErrOrStderr(), "load generator profiles at http://%s/debug/pprof/\n", ln.Addr())
	go func() { _ = http.Serve(ln, mux) }() //nolint:gosec // a local debugging endpoint for the run's length
	return nil
}
