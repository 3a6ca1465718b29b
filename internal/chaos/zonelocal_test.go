package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// TestZLScraperSumsIncarnations: the zone-local counters are read from a
// broker's /metrics, kept per incarnation (a restarted broker counts from
// zero again) and summed.
func TestZLScraperSumsIncarnations(t *testing.T) {
	var forwarded, appended, inline, objects atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE %s counter\n%s{role=\"forwarded\"} %d\n%s{role=\"appended\"} %d\n%s{role=\"inline\"} %d\n# TYPE other counter\nother 7\n",
			zoneLocalMetric, zoneLocalMetric, forwarded.Load(), zoneLocalMetric, appended.Load(), zoneLocalMetric, inline.Load())
		fmt.Fprintf(w, "# TYPE %s counter\n%s %d\n# TYPE %s counter\n%s %d\n",
			zoneLocalObjectsMetric, zoneLocalObjectsMetric, objects.Load(), zoneLocalSharedMetric, zoneLocalSharedMetric, objects.Load()/2)
	}))
	t.Cleanup(srv.Close)
	b := &broker{id: 1, metricsAddr: strings.TrimPrefix(srv.URL, "http://"), cmd: &exec.Cmd{}, incarnation: 1}
	c := &cluster{brokers: []*broker{b}}
	s := newZLScraper(c)
	ctx := context.Background()

	forwarded.Store(5)
	appended.Store(2)
	objects.Store(4)
	s.scrapeAll(ctx)
	forwarded.Store(9) // later in the same incarnation
	s.scrapeAll(ctx)
	b.incarnation = 2 // restarted: its counters start again
	forwarded.Store(4)
	appended.Store(3)
	objects.Store(2)
	inline.Store(6)
	s.scrapeAll(ctx)
	b.cmd = nil // down: not read
	forwarded.Store(100)
	s.scrapeAll(ctx)

	v, n := s.totals()
	if v != (zlValues{13, 5, 6, 6, 3}) || n != 3 {
		t.Fatalf("forwarded, appended, inline, objects, shared %v, scrapes %d; want [13 5 6 6 3], 3", v, n)
	}
}
