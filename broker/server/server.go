package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/auth"
	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/group"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/offsets"
	"github.com/strata-dev/strata/broker/metrics"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/quota"
	"github.com/strata-dev/strata/broker/telemetry"
	"github.com/strata-dev/strata/broker/traffic"
	"github.com/strata-dev/strata/broker/txn"
)

// Config configures a broker process.
type Config struct {
	// Broker is the broker state configuration. Host/Port are the
	// advertised address; when Port is 0 the listener's port is
	// advertised, when Host is empty the listener's host (or the machine's
	// hostname for a wildcard listener).
	Broker broker.Config
	// Listen is the Kafka listener address, e.g. "0.0.0.0:9092" or
	// "127.0.0.1:0".
	Listen string
	// MetricsListen is the HTTP address of /metrics, /healthz and /readyz;
	// empty disables it.
	MetricsListen string
	// Pprof serves Go's profiles under /debug/pprof/ on the metrics
	// listener (metrics.pprof.enable, default false).
	Pprof bool
	// MetricsAccess requires a bearer token or a client certificate for
	// everything on the metrics listener but /healthz and /readyz
	// (metricsauth.go); zero: open.
	MetricsAccess MetricsAccess
	// MaxRequestBytes is socket.request.max.bytes (0: 100 MiB).
	MaxRequestBytes int32
	// MaxInflightRequestMemory bounds the estimated decoded size of
	// requests in flight (queued.max.request.bytes; 0: 2 GiB); see
	// protocol.Config.
	MaxInflightRequestMemory int64
	// Connections are the connection limits (max.connections and the
	// rest, connlimits.go).
	Connections ConnectionLimits
	// Limits are the per-request limits (fetch.max.bytes, fetch session
	// cache); FetchSessionMaxPartitions defaults to max.partitions.
	Limits protocol.Limits
	// QuotaSamples and QuotaWindow sample the client-quota rates
	// (quota.window.num, default 11; quota.window.size.seconds, default
	// 1 s; package broker/quota).
	QuotaSamples int
	QuotaWindow  time.Duration
	// ConnectionsMaxIdle is connections.max.idle.ms (DefaultConfig: 10
	// min; 0 disables): see protocol.Config.IdleTimeout.
	ConnectionsMaxIdle time.Duration
	// RetentionCheckInterval is log.retention.check.interval.ms (0: 5 min).
	RetentionCheckInterval time.Duration
	// LogCleaner is the log cleaner of compacted topics (log.cleaner.*).
	LogCleaner broker.CleanerConfig
	// Group configures the consumer-group coordinator (group.* settings);
	// its Store and PartitionExists are set by Start.
	Group group.Config
	// Share configures share groups (KIP-932): record lock duration,
	// delivery count limit, auto offset reset (zero: Kafka's defaults).
	Share group.ShareConfig
	// OffsetsTopic configures the __consumer_offsets projection
	// (offsets.topic.*, broker/offsetstopic).
	OffsetsTopic InternalTopicConfig
	// TxnStateTopic configures the __transaction_state projection
	// (transaction.state.log.*, broker/txntopic).
	TxnStateTopic InternalTopicConfig
	// Txn configures the transaction coordinator (transaction.* and
	// transactional.id.* settings); its Store, Markers, ProducerIDs and
	// placement are set by Start.
	Txn txn.Config
	// WrapTxnMarkers, when set, wraps the transaction coordinator's
	// marker writer (fault injection in tests: markers that cannot be
	// written, as when leaders are unreachable).
	WrapTxnMarkers func(txn.MarkerWriter) txn.MarkerWriter
	// Cluster configures cluster mode; without etcd endpoints the broker
	// runs standalone.
	Cluster ClusterConfig
	// Prices is the price table of the cost estimates and wal.policy
	// (cost.price.* keys; zero: cost.Default()).
	Prices cost.Prices
	// Telemetry is the KIP-714 client telemetry subscription
	// (telemetry.* settings; zero: no metrics requested).
	Telemetry telemetry.Config
	// Tier is the slow tier (remote.log.storage.system.enable, tier.*).
	Tier TierConfig
	// Security is the listeners (listeners, advertised.listeners,
	// listener.security.protocol.map, inter.broker.listener.name), their
	// TLS and SASL settings, and this broker's inter-broker credentials
	// (docs/security.md).
	Security SecurityConfig
}

// DefaultConfig returns Kafka's defaults: listener 0.0.0.0:9092 advertising
// itself, no metrics listener, auto-created topics with one partition,
// group defaults of group.DefaultConfig. DataDir must be set.
func DefaultConfig() Config {
	cfg := Config{Broker: broker.DefaultConfig(), Listen: "0.0.0.0:9092", Group: group.DefaultConfig(), ConnectionsMaxIdle: 10 * time.Minute,
		LogCleaner: broker.DefaultCleanerConfig()}
	cfg.Broker.Host, cfg.Broker.Port = "", 0 // advertise the listener
	return cfg
}

// Server is a running broker.
type Server struct {
	cfg     Config
	log     logr.Logger
	broker  *broker.Broker
	proto   *protocol.Server
	metrics *metrics.Metrics
	cleaner *broker.LogCleaner
	groups  *group.Coordinator
	offsets *group.FileStore // standalone only
	txns    *txn.Coordinator
	// txnStore is the transaction coordinator's store (etcd or file).
	txnStore txn.Store
	// txnVerifier answers the partition side's KIP-890 checks.
	txnVerifier *txnVerifier
	// ownership follows the live broker set (group and transaction
	// coordinator placement).
	ownership *ownership
	// ib sends inter-broker requests (transaction markers, KIP-890
	// verification).
	ib *interBrokerClients
	// zoneLocal is zone-local produce (zonelocal.go), nil without WAL.
	zoneLocal *zoneLocal
	traffic   *traffic.Counter
	// cost counts replication bytes and dollars (broker/cost).
	cost *cost.Meter
	// tier runs the slow tier (tier.go), nil when off; objObs counts
	// object store calls of every bucket (created once, objstoreObserver).
	tier    *broker.TierManager
	objObs  *objstore.PrometheusObserver
	cluster *clusterRun  // nil standalone
	ln      net.Listener // the first listener
	// lns are all Kafka listeners (lns[0] == ln), bound in the order of
	// listeners; keyPairs their TLS files (nil for plain listeners).
	lns       []net.Listener
	listeners []resolvedListener
	keyPairs  []*keyPair
	http      *http.Server
	httpLn    net.Listener

	// phase drives /readyz and strata_broker_ready (readiness).
	phase atomic.Int32
	// readyReg holds strata_broker_ready; it is served from the start,
	// before the broker's own registry exists (liveMetrics).
	readyReg    *prometheus.Registry
	liveMetrics atomic.Pointer[metrics.Metrics]

	stop     chan struct{}
	wg       sync.WaitGroup
	serveErr chan error
	once     sync.Once
	shutErr  error
}

// Start opens the data directory, binds the listeners and starts serving.
// The broker accepts connections when Start returns.
func Start(ctx context.Context, cfg Config, logger logr.Logger) (*Server, error) {
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = 5 * time.Minute
	}
	listeners, err := resolveListeners(&cfg)
	if err != nil {
		return nil, fmt.Errorf("listeners: %w", err)
	}
	if err := cfg.Connections.checkListeners(listeners); err != nil {
		return nil, err
	}
	lns := make([]net.Listener, 0, len(listeners))
	closeAll := func() {
		for _, l := range lns {
			l.Close()
		}
	}
	for i := range listeners {
		l := &listeners[i]
		ln, err := net.Listen("tcp", l.Bind)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen on %s (listener %s): %w", l.Bind, l.Name, err)
		}
		lns = append(lns, ln)
		if err := l.advertise(ln.Addr()); err != nil {
			closeAll()
			return nil, err
		}
		cfg.Broker.Listeners = append(cfg.Broker.Listeners, broker.AdvertisedListener{Name: l.Name, Host: l.AdvHost, Port: l.AdvPort})
	}
	cfg.Broker.Host, cfg.Broker.Port = listeners[0].AdvHost, listeners[0].AdvPort
	ln := lns[0]
	cfg.Broker.Clustered = len(cfg.Cluster.EtcdEndpoints) > 0
	s := &Server{cfg: cfg, log: logger, ln: ln, lns: lns, listeners: listeners, stop: make(chan struct{}), serveErr: make(chan error, len(lns)+1)}
	started := false
	defer func() {
		if !started {
			s.abortStart()
		}
	}()
	if err := s.loadKeyPairs(); err != nil {
		return nil, err
	}
	// The HTTP listener comes first so that probes get an answer (503 and
	// why) during log recovery and while joining the cluster, not a
	// refused connection.
	s.readyReg = prometheus.NewRegistry()
	s.readyReg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "strata_broker_ready",
		Help: "1 when /readyz answers 200: logs recovered and, in cluster mode, the broker's registration alive and visible in its metadata view.",
	}, func() float64 {
		if ok, _ := s.readiness(); ok {
			return 1
		}
		return 0
	}))
	if cfg.MetricsListen != "" {
		guard, err := newMetricsGuard(cfg.MetricsAccess, s.log)
		if err != nil {
			return nil, err
		}
		tlsCfg, err := metricsTLS(cfg.MetricsAccess, s.log)
		if err != nil {
			return nil, err
		}
		if s.httpLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.MetricsListen, err)
		}
		if tlsCfg != nil {
			s.httpLn = tls.NewListener(s.httpLn, tlsCfg)
		}
		s.http = &http.Server{Handler: guard.wrap(s.httpHandler()), ReadHeaderTimeout: 10 * time.Second}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error(err, "metrics server stopped")
			}
		}()
	}
	cfg.Broker.RemoteStorageSystem = cfg.Tier.Enable
	s.cfg.Broker.RemoteStorageSystem = cfg.Tier.Enable
	if cfg.Broker.FDHeadroom == nil {
		cfg.Broker.FDHeadroom = fdHeadroom
	}
	b, err := broker.Open(ctx, cfg.Broker, logger.WithName("broker"))
	if err != nil {
		return nil, err
	}
	s.broker = b
	s.metrics = metrics.New(b)
	s.liveMetrics.Store(s.metrics)
	s.traffic = traffic.New(cfg.Broker.Rack)
	s.traffic.KnownZone = func(zone string) bool {
		return slices.ContainsFunc(b.Brokers(), func(bi broker.BrokerInfo) bool { return bi.Rack == zone })
	}
	s.metrics.Registry.MustRegister(s.traffic.Collector())
	if cfg.Prices == (cost.Prices{}) {
		cfg.Prices = cost.Default()
		s.cfg.Prices = cfg.Prices
	}
	s.cost = cost.NewMeter(cfg.Prices)
	s.metrics.Registry.MustRegister(s.cost.Collectors()...)
	s.traffic.OnCrossZone = func(path traffic.Path, dir traffic.Direction, n int) {
		switch {
		case path == traffic.ReplicationInline && dir == traffic.Out:
			s.cost.CrossZone(int64(n), false)
		case path == traffic.ReplicationWALMetadata && dir == traffic.Out:
			s.cost.CrossZone(int64(n), true)
		case path == traffic.Produce:
			s.cost.Client(cost.ClientProduce, int64(n))
		case path == traffic.Consume:
			s.cost.Client(cost.ClientConsume, int64(n))
		}
	}
	s.ownership = &ownership{b: b}
	s.cleaner = broker.NewLogCleaner(b, cfg.LogCleaner)
	s.metrics.Registry.MustRegister(metrics.CleanerCollector(s.cleaner))
	if s.tier, err = s.startTier(ctx, b); err != nil {
		return nil, err
	}
	groupCfg := cfg.Group
	if cfg.Broker.Clustered {
		s.phase.Store(phaseJoining)
		if s.cluster, err = s.startCluster(ctx, b, s.traffic); err != nil {
			return nil, err
		}
		// Offsets and membership in etcd; each group has one coordinator
		// among the live brokers.
		groupCfg.Store = offsets.New(s.cluster.store)
		groupCfg.Owns = groupOwner(b)
		groupCfg.OwnershipEpoch = s.ownership.Epoch
	} else {
		// Consumer groups: committed offsets live under the data dir and
		// survive restarts.
		if s.offsets, err = group.OpenFileStore(filepath.Join(cfg.Broker.DataDir, "__group_offsets")); err != nil {
			return nil, fmt.Errorf("open group offsets: %w", err)
		}
		groupCfg.Store = s.offsets
	}
	groupCfg.PartitionExists = func(topic string, p int32) bool {
		t, ok := b.Topic(topic)
		return ok && p >= 0 && p < t.Partitions
	}
	groupCfg.TopicID = func(topic string) ([16]byte, bool) {
		t, ok := b.Topic(topic)
		return t.ID, ok
	}
	groupCfg.Topics = groupTopics{b}
	if s.groups, err = group.New(logr.NewContext(ctx, logger), groupCfg); err != nil {
		return nil, fmt.Errorf("start group coordinator: %w", err)
	}
	limits := cfg.Limits
	if limits.FetchSessionMaxPartitions == 0 {
		// A follower cannot follow more partitions than the cluster has.
		limits.FetchSessionMaxPartitions = int(cmp.Or(cfg.Broker.MaxPartitions, broker.DefaultMaxPartitions))
	}
	env := &protocol.Env{Broker: b, Groups: s.groups, Shares: group.NewShareCoordinator(s.groups, cfg.Share), Log: logger.WithName("protocol"), Limits: limits, ReauthMax: cfg.Security.ReauthMax}
	env.CreateInternalTopic = s.internalTopicCreator()
	if s.zoneLocal != nil {
		env.ZoneLocal = s.zoneLocal
	}
	if b.Clustered() {
		s.metrics.RegisterQuota()
		env.Quotas = quota.New(quota.Config{Samples: cfg.QuotaSamples, Window: cfg.QuotaWindow, Quotas: b.ClientQuotas,
			Throttled: s.metrics.ObserveQuotaThrottle})
	}
	if s.cluster != nil {
		env.Credentials = s.cluster.store
	} else if env.Credentials, err = auth.OpenFileStore(filepath.Join(cfg.Broker.DataDir, "__scram_credentials.json")); err != nil {
		return nil, err
	}
	if err := s.startAuthorizer(ctx, env); err != nil {
		return nil, err
	}
	if err := s.startTxnCoordinator(ctx, env); err != nil {
		return nil, err
	}
	// KIP-714 client telemetry (telemetry.* settings).
	env.Telemetry = telemetry.New(cfg.Telemetry)
	s.metrics.Registry.MustRegister(env.Telemetry.Collector())
	s.metrics.Registry.MustRegister(env.FetchSessionCollector())
	pcfg := protocol.Config{
		Env:                      env,
		MaxRequestBytes:          cfg.MaxRequestBytes,
		IdleTimeout:              cfg.ConnectionsMaxIdle,
		MaxInflightRequestMemory: cfg.MaxInflightRequestMemory,
		Observer:                 s.metrics,
		Traffic:                  s.traffic,
		Log:                      logger.WithName("protocol"),
	}
	// The inter-broker listener is protected (reserved slots, no
	// broker-wide creation rate, no ip client quota) only beside other
	// listeners, as Kafka's protectedListener: a broker with one
	// listener would otherwise exempt every client.
	protected := ""
	if ib, _ := s.interBroker(); len(s.listeners) > 1 {
		protected = ib.Name
	}
	cfg.Connections.protocolConfig(&pcfg, protected)
	if b.Clustered() {
		// KIP-612's ip entity quotas (AlterClientQuotas) over
		// max.connection.creation.rate.per.ip.
		pcfg.IPConnectionCreationRate = func(ip string) (float64, bool) {
			return quota.IPConnectionRate(b.ClientQuotas(), ip)
		}
	}
	s.proto = protocol.NewServer(pcfg)
	served, err := s.protocolListeners()
	if err != nil {
		return nil, err
	}
	started = true
	go func() {
		select {
		case err := <-s.broker.StorageFailure():
			s.serveErr <- fmt.Errorf("%w: %w", ErrStorageFailure, err)
		case <-s.stop:
		}
	}()
	s.wg.Add(2 + len(served))
	for i, l := range served {
		go func() {
			defer s.wg.Done()
			err := s.proto.ServeListener(s.lns[i], l)
			if errors.Is(err, protocol.ErrServerClosed) {
				err = nil
			}
			s.serveErr <- err
		}()
	}
	go func() {
		defer s.wg.Done()
		s.retentionLoop()
	}()
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-s.stop; cancel() }()
		s.cleaner.Run(ctx)
	}()
	if s.tier != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-s.stop; cancel() }()
			s.tier.Run(ctx)
		}()
	}
	s.startInternalTopics(ctx, env)
	s.phase.Store(phaseRunning)
	s.log.Info("broker started", "listen", ln.Addr().String(), "listeners", s.listenerSummary(), "advertised", net.JoinHostPort(cfg.Broker.Host, strconv.Itoa(int(cfg.Broker.Port))),
		"nodeID", cfg.Broker.NodeID, "rack", cfg.Broker.Rack, "dataDir", cfg.Broker.DataDir, "metrics", s.MetricsAddr())
	return s, nil
}

// startAuthorizer turns ACL enforcement on when authorizer.class.name
// asks for it: bindings from etcd (followed) in a cluster, from
// <data dir>/__acls.json standalone.
func (s *Server) startAuthorizer(ctx context.Context, env *protocol.Env) error {
	sc := s.cfg.Security
	if !sc.Authorizer {
		return nil
	}
	authz := auth.NewAuthorizer(auth.Policy{SuperUsers: sc.SuperUsers, AllowIfNoACL: sc.AllowEveryoneIfNoACL})
	if s.cluster != nil {
		if err := s.cluster.followACLs(ctx, authz); err != nil {
			return fmt.Errorf("load ACLs: %w", err)
		}
		env.ACLs = s.cluster.store
	} else {
		store, err := auth.OpenFileACLStore(filepath.Join(s.cfg.Broker.DataDir, "__acls.json"), authz.SetBindings)
		if err != nil {
			return err
		}
		env.ACLs = store
	}
	env.Authorizer, env.Denials = authz, s.metrics
	s.log.Info("ACL authorizer on", "superUsers", sc.SuperUsers, "allowEveryoneIfNoACL", sc.AllowEveryoneIfNoACL, "bindings", len(authz.Bindings()))
	return nil
}

// abortStart undoes what a failed Start had set up.
func (s *Server) abortStart() {
	s.stopTxnCoordinator()
	if s.groups != nil {
		s.groups.Close()
	}
	if s.cluster != nil {
		s.cluster.stop()
	}
	if s.offsets != nil {
		s.offsets.Close()
	}
	if s.http != nil {
		_ = s.http.Close()
	}
	s.wg.Wait()
	for _, l := range s.lns {
		l.Close()
	}
	if s.broker != nil {
		s.broker.Close()
	}
}

// Readiness phases of a server (Server.phase).
const (
	phaseRecovering int32 = iota // broker.Open: recovering the logs
	phaseJoining                 // cluster mode: connecting and registering
	phaseRunning
	phaseStopping
)

// readiness says whether the broker should receive traffic, and if not,
// why (the body of /readyz's 503). Running in cluster mode, it also
// needs its registration: a broker whose lease expired (etcd cut off, a
// long pause) has had its partitions moved away and must not take
// clients until it has registered again and sees that. And it needs
// free file descriptors (fdStarved).
func (s *Server) readiness() (bool, string) {
	switch s.phase.Load() {
	case phaseRecovering:
		return false, "recovering logs"
	case phaseJoining:
		return false, "not registered in the cluster metadata"
	case phaseStopping:
		return false, "shutting down"
	}
	if s.cluster != nil && !s.cluster.registered(s.broker) {
		return false, "not registered in the cluster metadata"
	}
	if open, limit, ok := fdUsage(); ok {
		if starved, why := fdStarved(open, limit); starved {
			return false, why
		}
	}
	return true, "ok"
}

// Traffic returns the broker's traffic counters.
func (s *Server) Traffic() *traffic.Counter { return s.traffic }

// Addr returns the Kafka listener's address (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// MetricsAddr returns the HTTP listener's address, or "" if disabled.
func (s *Server) MetricsAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// Broker returns the broker state.
func (s *Server) Broker() *broker.Broker { return s.broker }

// Metrics returns the broker's metrics.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// Done returns a channel that receives the Kafka listener's fatal error (or
// nil after Shutdown) once.
func (s *Server) Done() <-chan error { return s.serveErr }

// ErrStorageFailure comes out of Done when a write or fsync to the data
// directory failed (disk full, I/O error): the broker must stop
// (fail-stop, see broker.Broker.StorageFailure); `strata broker` shuts
// down (controlled shutdown first: leaderships move to the other ISR
// members) and exits non-zero, and its supervisor starts it again.
var ErrStorageFailure = errors.New("storage failure on the data directory")

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	// Until the broker's registry exists (log recovery), only
	// strata_broker_ready is served.
	gather := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		g := prometheus.Gatherers{s.readyReg}
		if m := s.liveMetrics.Load(); m != nil {
			g = append(g, m.Registry)
		}
		return g.Gather()
	})
	mux.Handle("/metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	if s.cfg.Pprof {
		// Sample lock contention for /debug/pprof/mutex too.
		runtime.SetMutexProfileFraction(100)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := s.readiness(); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

func (s *Server) retentionLoop() {
	t := time.NewTicker(s.cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			n, err := s.broker.ApplyRetention()
			if err != nil {
				s.log.Error(err, "retention")
			}
			if n > 0 {
				s.log.Info("retention deleted segments", "segments", n)
			}
		}
	}
}

// Shutdown stops the broker gracefully: /readyz turns unready; in cluster
// mode the controller first moves the broker's leaderships to other ISR
// members (controlled shutdown, bounded by controlled.shutdown.timeout.ms
// and ctx); then the listener closes, in-flight requests finish (long polls
// answer at once), then the logs are flushed and closed. If ctx ends first,
// connections are closed hard but the logs are still closed. Safe to call
// more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() {
		s.phase.Store(phaseStopping)
		s.log.Info("broker shutting down")
		var errs []error
		if s.cluster != nil && s.cfg.ControlledShutdownTimeout() > 0 {
			s.controlledShutdown(ctx)
		}
		// Parked JoinGroup/SyncGroup requests answer NOT_COORDINATOR now
		// instead of being cut off by the connection shutdown.
		s.groups.Close()
		s.stopTxnCoordinator()
		s.log.Info("closing the Kafka listener")
		if err := s.proto.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("protocol server: %w", err))
		}
		if s.zoneLocal != nil {
			// After the listener: forwarded requests in flight were
			// answered; their objects are deleted now.
			s.zoneLocal.close()
		}
		if s.cluster != nil {
			// Deregister (the controller moves leadership away at once),
			// stop following the metadata and replicating.
			s.cluster.stop()
		}
		if s.offsets != nil {
			if err := s.offsets.Close(); err != nil {
				errs = append(errs, fmt.Errorf("group offsets: %w", err))
			}
		}
		close(s.stop)
		if s.http != nil {
			hctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := s.http.Shutdown(hctx); err != nil {
				errs = append(errs, fmt.Errorf("metrics server: %w", err))
			}
			cancel()
		}
		s.wg.Wait()
		if err := s.broker.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close logs: %w", err))
		}
		s.shutErr = errors.Join(errs...)
		s.log.Info("broker stopped")
	})
	return s.shutErr
}

// controlledShutdown is Kafka's controlled shutdown: the broker marks its
// registration as shutting down, the controller moves each partition it
// leads to another ISR member, and the broker waits until its own metadata
// view shows it leads nothing that could move, so clients are sent to the
// new leaders (NOT_LEADER_OR_FOLLOWER, then a metadata refresh) while this
// broker still answers, instead of finding a closed port and waiting for
// the registration to go. It keeps serving meanwhile, and keeps
// replicating until it stops. Partitions without another eligible ISR
// member keep it as leader (moving them would take them offline now) and
// go offline or fail over when it deregisters, as before. A timeout or an
// error is logged and the shutdown goes on: stopping must never hang on
// the cluster.
func (s *Server) controlledShutdown(ctx context.Context) {
	log := s.log.WithName("cluster")
	reg := s.cluster.reg.Load()
	if reg == nil {
		log.Info("controlled shutdown skipped: not registered (the controller has moved the leaderships already)")
		return
	}
	timeout := s.cfg.ControlledShutdownTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A lost registration ends the wait: the controller is moving the
	// leaderships already, and an etcd that is cut off would otherwise hold
	// the shutdown for the whole timeout.
	go func() {
		select {
		case <-reg.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	start := time.Now()
	id := s.broker.NodeID()
	log.Info("controlled shutdown: asking the controller to move this broker's leaderships", "timeout", timeout)
	if err := reg.EnterControlledShutdown(cctx); err != nil {
		log.Error(err, "controlled shutdown failed; closing the listener with leaderships not moved")
		return
	}
	oldController := int32(-1)
	err := s.broker.WaitApplied(cctx, func(st *meta.ClusterState) bool {
		done, old := meta.HandoffDone(st, id)
		oldController = old
		return done
	})
	if oldController >= 0 {
		log.Info("controlled shutdown skipped: the controller runs a version without it; leaderships move when this broker deregisters",
			"controller", oldController)
		return
	}
	var moving, staying []meta.TopicPartition
	if st := s.broker.ClusterState(); st != nil {
		moving, staying = meta.LeaderHandoff(st, id)
	}
	if len(staying) > 0 {
		log.Info("controlled shutdown: no other in-sync replica can lead these partitions; they keep this broker as leader until it stops",
			"partitions", tpStrings(staying))
	}
	if err != nil {
		log.Info("controlled shutdown did not finish; closing the listener with leaderships not moved",
			"reason", err.Error(), "elapsed", time.Since(start), "notMoved", tpStrings(moving))
		return
	}
	log.Info("controlled shutdown done: leaderships moved", "elapsed", time.Since(start), "stillLeading", len(staying))
}

func tpStrings(tps []meta.TopicPartition) []string {
	out := make([]string, len(tps))
	for i, tp := range tps {
		out[i] = tp.String()
	}
	return out
}

// objstoreObserver returns the one Prometheus observer of object store
// calls (strata_objstore_*), shared by the WAL and tier buckets.
func (s *Server) objstoreObserver() *objstore.PrometheusObserver {
	if s.objObs == nil {
		s.objObs = objstore.NewPrometheusObserver(s.metrics.Registry)
	}
	return s.objObs
}

// Tier returns the slow tier's manager, nil when off.
func (s *Server) Tier() *broker.TierManager { return s.tier }

// ZoneLocalStats returns the partitions this broker forwarded to their
// leaders through its zone's bucket and the partitions it appended as
// leader from other brokers' objects (zone-local produce; zeros without
// WAL replication).
func (s *Server) ZoneLocalStats() (forwarded, appended int64) {
	if s.zoneLocal == nil {
		return 0, 0
	}
	return s.zoneLocal.Stats()
}

// ZoneLocalPath returns the path this broker's next forwarded zone-local
// produce takes (strata_zonelocal_path): bucket, inline-cost or
// inline-outage; "" without WAL replication.
func (s *Server) ZoneLocalPath() string {
	if s.zoneLocal == nil {
		return ""
	}
	return s.zoneLocal.path()
}

// ZoneLocalInline returns the partitions this broker forwarded inline
// because its zone's bucket path had failed (zone-local produce).
func (s *Server) ZoneLocalInline() int64 {
	if s.zoneLocal == nil {
		return 0
	}
	return s.zoneLocal.InlineStats()
}
