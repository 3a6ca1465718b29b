package bench

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

func TestMain(m *testing.M) {
	brokertest.Main(m)
}

// checkModeResult holds for every successful bench of a mode.
func checkModeResult(t *testing.T, m ModeResult) {
	t.Helper()
	if m.Produced == 0 || m.ThroughputMBps <= 0 || m.RecordsPerSec <= 0 {
		t.Errorf("%s: no throughput: %d records, %v MB/s", m.Mode, m.Produced, m.ThroughputMBps)
	}
	if m.ProduceErrors != 0 {
		t.Errorf("%s: %d produce errors (%s)", m.Mode, m.ProduceErrors, m.FirstError)
	}
	if !m.DrainComplete || m.Consumed != m.Produced {
		t.Errorf("%s: consumed %d of %d window records (drain complete %v)", m.Mode, m.Consumed, m.Produced, m.DrainComplete)
	}
	for name, l := range map[string]LatencySummary{"produce": m.ProduceLatency, "end-to-end": m.EndToEndLatency} {
		if !(0 < l.MinMs && l.MinMs <= l.P50Ms && l.P50Ms <= l.P99Ms && l.P99Ms <= l.P999Ms && l.P999Ms <= l.MaxMs) {
			t.Errorf("%s: %s latency percentiles not ordered: %+v", m.Mode, name, l)
		}
	}
	if m.ProduceLatency.Count != m.Produced {
		t.Errorf("%s: %d produce latencies for %d records", m.Mode, m.ProduceLatency.Count, m.Produced)
	}
	if m.EndToEndLatency.Count != m.Consumed {
		t.Errorf("%s: %d end-to-end latencies for %d consumed records", m.Mode, m.EndToEndLatency.Count, m.Consumed)
	}
}

// checkProduceStages: acks=all records are traced to their requests;
// without warmup, the first records of an unprimed load are produced before
// their partition's first answer, and no record of a primed one is.
func checkProduceStages(t *testing.T, m ModeResult, lo LoadOptions) {
	t.Helper()
	st := m.ProduceStages
	if lo.Acks != "all" {
		if st != nil {
			t.Errorf("produce stages %+v at acks=%s, want none", st, lo.Acks)
		}
		return
	}
	if st == nil {
		t.Fatal("no produce stages at acks=all")
	}
	if st.Unmatched != 0 || st.InProducer.Count != m.Produced || st.Request.Count != m.Produced || st.Delivery.Count != m.Produced {
		t.Errorf("stages of %d, %d, %d records (%d unmatched) for %d produced", st.InProducer.Count, st.Request.Count, st.Delivery.Count, st.Unmatched, m.Produced)
	}
	if st.Cold.Count+st.Warm.Count != m.Produced || st.Cold.Count != st.ColdRecords {
		t.Errorf("%d cold (%d counted) and %d warm records for %d produced", st.Cold.Count, st.ColdRecords, st.Warm.Count, m.Produced)
	}
	switch {
	case lo.Warmup > 0:
	case lo.PrimePartitions && st.ColdRecords != 0:
		t.Errorf("%d records produced before their partition's first answer after priming, want 0", st.ColdRecords)
	case !lo.PrimePartitions && st.ColdRecords == 0:
		t.Error("no record produced before its partition's first answer, unprimed and without warmup: want the first")
	}
	t.Logf("in producer p99 %v ms, request p99 %v ms, %d cold records", st.InProducer.P99Ms, st.Request.P99Ms, st.ColdRecords)
}

// TestExternalInProcessBroker runs a short bench against an in-process
// single broker with its metrics endpoint.
func TestExternalInProcessBroker(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("metrics.listen", "127.0.0.1:0"))
	metricsURL := "http://" + b.Server().MetricsAddr() + "/metrics"
	for _, tc := range []struct {
		name string
		load func(*LoadOptions)
	}{
		{"acks=all max rate", func(o *LoadOptions) {}},
		{"acks=1 target rate, more consumers than partitions", func(o *LoadOptions) { o.Acks = "1"; o.Rate = 2000; o.Producers = 3; o.Consumers = 5 }},
		{"acks=0 lz4", func(o *LoadOptions) { o.Acks = "0"; o.Compression = "lz4"; o.Consumers = 1 }},
		{"acks=all unprimed, no warmup", func(o *LoadOptions) { o.PrimePartitions = false; o.Warmup = 0; o.Rate = 2000 }},
		{"acks=all primed, no warmup", func(o *LoadOptions) { o.Warmup = 0; o.Rate = 2000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo := DefaultLoadOptions()
			lo.Partitions, lo.Warmup, lo.Duration, lo.RecordSize = 4, 500*time.Millisecond, 2*time.Second, 256
			tc.load(&lo)
			rep, err := Run(context.Background(), Config{Bootstrap: []string{b.Addr()}, MetricsURLs: []string{metricsURL}, Load: lo})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Modes) != 1 || rep.Modes[0].Mode != ModeExternal || rep.Ratios != nil {
				t.Fatalf("modes %+v ratios %v, want one external mode and no ratios", rep.Modes, rep.Ratios)
			}
			m := rep.Modes[0]
			checkModeResult(t, m)
			if m.Brokers != 1 || m.ReplicationFactor != 1 {
				t.Errorf("brokers %d RF %d, want 1 and 1", m.Brokers, m.ReplicationFactor)
			}
			if lo.Consumers > int(lo.Partitions) && !strings.Contains(strings.Join(m.Notes, "\n"), "one per partition") {
				t.Errorf("no note about consumers capped at the partition count: %q", m.Notes)
			}
			// franz-go: up to 5 Produce requests in flight per broker when
			// idempotent (acks=all), 1 otherwise; none are answered at acks=0.
			switch wantMax := map[string]int64{"all": 5, "1": 1, "0": 0}[lo.Acks]; {
			case wantMax == 0 && m.RequestsInFlightMax != 0,
				wantMax > 0 && (m.RequestsInFlightMax < 1 || m.RequestsInFlightMax > wantMax):
				t.Errorf("at most %d Produce requests in flight at one broker with acks=%s, want 1 to %d (0 at acks=0)", m.RequestsInFlightMax, lo.Acks, wantMax)
			}
			t.Logf("at most %d Produce requests in flight at one broker", m.RequestsInFlightMax)
			checkProduceStages(t, m, lo)
			if lo.Rate > 0 && m.RecordsPerSec > float64(lo.Rate)*1.01 {
				t.Errorf("%v records/s with a target of %d", m.RecordsPerSec, lo.Rate)
			}
			// One broker: the traffic metric is exported, nothing crosses a zone.
			tr := m.Traffic
			// 0.9: records sent while the first scrape was in flight count before it.
			if tr.ProduceBytesIn == nil || *tr.ProduceBytesIn < 0.9*float64(m.Produced)*float64(lo.RecordSize) {
				t.Errorf("broker counted %v produce bytes for %d records of %d B", val(tr.ProduceBytesIn), m.Produced, lo.RecordSize)
			}
			if tr.CrossZonePerProducedByte == nil || *tr.CrossZonePerProducedByte != 0 {
				t.Errorf("cross-zone bytes per produced byte = %v, want 0 on one broker", val(tr.CrossZonePerProducedByte))
			}
			if tr.PutsPerSecondPerBroker != nil || tr.GetsPerSecond != nil {
				t.Errorf("object store figures %v %v on a broker without object store, want n/a", val(tr.PutsPerSecondPerBroker), val(tr.GetsPerSecond))
			}
		})
	}
}

// TestCancelDuringLoad: a run whose context ends mid-window returns the
// context's error and leaves nothing running (goleak in TestMain).
func TestCancelDuringLoad(t *testing.T) {
	b := brokertest.Start(t)
	lo := DefaultLoadOptions()
	lo.Warmup, lo.Duration, lo.Partitions = 0, time.Hour, 2
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := Run(ctx, Config{Bootstrap: []string{b.Addr()}, Load: lo})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	// The bench topic is deleted even so.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 0 {
		t.Errorf("topics left behind: %v", names)
	}
}

func TestExternalBadBootstrap(t *testing.T) {
	lo := DefaultLoadOptions()
	lo.Duration = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A port nobody listens on.
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(ctx, Config{Bootstrap: []string{"127.0.0.1:" + strconv.Itoa(port)}, Load: lo})
	if err == nil {
		t.Fatal("bench against a dead address succeeded")
	}
}

// TestModesDevSubprocess runs `--modes classic` through DevStarter (the
// strata binary built once by brokertest) and checks the 3-zone figures.
func TestModesDevSubprocess(t *testing.T) {
	bin := brokertest.Binary(t)
	starter := &DevStarter{Binary: bin}
	lo := DefaultLoadOptions()
	lo.Partitions, lo.Warmup, lo.Duration, lo.RecordSize = 6, 500*time.Millisecond, 2*time.Second, 512
	cpus, _ := availableCPUs()
	rep, err := Run(context.Background(), Config{Modes: []string{ModeClassic}, Starter: starter, Load: lo, Pin: true})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Modes[0]
	checkModeResult(t, m)
	// Pinned (issue #18): the settings say how, the test process has its
	// CPUs back, the brokers' CPU time was read from /proc.
	if p := rep.Settings.Pin; p == nil || p.Enabled != (len(cpus) >= 2) || (p.Enabled && (len(p.Brokers) == 0 || len(p.Others) == 0)) {
		t.Errorf("settings.pin %+v with %d CPUs", p, len(cpus))
	}
	if after, _ := availableCPUs(); !equalInts(after, cpus) {
		t.Errorf("the bench process runs on CPUs %v after the run, %v before", after, cpus)
	}
	// One scheduler P per broker and broker CPU (unless the environment
	// sets GOMAXPROCS), and the brokers' scheduler latency from their
	// Go collector.
	if p := rep.Settings.Pin; os.Getenv("GOMAXPROCS") == "" && p != nil && p.Enabled && rep.Settings.BrokerGoMaxProcs != strconv.Itoa(DevBrokers*len(p.Brokers)) {
		t.Errorf("settings.broker_gomaxprocs %q, want %d per broker CPU", rep.Settings.BrokerGoMaxProcs, DevBrokers)
	}
	if s := m.SchedLatency; s == nil || s.Count == 0 || s.P99Ms == nil {
		t.Errorf("scheduler latency %+v, want the brokers' go_sched_latencies_seconds over the window", s)
	}
	// Half the requests at least are no slower than the slowest record.
	// Not all: a request answered in the window may carry only records
	// of the warm-up, which the window does not measure (seen at p99 on
	// a machine at load 30).
	if r := m.ProduceRequestLatency; r.Count == 0 || r.P50Ms <= 0 || r.P50Ms > m.ProduceLatency.MaxMs {
		t.Errorf("Produce request round trip %+v, want requests timed, the median no longer than the slowest record (%v ms)", r, m.ProduceLatency.MaxMs)
	}
	if m.BrokerCPU == nil || m.BrokerCPU.Seconds <= 0 || m.BrokerCPU.SecondsPerGBProduce <= 0 {
		t.Errorf("broker CPU %+v, want the dev process's CPU time in the window", m.BrokerCPU)
	}
	if len(m.Stages) != 0 {
		t.Errorf("classic mode has WAL stages %+v", m.Stages)
	}
	if m.Brokers != 3 || m.ReplicationFactor != 3 || len(m.MetricsURLs) != 3 {
		t.Errorf("brokers %d RF %d metrics %v, want a 3-broker cluster with RF 3 and 3 metrics URLs", m.Brokers, m.ReplicationFactor, m.MetricsURLs)
	}
	// RF 3 over 3 zones: every produced byte is sent to two other zones.
	if v := m.Traffic.CrossZonePerProducedByte; v == nil || *v < 1.5 {
		t.Errorf("cross-zone bytes per produced byte = %v, want about 2 for RF 3 in 3 zones", val(v))
	}

}

// TestDevStarterFailsClearly: a dev that exits before its ready line is an
// error carrying dev's own output, and nothing is left running.
func TestDevStarterFailsClearly(t *testing.T) {
	starter := &DevStarter{Binary: brokertest.Binary(t), ExtraArgs: []string{"--no-such-flag"}}
	_, err := starter.Start(context.Background(), ModeClassic, ClusterOptions{})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("err %v, want an early-exit error quoting dev's complaint", err)
	}
}

// recordingDev wraps the real strata binary and records the arguments of
// every dev it starts.
const recordingDev = `#!/usr/bin/env bash
if [ "$1" = dev ] && [ "$2" != --help ]; then echo "$*" >> "$ARGS_LOG"; fi
exec "$REAL_STRATA" "$@"
`

// TestTwoModesOneRun is the whole two-mode path against the real `strata
// dev`: classic then wal+latency (local Versity Gateway; plain wal runs
// auto, which replicates this light load inline), injected S3 latencies and
// a 1 ms zone latency, two clusters in one bench, the flag mapping, the
// ratios, the plot, and the zone latency shown to act: replica and client
// bytes went through the delayed connections in both modes, and in wal
// mode GETs from other zones' buckets were delayed.
func TestTwoModesOneRun(t *testing.T) {
	const walLatency = ModeWAL + "+latency"
	if _, err := s3server.Binary(); err != nil {
		t.Fatal(err) // says to run `make test` (or `make test-deps`)
	}
	dir := t.TempDir()
	script, argsLog := dir+"/strata", dir+"/args"
	if err := os.WriteFile(script, []byte(recordingDev), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REAL_STRATA", brokertest.Binary(t))
	t.Setenv("ARGS_LOG", argsLog)
	lo := DefaultLoadOptions()
	lo.Partitions, lo.Warmup, lo.Duration, lo.RecordSize, lo.Rate = 3, time.Second, 2*time.Second, 200, 1000
	storeParent := t.TempDir()
	rep, err := Run(context.Background(), Config{
		Modes: []string{ModeClassic, walLatency}, Starter: &DevStarter{Binary: script}, Load: lo,
		Cluster: ClusterOptions{S3PutLatency: 5 * time.Millisecond, S3GetLatency: 3 * time.Millisecond, ZoneLatency: time.Millisecond,
			StoreDir: storeParent},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Modes) != 2 || rep.Modes[0].Mode != ModeClassic || rep.Modes[1].Mode != walLatency {
		t.Fatalf("modes %+v", rep.Modes)
	}
	if rep.Settings.S3LatencyMode != S3LatencyFloor {
		t.Errorf("settings: S3 latency mode %q, want floor", rep.Settings.S3LatencyMode)
	}
	if rep.Settings.ZoneLatency != time.Millisecond || rep.Settings.ZoneRoundTrip != 2*time.Millisecond || len(rep.Settings.ZoneLatencyAppliesTo) == 0 {
		t.Errorf("settings: zone latency %v, round trip %v, applies to %q", rep.Settings.ZoneLatency, rep.Settings.ZoneRoundTrip, rep.Settings.ZoneLatencyAppliesTo)
	}
	for _, m := range rep.Modes {
		checkModeResult(t, m)
		z := m.ZoneLatency
		if z == nil {
			t.Fatalf("%s: no zone latency result", m.Mode)
		}
		// Three brokers in three zones: every follower fetches from
		// leaders in the two other zones.
		if v := z.ReplicaBytesDelayed; v == nil || *v <= 0 || z.ReplicaConnections == nil || *z.ReplicaConnections < 2 {
			t.Errorf("%s: replica bytes delayed %v on %v connections, want > 0 on at least 2", m.Mode, val(v), val(z.ReplicaConnections))
		}
		if z.ClientBytesDelayed <= 0 || z.ClientConnections <= 0 {
			t.Errorf("%s: client bytes delayed %d on %d connections, want > 0", m.Mode, z.ClientBytesDelayed, z.ClientConnections)
		}
		if len(z.ProducerZones) != lo.Producers || z.ProducerZones[0] == z.ProducerZones[1] {
			t.Errorf("%s: producer zones %v, want round-robin", m.Mode, z.ProducerZones)
		}
	}
	if v := rep.Modes[1].ZoneLatency.CrossZoneObjectGets; v == nil || *v <= 0 {
		t.Errorf("wal: %v GETs from other zones' buckets delayed, want > 0", val(v))
	}
	// The WAL mode's per-stage breakdown, every stage observed.
	if st := rep.Modes[1].Stages; len(st) != len(walStages) || rep.Modes[1].SlowestStageP99 == "" {
		t.Errorf("wal stages %+v (slowest %q), want all %d", st, rep.Modes[1].SlowestStageP99, len(walStages))
	}
	if v := rep.Modes[1].Traffic.PutsPerSecondPerBroker; v == nil || *v <= 0 {
		t.Errorf("wal: %v PUTs/s per broker, want > 0", val(v))
	}
	if v := rep.Modes[0].ZoneLatency.CrossZoneObjectGets; v == nil || *v != 0 {
		t.Errorf("classic: %v cross-zone object GETs, want 0", val(v))
	}
	if rep.Modes[0].Bootstrap[0] == rep.Modes[1].Bootstrap[0] {
		t.Errorf("both modes ran on the same cluster %v", rep.Modes[0].Bootstrap)
	}
	row := rep.Ratios[walLatency+"/classic"]
	for _, k := range []string{"produce_p50_ms", "e2e_p99_ms", "throughput_mb_per_s"} {
		if row[k] == nil || *row[k] <= 0 {
			t.Errorf("ratio %s = %v, want a positive number", k, val(row[k]))
		}
	}
	if row["puts_per_s_per_broker"] != nil {
		t.Errorf("PUT ratio %v with classic (no object store) as the base, want n/a", val(row["puts_per_s_per_broker"]))
	}
	logged, err := os.ReadFile(argsLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
	if len(lines) != 2 ||
		!strings.Contains(lines[0], "--replication classic --zone-latency 1ms") || strings.Contains(lines[0], "s3-") ||
		!strings.Contains(lines[1], "--replication wal --set wal.policy=latency --s3-dir "+storeParent+"/strata-bench-s3-") ||
		!strings.Contains(lines[1], " --s3-put-latency 5ms --s3-get-latency 3ms --zone-latency 1ms") {
		t.Errorf("dev command lines:\n%s", logged)
	}
	// The wal mode's object store directory is gone with its cluster.
	if left, err := os.ReadDir(storeParent); err != nil || len(left) != 0 {
		t.Errorf("object store directories left after the run: %v (%v)", left, err)
	}
	if want := map[bool]string{true: "tmpfs", false: "disk"}[isTmpfs(storeParent)]; rep.Settings.ObjectStoreData != want {
		t.Errorf("settings: object store data %q, want %q", rep.Settings.ObjectStoreData, want)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	var svg strings.Builder
	if err := WriteSVG(&svg, rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(svg.String(), "<polyline"); n != 4 {
		t.Errorf("%d lines in the plot, want 4", n)
	}
}

// TestSweepTwoPoints is --sweep end to end against the real `strata dev`:
// classic once and wal+latency at two upload intervals, each point's
// setting passed to its own cluster (before the mode's wal.policy), the
// default point (plain wal, no swept key) last, and the frontier filled
// from the four runs.
func TestSweepTwoPoints(t *testing.T) {
	const walLatency = ModeWAL + "+latency"
	if _, err := s3server.Binary(); err != nil {
		t.Fatal(err) // says to run `make test` (or `make test-deps`)
	}
	dir := t.TempDir()
	script, argsLog := dir+"/strata", dir+"/args"
	if err := os.WriteFile(script, []byte(recordingDev), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REAL_STRATA", brokertest.Binary(t))
	t.Setenv("ARGS_LOG", argsLog)
	lo := DefaultLoadOptions()
	lo.Partitions, lo.Warmup, lo.Duration, lo.RecordSize, lo.Rate = 3, 500*time.Millisecond, time.Second, 200, 500
	sweep := &Sweep{Key: "wal.upload.interval.ms", Values: []string{"10", "40"}, Default: true}
	rep, err := Run(context.Background(), Config{
		Modes: []string{ModeClassic, walLatency}, Starter: &DevStarter{Binary: script}, Load: lo, Sweep: sweep,
		Cluster: ClusterOptions{BrokerConfig: []string{"wal.object.max.bytes=1048576"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Modes) != 4 {
		t.Fatalf("%d runs, want classic once, wal+latency twice and the default point", len(rep.Modes))
	}
	for _, m := range rep.Modes {
		checkModeResult(t, m)
	}
	sw := rep.Sweep
	if sw == nil || sw.Classic == nil || sw.Classic.ModeIndex != 0 || len(sw.Points) != 2 {
		t.Fatalf("sweep %+v", sw)
	}
	for i, p := range sw.Points {
		if p.Mode != walLatency || p.Value != sweep.Values[i] || p.WALPolicy != "latency" || rep.Modes[p.ModeIndex].SweepSetting == nil ||
			rep.Modes[p.ModeIndex].SweepSetting.Value != p.Value {
			t.Errorf("point %d: %+v (its run's setting %+v)", i, p, rep.Modes[p.ModeIndex].SweepSetting)
		}
		for name, v := range map[string]*float64{"produce p99": p.ProduceP99Ms, "e2e p99": p.EndToEndP99Ms, "PUTs/s per broker": p.PutsPerSecondPerBroker,
			"USD/GB": p.CostUSDPerGBProduced, "cost ratio": p.CostRatioToClassic} {
			if v == nil || *v <= 0 {
				t.Errorf("point %s: %s = %v, want a positive figure", p.Value, name, val(v))
			}
		}
	}
	logged, err := os.ReadFile(argsLog)
	if err != nil {
		t.Fatal(err)
	}
	if d := sw.Default; d == nil || d.Mode != ModeWAL || d.ModeIndex != 3 || !rep.Modes[3].SweepDefault || rep.Modes[3].SweepSetting != nil ||
		d.ProduceP99Ms == nil || d.CostRatioToClassic == nil {
		t.Errorf("default point %+v", d)
	}
	lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
	if len(lines) != 4 ||
		!strings.Contains(lines[3], "--set wal.object.max.bytes=1048576 --replication wal") || strings.Contains(lines[3], "wal.upload.interval.ms") ||
		strings.Contains(lines[3], "wal.policy=latency") ||
		!strings.Contains(lines[0], "--set wal.object.max.bytes=1048576 --replication classic") || strings.Contains(lines[0], "wal.upload.interval.ms") ||
		!strings.Contains(lines[1], "--set wal.object.max.bytes=1048576 --set wal.upload.interval.ms=10 --replication wal --set wal.policy=latency") ||
		!strings.Contains(lines[2], "--set wal.object.max.bytes=1048576 --set wal.upload.interval.ms=40 --replication wal --set wal.policy=latency") {
		t.Errorf("dev command lines:\n%s", logged)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
}
