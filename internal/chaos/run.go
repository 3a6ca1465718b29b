package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/meta"
)

// BucketPrefix + zone names a zone's WAL bucket; the caller creates them.
const BucketPrefix = "strata-wal-"

// TierBucket is the slow tier's bucket (the tiered workload's, in both
// replication modes); the caller creates it.
const TierBucket = "strata-chaos-tier"

// S3 is the S3-compatible server holding the zone buckets (WAL mode).
type S3 struct {
	Endpoint, Region, AccessKey, SecretKey string
}

// Options configure a run.
type Options struct {
	Seed     int64
	Duration time.Duration
	// Replication is "wal" (S3 must be set) or "classic".
	Replication    string
	Zones          []string // default a, b, c
	BrokersPerZone int      // default 1
	Topics         int      // default 3
	Partitions     int32    // default 3
	Producers      int      // default 3
	Rate           int      // records per second over all producers (default 300)
	// Kinds are the fault kinds (nil: all the mode allows; empty and
	// non-nil: none, a run that must then fail for want of faults).
	Kinds []string
	// MinAcked is the fewest acknowledged records a run needs to pass
	// (0: a tenth of what Rate would send in the fault window, Duration
	// less 10 s).
	MinAcked int
	// LivenessBound is how long the cluster has after healing to take
	// one record per partition and serve it back (default 60 s).
	LivenessBound time.Duration
	// Binary is the strata executable started as `strata broker`.
	Binary string
	// Dir is the run's directory (etcd, broker data and logs); it must
	// not exist or be empty.
	Dir string
	// S3 holds the zone buckets (WAL mode) and the tier bucket (both
	// modes: the tiered workload).
	S3 *S3
	// ZoneLocalProducers runs the brokers with zone-local produce
	// (wal.zonelocal.produce.enable; WAL replication only) and gives every
	// producer of the workload a client ID naming a zone (strata_az=),
	// the zones taken in turn: their produce goes through their zone's
	// broker and an object of its bucket to the leader.
	ZoneLocalProducers bool
	// History is a file to write every operation to as JSON lines (""
	// none; CheckHistory judges it again).
	History string
	// Log receives progress lines (nil: none); Verbose adds each fault.
	Log     io.Writer
	Verbose bool
}

func (o *Options) defaults() error {
	if len(o.Zones) == 0 {
		o.Zones = []string{"a", "b", "c"}
	}
	if o.BrokersPerZone <= 0 {
		o.BrokersPerZone = 1
	}
	if o.Topics <= 0 {
		o.Topics = 3
	}
	if o.Partitions <= 0 {
		o.Partitions = 3
	}
	if o.Producers <= 0 {
		o.Producers = 3
	}
	if o.Rate <= 0 {
		o.Rate = 300
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.MinAcked <= 0 {
		o.MinAcked = max(1, int(float64(o.Rate)*(o.Duration-10*time.Second).Seconds()/10))
	}
	if o.LivenessBound <= 0 {
		o.LivenessBound = time.Minute
	}
	switch o.Replication {
	case "wal", "classic":
		if o.S3 == nil {
			return errors.New("an S3 server is needed (the tier bucket of the tiered workload; in wal mode the zone buckets too)")
		}
	default:
		return fmt.Errorf("replication %q: want wal or classic", o.Replication)
	}
	if o.ZoneLocalProducers && o.Replication != "wal" {
		return errors.New("zone-local producers need wal replication (the forwarded batches go through the zone buckets)")
	}
	if o.Duration < 15*time.Second {
		return fmt.Errorf("duration %v: at least 15s (5s warm-up, 5s cool-down)", o.Duration)
	}
	if len(o.Zones) < 3 {
		return errors.New("need at least 3 zones (replication factor 3, min.insync.replicas 2)")
	}
	if o.Binary == "" || o.Dir == "" {
		return errors.New("Binary and Dir are required")
	}
	if o.Kinds != nil && len(o.Kinds) == 0 {
		return nil // --faults none
	}
	var kinds []string
	for _, k := range o.Kinds {
		if !IsBucketKind(k) || o.Replication == "wal" {
			kinds = append(kinds, k)
		}
	}
	if len(o.Kinds) == 0 {
		for _, k := range AllKinds {
			if !IsBucketKind(k) || o.Replication == "wal" {
				kinds = append(kinds, k)
			}
		}
	}
	if len(kinds) == 0 {
		return errors.New("no fault kind applies to this replication mode")
	}
	o.Kinds = kinds
	return nil
}

// Result is the outcome of a run, printed as one JSON object.
type Result struct {
	Seed        int64   `json:"seed"`
	DurationS   float64 `json:"duration_s"`
	Replication string  `json:"replication"`
	Brokers     int     `json:"brokers"`
	Partitions  int     `json:"partitions"`
	// Faults counts the faults injected, by kind; FaultErrors those that
	// could not be (no WAL object to corrupt, a refused reassignment...).
	Faults      map[string]int `json:"faults"`
	FaultErrors map[string]int `json:"fault_errors"`
	// OverlappingFaults counts the faults applied while another was
	// active; MaxBrokersDown is the most brokers down (killed, stopped,
	// paused) at once. Both from what was really applied.
	OverlappingFaults int     `json:"overlapping_faults"`
	MaxBrokersDown    int     `json:"max_brokers_down"`
	Schedule          []Fault `json:"schedule"`
	// Applied is each fault as it happened, its target resolved.
	Applied []string `json:"applied,omitempty"`
	Sent    int64    `json:"sent"`
	Verdict
	Unacknowledged int            `json:"unacknowledged"`
	ErrorsSeen     map[string]int `json:"errors_seen"`
	Converged      bool           `json:"converged"`
	// ConvergeS is how long convergence took after healing (bounded by
	// two minutes).
	ConvergeS float64 `json:"converge_s"`
	// BucketRequests counts, per zone bucket, the requests brokers sent
	// through its proxy and those the proxy failed on purpose: the WAL
	// path was really taken (and really hit).
	BucketRequests map[string]BucketCount `json:"bucket_requests,omitempty"`
	// ObjectFaultsMet counts the downloads of WAL objects the nemesis
	// corrupted or deleted, made after the damage (the download caught
	// when it was applied included), by the HTTP status the bucket
	// answered ("200"/"206": damaged bytes served; "404": deleted).
	ObjectFaultsMet map[string]int `json:"object_faults_met,omitempty"`
	// ZoneLocal is set when the producers were zone-local
	// (--zone-local-producers): how much produce took that path.
	ZoneLocal *ZoneLocalResult `json:"zone_local,omitempty"`
	// Problems are harness-level failures (no convergence, unclean
	// shutdown); any makes OK false.
	Problems []string `json:"problems,omitempty"`
	// MinAcked is the minimum of acknowledged records (--min-acked).
	MinAcked int `json:"min_acked"`
	// Live is whether, after healing, every partition took a record
	// (acks=all) and served it back within LivenessBoundS; LivenessS is
	// how long that took.
	Live           bool    `json:"live"`
	LivenessS      float64 `json:"liveness_s"`
	LivenessBoundS float64 `json:"liveness_bound_s"`
	LivenessError  string  `json:"liveness_error,omitempty"`
	// Workloads are the workloads the checker judged (Verdict.workloads).
	Workloads map[string]WorkloadCount `json:"workloads"`
	// ExpectWorkloads are the workloads the run ran: each must have
	// checked something (and shown it did its job) for the run to pass.
	ExpectWorkloads []string `json:"expect_workloads,omitempty"`
	OK              bool     `json:"ok"`
	// Reason says why OK is false (every cause; empty when OK).
	Reason string `json:"reason"`
	Dir    string `json:"dir,omitempty"`
}

// BucketCount is one zone bucket's traffic through its fault proxy.
type BucketCount struct {
	Requests int64 `json:"requests"`
	Injected int64 `json:"injected_failures"`
}

// cluster is the running system under test.
type cluster struct {
	o       *Options
	etcd    *meta.Embedded
	brokers []*broker
	etcdPx  map[int32]*tcpProxy
	// clientPx and replPx are each broker's client and replication
	// listener proxies (network partitions).
	clientPx, replPx map[int32]*tcpProxy
	s3Px             map[string]*s3Proxy
	// addrs are the client listeners' proxies (what clients know).
	addrs []string
	adm   *kadm.Client
	admCl *kgo.Client
	tps   []TP

	// zlClients are the zone-local producers' client IDs and zones.
	zlMu      sync.Mutex
	zlClients map[string]string
}

// Run starts the cluster, runs the workload under the seed's nemesis,
// heals, waits for convergence, stops everything and checks the history.
// An error means the harness could not do its job; a finding makes
// Result.OK false.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &cluster{o: &o, etcdPx: map[int32]*tcpProxy{}, clientPx: map[int32]*tcpProxy{}, replPx: map[int32]*tcpProxy{}, s3Px: map[string]*s3Proxy{},
		zlClients: map[string]string{}}
	defer c.close()
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	topo := Topology{Zones: o.Zones, Topics: topicNames(o.Topics), Partitions: o.Partitions, Replicas: 3}
	for _, b := range c.brokers {
		topo.BrokerIDs = append(topo.BrokerIDs, b.id)
	}
	topo.PerZone = o.BrokersPerZone
	var schedule []Fault
	if len(o.Kinds) > 0 {
		schedule = NewSchedule(o.Seed, topo, ScheduleOptions{Duration: o.Duration, Kinds: o.Kinds})
	}
	res := &Result{Seed: o.Seed, DurationS: o.Duration.Seconds(), Replication: o.Replication, Brokers: len(c.brokers),
		Partitions: o.Topics * int(o.Partitions), Faults: map[string]int{}, FaultErrors: map[string]int{}, Schedule: schedule,
		MinAcked: o.MinAcked, LivenessBoundS: o.LivenessBound.Seconds()}
	zlNote := ""
	if o.ZoneLocalProducers {
		zlNote = ", zone-local producers"
	}
	fmt.Fprintf(o.Log, "chaos: seed %d, %v, %s replication%s, %d brokers, %d partitions, %d faults scheduled\n",
		o.Seed, o.Duration, o.Replication, zlNote, len(c.brokers), res.Partitions, len(schedule))
	if o.Verbose {
		for _, f := range schedule {
			fmt.Fprintf(o.Log, "  %s\n", f)
		}
	}
	if err := c.createTopics(ctx, topo.Topics); err != nil {
		return nil, err
	}
	if err := c.createWorkloadTopics(ctx); err != nil {
		return nil, err
	}
	res.ExpectWorkloads = ExtraWorkloads

	hist, err := createHistory(o.History)
	if err != nil {
		return nil, err
	}
	errs := &errorCounts{}
	wctx, stopWorkload := context.WithCancel(ctx)
	defer stopWorkload()
	var zls *zlScraper
	if o.ZoneLocalProducers {
		zls = newZLScraper(c)
		scraped := make(chan struct{})
		go func() { defer close(scraped); zls.run(wctx) }()
		defer func() { stopWorkload(); <-scraped }()
	}
	var fetchers []*fetcher
	start := time.Now()
	hist.setStart(start)
	for _, b := range c.brokers {
		f, err := newFetcher(b, c.addrs, c.tps, errs, start, hist)
		if err != nil {
			return nil, err
		}
		fetchers = append(fetchers, f)
		go f.run(wctx)
	}
	extra := startWorkloads(ctx, c, o.Seed, start, hist, errs)
	defer extra.finish()
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var producers []*producer
	for i := range o.Producers {
		p, err := newProducer(i, c.producerClientID(fmt.Sprintf("chaos-producer-%d", i), i), c.addrs, c.tps, max(o.Rate/o.Producers, 1), errs, hist)
		if err != nil {
			return nil, err
		}
		producers = append(producers, p)
		go p.run(pctx)
	}

	n := newNemesis(c, res, o.Log, o.Verbose, topo.Replicas-1)
	n.hist = hist
	n.end = start.Add(o.Duration - defaultCooldown)
	nemErr := n.run(ctx, start, schedule)
	if rest := time.Until(start.Add(o.Duration)); rest > 0 && nemErr == nil {
		wait(ctx, rest) // the workload's remaining time
	}
	fmt.Fprintf(o.Log, "chaos: healing\n")
	n.healAll(context.WithoutCancel(ctx))
	if nemErr != nil {
		return nil, nemErr
	}
	stopProducers()
	for _, p := range producers {
		if err := p.finish(60 * time.Second); err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
	}
	extra.finish()
	fmt.Fprintf(o.Log, "chaos: checking that the cluster serves produce and consume\n")
	liveStart := time.Now()
	liveAcks, err := c.probeLiveness(ctx, o.LivenessBound)
	for _, a := range liveAcks {
		hist.write(Event{Op: OpProduce, Topic: a.Topic, Partition: a.Partition, Offset: a.Offset, Value: a.Value})
	}
	res.LivenessS = time.Since(liveStart).Seconds()
	res.Live = err == nil
	if err != nil {
		res.LivenessError = err.Error()
	}
	h := History{Replicas: map[TP][]ReplicaLog{}, Acks: liveAcks}
	fmt.Fprintf(o.Log, "chaos: final reads of the groups, transactions, compacted and tiered workloads\n")
	if err := extra.final(ctx, &h); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	fmt.Fprintf(o.Log, "chaos: waiting for convergence\n")
	convergeStart := time.Now()
	hwm, err := c.converge(ctx, fetchers, 2*time.Minute)
	res.Converged = err == nil
	res.ConvergeS = time.Since(convergeStart).Seconds()
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	stopWorkload()
	for _, f := range fetchers {
		<-f.stopped
	}
	replicas, err := c.replicaSets(ctx)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	if zls != nil {
		zls.scrapeAll(ctx) // the last counts before the brokers stop
	}
	c.admCl.Close()
	c.admCl = nil
	fmt.Fprintf(o.Log, "chaos: stopping brokers\n")
	for _, b := range c.brokers {
		if !b.stop(30 * time.Second) {
			res.Problems = append(res.Problems, fmt.Sprintf("broker %d did not shut down cleanly", b.id))
		}
	}

	h.HWM = hwm
	for _, p := range producers {
		h.Acks = append(h.Acks, p.acks...)
		res.Sent += p.sent
		res.Unacknowledged += p.failed
	}
	for _, f := range fetchers {
		h.Observations = append(h.Observations, f.obs...)
		h.HWMRegressions = append(h.HWMRegressions, f.regress...)
	}
	for _, tp := range c.tps {
		for _, id := range replicas[tp] {
			h.Replicas[tp] = append(h.Replicas[tp], readReplica(filepath.Join(o.Dir, brokerDirName(id), fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)), id, hwm[tp]))
		}
	}
	for z, px := range c.s3Px {
		if res.BucketRequests == nil {
			res.BucketRequests = map[string]BucketCount{}
		}
		res.BucketRequests[z] = BucketCount{Requests: px.requests.Load(), Injected: px.injected.Load()}
		for status, n := range px.objectFaultsMet() {
			if res.ObjectFaultsMet == nil {
				res.ObjectFaultsMet = map[string]int{}
			}
			res.ObjectFaultsMet[strconv.Itoa(status)] += n
		}
	}
	res.ZoneLocal = c.zoneLocalResult(zls)
	res.ErrorsSeen = errs.snapshot()
	res.judgeHistory(h)
	if err := hist.final(h, res); err != nil {
		res.Problems = append(res.Problems, err.Error())
		res.judge()
	}
	return res, nil
}

func topicNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, "chaos-"+strconv.Itoa(i))
	}
	return out
}

func brokerDirName(id int32) string { return fmt.Sprintf("broker-%d", id) }

func (c *cluster) start(ctx context.Context) error {
	o := c.o
	etcd, err := meta.StartEmbedded(ctx, filepath.Join(o.Dir, "etcd"), nil)
	if err != nil {
		return err
	}
	c.etcd = etcd
	if o.Replication == "wal" {
		for i, z := range o.Zones {
			px, err := startS3Proxy(o.S3.Endpoint, uint64(o.Seed)+uint64(i))
			if err != nil {
				return err
			}
			c.s3Px[z] = px
		}
	}
	env := append(os.Environ(), faultFSEnv,
		"STRATA_TIER_ACCESS_KEY_ID="+o.S3.AccessKey, "STRATA_TIER_SECRET_ACCESS_KEY="+o.S3.SecretKey)
	if o.Replication == "wal" {
		env = append(env, "STRATA_WAL_ACCESS_KEY_ID="+o.S3.AccessKey, "STRATA_WAL_SECRET_ACCESS_KEY="+o.S3.SecretKey)
	}
	id := int32(1)
	for _, z := range o.Zones {
		for range o.BrokersPerZone {
			px, err := startTCPProxy(etcd.ClientAddr, nil)
			if err != nil {
				return err
			}
			c.etcdPx[id] = px
			addr, err := freeAddr()
			if err != nil {
				return err
			}
			replAddr, err := freeAddr()
			if err != nil {
				return err
			}
			cpx, err := startTCPProxy(addr, classifySource)
			if err != nil {
				return err
			}
			rpx, err := startTCPProxy(replAddr, classifySource)
			if err != nil {
				return err
			}
			c.clientPx[id], c.replPx[id] = cpx, rpx
			settings := map[string]string{
				// Two listeners, each advertised as its fault proxy.
				"listeners":                      "CLIENT://" + addr + ",REPLICATION://" + replAddr,
				"advertised.listeners":           "CLIENT://" + cpx.Addr() + ",REPLICATION://" + rpx.Addr(),
				"listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
				"inter.broker.listener.name":     "REPLICATION",
				"metadata.etcd.endpoints":        "http://" + px.Addr(),
				"cluster.name":                   "chaos",
				"broker.id":                      strconv.Itoa(int(id)),
				"broker.rack":                    z,
				"broker.session.timeout.ms":      "3000",
				"replica.lag.time.max.ms":        "5000",
				"default.replication.factor":     "3",
				"unclean.leader.election.enable": "false",
				"auto.create.topics.enable":      "false",
			}
			// The slow tier (regional: no fault proxy) and the other
			// workloads' settings.
			settings["tier.bucket.name"] = TierBucket
			settings["tier.bucket.endpoint"] = o.S3.Endpoint
			settings["tier.bucket.region"] = o.S3.Region
			settings["tier.bucket.force.path.style"] = "true"
			for k, v := range workloadSettings {
				settings[k] = v
			}
			if o.Replication == "wal" {
				settings["wal.enable"] = "true"
				// The bucket nemeses need WAL objects whatever the
				// workload's (low) throughput.
				settings["wal.policy"] = "latency"
				for _, zz := range o.Zones {
					pre := "wal.zone." + zz + ".bucket."
					settings[pre+"name"] = BucketPrefix + zz
					settings[pre+"endpoint"] = c.s3Px[zz].Endpoint()
					settings[pre+"region"] = o.S3.Region
					settings[pre+"force.path.style"] = "true"
				}
			}
			metricsAddr := ""
			if o.ZoneLocalProducers {
				settings[zoneLocalSetting] = "true"
				// Its counters show the path was taken.
				if metricsAddr, err = freeAddr(); err != nil {
					return err
				}
			}
			args := []string{"--metrics-listen", metricsAddr, "--log-format", "console"}
			keys := make([]string, 0, len(settings))
			for k := range settings {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				args = append(args, "--set", k+"="+settings[k])
			}
			b := &broker{id: id, zone: z, bin: o.Binary, dir: filepath.Join(o.Dir, brokerDirName(id)),
				logPath: filepath.Join(o.Dir, brokerDirName(id)+".log"), addr: addr, metricsAddr: metricsAddr, args: args, env: env}
			c.brokers = append(c.brokers, b)
			c.addrs = append(c.addrs, cpx.Addr())
			id++
		}
	}
	for _, b := range c.brokers {
		if err := b.start(ctx); err != nil {
			return fmt.Errorf("%w (log: %s)", err, b.logPath)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		return err
	}
	c.admCl, c.adm = cl, kadm.NewClient(cl)
	return nil
}

// killBroker SIGKILLs b; its listener proxies refuse connections until it
// starts again (as a dead host's address would). Faults that take a
// broker's process down use killBroker, stopBroker and startBroker.
func (c *cluster) killBroker(b *broker) {
	c.proxiesDown(b.id)
	b.kill()
}

// stopBroker is b.stop with the proxies down.
func (c *cluster) stopBroker(b *broker, grace time.Duration) bool {
	c.proxiesDown(b.id)
	return b.stop(grace)
}

// startBroker starts b with its listener proxies up again.
func (c *cluster) startBroker(ctx context.Context, b *broker) error {
	for _, px := range []*tcpProxy{c.clientPx[b.id], c.replPx[b.id]} {
		if px != nil {
			if err := px.Up(); err != nil {
				return err
			}
		}
	}
	return b.start(ctx)
}

func (c *cluster) proxiesDown(id int32) {
	for _, px := range []*tcpProxy{c.clientPx[id], c.replPx[id]} {
		if px != nil {
			px.Down()
		}
	}
}

func (c *cluster) brokerByID(id int32) *broker {
	for _, b := range c.brokers {
		if b.id == id {
			return b
		}
	}
	return nil
}

func (c *cluster) close() {
	if c.admCl != nil {
		c.admCl.Close()
	}
	for _, b := range c.brokers {
		b.kill()
	}
	for _, m := range []map[int32]*tcpProxy{c.etcdPx, c.clientPx, c.replPx} {
		for _, p := range m {
			p.Close()
		}
	}
	for _, p := range c.s3Px {
		p.Close()
	}
	if c.etcd != nil {
		c.etcd.Close()
	}
}

// createTopics creates the topics (RF 3, min.insync.replicas 2) and waits
// until every partition has a leader and a full ISR.
func (c *cluster) createTopics(ctx context.Context, topics []string) error {
	two := "2"
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		resp, err := c.adm.CreateTopics(ctx2, c.o.Partitions, 3, map[string]*string{"min.insync.replicas": &two}, topics...)
		if err == nil {
			bad := false
			for _, r := range resp {
				if r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
					bad = true
					err = r.Err
				}
			}
			if !bad {
				break
			}
		}
		if ctx2.Err() != nil {
			return fmt.Errorf("create topics: %w", err)
		}
		wait(ctx2, 200*time.Millisecond)
	}
	for _, t := range topics {
		for p := range c.o.Partitions {
			c.tps = append(c.tps, TP{t, p})
		}
	}
	for {
		if ok, _ := c.inSync(ctx2); ok {
			return nil
		}
		if ctx2.Err() != nil {
			return errors.New("topics created but not every partition has a leader and a full ISR after a minute")
		}
		wait(ctx2, 200*time.Millisecond)
	}
}

// inSync reports whether every partition has a leader and ISR = replicas;
// otherwise why not.
func (c *cluster) inSync(ctx context.Context) (bool, string) {
	ok, why, _ := c.inSyncReplicas(ctx)
	return ok, why
}

// inSyncReplicas is inSync that also returns each partition's replicas.
func (c *cluster) inSyncReplicas(ctx context.Context) (bool, string, map[TP][]int32) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	td, err := c.adm.ListTopics(rctx, topicNames(c.o.Topics)...)
	if err != nil {
		return false, err.Error(), nil
	}
	reps := map[TP][]int32{}
	for _, tp := range c.tps {
		pd, ok := td[tp.Topic].Partitions[tp.Partition]
		if !ok {
			return false, fmt.Sprintf("%s: not in metadata", tp), nil
		}
		if pd.Err != nil || pd.Leader < 0 {
			return false, fmt.Sprintf("%s: no leader (%v)", tp, pd.Err), nil
		}
		if len(pd.ISR) != len(pd.Replicas) {
			return false, fmt.Sprintf("%s: ISR %v of replicas %v", tp, pd.ISR, pd.Replicas), nil
		}
		reps[tp] = pd.Replicas
	}
	return true, "", reps
}

// converge waits until every partition's ISR is all its replicas, the
// high watermarks stopped moving (the producers are done) and every
// fetcher has read up to them, and returns the high watermarks.
func (c *cluster) converge(ctx context.Context, fetchers []*fetcher, limit time.Duration) (map[TP]int64, error) {
	deadline := time.Now().Add(limit)
	var last map[TP]int64
	why := ""
	for {
		hwm, err := c.highWatermarks(ctx)
		switch {
		case err != nil:
			why = err.Error()
		default:
			ok, w, reps := c.inSyncReplicas(ctx)
			why = w
			if ok {
				stable := last != nil && sameHWMs(last, hwm)
				behind := ""
				for _, f := range fetchers {
					for _, tp := range c.tps {
						if !slices.Contains(reps[tp], f.b.id) {
							continue // not a replica: it has nothing to serve
						}
						if p := f.position(tp); p < hwm[tp] && behind == "" {
							behind = fmt.Sprintf("fetcher of broker %d at %d of %s, high watermark %d", f.b.id, p, tp, hwm[tp])
						}
					}
				}
				switch {
				case !stable:
					why = "high watermarks still moving"
				case behind != "":
					why = behind
				default:
					return hwm, nil
				}
			}
			last = hwm
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if last == nil {
				last = map[TP]int64{}
			}
			return last, fmt.Errorf("no convergence after %v: %s", limit, why)
		}
		wait(ctx, 500*time.Millisecond)
	}
}

func sameHWMs(a, b map[TP]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func (c *cluster) highWatermarks(ctx context.Context) (map[TP]int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lo, err := c.adm.ListEndOffsets(rctx, topicNames(c.o.Topics)...)
	if err != nil {
		return nil, err
	}
	out := map[TP]int64{}
	for _, tp := range c.tps {
		o, ok := lo.Lookup(tp.Topic, tp.Partition)
		if !ok || o.Err != nil {
			return nil, fmt.Errorf("%s: end offset: %v", tp, o.Err)
		}
		out[tp] = o.Offset
	}
	return out, nil
}

// replicaSets returns each partition's replicas from the final metadata.
func (c *cluster) replicaSets(ctx context.Context) (map[TP][]int32, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := map[TP][]int32{}
	td, err := c.adm.ListTopics(rctx, topicNames(c.o.Topics)...)
	for _, tp := range c.tps {
		var reps []int32
		if err == nil {
			reps = slices.Clone(td[tp.Topic].Partitions[tp.Partition].Replicas)
		}
		if len(reps) == 0 {
			// Without metadata: every broker holding the partition's directory.
			for _, b := range c.brokers {
				if _, serr := os.Stat(filepath.Join(b.dir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))); serr == nil {
					reps = append(reps, b.id)
				}
			}
		}
		slices.Sort(reps)
		out[tp] = reps
	}
	if err != nil {
		return out, fmt.Errorf("final metadata: %w", err)
	}
	return out, nil
}
