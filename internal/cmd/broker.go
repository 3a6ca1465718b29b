package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/strata-dev/strata/broker/server"
)

// brokerFlags are the flags of `strata broker` (and, partly, `strata dev`).
type brokerFlags struct {
	configFile      string
	listen          string
	advertised      string
	dataDir         string
	brokerID        int32
	rack            string
	metricsListen   string
	set             []string
	shutdownTimeout time.Duration
	logLevel        int
	logFormat       string
}

func (f *brokerFlags) register(cmd *cobra.Command, defaultListen, defaultMetrics string) {
	fl := cmd.Flags()
	fl.StringVar(&f.configFile, "config", "", "broker config file: Java properties, or YAML/JSON when it ends in .yaml/.yml/.json; flags override it")
	fl.StringVar(&f.listen, "listen", defaultListen, "Kafka listener address host:port (config: listen or listeners)")
	fl.StringVar(&f.advertised, "advertised-address", "", "host:port advertised to clients (default: the listener's address)")
	fl.StringVar(&f.dataDir, "data-dir", "", "data directory (config: log.dirs)")
	fl.Int32Var(&f.brokerID, "broker-id", 0, "broker.id")
	fl.StringVar(&f.rack, "rack", "", "broker.rack, i.e. the zone (config: broker.rack or zone)")
	fl.StringVar(&f.metricsListen, "metrics-listen", defaultMetrics, "HTTP address for /metrics, /healthz and /readyz; empty disables it")
	fl.StringArrayVar(&f.set, "set", nil, "extra config key=value, repeatable (e.g. --set log.flush.interval.ms=0)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown waits for in-flight requests")
	fl.IntVarP(&f.logLevel, "verbosity", "v", 0, "log verbosity (0 info, 1 debug, 2 trace)")
	fl.StringVar(&f.logFormat, "log-format", "json", "log format: json or console")
}

// serverConfig merges the config file, --set values and explicit flags.
func (f *brokerFlags) serverConfig(cmd *cobra.Command, log logr.Logger) (server.Config, error) {
	cfg := server.DefaultConfig()
	cfg.Listen, cfg.MetricsListen = f.listen, f.metricsListen
	kv := map[string]string{}
	if f.configFile != "" {
		fileKV, err := server.ReadConfigFile(f.configFile)
		if err != nil {
			return cfg, err
		}
		kv = fileKV
	}
	for _, s := range f.set {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return cfg, fmt.Errorf("--set %q: want key=value", s)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	unknown, err := server.ApplySettings(&cfg, kv)
	if err != nil {
		return cfg, err
	}
	for _, k := range unknown {
		log.Info("WARNING: ignoring unknown config key (not used by this broker version)", "key", k)
	}
	changed := cmd.Flags().Changed
	if changed("listen") || cfg.Listen == "" {
		cfg.Listen = f.listen
	}
	if changed("metrics-listen") {
		cfg.MetricsListen = f.metricsListen
	}
	if f.advertised != "" {
		if _, err := server.ApplySettings(&cfg, map[string]string{"advertised.address": f.advertised}); err != nil {
			return cfg, err
		}
	}
	if changed("data-dir") {
		cfg.Broker.DataDir = f.dataDir
	}
	if changed("broker-id") {
		cfg.Broker.NodeID = f.brokerID
	}
	if changed("rack") {
		cfg.Broker.Rack = f.rack
	}
	if cfg.Broker.DataDir == "" {
		return cfg, errors.New("no data directory: set --data-dir or log.dirs")
	}
	return cfg, nil
}

func newLogger(format string, verbosity int) (logr.Logger, func(), error) {
	zc := zap.NewProductionConfig()
	if format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	} else if format != "json" {
		return logr.Discard(), nil, fmt.Errorf("--log-format %q: want json or console", format)
	}
	zc.Level = zap.NewAtomicLevelAt(zapcore.Level(-verbosity))
	zc.Sampling = nil
	zl, err := zc.Build()
	if err != nil {
		return logr.Discard(), nil, err
	}
	return zapr.NewLogger(zl), func() { _ = zl.Sync() }, nil
}

func newBrokerCmd() *cobra.Command {
	var f brokerFlags
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a Strata broker (Kafka wire protocol)",
		Long: `Run one Strata broker: the Kafka protocol on --listen, Prometheus metrics
and health probes on --metrics-listen, data in --data-dir.

SIGTERM or SIGINT shuts it down gracefully: the listener closes, in-flight
requests finish, logs are flushed and closed.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, flush, err := newLogger(f.logFormat, f.logLevel)
			if err != nil {
				return err
			}
			defer flush()
			cfg, err := f.serverConfig(cmd, log)
			if err != nil {
				return err
			}
			return runBroker(cmd.Context(), cfg, f.shutdownTimeout, log, nil)
		},
	}
	f.register(cmd, "0.0.0.0:9092", "0.0.0.0:9644")
	return cmd
}

// runBroker starts a broker, calls onReady, and serves until SIGINT/SIGTERM
// or ctx ends, then shuts down gracefully.
func runBroker(ctx context.Context, cfg server.Config, shutdownTimeout time.Duration, log logr.Logger, onReady func(*server.Server)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	if onReady != nil {
		onReady(srv)
	}
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("signal received, shutting down")
	case serveErr = <-srv.Done():
		log.Error(serveErr, "listener failed, shutting down")
	}
	stop() // a second signal kills the process the default way
	// The grace period covers in-flight requests after the controlled
	// shutdown, not the controlled shutdown itself.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout+cfg.ControlledShutdownTimeout())
	defer cancel()
	return errors.Join(serveErr, srv.Shutdown(sctx))
}
