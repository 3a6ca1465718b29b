package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is a whole bench run.
type Config struct {
	// Bootstrap selects the external mode: the load runs once against
	// these brokers. Otherwise every entry of Modes gets its own cluster
	// from Starter.
	Bootstrap []string
	Modes     []string
	Starter   ClusterStarter
	// MetricsURLs are scraped for traffic figures; for embedded clusters
	// they override the URLs the starter found.
	MetricsURLs []string
	// MetricsToken is the bearer token of the brokers' /metrics (an
	// operator's cluster: key "token" of Secret <cluster>-metrics-token);
	// empty sends none.
	MetricsToken string
	Cluster      ClusterOptions
	Load         LoadOptions
	// Progress receives one line per step (nil: discarded).
	Progress io.Writer
	// Pin: on Linux with two CPUs or more, run the brokers on one CPU set
	// and the object store and this process (the load generator) on the
	// other (pin.go); `strata bench` sets it unless --pin=false.
	Pin bool
	// PinLoadWith is where the load generator runs when pinned:
	// PinLoadWithStore (""; the default: with the object store) or
	// PinLoadWithBrokers (--pin-load-generator=brokers).
	PinLoadWith string
	// StoreNote says why the object store's data is on disk although
	// tmpfs was asked for (StoreTmpfs); it goes into the report.
	StoreNote string
	// Sweep (--sweep) measures every WAL mode once per value of a WAL
	// setting, classic once; nil: every mode once.
	Sweep *Sweep
}

// Where the load generator runs under pinning (Config.PinLoadWith).
const (
	PinLoadWithStore   = "store"
	PinLoadWithBrokers = "brokers"
)

// Run measures every mode in turn, one cluster at a time, and returns the
// report. A mode that fails stops the run: the comparison is only
// meaningful with every mode measured.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Load.Validate(); err != nil {
		return nil, err
	}
	if cfg.Cluster.ZoneLatency < 0 {
		return nil, fmt.Errorf("zone latency %v: want 0 or more", cfg.Cluster.ZoneLatency)
	}
	if len(cfg.Bootstrap) > 0 && cfg.Cluster.ZoneLatency > 0 {
		return nil, errors.New("--zone-latency needs embedded clusters (--modes): the links between an external cluster's brokers cannot be delayed from here")
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	modes := cfg.Modes
	if len(cfg.Bootstrap) > 0 {
		modes = []string{ModeExternal}
	} else {
		if err := ValidateModes(modes); err != nil {
			return nil, err
		}
		if cfg.Sweep != nil {
			if err := cfg.Sweep.Validate(modes, cfg.Cluster.BrokerConfig); err != nil {
				return nil, err
			}
		}
		if cfg.Starter == nil {
			return nil, errors.New("no cluster starter for embedded modes")
		}
	}
	if len(cfg.Bootstrap) > 0 && cfg.Sweep != nil {
		return nil, fmt.Errorf("%w needs embedded clusters (--modes): an external cluster's broker config is not the bench's to change", ErrSweep)
	}
	runs := planRuns(modes, cfg.Sweep)
	if mc, ok := cfg.Starter.(ModeChecker); ok && len(cfg.Bootstrap) == 0 {
		checked := map[string]bool{}
		for _, r := range runs {
			if checked[r.mode] {
				continue
			}
			checked[r.mode] = true
			if err := mc.CheckMode(ctx, r.mode, r.clusterOptions(cfg.Cluster)); err != nil {
				return nil, fmt.Errorf("mode %s: %w", r.mode, err)
			}
		}
	}
	l := cfg.Load
	rep := &Report{Schema: SchemaVersion, Started: time.Now().UTC(), Settings: Settings{
		Acks: l.Acks, RecordSize: l.RecordSize, Partitions: l.Partitions, ReplicationFactor: l.ReplicationFactor,
		Rate: l.Rate, Producers: l.Producers, Consumers: l.Consumers, MaxInFlight: l.MaxInFlight,
		Compression: l.Compression, Linger: l.Linger, PrimePartitions: l.PrimePartitions, Warmup: l.Warmup, Duration: l.Duration,
		S3PutLatency: cfg.Cluster.S3PutLatency, S3GetLatency: cfg.Cluster.S3GetLatency, ZoneLatency: cfg.Cluster.ZoneLatency,
		BrokerConfig: cfg.Cluster.BrokerConfig,
	}}
	if slices.ContainsFunc(modes, func(m string) bool { b, _ := BaseMode(m); return b == ModeWAL }) {
		rep.Settings.ObjectStoreData, rep.Settings.ObjectStoreNote = "disk", cfg.StoreNote
		if d := cfg.Cluster.StoreDir; d != "" && isTmpfs(d) {
			rep.Settings.ObjectStoreData = "tmpfs"
		}
	}
	if cfg.Cluster.S3PutLatency > 0 || cfg.Cluster.S3GetLatency > 0 {
		rep.Settings.S3LatencyMode = S3LatencyFloor
	}
	if z := cfg.Cluster.ZoneLatency; z > 0 {
		rep.Settings.ZoneRoundTrip = 2 * z
		rep.Settings.ZoneLatencyAppliesTo = ZoneLatencyScope
	}
	pin, restore := pinSelf(cfg)
	defer restore()
	rep.Settings.Pin = &pin
	if pin.Enabled {
		fmt.Fprintf(progress, "pinned: %s\n", pin.describe())
	}
	if len(cfg.Bootstrap) == 0 {
		cfg.Cluster.GoMaxProcs, rep.Settings.BrokerGoMaxProcs = brokerProcs(pin)
	}
	for _, r := range runs {
		rc := cfg
		rc.Cluster = r.clusterOptions(cfg.Cluster)
		mr, err := runMode(ctx, rc, r.mode, r.label(), pin, progress)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", r.label(), err)
		}
		mr.SweepSetting, mr.SweepDefault = r.setting, r.defaultPoint
		rep.Modes = append(rep.Modes, *mr)
	}
	if cfg.Sweep != nil {
		rep.ComputeSweep(cfg.Sweep)
	} else {
		rep.ComputeRatios()
	}
	return rep, nil
}

// clusterOptions are the options of the run's cluster: the run's, and a
// swept run's setting after --broker-config.
func (r plannedRun) clusterOptions(opts ClusterOptions) ClusterOptions {
	if r.setting != nil {
		opts.BrokerConfig = append(slices.Clone(opts.BrokerConfig), r.setting.String())
	}
	return opts
}

// label names the run in progress lines and errors (ModeResult.Label).
func (r plannedRun) label() string {
	if r.defaultPoint {
		return defaultLabel
	}
	if r.setting == nil {
		return r.mode
	}
	return r.mode + " " + r.setting.String()
}

// pinSelf decides the run's pinning and pins this process (the load
// generator) to the other CPUs; restore gives it its CPUs back.
func pinSelf(cfg Config) (pin PinSettings, restore func()) {
	restore = func() {}
	switch {
	case !cfg.Pin:
		pin.Reason = "--pin=false"
		return pin, restore
	case len(cfg.Bootstrap) > 0:
		pin.Reason = "external cluster: its brokers are not this machine's processes"
		return pin, restore
	case !pinSupported:
		pin.Reason = "pinning needs Linux"
		return pin, restore
	}
	cpus, err := availableCPUs()
	if err != nil {
		pin.Reason = err.Error()
		return pin, restore
	}
	plan, ok := PlanCPUs(cpus)
	if !ok {
		pin.Reason = fmt.Sprintf("%d CPU: nothing to split", len(cpus))
		return pin, restore
	}
	plan.LoadGenerator = plan.Others
	if cfg.PinLoadWith == PinLoadWithBrokers {
		plan.LoadGenerator = plan.Brokers
	}
	if err := pinProcess(os.Getpid(), plan.LoadGenerator); err != nil {
		pin.Reason = err.Error()
		return pin, restore
	}
	pin.Enabled, pin.CPUPlan = true, plan
	return pin, func() { _ = pinProcess(os.Getpid(), cpus) }
}

// pinCluster pins a started cluster's broker processes to the broker
// CPUs and their children (the object store) to the others.
func pinCluster(cl *Cluster, pin PinSettings) error {
	if !pin.Enabled {
		return nil
	}
	if len(cl.PIDs) == 0 {
		return fmt.Errorf("pinning: the cluster starter reported no broker processes")
	}
	for _, pid := range cl.PIDs {
		if err := pinProcess(pid, pin.Brokers); err != nil {
			return fmt.Errorf("pin brokers: %w", err)
		}
		for _, child := range childPIDs(pid) {
			if err := pinProcess(child, pin.Others); err != nil {
				return fmt.Errorf("pin the brokers' child process %d (object store): %w", child, err)
			}
		}
	}
	return nil
}

// runMode measures one mode on its own cluster; label names the run in
// the progress lines (the mode, and in a sweep its setting).
func runMode(ctx context.Context, cfg Config, mode, label string, pin PinSettings, progress io.Writer) (_ *ModeResult, err error) {
	cl := &Cluster{Bootstrap: cfg.Bootstrap, Security: cfg.Load.Security}
	if mode != ModeExternal {
		fmt.Fprintf(progress, "%s: starting the cluster\n", label)
		cl, err = cfg.Starter.Start(ctx, mode, cfg.Cluster)
		if err != nil {
			return nil, err
		}
		defer func() {
			fmt.Fprintf(progress, "%s: stopping the cluster\n", label)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if serr := cl.Stop(sctx); serr != nil && err == nil {
				err = serr
			}
		}()
	}
	if err := pinCluster(cl, pin); err != nil {
		return nil, err
	}
	urls := cl.MetricsURLs
	if len(cfg.MetricsURLs) > 0 {
		urls = cfg.MetricsURLs
	}
	mr := &ModeResult{Mode: mode, Bootstrap: cl.Bootstrap, MetricsURLs: urls, Notes: cl.Notes}
	if len(urls) == 0 {
		mr.Notes = append(mr.Notes, "no metrics URLs (--metrics): traffic figures n/a")
	}

	var before, after []Scrape
	var beforeAt time.Time
	var cpuBefore, cpuAfter time.Duration
	var cpuErr error
	readCPU := func() time.Duration {
		if len(cl.PIDs) == 0 || cpuErr != nil {
			return 0
		}
		d, err := brokerCPUTime(cl.PIDs)
		if err != nil {
			cpuErr = err
		}
		return d
	}
	scrape := func(ctx context.Context, when string) ([]Scrape, time.Time) {
		if len(urls) == 0 {
			return nil, time.Now()
		}
		s, errs := ScrapeAll(ctx, urls, WithBearerToken(cfg.MetricsToken))
		at := time.Now()
		for _, e := range errs {
			mr.Notes = append(mr.Notes, fmt.Sprintf("metrics %s: %v", when, e))
		}
		return s, at
	}
	lopts := cfg.Load
	if mode != ModeExternal {
		// A classic run at 1,200 partitions once created its topic with
		// replication factor 1: the first broker had not seen the other
		// two register.
		lopts.ExpectBrokers = len(cl.Bootstrap)
	}
	lopts.ZoneLatency = cl.ZoneLatency
	lopts.Security = cl.Security
	if lopts.Topic == "" {
		lopts.Topic = "strata-bench-" + strings.ReplaceAll(mode, "+", "-") + "-" + randomSuffix()
	}
	fmt.Fprintf(progress, "%s: %v warmup + %v measured on %v\n", label, lopts.Warmup, lopts.Duration, cl.Bootstrap)
	res, err := RunLoad(ctx, cl.Bootstrap, lopts, Hooks{
		WindowStart: func(ctx context.Context) {
			cpuBefore = readCPU()
			before, beforeAt = scrape(ctx, "before the window")
		},
		WindowEnd: func(ctx context.Context) {
			after, _ = scrape(ctx, "after the window")
			cpuAfter = readCPU()
		},
	})
	if err != nil {
		return nil, err
	}
	fillLoad(mr, res, lopts.Consumers)
	switch {
	case cpuErr != nil:
		mr.Notes = append(mr.Notes, "broker CPU n/a: "+cpuErr.Error())
	case len(cl.PIDs) > 0 && res.ProducedBytes > 0:
		secs := (cpuAfter - cpuBefore).Seconds()
		mr.BrokerCPU = &BrokerCPU{Seconds: secs, SecondsPerGBProduce: secs / (float64(res.ProducedBytes) / 1e9)}
	}
	if len(urls) > 0 {
		// Rates are per second of producing (first scrape to the last
		// acknowledgement); the second scrape waits for the consumers so
		// that the window's replication is complete in the counters.
		mr.Traffic = ComputeTraffic(before, after, res.FlushedAt.Sub(beforeAt))
		mr.Cost = ComputeCost(before, after)
		mr.Stages, mr.SlowestStageP99 = ComputeStages(before, after)
		mr.SchedLatency = ComputeSchedLatency(before, after)
	}
	if cfg.Cluster.ZoneLatency > 0 {
		mr.ZoneLatency = zoneLatencyResult(cl.ZoneLatency, res.ClientZones, before, after)
		if cl.ZoneLatency == 0 {
			mr.Notes = append(mr.Notes, "zone latency not applied: neither replica nor client connections were delayed")
		}
	}
	fmt.Fprintf(progress, "%s: %d records produced, %d consumed\n", label, mr.Produced, mr.Consumed)
	return mr, nil
}

func fillLoad(mr *ModeResult, res *LoadResult, requestedConsumers int) {
	secs := res.Window.Seconds()
	mr.Topic, mr.Brokers, mr.ReplicationFactor = res.Topic, res.Brokers, res.ReplicationFactor
	mr.WindowSeconds = secs
	mr.ProduceLatency = res.ProduceLatency.Summary()
	mr.EndToEndLatency = res.EndToEnd.Summary()
	if res.ProduceRequest != nil {
		mr.ProduceRequestLatency = res.ProduceRequest.Summary()
		mr.ProduceWriteWait = res.ProduceWriteWait.Summary()
	}
	mr.RequestsInFlightMax = res.RequestsInFlightMax
	if res.ProduceStages != nil {
		mr.ProduceStages = res.ProduceStages.Summary()
	}
	mr.ThroughputMBps = float64(res.ProducedBytes) / secs / 1e6
	mr.RecordsPerSec = float64(res.Produced) / secs
	mr.Produced, mr.Consumed = res.Produced, res.Consumed
	mr.ProduceErrors, mr.FirstError, mr.Late = res.ProduceErrors, res.FirstError, res.Late
	mr.DrainComplete = res.DrainComplete
	if res.Consumers < requestedConsumers {
		mr.Notes = append(mr.Notes, fmt.Sprintf("%d consumers run instead of %d: one per partition at most", res.Consumers, requestedConsumers))
	}
}

// DevBrokers is the number of brokers strata dev runs (three zones, one
// broker each), all in one process.
const DevBrokers = 3

// brokerProcs is GOMAXPROCS for the embedded cluster's process: what its
// brokers would have as separate processes on the same CPUs (Go's default
// for each is the CPUs it may run on), so that three brokers and etcd in
// one process do not share a single scheduler run queue when pinned to
// one CPU. With one P, a busy process notices network readiness late
// (the runtime polls the network from a busy P only every 10 ms): the
// brokers' scheduler latency p99 was 6.4 ms in WAL mode at 2,000 rec/s
// vs 0.5-0.9 ms with one P per broker. A GOMAXPROCS in the environment
// wins (dev inherits it); the setting reports it, and ClusterOptions gets
// "" (nothing to set).
func brokerProcs(pin PinSettings) (forDev, setting string) {
	if env := os.Getenv("GOMAXPROCS"); env != "" {
		return "", env + " (GOMAXPROCS of the environment)"
	}
	cpus := runtime.NumCPU()
	if pin.Enabled {
		cpus = len(pin.Brokers)
	}
	n := strconv.Itoa(DevBrokers * max(cpus, 1))
	return n, n
}
