package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-dev/strata/internal/bench"
)

// TestBenchFlagErrors: flags for the embedded clusters are refused with
// --bootstrap, and a malformed --broker-config is refused, before anything
// starts.
func TestBenchFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--broker-config", "wal.upload.interval.ms"}, `--broker-config "wal.upload.interval.ms": want key=value`},
		{[]string{"--broker-config", "=5"}, `--broker-config "=5": want key=value`},
		{[]string{"--bootstrap", "127.0.0.1:1", "--broker-config", "a=b"}, "--broker-config is for the embedded clusters"},
		{[]string{"--bootstrap", "127.0.0.1:1", "--store-tmpfs=false"}, "--store-tmpfs is for the embedded clusters"},
		{[]string{"--default-point=false"}, "--default-point is for --sweep"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if _, err := runStrata(t, append([]string{"bench"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBenchSweepFlagErrors: a --sweep the embedded clusters could not
// apply, or one that would measure nothing, is refused before anything
// starts.
func TestBenchSweepFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sweep", "wal.upload.interval.ms"}, `--sweep "wal.upload.interval.ms": want key=v1,v2,...`},
		{[]string{"--sweep", ""}, `--sweep "": want key=v1,v2,...`},
		{[]string{"--sweep", "wal.upload.interval.ms="}, "--sweep \"wal.upload.interval.ms=\": no values for wal.upload.interval.ms"},
		{[]string{"--sweep", "wal.upload.interval.ms=5,,10"}, "an empty value"},
		{[]string{"--sweep", "wal.upload.intervall.ms=5,10"}, "--sweep wal.upload.intervall.ms: not a broker config key of this strata"},
		{[]string{"--sweep", "wal.upload.interval.ms=5,fast"}, `--sweep: config wal.upload.interval.ms="fast": want a positive number`},
		{[]string{"--sweep", "wal.upload.interval.ms=0"}, `--sweep: config wal.upload.interval.ms="0": want a positive number`},
		{[]string{"--sweep", "replica.fetch.wait.max.ms=10,100"}, "not a WAL setting (wal.*)"},
		{[]string{"--sweep", "wal.policy=latency,auto"}, "compare policies with --modes"},
		{[]string{"--sweep", "wal.upload.interval.ms=5,10", "--modes", "classic"}, "--modes classic has no wal mode to sweep"},
		{[]string{"--sweep", "wal.upload.interval.ms=5,10", "--broker-config", "wal.upload.interval.ms=20"}, "the sweep gives wal.upload.interval.ms its values"},
		{[]string{"--sweep", "wal.upload.interval.ms=5,10", "--bootstrap", "127.0.0.1:1"}, "--sweep is for the embedded clusters, not --bootstrap"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if _, err := runStrata(t, append([]string{"bench"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBenchSweepFromJSON: --from-json prints and plots a sweep report
// again (the frontier table and plot, not the per-mode ones).
func TestBenchSweepFromJSON(t *testing.T) {
	dir := t.TempDir()
	cost := func(v float64) bench.CostFigures { return bench.CostFigures{USDPerGBProduced: &v} }
	lat := func(ms float64) bench.LatencySummary {
		return bench.LatencySummary{Count: 100, MinMs: ms / 2, P50Ms: ms, P90Ms: ms, P99Ms: 2 * ms, P999Ms: 2 * ms, MaxMs: 2 * ms}
	}
	rep := &bench.Report{Schema: bench.SchemaVersion, Settings: bench.Settings{Acks: "all", RecordSize: 1024, Partitions: 6}}
	rep.Modes = []bench.ModeResult{
		{Mode: "classic", ProduceLatency: lat(1), Cost: cost(0.04)},
		{Mode: "wal+latency", SweepSetting: &bench.SweepSetting{Key: "wal.upload.interval.ms", Value: "10"}, ProduceLatency: lat(20), Cost: cost(0.02)},
		{Mode: "wal+latency", SweepSetting: &bench.SweepSetting{Key: "wal.upload.interval.ms", Value: "40"}, ProduceLatency: lat(50), Cost: cost(0.008)},
		{Mode: "wal", SweepDefault: true, ProduceLatency: lat(30), Cost: cost(0.04)},
	}
	rep.ComputeSweep(&bench.Sweep{Key: "wal.upload.interval.ms", Values: []string{"10", "40"}, Default: true})
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	path, plot := filepath.Join(dir, "sweep.json"), filepath.Join(dir, "frontier.svg")
	if err := os.WriteFile(path, js.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runStrata(t, "bench", "--from-json", path, "--plot", plot)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"frontier plot written to " + plot, "sweep: wal.upload.interval.ms = 10, 40", "(reference)", "0.500x", "0.200x", "(defaults)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	svg, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(svg), "<title>wal+latency wal.upload.interval.ms="); n != 2 {
		t.Errorf("%d point markers in the plot, want 2", n)
	}
	if n := strings.Count(string(svg), "<title>wal (defaults): 0.040 USD/GB (1.000x classic)"); n != 1 {
		t.Errorf("%d default point markers in the plot, want 1", n)
	}
}
