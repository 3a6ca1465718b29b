package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseSweep(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    *Sweep
		wantErr string
	}{
		{"wal.upload.interval.ms=5,10,20", &Sweep{Key: "wal.upload.interval.ms", Values: []string{"5", "10", "20"}}, ""},
		{" wal.object.max.bytes = 262144 , 1048576 ", &Sweep{Key: "wal.object.max.bytes", Values: []string{"262144", "1048576"}}, ""},
		{"wal.upload.interval.ms=40", &Sweep{Key: "wal.upload.interval.ms", Values: []string{"40"}}, ""},
		{"", nil, `want key=v1,v2,...`},
		{"wal.upload.interval.ms", nil, `"wal.upload.interval.ms": want key=v1,v2,...`},
		{"=5,10", nil, `"=5,10": want key=v1,v2,...`},
		{"wal.upload.interval.ms=", nil, "no values for wal.upload.interval.ms"},
		{"wal.upload.interval.ms= , ", nil, "an empty value"},
		{"wal.upload.interval.ms=5,,10", nil, "an empty value"},
		{"wal.upload.interval.ms=5,10,5", nil, "value 5 given twice"},
		{"replica.fetch.wait.max.ms=10,100", nil, "not a WAL setting (wal.*)"},
		{"wal.policy=latency,cost", nil, "compare policies with --modes"},
		{"wal.enable=true,false", nil, "strata dev sets it"},
		{"wal.bucket.endpoint=a,b", nil, "buckets of its local object store"},
		{"wal.zone.a.bucket.name=x,y", nil, "buckets of its local object store"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseSweep(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrSweep) {
					t.Fatalf("err %v, want ErrSweep with %q", err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "--sweep") {
					t.Errorf("err %q does not name the flag", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseSweep = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestSweepValidate(t *testing.T) {
	sw := &Sweep{Key: "wal.upload.interval.ms", Values: []string{"5", "10"}}
	for _, tc := range []struct {
		name         string
		sweep        *Sweep
		modes        []string
		brokerConfig []string
		wantErr      string
	}{
		{"classic and a wal mode", sw, []string{"classic", "wal+latency"}, []string{"wal.object.max.bytes=1048576"}, ""},
		{"wal modes only", sw, []string{"wal+latency", "wal"}, nil, ""},
		{"secure modes", sw, []string{"classic+sasl_ssl", "wal+latency+sasl_ssl"}, nil, ""},
		{"no wal mode", sw, []string{"classic"}, nil, "has no wal mode to sweep"},
		{"two classic references", sw, []string{"classic", "classic+sasl_ssl", "wal"}, nil, "one classic mode at most"},
		{"broker config of the same key", sw, []string{"classic", "wal+latency"}, []string{"wal.upload.interval.ms=5"}, "the sweep gives wal.upload.interval.ms its values"},
		{"no values", &Sweep{Key: "wal.upload.interval.ms"}, []string{"wal"}, nil, "no values"},
		{"a key classic would need too", &Sweep{Key: "log.segment.bytes", Values: []string{"1"}}, []string{"wal"}, nil, "not a WAL setting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sweep.Validate(tc.modes, tc.brokerConfig)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestPlanRuns(t *testing.T) {
	sw := &Sweep{Key: "wal.upload.interval.ms", Values: []string{"10", "40"}}
	label := func(runs []plannedRun) []string {
		var out []string
		for _, r := range runs {
			out = append(out, r.label())
		}
		return out
	}
	if got, want := label(planRuns([]string{"classic", "wal+latency", "wal"}, sw)), []string{
		"classic",
		"wal+latency wal.upload.interval.ms=10", "wal+latency wal.upload.interval.ms=40",
		"wal wal.upload.interval.ms=10", "wal wal.upload.interval.ms=40",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("sweep runs %q, want %q", got, want)
	}
	// The default point comes last: the plain wal mode, no setting.
	withDefault := &Sweep{Key: sw.Key, Values: sw.Values, Default: true}
	runs := planRuns([]string{"classic", "wal+latency"}, withDefault)
	if got, want := label(runs), []string{
		"classic", "wal+latency wal.upload.interval.ms=10", "wal+latency wal.upload.interval.ms=40", "wal (defaults)",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("sweep runs with the default point %q, want %q", got, want)
	}
	if last := runs[len(runs)-1]; last.mode != ModeWAL || last.setting != nil || !last.defaultPoint {
		t.Errorf("default point's run %+v", last)
	}
	if got := runs[len(runs)-1].clusterOptions(ClusterOptions{BrokerConfig: []string{"wal.object.max.bytes=524288"}}).BrokerConfig; !reflect.DeepEqual(got, []string{"wal.object.max.bytes=524288"}) {
		t.Errorf("default point's broker config %q, want --broker-config's only", got)
	}
	if got, want := label(planRuns([]string{"classic", "wal"}, nil)), []string{"classic", "wal"}; !reflect.DeepEqual(got, want) {
		t.Errorf("runs without a sweep %q, want %q", got, want)
	}
	// A swept run's setting comes after --broker-config, which is not
	// changed for the other runs.
	base := ClusterOptions{BrokerConfig: []string{"wal.object.max.bytes=524288"}}
	runs = planRuns([]string{"classic", "wal+latency"}, sw)
	if got := runs[1].clusterOptions(base).BrokerConfig; !reflect.DeepEqual(got, []string{"wal.object.max.bytes=524288", "wal.upload.interval.ms=10"}) {
		t.Errorf("swept run's broker config %q", got)
	}
	if got := runs[0].clusterOptions(base).BrokerConfig; !reflect.DeepEqual(got, base.BrokerConfig) {
		t.Errorf("classic's broker config %q, want --broker-config's only", got)
	}
	if len(base.BrokerConfig) != 1 {
		t.Errorf("--broker-config changed by a run: %q", base.BrokerConfig)
	}
}

func TestSweepNotes(t *testing.T) {
	for _, tc := range []struct {
		key   string
		modes []string
		want  []string // one substring per note
	}{
		{"wal.upload.interval.ms", []string{"wal+latency"}, nil},
		{"wal.upload.interval.ms", []string{"wal+latency", "wal"}, []string{"wal (wal.policy=auto) stretches wal.upload.interval.ms"}},
		{"wal.upload.interval.ms", []string{"wal+cost"}, []string{"wal+cost (wal.policy=cost) does not cut objects by wal.upload.interval.ms (a value above wal.upload.max.interval.ms raises that to it)"}},
		{"wal.upload.max.interval.ms", []string{"wal+latency", "wal+auto"}, []string{"wal+latency (wal.policy=latency) does not cut objects by wal.upload.max.interval.ms: it cuts by wal.upload.interval.ms and wal.object.max.bytes"}},
		{"wal.object.max.bytes", []string{"wal+latency"}, nil},
		{"wal.download.hedge.ms", []string{"wal+latency", "wal"}, nil},
	} {
		got := sweepNotes(tc.key, tc.modes)
		if len(got) != len(tc.want) {
			t.Errorf("%s %v: notes %q, want %d", tc.key, tc.modes, got, len(tc.want))
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], tc.want[i]) {
				t.Errorf("%s %v: note %q lacks %q", tc.key, tc.modes, got[i], tc.want[i])
			}
		}
	}
}

// sampleSweepReport is a sweep of wal+latency over three intervals with
// classic as the reference; the 80 ms point has no cost figure (its
// brokers did not export it), so it cannot be placed on the plot.
func sampleSweepReport() *Report {
	lat := func(p50 float64) LatencySummary {
		h := NewHistogram()
		for i := 0; i < 1000; i++ {
			h.Record(time.Duration(p50*float64(1+i%3)/2*1000) * time.Microsecond)
		}
		return h.Summary()
	}
	sw := &Sweep{Key: "wal.upload.interval.ms", Values: []string{"10", "40", "80"}, Default: true}
	run := func(value string, p50, cost, puts, objectBytes float64) ModeResult {
		m := ModeResult{Mode: "wal+latency", SweepSetting: &SweepSetting{Key: sw.Key, Value: value},
			ProduceLatency: lat(p50), EndToEndLatency: lat(p50 + 1), ThroughputMBps: 2.048, RecordsPerSec: 2000,
			Produced: 20000, Consumed: 20000, DrainComplete: true,
			Traffic: TrafficFigures{PutsPerSecondPerBroker: ptr(puts)},
			Cost:    CostFigures{USDPerGBProduced: ptr(cost), WALObjectBytes: ptr(objectBytes)}}
		if cost == 0 {
			m.Cost.USDPerGBProduced = nil
			m.Notes = []string{"metrics after the window: connection refused"}
		}
		return m
	}
	r := &Report{Schema: SchemaVersion, Settings: Settings{Acks: "all", RecordSize: 1024, Partitions: 6, Rate: 2000, Duration: 10 * time.Second}}
	r.Modes = []ModeResult{
		{Mode: "classic", ProduceLatency: lat(1), EndToEndLatency: lat(1.2), ThroughputMBps: 2.048, RecordsPerSec: 2000,
			Produced: 20000, Consumed: 20000, DrainComplete: true, Cost: CostFigures{USDPerGBProduced: ptr(0.04)}},
		run("10", 20, 0.02, 100, 6827),
		run("40", 50, 0.008, 25, 27307),
		run("80", 90, 0, 12.5, 54613),
		{Mode: "wal", SweepDefault: true, ProduceLatency: lat(30), EndToEndLatency: lat(31), ThroughputMBps: 2.048, RecordsPerSec: 2000,
			Produced: 20000, Consumed: 20000, DrainComplete: true, Traffic: TrafficFigures{PutsPerSecondPerBroker: ptr(20)},
			Cost: CostFigures{USDPerGBProduced: ptr(0.01), WALObjectBytes: ptr(34133)}},
	}
	r.ComputeSweep(sw)
	return r
}

func TestComputeSweep(t *testing.T) {
	r := sampleSweepReport()
	sw := r.Sweep
	if r.Ratios != nil {
		t.Errorf("a sweep report has mode ratios %v", r.Ratios)
	}
	if sw.Classic == nil || sw.Classic.Mode != "classic" || sw.Classic.ModeIndex != 0 || sw.Classic.Value != "" || sw.Classic.WALPolicy != "" {
		t.Fatalf("classic point %+v", sw.Classic)
	}
	if len(sw.Points) != 3 {
		t.Fatalf("%d points, want 3", len(sw.Points))
	}
	for i, want := range []struct {
		value string
		ratio *float64
	}{{"10", ptr(0.5)}, {"40", ptr(0.2)}, {"80", nil}} {
		p := sw.Points[i]
		if p.Mode != "wal+latency" || p.WALPolicy != "latency" || p.Value != want.value || p.ModeIndex != i+1 {
			t.Errorf("point %d: %+v", i, p)
		}
		if (p.CostRatioToClassic == nil) != (want.ratio == nil) || (want.ratio != nil && abs(*p.CostRatioToClassic-*want.ratio) > 1e-12) {
			t.Errorf("point %s: cost ratio %v, want %v", p.Value, val(p.CostRatioToClassic), val(want.ratio))
		}
		if p.ProduceP99Ms == nil || *p.ProduceP99Ms != r.Modes[i+1].ProduceLatency.P99Ms || p.EndToEndP99Ms == nil || p.PutsPerSecondPerBroker == nil {
			t.Errorf("point %s: figures not taken from its run: %+v", p.Value, p)
		}
	}
	// The default point: its own entry, not one of the swept points.
	if d := sw.Default; d == nil || d.Mode != "wal" || d.ModeIndex != 4 || d.Value != "" || d.WALPolicy != DefaultWALPolicy ||
		d.CostRatioToClassic == nil || abs(*d.CostRatioToClassic-0.25) > 1e-12 || d.Label(sw.Key) != "wal (defaults)" {
		t.Errorf("default point %+v", d)
	}
	// Without a classic mode there is no reference and no ratio.
	noClassic := &Report{Modes: r.Modes[1:]}
	noClassic.ComputeSweep(&Sweep{Key: sw.Key, Values: sw.Values})
	if noClassic.Sweep.Classic != nil || noClassic.Sweep.Points[0].CostRatioToClassic != nil {
		t.Errorf("without classic: reference %+v, ratio %v", noClassic.Sweep.Classic, val(noClassic.Sweep.Points[0].CostRatioToClassic))
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestSweepText(t *testing.T) {
	r := sampleSweepReport()
	r.Sweep.Notes = []string{"a sweep note"}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"sweep: wal.upload.interval.ms = 10, 40, 80",
		"mode  ", "wal.policy", "acks=all p50 (ms)", "acks=all p99 (ms)", "e2e p99 (ms)", "PUTs/s per broker", "USD/GB produced", "cost/classic",
		"note: a sweep note",
		"wal+latency wal.upload.interval.ms=80: metrics after the window: connection refused",
		"  wal+latency wal.upload.interval.ms=40: 0 brokers",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	// One row per point, classic's first, each with its setting; the
	// point without a cost says n/a rather than 0.
	rows := map[string][]string{}
	var order []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 11 && (f[0] == "classic" || f[0] == "wal+latency" || f[0] == "wal") {
			rows[f[2]] = f
			order = append(order, f[2])
		}
	}
	if want := []string{"(reference)", "10", "40", "80", "(defaults)"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("rows by setting %q, want %q:\n%s", order, want, out)
	}
	if got := rows["40"]; got[1] != "latency" || got[6] != "25.00" || got[7] != "0.008" || got[8] != "0.200x" || got[9] != "27307" {
		t.Errorf("row of 40: %q", got)
	}
	if got := rows["(reference)"]; got[1] != "-" || got[6] != "n/a" || got[8] != "1.000x" {
		t.Errorf("classic's row: %q", got)
	}
	if got := rows["(defaults)"]; got[1] != DefaultWALPolicy || got[7] != "0.010" || got[8] != "0.250x" {
		t.Errorf("default point's row: %q", got)
	}
	if got := rows["80"]; got[7] != "n/a" || got[8] != "n/a" {
		t.Errorf("row of 80 (cost n/a): %q", got)
	}
	// The per-mode figure table is not printed for a sweep.
	if strings.Contains(out, "produce latency p99.9 (ms)") {
		t.Errorf("sweep text has the per-mode figure table:\n%s", out)
	}
}

func TestSweepJSONRoundTrip(t *testing.T) {
	r := sampleSweepReport()
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	sweep, ok := doc["sweep"].(map[string]any)
	if !ok {
		t.Fatalf("no sweep section: %s", b.String())
	}
	if got, want := sortedKeys(sweep), "classic default key points values"; got != want {
		t.Errorf("sweep keys %q, want %q", got, want)
	}
	point := sweep["points"].([]any)[2].(map[string]any)
	if got, want := sortedKeys(point), "cost_ratio_to_classic cost_usd_per_gb_produced e2e_p99_ms mode mode_index produce_p50_ms produce_p99_ms puts_per_s_per_broker throughput_mb_per_s value wal_object_bytes wal_policy"; got != want {
		t.Errorf("point keys\n got %q\nwant %q", got, want)
	}
	if v, ok := point["cost_usd_per_gb_produced"]; !ok || v != nil {
		t.Errorf("n/a cost is %v (present %v), want null", v, ok)
	}
	modes := doc["modes"].([]any)
	if got := modes[1].(map[string]any)["sweep_setting"]; !reflect.DeepEqual(got, map[string]any{"key": "wal.upload.interval.ms", "value": "10"}) {
		t.Errorf("modes[1].sweep_setting = %v", got)
	}
	if _, ok := modes[0].(map[string]any)["sweep_setting"]; ok {
		t.Errorf("classic has a sweep_setting")
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Sweep, r.Sweep) {
		t.Errorf("sweep after the round trip\n got %+v\nwant %+v", back.Sweep, r.Sweep)
	}
	for i := range r.Modes {
		if !reflect.DeepEqual(back.Modes[i].SweepSetting, r.Modes[i].SweepSetting) {
			t.Errorf("modes[%d].sweep_setting %+v, want %+v", i, back.Modes[i].SweepSetting, r.Modes[i].SweepSetting)
		}
	}
	// What --from-json prints again is what the run printed.
	var first, again bytes.Buffer
	if err := r.WriteText(&first); err != nil {
		t.Fatal(err)
	}
	if err := back.WriteText(&again); err != nil {
		t.Fatal(err)
	}
	if first.String() != again.String() {
		t.Errorf("text from the JSON differs:\n%s\n---\n%s", first.String(), again.String())
	}
}

func sortedKeys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, " ")
}
