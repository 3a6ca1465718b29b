package bench

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"strings"
	"testing"
)

// Two brokers. Broker 0 before the window: 10 put observations ≤ 5 ms.
// In the window: put gains 100 observations, 50 in (0, 5 ms] and 50 in
// (5, 10 ms]; get (broker 1 only) 100 in (10, 20 ms], with 2 of them
// beyond 20 ms; cut_wait 10 in the +Inf bucket (beyond 20 ms).
const stagesBefore0 = `# TYPE strata_wal_stage_seconds histogram
strata_wal_stage_seconds_bucket{stage="put",le="0.005"} 10
strata_wal_stage_seconds_bucket{stage="put",le="0.01"} 10
strata_wal_stage_seconds_bucket{stage="put",le="0.02"} 10
strata_wal_stage_seconds_bucket{stage="put",le="+Inf"} 10
strata_wal_stage_seconds_sum{stage="put"} 0.03
strata_wal_stage_seconds_count{stage="put"} 10
`

const stagesAfter0 = `# TYPE strata_wal_stage_seconds histogram
strata_wal_stage_seconds_bucket{stage="put",le="0.005"} 60
strata_wal_stage_seconds_bucket{stage="put",le="0.01"} 110
strata_wal_stage_seconds_bucket{stage="put",le="0.02"} 110
strata_wal_stage_seconds_bucket{stage="put",le="+Inf"} 110
strata_wal_stage_seconds_sum{stage="put"} 0.8
strata_wal_stage_seconds_count{stage="put"} 110
strata_wal_stage_seconds_bucket{stage="cut_wait",le="0.005"} 0
strata_wal_stage_seconds_bucket{stage="cut_wait",le="0.01"} 0
strata_wal_stage_seconds_bucket{stage="cut_wait",le="0.02"} 0
strata_wal_stage_seconds_bucket{stage="cut_wait",le="+Inf"} 10
strata_wal_stage_seconds_sum{stage="cut_wait"} 1
strata_wal_stage_seconds_count{stage="cut_wait"} 10
`

const stagesAfter1 = `# TYPE strata_wal_stage_seconds histogram
strata_wal_stage_seconds_bucket{stage="get",le="0.005"} 0
strata_wal_stage_seconds_bucket{stage="get",le="0.01"} 0
strata_wal_stage_seconds_bucket{stage="get",le="0.02"} 98
strata_wal_stage_seconds_bucket{stage="get",le="+Inf"} 100
strata_wal_stage_seconds_sum{stage="get"} 1.6
strata_wal_stage_seconds_count{stage="get"} 100
`

func TestComputeStages(t *testing.T) {
	before := []Scrape{mustParse(t, stagesBefore0), mustParse(t, "")}
	after := []Scrape{mustParse(t, stagesAfter0), mustParse(t, stagesAfter1)}
	got, slowest := ComputeStages(before, after)
	want := []struct {
		stage    string
		count    uint64
		p50, p99 float64
	}{
		// Data-path order, not exposition order.
		{"cut_wait", 10, 20, 20}, // all beyond the last bound: that bound
		{"put", 100, 5, 9.9},     // rank 50 ends bucket 1; rank 99: 49/50 into (5, 10]
		{"get", 100, 15.102, 20}, // rank 50: 50/98 into (10, 20]; 99 beyond 20 ms
	}
	if len(got) != len(want) {
		t.Fatalf("stages %+v, want %d", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Stage != w.stage || g.Count != w.count || g.P50Ms == nil || g.P99Ms == nil ||
			math.Abs(*g.P50Ms-w.p50) > 0.01 || math.Abs(*g.P99Ms-w.p99) > 0.01 {
			t.Errorf("stage %d: %s count %d p50 %v p99 %v; want %+v", i, g.Stage, g.Count, FormatValue(g.P50Ms), FormatValue(g.P99Ms), w)
		}
	}
	// Ties at p99 (cut_wait and get at 20 ms): the first in path order.
	if slowest != "cut_wait" {
		t.Errorf("slowest stage at p99 %q, want cut_wait", slowest)
	}
	// Classic mode: no histogram, no stages.
	if s, name := ComputeStages([]Scrape{mustParse(t, exposBefore)}, []Scrape{mustParse(t, exposAfter)}); s != nil || name != "" {
		t.Errorf("stages without the histogram: %+v %q", s, name)
	}
}

func TestPlanCPUs(t *testing.T) {
	for _, tc := range []struct {
		cpus            []int
		ok              bool
		brokers, others []int
	}{
		{[]int{0}, false, nil, nil},
		{[]int{0, 1}, true, []int{0}, []int{1}},
		{[]int{0, 1, 2}, true, []int{0}, []int{1, 2}},
		{[]int{2, 3, 6, 7}, true, []int{2, 3}, []int{6, 7}},
	} {
		p, ok := PlanCPUs(tc.cpus)
		if ok != tc.ok || !equalInts(p.Brokers, tc.brokers) || !equalInts(p.Others, tc.others) {
			t.Errorf("PlanCPUs(%v) = %+v, %v; want %v / %v, %v", tc.cpus, p, ok, tc.brokers, tc.others, tc.ok)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPlotStages: a WAL mode's stages add a panel below the latency
// panels (SVG and PNG grow by its height) with every stage named and the
// slowest marked; a report without stages keeps the plain size.
func TestPlotStages(t *testing.T) {
	r := sampleReport()
	if w, h := plotSize(r); w != plotWidth || h != plotHeight {
		t.Fatalf("no stages: size %dx%d, want %dx%d", w, h, plotWidth, plotHeight)
	}
	for i, st := range walStages {
		r.Modes[1].Stages = append(r.Modes[1].Stages, StageFigure{Stage: st, Count: 10, P50Ms: ptr(float64(i + 1)), P99Ms: ptr(float64(10 * (i + 1)))})
	}
	r.Modes[1].SlowestStageP99 = "hwm_to_consumer_fetch"
	var b bytes.Buffer
	if err := WriteSVG(&b, r); err != nil {
		t.Fatal(err)
	}
	_, h := plotSize(r)
	if h <= plotHeight || !strings.Contains(b.String(), fmt.Sprintf(`height="%d"`, h)) {
		t.Fatalf("SVG height: want %d (> %d)", h, plotHeight)
	}
	for _, want := range append([]string{"WAL stages", "hwm_to_consumer_fetch *", "8.000 / 80.00"}, walStages...) {
		if !strings.Contains(b.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	b.Reset()
	if err := WritePNG(&b, r); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Dy(); got != h {
		t.Errorf("PNG height %d, want %d", got, h)
	}
}

// TestReadJSON: a saved report prints the same text as the run did
// (bench --from-json), and another schema is refused clearly.
func TestReadJSON(t *testing.T) {
	r := sampleReport()
	r.Settings.Pin = &PinSettings{Enabled: true, CPUPlan: CPUPlan{Brokers: []int{0}, Others: []int{1}}}
	r.Modes[1].Stages = []StageFigure{{Stage: "put", Count: 3, P50Ms: ptr(5), P99Ms: ptr(9)}}
	r.Modes[1].SlowestStageP99 = "put"
	r.Modes[1].BrokerCPU = &BrokerCPU{Seconds: 2, SecondsPerGBProduce: 40}
	var js, want, got bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteText(&want); err != nil {
		t.Fatal(err)
	}
	if err := back.WriteText(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("text from the saved report differs:\n%s\nwant:\n%s", got.String(), want.String())
	}
	for _, s := range []string{"pinned: brokers on CPUs [0]", "broker CPU seconds per GB produced", "slowest at p99: put"} {
		if !strings.Contains(got.String(), s) {
			t.Errorf("text lacks %q", s)
		}
	}
	if _, err := ReadJSON(strings.NewReader(`{"schema": 99}`)); err == nil || !strings.Contains(err.Error(), "schema 99") {
		t.Errorf("schema 99: %v", err)
	}
}
