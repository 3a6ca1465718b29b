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
	var forwarded, appended, inline atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE %s counter\n%s{role=\"forwarded\"} %d\n%s{role=\"appended\"} %d\n%s{role=\"inline\"} %d\n# TYPE other counter\nother 7\n",
			zoneLocalMetric, zoneLocalMetric, forwarded.Load(), zoneLocalMetric, appended.Load(), zoneLocalMetric, inline.Load())
	}))
	t.Cleanup(srv.Close)
	b := &broker{id: 1, metricsAddr: strings.TrimPrefix(srv.URL, "http://"), cmd: &exec.Cmd{}, incarnation: 1}
	c := &cluster{brokers: []*broker{b}}
	s := newZLScraper(c)
	ctx := context.Background()

	forwarded.Store(5)
	appended.Store(2)
	s.scrapeAll(ctx)
	forwarded.Store(9) // later in the same incarnation
	s.scrapeAll(ctx)
	b.incarnation = 2 // restarted: its counters start again
	forwarded.Store(4)
	appended.Store(3)
	inline.Store(6)
	s.scrapeAll(ctx)
	b.cmd = nil // down: not read
	forwarded.Store(100)
	s.scrapeAll(ctx)

	f, a, in, n := s.totals()
	if f != 13 || a != 5 || in != 6 || n != 3 {
		t.Fatalf("forwarded %d, appended %d, inline %d, scrapes %d; want 13, 5, 6, 3", f, a, in, n)
	}
}
