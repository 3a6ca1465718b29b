package chaos

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/strata-dev/strata/broker/protocol"
)

// Zone-local producers (--zone-local-producers; docs/chaos.md): the
// brokers run with wal.zonelocal.produce.enable, and every producer of the
// workload names a zone in its client ID, so that its produce goes to its
// zone's broker and through an object of that zone's bucket to the
// leader. The run must show that this path was taken: the zone buckets'
// proxies count the forwarded objects, and the brokers' metric
// strata_zonelocal_partitions_total{role} is polled for the partitions
// forwarded and appended.

// zoneLocalSetting is the broker setting the flag turns on.
const zoneLocalSetting = "wal.zonelocal.produce.enable"

// zoneLocalMetric is the brokers' counter of forwarded (role=forwarded,
// on the client's zone's broker) and appended (role=appended, on the
// leader) partitions; zoneLocalObjectsMetric and zoneLocalSharedMetric
// count the objects that carried forwarded records and, of those, the
// WAL objects shared with the broker's own chunks.
const (
	zoneLocalMetric        = "strata_zonelocal_partitions_total"
	zoneLocalObjectsMetric = "strata_zonelocal_objects_total"
	zoneLocalSharedMetric  = "strata_zonelocal_shared_objects_total"
)

// zlValues are one broker incarnation's counters: forwarded, appended
// and inline partitions, objects, shared objects.
type zlValues [5]float64

// metricsPollEvery is how often the brokers' metrics are read.
const metricsPollEvery = time.Second

// ZoneLocalResult says that zone-local produce was on and how much of the
// workload's produce really took its path.
type ZoneLocalResult struct {
	Enabled bool `json:"enabled"`
	// Clients are the producers' client IDs with the zone they name.
	Clients map[string]string `json:"clients"`
	// ObjectsPut counts the objects of their own that forwarded produce
	// requests got (keys wal/.../zl-<incarnation>/...: a broker's WAL
	// uploader refused them, e.g. while degraded) that a broker PUT into
	// its zone's bucket and the bucket stored, from the buckets'
	// proxies; forwarded records otherwise ride in WAL objects, which the
	// proxies cannot tell apart (ForwardedObjects). ObjectsRead counts
	// the leaders' GETs of the former that were answered with data;
	// ObjectRequestsFailed the PUTs and GETs of them that failed
	// (injected by the bucket nemeses included).
	ObjectsPut           int64 `json:"objects_put"`
	ObjectsRead          int64 `json:"objects_read"`
	ObjectRequestsFailed int64 `json:"object_requests_failed"`
	// ObjectsPutByZone is ObjectsPut per zone bucket.
	ObjectsPutByZone map[string]int64 `json:"objects_put_by_zone"`
	// ForwardedPartitions, InlinePartitions and AppendedPartitions are
	// the brokers' strata_zonelocal_partitions_total{role=forwarded|
	// inline|appended}, summed over every broker incarnation: a lower
	// bound (an incarnation's last second before a kill is not read).
	// Inline ones went to their leaders in the Produce while the bucket
	// path was out (a bucket fault). MetricsScrapes counts the
	// successful reads of a broker's /metrics.
	ForwardedPartitions int64 `json:"forwarded_partitions"`
	InlinePartitions    int64 `json:"inline_partitions"`
	AppendedPartitions  int64 `json:"appended_partitions"`
	// ForwardedObjects are the brokers' strata_zonelocal_objects_total
	// (every object that carried forwarded records, own or a WAL
	// object's) and SharedObjects their
	// strata_zonelocal_shared_objects_total (WAL objects that carried the
	// broker's own chunks too), summed like the partitions.
	ForwardedObjects int64 `json:"forwarded_objects"`
	SharedObjects    int64 `json:"shared_objects"`
	MetricsScrapes   int   `json:"metrics_scrapes"`
}

// problem says why a run with zone-local producers did not show the path
// was taken ("" when it did).
func (z *ZoneLocalResult) problem() string {
	if z == nil || !z.Enabled {
		return ""
	}
	switch {
	case z.ObjectsPut+z.ForwardedObjects == 0 || z.ForwardedPartitions == 0:
		return fmt.Sprintf("zone-local producers: nothing was forwarded (%d objects by the metric, %d own objects put, %d partitions forwarded by the metric, %d scrapes)",
			z.ForwardedObjects, z.ObjectsPut, z.ForwardedPartitions, z.MetricsScrapes)
	case z.AppendedPartitions == 0:
		return fmt.Sprintf("zone-local producers: no leader appended forwarded records (%d partitions appended by the metric)", z.AppendedPartitions)
	}
	return ""
}

// producerClientID is a workload producer's client ID: base, with
// ",strata_az=<zone>" when zone-local producers are on (zones taken
// round-robin by index, so that the producers are spread over the
// zones). It records the client in res.
func (c *cluster) producerClientID(base string, index int) string {
	if !c.o.ZoneLocalProducers {
		return base
	}
	zone := c.o.Zones[index%len(c.o.Zones)]
	id := base + "," + protocol.ClientIDZonePrefix + zone
	c.zlMu.Lock()
	c.zlClients[id] = zone
	c.zlMu.Unlock()
	return id
}

// zoneLocalObject says whether r is a PUT or GET of a zone-local produce
// object (path-style "/<bucket>/wal/<cluster>/<zone>/<broker>/zl-<n>/<seq>"):
// "put", "get" or "".
func zoneLocalObject(r *http.Request) string {
	_, key, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !ok || !strings.HasPrefix(key, "wal/") || !strings.Contains(key, "/zl-") {
		return ""
	}
	switch r.Method {
	case http.MethodPut:
		return "put"
	case http.MethodGet:
		return "get"
	}
	return ""
}

// countZoneLocal counts a zone-local object request by its answer.
func (p *s3Proxy) countZoneLocal(op string, status int) {
	switch {
	case status/100 != 2:
		p.zlFailed.Add(1)
	case op == "put":
		p.zlPut.Add(1)
	case op == "get":
		p.zlGet.Add(1)
	}
}

// zlScraper polls every running broker's zone-local counters and keeps
// the last values of each incarnation.
type zlScraper struct {
	c      *cluster
	client *http.Client

	mu      sync.Mutex
	last    map[zlIncarnation]zlValues
	scrapes int
}

type zlIncarnation struct {
	broker      int32
	incarnation int
}

func newZLScraper(c *cluster) *zlScraper {
	return &zlScraper{c: c, client: &http.Client{Timeout: 2 * time.Second}, last: map[zlIncarnation]zlValues{}}
}

// run polls until ctx ends.
func (s *zlScraper) run(ctx context.Context) {
	for ctx.Err() == nil {
		s.scrapeAll(ctx)
		wait(ctx, metricsPollEvery)
	}
}

func (s *zlScraper) scrapeAll(ctx context.Context) {
	for _, b := range s.c.brokers {
		s.scrape(ctx, b)
	}
}

// scrape reads b's counters; a value read while b changed incarnation is
// dropped.
func (s *zlScraper) scrape(ctx context.Context, b *broker) {
	inc, up := b.Incarnation()
	if !up || b.metricsAddr == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.metricsAddr+"/metrics", nil)
	if err != nil {
		return
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return
	}
	var v zlValues
	for i, name := range []string{zoneLocalObjectsMetric, zoneLocalSharedMetric} {
		if mf, ok := families[name]; ok {
			for _, m := range mf.GetMetric() {
				v[3+i] += m.GetCounter().GetValue()
			}
		}
	}
	if mf, ok := families[zoneLocalMetric]; ok {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "role" {
					continue
				}
				switch l.GetValue() {
				case "forwarded":
					v[0] += m.GetCounter().GetValue()
				case "appended":
					v[1] += m.GetCounter().GetValue()
				case "inline":
					v[2] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if after, _ := b.Incarnation(); after != inc {
		return
	}
	k := zlIncarnation{b.id, inc}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scrapes++
	old := s.last[k]
	for i := range v {
		v[i] = max(old[i], v[i])
	}
	s.last[k] = v
}

// totals sums the last values of every incarnation.
func (s *zlScraper) totals() (sum zlValues, scrapes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.last {
		for i := range v {
			sum[i] += v[i]
		}
	}
	return sum, s.scrapes
}

// zoneLocalResult gathers the run's zone-local figures (nil when off).
func (c *cluster) zoneLocalResult(s *zlScraper) *ZoneLocalResult {
	if !c.o.ZoneLocalProducers {
		return nil
	}
	z := &ZoneLocalResult{Enabled: true, Clients: map[string]string{}, ObjectsPutByZone: map[string]int64{}}
	c.zlMu.Lock()
	for id, zone := range c.zlClients {
		z.Clients[id] = zone
	}
	c.zlMu.Unlock()
	zones := make([]string, 0, len(c.s3Px))
	for zone := range c.s3Px {
		zones = append(zones, zone)
	}
	sort.Strings(zones)
	for _, zone := range zones {
		px := c.s3Px[zone]
		z.ObjectsPut += px.zlPut.Load()
		z.ObjectsRead += px.zlGet.Load()
		z.ObjectRequestsFailed += px.zlFailed.Load()
		z.ObjectsPutByZone[zone] = px.zlPut.Load()
	}
	if s != nil {
		var v zlValues
		v, z.MetricsScrapes = s.totals()
		z.ForwardedPartitions, z.AppendedPartitions, z.InlinePartitions = int64(v[0]), int64(v[1]), int64(v[2])
		z.ForwardedObjects, z.SharedObjects = int64(v[3]), int64(v[4])
	}
	return z
}
