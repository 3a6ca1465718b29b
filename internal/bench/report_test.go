package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"image/color"
	"image/png"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestFormatValueAndRatio(t *testing.T) {
	tests := []struct {
		v         *float64
		value     string
		ratioBase *float64
		ratio     string
	}{
		{nil, "n/a", ptr(1), "n/a"},
		{ptr(0), "0", ptr(2), "0x"},
		{ptr(1234.5), "1234", ptr(1234.5), "1.000x"},
		{ptr(123.45), "123.5", ptr(246.9), "0.500x"},
		{ptr(12.345), "12.35", ptr(0), "n/a"}, // base 0: no ratio
		{ptr(2.009), "2.009", nil, "n/a"},
		{ptr(0.00042), "0.00042", ptr(0.00021), "2.000x"},
		{ptr(-3.5), "-3.500", ptr(1), "-3.500x"},
	}
	for _, tt := range tests {
		if got := FormatValue(tt.v); got != tt.value {
			t.Errorf("FormatValue(%v) = %q, want %q", val(tt.v), got, tt.value)
		}
		if got := FormatRatio(Ratio(tt.v, tt.ratioBase)); got != tt.ratio {
			t.Errorf("ratio %v/%v = %q, want %q", val(tt.v), val(tt.ratioBase), got, tt.ratio)
		}
	}
}

func sampleReport() *Report {
	lat := func(p50 float64) LatencySummary {
		h := NewHistogram()
		for i := 0; i < 1000; i++ {
			h.Record(time.Duration(p50*float64(1+i%3)/2*1000) * time.Microsecond)
		}
		return h.Summary()
	}
	r := &Report{Schema: SchemaVersion, Settings: Settings{Acks: "all", RecordSize: 1024, Partitions: 12, Duration: 10 * time.Second,
		ZoneLatency: time.Millisecond, ZoneRoundTrip: 2 * time.Millisecond, ZoneLatencyAppliesTo: ZoneLatencyScope,
		S3PutLatency: 5 * time.Millisecond, S3GetLatency: 3 * time.Millisecond, S3LatencyMode: S3LatencyFloor}}
	r.Modes = []ModeResult{
		{Mode: "classic", ProduceLatency: lat(4), EndToEndLatency: lat(5), ThroughputMBps: 50, RecordsPerSec: 48828,
			Produced: 488280, Consumed: 488280, DrainComplete: true,
			Traffic: TrafficFigures{CrossZonePerProducedByte: ptr(2.01)}},
		{Mode: "wal", ProduceLatency: lat(8), EndToEndLatency: lat(10), ThroughputMBps: 45, RecordsPerSec: 43945,
			Produced: 439450, Consumed: 439450, DrainComplete: true,
			Traffic: TrafficFigures{CrossZonePerProducedByte: ptr(0.02), PutsPerSecondPerBroker: ptr(95), GetsPerSecond: ptr(190),
				PutsPerSecond: []*float64{ptr(90), ptr(95), ptr(100)}},
			ZoneLatency: &ZoneLatencyResult{OneWay: time.Millisecond, ReplicaConnections: ptr(6), ReplicaBytesDelayed: ptr(123456),
				CrossZoneObjectGets: ptr(42), ClientConnections: 4, ClientBytesDelayed: 98765, ProducerZones: []string{"a", "b"}, ConsumerZones: []string{"a", "b"}}},
	}
	r.ComputeRatios()
	return r
}

func TestRatios(t *testing.T) {
	r := sampleReport()
	row, ok := r.Ratios["wal/classic"]
	if !ok || len(r.Ratios) != 1 {
		t.Fatalf("ratios %v, want one wal/classic row", r.Ratios)
	}
	if got := *row["throughput_mb_per_s"]; got != 0.9 {
		t.Errorf("throughput ratio %v, want 0.9", got)
	}
	if got := *row["cross_zone_bytes_per_produced_byte"]; got < 0.00995 || got > 0.00996 {
		t.Errorf("cross-zone ratio %v, want 0.02/2.01", got)
	}
	if row["puts_per_s_per_broker"] != nil || row["gets_per_s"] != nil {
		t.Errorf("PUT/GET ratios against an n/a base must be n/a, got %v %v", val(row["puts_per_s_per_broker"]), val(row["gets_per_s"]))
	}
	if got := *row["produce_p50_ms"]; got < 1.99 || got > 2.01 {
		t.Errorf("produce p50 ratio %v, want 2", got)
	}
	one := &Report{Modes: r.Modes[:1]}
	one.ComputeRatios()
	if one.Ratios != nil {
		t.Errorf("single mode has ratios %v", one.Ratios)
	}
}

// TestJSONSchema pins the JSON field names that scripts read.
func TestJSONSchema(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(m any) string {
		var ks []string
		for k := range m.(map[string]any) {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return strings.Join(ks, " ")
	}
	if got, want := keys(doc), "modes ratios schema settings started"; got != want {
		t.Errorf("top-level keys %q, want %q", got, want)
	}
	if doc["schema"].(float64) != SchemaVersion {
		t.Errorf("schema %v", doc["schema"])
	}
	mode := doc["modes"].([]any)[1]
	wantMode := "bootstrap brokers cost drain_complete end_to_end_latency metrics_urls mode produce_errors produce_latency records_consumed records_late records_per_s records_produced replication_factor throughput_mb_per_s topic traffic window_seconds zone_latency"
	if got := keys(mode); got != wantMode {
		t.Errorf("mode keys\n got %q\nwant %q", got, wantMode)
	}
	lat := mode.(map[string]any)["produce_latency"]
	if got, want := keys(lat), "count curve max_ms mean_ms min_ms p50_ms p90_ms p999_ms p99_ms"; got != want {
		t.Errorf("latency keys %q, want %q", got, want)
	}
	tr := mode.(map[string]any)["traffic"]
	if got, want := keys(tr), "cross_zone_bytes_per_produced_byte cross_zone_client_bytes cross_zone_produce_bytes_in cross_zone_replication_bytes gets_per_second hedged_gets_per_second hedged_puts_per_second produce_bytes_in puts_per_second_by_broker puts_per_second_per_broker total_cross_zone_bytes_per_produced_byte"; got != want {
		t.Errorf("traffic keys %q, want %q", got, want)
	}
	if got, want := keys(mode.(map[string]any)["cost"]), "classic_equivalent_usd classic_usd_per_gb_produced client_usd client_usd_per_gb_produced produced_bytes producer_usd total_usd_per_gb_produced usd usd_per_gb_produced"; got != want {
		t.Errorf("cost keys %q, want %q", got, want)
	}
	zl := mode.(map[string]any)["zone_latency"]
	if got, want := keys(zl), "client_bytes_delayed client_connections consumer_zones cross_zone_object_gets_delayed one_way_ns producer_zones replica_bytes_delayed replica_connections"; got != want {
		t.Errorf("zone latency keys\n got %q\nwant %q", got, want)
	}
	settings := doc["settings"].(map[string]any)
	if settings["s3_latency_mode"] != "floor" {
		t.Errorf("s3_latency_mode %v, want floor", settings["s3_latency_mode"])
	}
	if settings["zone_latency_ns"].(float64) != 1e6 || settings["zone_round_trip_ns"].(float64) != 2e6 || len(settings["zone_latency_applies_to"].([]any)) != 3 {
		t.Errorf("zone latency settings %v %v %v", settings["zone_latency_ns"], settings["zone_round_trip_ns"], settings["zone_latency_applies_to"])
	}
	// n/a is null, not 0.
	classicTraffic := doc["modes"].([]any)[0].(map[string]any)["traffic"].(map[string]any)
	if v, ok := classicTraffic["gets_per_second"]; !ok || v != nil {
		t.Errorf("classic gets_per_second = %v (present %v), want null", v, ok)
	}
	ratios := doc["ratios"].(map[string]any)["wal/classic"].(map[string]any)
	if len(ratios) != len(Figures) {
		t.Errorf("ratio row has %d figures, want %d", len(ratios), len(Figures))
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"wal/classic", "produce latency p99.9 (ms)", "inter-broker cross-zone B per produced B", "n/a", "0.900x", "PUTs/s by broker: 90.00, 95.00, 100.0", "488280 / 488280",
		"zone latency 1ms one-way (+2ms per cross-zone round trip); wal: S3 PUT 5ms, GET 3ms (floor: at least that long, the local server's time included)",
		"zone latency 1ms delayed: replica fetches 0.123 MB on 6 connections and 42 GETs from other zones' buckets in the window; clients 0.099 MB on 4 connections (producers in a,b, consumers in a,b)"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	// Every figure has a row with one value per mode plus the ratio.
	for _, f := range Figures {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, f.Label+" ") {
				found = true
				if n := len(strings.Fields(strings.TrimPrefix(line, f.Label))); n != 3 {
					t.Errorf("row %q has %d columns, want 3", line, n)
				}
			}
		}
		if !found {
			t.Errorf("no row for %q", f.Label)
		}
	}
}

func TestWriteSVG(t *testing.T) {
	r := sampleReport()
	r.Modes = append(r.Modes, ModeResult{Mode: "empty"}) // no samples: legend only
	var b bytes.Buffer
	if err := WriteSVG(&b, r); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML with one line per mode with samples in each panel.
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	polylines := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != 4 {
		t.Errorf("%d polylines, want 4 (2 modes with samples × 2 panels)", polylines)
	}
	for _, want := range []string{"produce latency", "end-to-end latency", "99.9%", "empty (no samples)"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestPercentileLabel(t *testing.T) {
	for d, want := range []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"} {
		if got := percentileLabel(float64(d)); got != want {
			t.Errorf("percentileLabel(%d) = %q, want %q", d, got, want)
		}
	}
}

func TestWritePlotFile(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport()
	if err := WritePlotFile(dir+"/p.gif", r); err == nil || !strings.Contains(err.Error(), ".svg or .png") {
		t.Errorf("gif: err %v, want a clear refusal", err)
	}
	if err := WritePlotFile(dir+"/p.svg", r); err != nil {
		t.Fatal(err)
	}
	if err := WritePlotFile(dir+"/p.PNG", r); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir + "/p.PNG")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != plotWidth || b.Dy() != plotHeight {
		t.Errorf("size %v, want %dx%d", b, plotWidth, plotHeight)
	}
	// Both modes' lines are drawn: pixels of both colours exist.
	want := map[color.RGBA]int{parseColor(modeColors[0]): 0, parseColor(modeColors[1]): 0}
	for y := 0; y < plotHeight; y++ {
		for x := 0; x < plotWidth; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
			if _, ok := want[c]; ok {
				want[c]++
			}
		}
	}
	for c, n := range want {
		if n < 100 {
			t.Errorf("colour %v: %d pixels, want a line", c, n)
		}
	}
}
