package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	Cluster     ClusterOptions
	Load        LoadOptions
	// Progress receives one line per step (nil: discarded).
	Progress io.Writer
}

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
		if cfg.Starter == nil {
			return nil, errors.New("no cluster starter for embedded modes")
		}
		if mc, ok := cfg.Starter.(ModeChecker); ok {
			for _, m := range modes {
				if err := mc.CheckMode(ctx, m, cfg.Cluster); err != nil {
					return nil, fmt.Errorf("mode %s: %w", m, err)
				}
			}
		}
	}
	l := cfg.Load
	rep := &Report{Schema: SchemaVersion, Started: time.Now().UTC(), Settings: Settings{
		Acks: l.Acks, RecordSize: l.RecordSize, Partitions: l.Partitions, ReplicationFactor: l.ReplicationFactor,
		Rate: l.Rate, Producers: l.Producers, Consumers: l.Consumers, MaxInFlight: l.MaxInFlight,
		Compression: l.Compression, Linger: l.Linger, Warmup: l.Warmup, Duration: l.Duration,
		S3PutLatency: cfg.Cluster.S3PutLatency, S3GetLatency: cfg.Cluster.S3GetLatency, ZoneLatency: cfg.Cluster.ZoneLatency,
	}}
	if cfg.Cluster.S3PutLatency > 0 || cfg.Cluster.S3GetLatency > 0 {
		rep.Settings.S3LatencyMode = S3LatencyFloor
	}
	if z := cfg.Cluster.ZoneLatency; z > 0 {
		rep.Settings.ZoneRoundTrip = 2 * z
		rep.Settings.ZoneLatencyAppliesTo = ZoneLatencyScope
	}
	for _, mode := range modes {
		mr, err := runMode(ctx, cfg, mode, progress)
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", mode, err)
		}
		rep.Modes = append(rep.Modes, *mr)
	}
	rep.ComputeRatios()
	return rep, nil
}

func runMode(ctx context.Context, cfg Config, mode string, progress io.Writer) (_ *ModeResult, err error) {
	cl := &Cluster{Bootstrap: cfg.Bootstrap, Security: cfg.Load.Security}
	if mode != ModeExternal {
		fmt.Fprintf(progress, "%s: starting the cluster\n", mode)
		cl, err = cfg.Starter.Start(ctx, mode, cfg.Cluster)
		if err != nil {
			return nil, err
		}
		defer func() {
			fmt.Fprintf(progress, "%s: stopping the cluster\n", mode)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if serr := cl.Stop(sctx); serr != nil && err == nil {
				err = serr
			}
		}()
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
	scrape := func(ctx context.Context, when string) ([]Scrape, time.Time) {
		if len(urls) == 0 {
			return nil, time.Now()
		}
		s, errs := ScrapeAll(ctx, urls)
		at := time.Now()
		for _, e := range errs {
			mr.Notes = append(mr.Notes, fmt.Sprintf("metrics %s: %v", when, e))
		}
		return s, at
	}
	lopts := cfg.Load
	lopts.ZoneLatency = cl.ZoneLatency
	lopts.Security = cl.Security
	if lopts.Topic == "" {
		lopts.Topic = "strata-bench-" + strings.ReplaceAll(mode, "+", "-") + "-" + randomSuffix()
	}
	fmt.Fprintf(progress, "%s: %v warmup + %v measured on %v\n", mode, lopts.Warmup, lopts.Duration, cl.Bootstrap)
	res, err := RunLoad(ctx, cl.Bootstrap, lopts, Hooks{
		WindowStart: func(ctx context.Context) { before, beforeAt = scrape(ctx, "before the window") },
		WindowEnd:   func(ctx context.Context) { after, _ = scrape(ctx, "after the window") },
	})
	if err != nil {
		return nil, err
	}
	fillLoad(mr, res, lopts.Consumers)
	if len(urls) > 0 {
		// Rates are per second of producing (first scrape to the last
		// acknowledgement); the second scrape waits for the consumers so
		// that the window's replication is complete in the counters.
		mr.Traffic = ComputeTraffic(before, after, res.FlushedAt.Sub(beforeAt))
		mr.Cost = ComputeCost(before, after)
	}
	if cfg.Cluster.ZoneLatency > 0 {
		mr.ZoneLatency = zoneLatencyResult(cl.ZoneLatency, res.ClientZones, before, after)
		if cl.ZoneLatency == 0 {
			mr.Notes = append(mr.Notes, "zone latency not applied: neither replica nor client connections were delayed")
		}
	}
	fmt.Fprintf(progress, "%s: %d records produced, %d consumed\n", mode, mr.Produced, mr.Consumed)
	return mr, nil
}

func fillLoad(mr *ModeResult, res *LoadResult, requestedConsumers int) {
	secs := res.Window.Seconds()
	mr.Topic, mr.Brokers, mr.ReplicationFactor = res.Topic, res.Brokers, res.ReplicationFactor
	mr.WindowSeconds = secs
	mr.ProduceLatency = res.ProduceLatency.Summary()
	mr.EndToEndLatency = res.EndToEnd.Summary()
	mr.ThroughputMBps = float64(res.ProducedBytes) / secs / 1e6
	mr.RecordsPerSec = float64(res.Produced) / secs
	mr.Produced, mr.Consumed = res.Produced, res.Consumed
	mr.ProduceErrors, mr.FirstError, mr.Late = res.ProduceErrors, res.FirstError, res.Late
	mr.DrainComplete = res.DrainComplete
	if res.Consumers < requestedConsumers {
		mr.Notes = append(mr.Notes, fmt.Sprintf("%d consumers run instead of %d: one per partition at most", res.Consumers, requestedConsumers))
	}
}
