package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const exposBefore = `# HELP strata_traffic_bytes_total Bytes.
# TYPE strata_traffic_bytes_total counter
strata_traffic_bytes_total{direction="in",local_zone="a",path="produce",peer_zone="unknown"} 1000
strata_traffic_bytes_total{direction="out",local_zone="a",path="replication-inline",peer_zone="b"} 2000
# HELP strata_objstore_requests_total Calls.
# TYPE strata_objstore_requests_total counter
strata_objstore_requests_total{bucket="wal-a",op="put",result="ok",zone="a"} 10
strata_objstore_requests_total{bucket="wal-a",op="get",result="ok",zone="a"} 4
`

// After 2 s: 10000 produce bytes in, cross-zone replication out 2*10000
// (to b and c), in-zone 500 (not counted), the follower's incoming
// replication bytes (not counted: counted as out by the leader), unknown
// peers (not counted), 100 PUTs (one failed, counted: it is billed), 20 GETs.
const exposAfter = `# TYPE strata_traffic_bytes_total counter
strata_traffic_bytes_total{direction="in",local_zone="a",path="produce",peer_zone="unknown"} 11000
strata_traffic_bytes_total{direction="in",local_zone="a",path="produce",peer_zone="b"} 700
strata_traffic_bytes_total{direction="in",local_zone="a",path="produce",peer_zone="a"} 300
strata_traffic_bytes_total{direction="out",local_zone="a",path="replication-inline",peer_zone="b"} 12000
strata_traffic_bytes_total{direction="out",local_zone="a",path="replication-inline",peer_zone="c"} 10000
strata_traffic_bytes_total{direction="out",local_zone="a",path="replication-inline",peer_zone="a"} 500
strata_traffic_bytes_total{direction="in",local_zone="a",path="replication-inline",peer_zone="b"} 7777
strata_traffic_bytes_total{direction="out",local_zone="a",path="replication-inline",peer_zone="unknown"} 999
strata_traffic_bytes_total{direction="out",local_zone="a",path="consume",peer_zone="b"} 123456
# TYPE strata_objstore_requests_total counter
strata_objstore_requests_total{bucket="wal-a",op="put",result="ok",zone="a"} 109
strata_objstore_requests_total{bucket="wal-a",op="put",result="error",zone="a"} 1
strata_objstore_requests_total{bucket="wal-a",op="get",result="ok",zone="a"} 24
strata_objstore_requests_total{bucket="wal-b",op="get",result="not_found",zone="a"} 16
`

func mustParse(t *testing.T, s string) Scrape {
	t.Helper()
	sc, err := ParseExposition(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func val(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestComputeTraffic(t *testing.T) {
	before, after := mustParse(t, exposBefore), mustParse(t, exposAfter)
	// A broker without object store and with no traffic counted before.
	bare := mustParse(t, "# TYPE go_goroutines gauge\ngo_goroutines 7\n")
	bareAfter := mustParse(t, `# TYPE strata_traffic_bytes_total counter
strata_traffic_bytes_total{direction="in",local_zone="b",path="produce",peer_zone="unknown"} 5000
strata_traffic_bytes_total{direction="out",local_zone="b",path="replication-wal-metadata",peer_zone="c"} 300
`)
	walOnly := mustParse(t, "# TYPE strata_wal_degraded gauge\nstrata_wal_degraded 0\n")

	tests := []struct {
		name          string
		before, after []Scrape
		window        time.Duration
		crossZone     any
		produceIn     any
		crossProduce  any
		perByte       any
		clientCZ      any
		total         any
		putsPerBroker any
		gets          any
		problems      int
	}{
		{
			name: "one broker", before: []Scrape{before}, after: []Scrape{after}, window: 2 * time.Second,
			crossZone: 20000.0, produceIn: 11000.0, crossProduce: 700.0, perByte: 20000.0 / 11000, putsPerBroker: 50.0, gets: 18.0,
			// Clients of another zone: 700 produced from b, 123456 consumed by b.
			clientCZ: 124156.0, total: (20000.0 + 124156) / 11000,
		},
		{
			name: "second broker without object store: PUTs n/a, traffic summed", before: []Scrape{before, bare}, after: []Scrape{after, bareAfter},
			window: 2 * time.Second, crossZone: 20300.0, produceIn: 16000.0, crossProduce: 700.0, perByte: 20300.0 / 16000, putsPerBroker: nil, gets: nil,
			clientCZ: 124156.0, total: (20300.0 + 124156) / 16000,
		},
		{
			name: "WAL wired but no PUT yet: 0, not n/a", before: []Scrape{walOnly}, after: []Scrape{walOnly}, window: time.Second,
			crossZone: nil, produceIn: nil, perByte: nil, putsPerBroker: 0.0, gets: 0.0,
		},
		{
			name: "no strata metrics at all", before: []Scrape{bare}, after: []Scrape{bare}, window: time.Second,
		},
		{
			name: "failed scrape", before: []Scrape{before}, after: []Scrape{nil}, window: time.Second, problems: 1,
		},
		{
			name: "counter went backwards (restart)", before: []Scrape{after}, after: []Scrape{before}, window: time.Second,
			problems: 3, // traffic cross-zone, produce, cross-zone produce, puts; gets too
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := ComputeTraffic(tt.before, tt.after, tt.window)
			check := func(what string, got *float64, want any) {
				t.Helper()
				g := val(got)
				if (g == nil) != (want == nil) {
					t.Errorf("%s = %v, want %v", what, g, want)
					return
				}
				if g != nil && (g.(float64) < want.(float64)-1e-9 || g.(float64) > want.(float64)+1e-9) {
					t.Errorf("%s = %v, want %v", what, g, want)
				}
			}
			check("cross-zone bytes", tf.CrossZoneReplicationBytes, tt.crossZone)
			check("produce bytes in", tf.ProduceBytesIn, tt.produceIn)
			check("cross-zone produce bytes in", tf.CrossZoneProduceBytesIn, tt.crossProduce)
			check("per produced byte", tf.CrossZonePerProducedByte, tt.perByte)
			check("client cross-zone bytes", tf.CrossZoneClientBytes, tt.clientCZ)
			check("total per produced byte", tf.TotalCrossZonePerProducedByte, tt.total)
			check("PUTs/s per broker", tf.PutsPerSecondPerBroker, tt.putsPerBroker)
			check("GETs/s", tf.GetsPerSecond, tt.gets)
			if tt.problems > 0 && len(tf.Problems) < tt.problems {
				t.Errorf("problems %q, want at least %d", tf.Problems, tt.problems)
			}
			if tt.problems == 0 && len(tf.Problems) > 0 {
				t.Errorf("unexpected problems %q", tf.Problems)
			}
		})
	}
}

func TestParseExpositionError(t *testing.T) {
	if _, err := ParseExposition(strings.NewReader("this is { not prometheus\n")); err == nil {
		t.Fatal("garbage parsed without error")
	}
}

// TestComputeTrafficHedges: twin PUTs and GETs per second are the window
// deltas of the brokers' hedge counters, summed; n/a when a broker does
// not export them (classic mode, an older broker).
func TestComputeTrafficHedges(t *testing.T) {
	expo := func(puts, gets int) Scrape {
		return mustParse(t, fmt.Sprintf("# TYPE strata_wal_upload_hedges_total counter\nstrata_wal_upload_hedges_total %d\n# TYPE strata_wal_download_hedges_total counter\nstrata_wal_download_hedges_total %d\n", puts, gets))
	}
	tf := ComputeTraffic([]Scrape{expo(1, 10), expo(0, 0)}, []Scrape{expo(5, 30), expo(2, 4)}, 2*time.Second)
	if val(tf.HedgedPutsPerSecond) != 3.0 || val(tf.HedgedGetsPerSecond) != 12.0 {
		t.Fatalf("hedged PUTs/s %v, GETs/s %v; want 3 and 12", val(tf.HedgedPutsPerSecond), val(tf.HedgedGetsPerSecond))
	}
	bare := mustParse(t, "# TYPE go_goroutines gauge\ngo_goroutines 7\n")
	tf = ComputeTraffic([]Scrape{expo(1, 10), bare}, []Scrape{expo(5, 30), bare}, 2*time.Second)
	if tf.HedgedPutsPerSecond != nil || tf.HedgedGetsPerSecond != nil {
		t.Fatalf("a broker without the counters: %v, %v; want n/a", val(tf.HedgedPutsPerSecond), val(tf.HedgedGetsPerSecond))
	}
}

// TestScrapeWithBearerToken: a broker whose /metrics needs a token (as
// every broker the operator runs) is scraped with WithBearerToken and
// refuses the scrape without it.
func TestScrapeWithBearerToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cr3t" {
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "strata_up 1")
	}))
	defer srv.Close()
	if _, err := ScrapeURL(context.Background(), srv.URL); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("scrape without the token: %v, want HTTP 401", err)
	}
	s, errs := ScrapeAll(context.Background(), []string{srv.URL}, WithBearerToken("s3cr3t"))
	if len(errs) > 0 || !s[0].Has("strata_up") {
		t.Errorf("scrape with the token: %v %v", s, errs)
	}
}

// TestComputeTrafficZoneLocalObjects: the forwarders' objects per second
// by broker and the client requests per object (the histogram's sum over
// the objects) are window deltas; absent when nothing was forwarded.
func TestComputeTrafficZoneLocalObjects(t *testing.T) {
	expo := func(objects, requests int) Scrape {
		return mustParse(t, fmt.Sprintf(`# TYPE strata_zonelocal_objects_total counter
strata_zonelocal_objects_total %d
# TYPE strata_zonelocal_object_requests histogram
strata_zonelocal_object_requests_bucket{le="1"} 0
strata_zonelocal_object_requests_bucket{le="+Inf"} %d
strata_zonelocal_object_requests_sum %d
strata_zonelocal_object_requests_count %d
`, objects, objects, requests, objects))
	}
	tf := ComputeTraffic([]Scrape{expo(10, 15), expo(0, 0), expo(0, 0)}, []Scrape{expo(30, 75), expo(20, 40), expo(0, 0)}, 2*time.Second)
	if len(tf.ZoneLocalObjectsPerSecond) != 3 || val(tf.ZoneLocalObjectsPerSecond[0]) != 10.0 || val(tf.ZoneLocalObjectsPerSecond[1]) != 10.0 || val(tf.ZoneLocalObjectsPerSecond[2]) != 0.0 {
		t.Fatalf("objects/s by broker %v %v %v, want 10 10 0", val(tf.ZoneLocalObjectsPerSecond[0]), val(tf.ZoneLocalObjectsPerSecond[1]), val(tf.ZoneLocalObjectsPerSecond[2]))
	}
	if got := val(tf.ZoneLocalRequestsPerObject); got != 2.5 {
		t.Fatalf("requests per object %v, want (60+40)/(20+20) = 2.5", got)
	}
	tf = ComputeTraffic([]Scrape{expo(5, 5)}, []Scrape{expo(5, 5)}, time.Second)
	if tf.ZoneLocalObjectsPerSecond != nil || tf.ZoneLocalRequestsPerObject != nil {
		t.Fatal("figures without any forwarded object")
	}
}
