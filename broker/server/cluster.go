package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/auth"
	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/replica"
	"github.com/strata-dev/strata/broker/traffic"
)

// ClusterConfig configures cluster mode (etcd metadata and replication).
// With no EtcdEndpoints the broker runs standalone.
type ClusterConfig struct {
	// EtcdEndpoints is metadata.etcd.endpoints (comma-separated URLs).
	EtcdEndpoints []string
	// EtcdTLS is metadata.etcd.ssl.certificate.location, .key.location
	// and .ca.location: the client certificate and CA towards https://
	// endpoints, re-read when the files change (none: no client
	// certificate, system roots).
	EtcdTLS TLSFiles
	// Name is the cluster's key space in etcd: metadata.etcd.prefix
	// /strata/<Name>/ as the operator writes it, else cluster.name
	// (default "strata").
	Name string
	// SessionTimeout is broker.session.timeout.ms: the TTL of the broker's
	// etcd lease; a broker that stops renewing it is considered dead after
	// this long (default 9 s, as Kafka's KRaft).
	SessionTimeout time.Duration
	// Replica holds the replica.* settings; NodeID, Store, Traffic and Log
	// are set by Start.
	Replica replica.Config
	// Controller holds auto.leader.rebalance.enable and
	// unclean.leader.election.enable.
	Controller meta.ControllerOptions
	// StartTimeout bounds waiting for the broker's registration to be seen
	// (a restarted broker waits for its previous lease to expire). Default
	// 3 × SessionTimeout + 30 s.
	StartTimeout time.Duration
	// WAL configures WAL replication (wal.* settings); off by default.
	WAL WALConfig
	// DisableControlledShutdown is controlled.shutdown.enable=false: on
	// Shutdown the broker closes its listener without first having the
	// controller move its leaderships away.
	DisableControlledShutdown bool
	// ControlledShutdownTimeout is controlled.shutdown.timeout.ms: how long
	// Shutdown waits for the controller to move the broker's leaderships
	// away before it closes the listener anyway (default 30 s).
	ControlledShutdownTimeout time.Duration
}

// DefaultMaxUploadInterval is wal.upload.max.interval.ms's default: the
// longest an object of the cost and auto policies waits for bytes.
const DefaultMaxUploadInterval = 100 * time.Millisecond

// DefaultControlledShutdownTimeout is controlled.shutdown.timeout.ms's
// default.
const DefaultControlledShutdownTimeout = 30 * time.Second

// ControlledShutdownTimeout is how long Shutdown may spend on controlled
// shutdown before it starts closing connections: 0 standalone or with
// controlled.shutdown.enable=false. Callers that bound Shutdown with a
// context add it to their own grace period.
func (c Config) ControlledShutdownTimeout() time.Duration {
	switch {
	case len(c.Cluster.EtcdEndpoints) == 0 || c.Cluster.DisableControlledShutdown:
		return 0
	case c.Cluster.ControlledShutdownTimeout > 0:
		return c.Cluster.ControlledShutdownTimeout
	}
	return DefaultControlledShutdownTimeout
}

// WALConfig is the wal.* settings: WAL replication through per-zone fast
// buckets (docs/replication.md).
type WALConfig struct {
	// Enable is wal.enable (default false: classic replication).
	Enable bool
	// Bucket is this broker's zone fast bucket: wal.bucket.name,
	// wal.bucket.region, wal.bucket.endpoint, wal.bucket.force.path.style,
	// wal.bucket.type; credentials from STRATA_WAL_* (else the SDK chain).
	// Zone is set from the broker's rack. Uploads go here.
	Bucket objstore.Config
	// Zones is the zone→bucket map, wal.zone.<zone>.bucket.* (the
	// operator writes every zone of the cluster, this one included): a
	// follower reads the bucket a leader's pointer names with that zone's
	// endpoint, region, type and credentials (ResolveBuckets). Empty: the
	// other zones' buckets are reached with Bucket's endpoint, region and
	// credentials.
	Zones map[string]WALZoneBucket
	// UploadInterval (wal.upload.interval.ms), MaxObjectBytes
	// (wal.object.max.bytes), Retention (wal.retention.ms).
	UploadInterval time.Duration
	MaxObjectBytes int
	Retention      time.Duration
	// Policy is wal.policy ("": auto) and MaxUploadInterval
	// wal.upload.max.interval.ms (0: DefaultMaxUploadInterval), the latency
	// budget of the cost and auto policies (docs/wal.md "Cost and
	// wal.policy").
	Policy            cost.Policy
	MaxUploadInterval time.Duration
	// PolicyMaxObjectBytes is wal.policy.object.max.bytes (0: the
	// decider's default, 1 MiB): cost and auto let objects grow to it.
	PolicyMaxObjectBytes int
	// AutoMaxLatency is wal.auto.max.latency.ms (0: unset,
	// cost.DefaultMaxLatency; < 0: no bound but MaxUploadInterval, what
	// the key's 0 sets) and AutoMaxCostRatio wal.auto.max.cost.ratio (0:
	// 1, classic's cost): the bounds auto picks its point inside
	// (docs/wal.md "Cost and wal.policy").
	AutoMaxLatency   time.Duration
	AutoMaxCostRatio float64
	// DownloadTimeout is wal.download.timeout.ms: the budget of a
	// follower's downloads per fetch round (0: replica's default, 1 s).
	DownloadTimeout time.Duration
	// DownloadHedge is wal.download.hedge.ms: a follower's GET slower
	// than this gets a twin (0: adaptive, 3 × the recent average; < 0:
	// never; wal.DownloaderConfig.HedgeAfter).
	DownloadHedge time.Duration
	// UploadHedge is wal.upload.hedge.ms: a leader's PUT slower than this
	// gets a twin of the same key and bytes (0: adaptive, 3 × the recent
	// average, at least 10 ms; < 0: never; wal.UploaderConfig.HedgeAfter).
	UploadHedge time.Duration
	// ZoneLocalProduce is wal.zonelocal.produce.enable (default false):
	// a zone-tagged client is shown a broker of its own zone as every
	// partition's leader, and that broker hands its produce batches to
	// the real leader through an object in its zone's bucket (docs/wal.md
	// "Zone-local produce"). Needs Enable.
	ZoneLocalProduce bool
	// ZoneLocalInline is wal.zonelocal.produce.inline.ms (default 10 s):
	// after the bucket path of zone-local produce failed (the
	// forwarder's PUT, or the leader's GET or check of its object), the
	// forwarder sends forwarded records to their leaders inline, across
	// zones, for this long before it tries the bucket again; 0 turns the
	// fallback off (a failed path answers KAFKA_STORAGE_ERROR). In this
	// struct 0 means the default and < 0 off.
	ZoneLocalInline time.Duration
	// ZoneLocalPolicy is wal.zonelocal.produce.policy: bucket (default;
	// every forwarded request through the bucket) or auto (through the
	// bucket only while its objects cost no more than the transfer they
	// save; zonelocalpolicy.go).
	ZoneLocalPolicy string
	// ZoneLocalPutConcurrency is wal.zonelocal.put.concurrency (0:
	// DefaultZoneLocalPutConcurrency): the most forwarded PUTs in flight.
	// A request forwarded while one is in flight waits for it and shares
	// the next object with the others that waited (group commit); a
	// second PUT starts beside one only once that one is slow (docs/wal.md
	// "Zone-local produce").
	ZoneLocalPutConcurrency int
	// ZoneLocalKeep is wal.zonelocal.object.keep.ms (default
	// DefaultZoneLocalKeep): how long a forwarder keeps an object after
	// its leaders answered, so that their followers read the forwarded
	// records from it instead of the leader uploading them again; the
	// forwarded requests announce it (protocol.TagZoneLocalKeep). In
	// this struct 0 means the default and < 0 off (deleted at the
	// answer, as before; the leaders upload the records).
	ZoneLocalKeep time.Duration
	// WrapStore, when set, wraps every bucket client (fault injection:
	// strata dev's --s3-put-latency/--s3-get-latency, tests).
	WrapStore func(objstore.Store) objstore.Store
}

// clusterRun is the running cluster mode of a server.
type clusterRun struct {
	store    *meta.Store
	replicas *replica.Manager
	cancel   context.CancelFunc
	ctx      context.Context // ends with stop
	wg       sync.WaitGroup
	// reg is the live registration (nil between a lost lease and the
	// next registration), for readiness.
	reg atomic.Pointer[meta.Registration]
}

// registered says whether the broker's registration is alive and the
// metadata it has applied shows this very registration (same epoch), not
// a previous one of the same ID.
func (r *clusterRun) registered(b *broker.Broker) bool {
	reg := r.reg.Load()
	if reg == nil {
		return false
	}
	select {
	case <-reg.Done():
		return false
	default:
	}
	st := b.ClusterState()
	if st == nil {
		return false
	}
	bi, ok := st.Brokers[reg.Info().ID]
	return ok && bi.Epoch == reg.Info().Epoch
}

// replicaTraffic counts a follower's replica fetches under the leader's
// zone.
type replicaTraffic struct {
	counter *traffic.Counter
	m       *replica.Manager
}

func (t *replicaTraffic) ReplicaFetch(leader int32, requestBytes, responseBytes int, walMetadata bool) {
	zone := ""
	if info, ok := t.m.Broker(leader); ok {
		zone = info.Zone
	}
	path := traffic.ReplicationInline
	if walMetadata {
		path = traffic.ReplicationWALMetadata
	}
	t.counter.Add(zone, path, traffic.Out, requestBytes)
	t.counter.Add(zone, path, traffic.In, responseBytes)
}

// objectTraffic counts object-store bytes: PUTs to this broker's zone
// bucket (object-put) and GETs (object-get, under the bucket's zone when
// known).
type objectTraffic struct {
	counter *traffic.Counter
	meter   *cost.Meter
	next    objstore.Observer
}

func (o objectTraffic) ObserveCall(op objstore.Op, bucket, zone string, n int64, elapsed time.Duration, err error) {
	if o.next != nil {
		o.next.ObserveCall(op, bucket, zone, n, elapsed, err)
	}
	// Requests are billed whether they succeed or not.
	switch op {
	case objstore.OpPut:
		o.meter.Put(n)
	case objstore.OpGet:
		o.meter.Get(n)
	}
	if err != nil {
		return
	}
	switch op {
	case objstore.OpPut:
		o.counter.Add(zone, traffic.ObjectPut, traffic.Out, int(n))
	case objstore.OpGet:
		o.counter.Add(zone, traffic.ObjectGet, traffic.In, int(n))
		if zone != "" && zone != o.counter.Zone() {
			o.meter.GetCrossZone(n)
		}
	}
}

// enableWAL starts WAL replication on the manager: this zone's bucket for
// uploads, a client per other bucket for downloads.
func (s *Server) enableWAL(ctx context.Context, replicas *replica.Manager, counter *traffic.Counter, cluster string) error {
	wc := s.cfg.Cluster.WAL
	obs := objectTraffic{counter: counter, meter: s.cost, next: s.objstoreObserver()}
	wc.Bucket.Observer = obs
	if wc.Bucket.AttemptTimeout <= 0 {
		wc.Bucket.AttemptTimeout = 2 * time.Second
	}
	if wc.Bucket.CallTimeout <= 0 {
		wc.Bucket.CallTimeout = 5 * time.Second
	}
	buckets, err := wc.ResolveBuckets(s.cfg.Broker.Rack)
	if err != nil {
		return fmt.Errorf("WAL buckets: %w", err)
	}
	base := buckets.Own
	open := func(cfg objstore.Config) (objstore.Store, error) {
		// WAL objects carry their own CRC-32Cs (header, table, every
		// chunk), checked on every read: the SDK's checksums add nothing.
		cfg.OwnChecksums = true
		st, err := objstore.NewS3(ctx, cfg)
		if err != nil {
			return nil, err
		}
		if wc.WrapStore != nil {
			return wc.WrapStore(st), nil
		}
		return st, nil
	}
	own, err := open(base)
	if err != nil {
		return fmt.Errorf("WAL bucket %q: %w", base.Bucket, err)
	}
	var mu sync.Mutex
	stores := map[string]objstore.Store{base.Bucket: own}
	// storeFor is the client of the bucket a pointer (or a forwarded
	// produce) names, opened on first use.
	storeFor := func(bucket string) (objstore.Store, error) {
		mu.Lock()
		defer mu.Unlock()
		if st, ok := stores[bucket]; ok {
			return st, nil
		}
		cfg, err := buckets.Download(bucket)
		if err != nil {
			return nil, err
		}
		st, err := open(cfg)
		if err != nil {
			return nil, fmt.Errorf("WAL bucket %q of zone %q: %w", bucket, cfg.Zone, err)
		}
		stores[bucket] = st
		return st, nil
	}
	policy, err := cost.ParsePolicy(string(wc.Policy))
	if err != nil {
		return err
	}
	maxInterval := wc.MaxUploadInterval
	if maxInterval <= 0 {
		maxInterval = DefaultMaxUploadInterval
	}
	autoMaxLatency := wc.AutoMaxLatency
	switch {
	case autoMaxLatency == 0:
		autoMaxLatency = cost.DefaultMaxLatency
	case autoMaxLatency < 0:
		autoMaxLatency = 0 // the decider's "no bound"
	}
	if interval := wc.UploadInterval; maxInterval < interval {
		return fmt.Errorf("wal.upload.max.interval.ms (%v) is below wal.upload.interval.ms (%v)", maxInterval, interval)
	}
	err = replicas.EnableWAL(replica.WALConfig{
		Store: own, Cluster: cluster, Zone: base.Zone, Incarnation: uint64(time.Now().UnixNano()),
		MaxObjectBytes: wc.MaxObjectBytes, UploadInterval: wc.UploadInterval, Retention: wc.Retention,
		DownloadTimeout: wc.DownloadTimeout, DownloadHedge: wc.DownloadHedge, UploadHedge: wc.UploadHedge,
		Policy: policy, MaxUploadInterval: maxInterval, Prices: s.cfg.Prices,
		PolicyMaxObjectBytes: wc.PolicyMaxObjectBytes,
		AutoMaxLatency:       autoMaxLatency, AutoMaxCostRatio: wc.AutoMaxCostRatio,
		Stores: storeFor,
	})
	if err != nil {
		return err
	}
	// The uploader's stats (strata_wal_degraded, ...) and the inline bytes
	// by reason (strata_wal_inline_bytes_total).
	for _, c := range replicas.WALCollectors() {
		if err := s.metrics.Registry.Register(c); err != nil {
			return fmt.Errorf("register WAL metrics: %w", err)
		}
	}
	// Zone-local produce: objects of forwarded produce requests in the
	// own bucket, read from the forwarder's bucket as leader (always, so
	// that a leader whose own flag is off still serves its forwarders).
	router, err := newZLRouter(wc.ZoneLocalPolicy, s.cfg.Prices)
	if err != nil {
		return err
	}
	s.zoneLocal = newZoneLocal(s, wc.ZoneLocalProduce, wc.ZoneLocalInline, router, own, storeFor, cluster, base.Zone, wc.ZoneLocalPutConcurrency)
	s.zoneLocal.keep = zoneLocalKeep(wc.ZoneLocalKeep)
	s.zoneLocal.share(replicas.WALUploader(), replicas.WALProduced)
	for _, c := range s.zoneLocal.collectors() {
		if err := s.metrics.Registry.Register(c); err != nil {
			s.zoneLocal.close()
			s.zoneLocal = nil
			return fmt.Errorf("register zone-local metrics: %w", err)
		}
	}
	s.log.WithName("cluster").Info("WAL replication enabled", "bucket", base.Bucket, "endpoint", base.Endpoint, "zoneMap", buckets.ZoneMap(),
		"policy", policy, "maxUploadInterval", maxInterval)
	return nil
}

// startCluster connects to etcd, switches the broker to cluster mode,
// follows the metadata, registers the broker (running a controller
// candidate with its lease) and waits until the broker sees itself
// registered and has applied that snapshot.
func (s *Server) startCluster(ctx context.Context, b *broker.Broker, counter *traffic.Counter) (*clusterRun, error) {
	cc := s.cfg.Cluster
	if cc.Name == "" {
		cc.Name = "strata"
	}
	if cc.SessionTimeout <= 0 {
		cc.SessionTimeout = 9 * time.Second
	}
	if cc.StartTimeout <= 0 {
		cc.StartTimeout = 3*cc.SessionTimeout + 30*time.Second
	}
	log := s.log.WithName("cluster")
	// StartTimeout bounds the whole join: reaching etcd (it may come up
	// after the broker, e.g. pods started together) and seeing the
	// registration.
	wctx, wcancel := context.WithTimeout(ctx, cc.StartTimeout)
	defer wcancel()
	etcdCfg := meta.ClientConfig{Endpoints: cc.EtcdEndpoints, Cluster: cc.Name}
	if cc.EtcdTLS.CertFile != "" || cc.EtcdTLS.CAFile != "" {
		kp, err := newKeyPair(cc.EtcdTLS, log.WithName("etcd-tls"))
		if err != nil {
			return nil, fmt.Errorf("metadata.etcd.ssl.*: %w", err)
		}
		etcdCfg.TLS = kp.etcdClientConfig()
	}
	var store *meta.Store
	for {
		var err error
		if store, err = meta.Connect(wctx, etcdCfg); err == nil {
			break
		}
		if wctx.Err() != nil {
			return nil, fmt.Errorf("broker %d could not reach etcd within %s: %w", s.cfg.Broker.NodeID, cc.StartTimeout, err)
		}
		log.Info("etcd not reachable yet, retrying", "etcd", cc.EtcdEndpoints, "reason", err.Error())
		select {
		case <-wctx.Done():
		case <-time.After(time.Second): // retry pace, not synchronisation
		}
	}
	if _, err := store.ClusterID(ctx); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("cluster ID: %w", err)
	}
	if b.Config().LogDefaults["unclean.leader.election.enable"] == "true" {
		// The broker-level default of the topic config (topics override it).
		cc.Controller.UncleanLeaderElection = true
	}
	// Policy Zone: the controller keeps the preferred leaders of topics
	// without their own leader.placement.zone in this zone.
	cc.Controller.LeaderZone = b.Config().LeaderZone()
	rcfg := cc.Replica
	rcfg.NodeID, rcfg.Store, rcfg.Log = b.NodeID(), store, s.log.WithName("replica")
	ib, kp := s.interBroker()
	rcfg.Listener = ib.Name
	rcfg.Dial = secureDial(rcfg.Dial, ib, kp, s.cfg.Security.InterBroker)
	rt := &replicaTraffic{counter: counter}
	rcfg.Traffic = rt
	rcfg.Cost = s.cost
	rcfg.Hydrate = s.cfg.Tier.Enable && !s.cfg.Tier.DisableHydration
	replicas := replica.NewManager(rcfg)
	rt.m = replicas
	for _, c := range replicas.Collectors() {
		if err := s.metrics.Registry.Register(c); err != nil {
			replicas.Close()
			_ = store.Close()
			return nil, fmt.Errorf("register replica metrics: %w", err)
		}
	}
	if cc.WAL.ZoneLocalProduce && !cc.WAL.Enable {
		replicas.Close()
		_ = store.Close()
		return nil, errors.New("wal.zonelocal.produce.enable needs wal.enable (forwarded batches go through the zone's WAL bucket)")
	}
	if cc.WAL.Enable {
		if err := s.enableWAL(ctx, replicas, counter, cc.Name); err != nil {
			replicas.Close()
			_ = store.Close()
			return nil, err
		}
	}
	b.EnableCluster(store, replicas)

	// Until this process has registered, neither the broker nor its
	// replicas take the metadata's record of this ID for their own: it
	// may be the previous run's, its lease not expired yet.
	replicas.SetOwnRegistration(meta.BrokerInfo{})
	b.SetOwnRegistration(0)

	run := &clusterRun{store: store, replicas: replicas}
	cctx, cancel := context.WithCancel(context.Background())
	run.cancel = cancel
	run.ctx = logr.NewContext(cctx, log)
	// reapply asks the apply loop to apply the last snapshot again: the
	// registration changed, and leaderships deferred for want of it may
	// be taken (the snapshot that shows it may have been applied first).
	reapply := make(chan struct{}, 1)
	run.wg.Add(2)
	go func() {
		defer run.wg.Done()
		watch := store.Watch(cctx)
		for {
			var st *meta.ClusterState
			select {
			case next, ok := <-watch:
				if !ok {
					return
				}
				st = next
			case <-reapply:
				if st = b.ClusterState(); st == nil {
					continue
				}
			}
			if err := b.ApplyClusterState(st); err != nil {
				log.Error(err, "applying cluster metadata", "version", st.Version)
			}
		}
	}()
	setOwn := func(info meta.BrokerInfo) {
		replicas.SetOwnRegistration(info)
		b.SetOwnRegistration(info.Epoch)
		select {
		case reapply <- struct{}{}:
		default:
		}
	}
	cfg := b.Config()
	// FetchEpoch: this broker's replica fetches carry its broker epoch, so
	// leaders refuse fetches in its name that do not (replica.Manager.
	// CheckReplicaFetcher).
	info := meta.BrokerInfo{ID: cfg.NodeID, Zone: cfg.Rack, FetchEpoch: true, ControlledShutdown: true}
	for _, l := range s.listeners {
		info.Listeners = append(info.Listeners, meta.Listener{Name: l.Name, Host: l.AdvHost, Port: l.AdvPort, SecurityProtocol: l.Protocol})
	}
	go func() {
		defer run.wg.Done()
		err := store.Maintain(cctx, info, cc.SessionTimeout, func(ctx context.Context, reg *meta.Registration) {
			run.reg.Store(reg)
			defer run.reg.Store(nil)
			setOwn(reg.Info())
			defer setOwn(meta.BrokerInfo{})
			ctrl := store.NewController(reg, cc.Controller)
			b.SetController(ctrl)
			defer b.SetController(nil)
			if err := ctrl.Run(ctx); err != nil && ctx.Err() == nil {
				log.Info("controller candidate stopped", "reason", err.Error())
			}
		})
		if err != nil {
			log.Error(err, "broker registration ended")
		}
	}()
	// Its own registration, not the previous run's (same ID, same
	// listeners) that a restart within the session timeout still finds.
	if err := b.WaitApplied(wctx, func(*meta.ClusterState) bool { return run.registered(b) }); err != nil {
		run.stop()
		return nil, fmt.Errorf("broker %d did not see its registration in etcd within %s: %w", cfg.NodeID, cc.StartTimeout, err)
	}
	log.Info("joined the cluster", "cluster", cc.Name, "etcd", cc.EtcdEndpoints, "sessionTimeout", cc.SessionTimeout)
	return run, nil
}

// followACLs loads the cluster's ACL bindings into authz, then keeps them
// current from etcd until stop: a binding created or deleted through any
// broker reaches this one without a restart. The first load happens
// before followACLs returns, so the broker never serves requests with an
// empty authorizer that would refuse everyone but super users.
func (r *clusterRun) followACLs(ctx context.Context, authz *auth.Authorizer) error {
	bs, err := r.store.ACLs(ctx)
	if err != nil {
		return err
	}
	authz.SetBindings(bs)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.store.WatchACLs(r.ctx, authz.SetBindings)
	}()
	return nil
}

// stop deregisters the broker (the controller role moves at once), stops
// following the metadata and replication, and closes the etcd client.
func (r *clusterRun) stop() {
	r.cancel()
	r.wg.Wait()
	r.replicas.Close()
	_ = r.store.Close()
}

// groupOwner returns the group coordinator placement of a cluster: a
// group belongs to group.CoordinatorFor over the live brokers.
func groupOwner(b *broker.Broker) func(string) bool {
	self := b.NodeID()
	return func(g string) bool {
		brokers := b.Brokers()
		ids := make([]int32, 0, len(brokers))
		for _, bi := range brokers {
			ids = append(ids, bi.ID)
		}
		if !slices.Contains(ids, self) {
			return false
		}
		return group.CoordinatorFor(g, ids) == self
	}
}
