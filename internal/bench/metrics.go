package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names read from the brokers.
const (
	metricTraffic     = "strata_traffic_bytes_total"     // {local_zone, peer_zone, path, direction}
	metricObjRequests = "strata_objstore_requests_total" // {bucket, zone, op, result}
	// metricWALDegraded is exported by every broker whose WAL uploader is
	// wired; it tells "no PUT yet" (0) from "no object store" (n/a).
	metricWALDegraded = "strata_wal_degraded"
	// Twin requests of hedged PUTs (leaders) and GETs (followers).
	metricPutHedges = "strata_wal_upload_hedges_total"
	metricGetHedges = "strata_wal_download_hedges_total"
	// Zone-local produce: the forwarders' objects and the client
	// requests in them (a histogram; its sum).
	metricZLObjects  = "strata_zonelocal_objects_total"
	metricZLRequests = "strata_zonelocal_object_requests"
	// strata dev --zone-latency: what each broker's injected inter-zone
	// latency delayed.
	metricZoneConns = "strata_dev_zone_latency_connections_total"
	metricZoneBytes = "strata_dev_zone_latency_bytes_total" // {direction}
	metricZoneGets  = "strata_dev_zone_latency_object_gets_total"
)

// zoneLatencyResult fills a mode's ZoneLatencyResult: replica figures as
// window deltas over all brokers (connections: the total since the
// cluster started; nil unless every broker exports them), client figures
// from the load.
func zoneLatencyResult(oneWay time.Duration, cz *ClientZones, before, after []Scrape) *ZoneLatencyResult {
	z := &ZoneLatencyResult{OneWay: oneWay}
	if cz != nil {
		z.ClientConnections, z.ClientBytesDelayed = cz.Conns(), cz.Bytes()
		z.ProducerZones, z.ConsumerZones = cz.Producers, cz.Consumers
	}
	delta := func(name string) *float64 {
		n := min(len(before), len(after))
		if n == 0 {
			return nil
		}
		total := 0.0
		for i := 0; i < n; i++ {
			if before[i] == nil || after[i] == nil || !after[i].Has(name) {
				return nil
			}
			a, _ := after[i].Sum(name, nil)
			b, _ := before[i].Sum(name, nil)
			total += a - b
		}
		return &total
	}
	// Connections are opened when the cluster starts, before the window:
	// their count is the total so far.
	if conns := delta(metricZoneConns); conns != nil {
		total := 0.0
		for _, a := range after {
			v, _ := a.Sum(metricZoneConns, nil)
			total += v
		}
		z.ReplicaConnections = &total
	}
	z.ReplicaBytesDelayed = delta(metricZoneBytes)
	z.CrossZoneObjectGets = delta(metricZoneGets)
	return z
}

// Replication paths whose cross-zone bytes are inter-broker traffic.
var replicationPaths = map[string]bool{"replication-inline": true, "replication-wal-metadata": true}

// clientPaths are the client data paths of strata_traffic_bytes_total.
var clientPaths = map[string]bool{"produce": true, "consume": true}

// Scrape is one /metrics exposition: metric families by name.
type Scrape map[string]*dto.MetricFamily

// ParseExposition parses the Prometheus text format.
func ParseExposition(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Scrape(fams), nil
}

// ScrapeURL fetches and parses url (a broker's /metrics).
func ScrapeURL(ctx context.Context, url string, opts ...ScrapeOption) (Scrape, error) {
	var o scrapeOptions
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	req.Close = true // no idle keep-alive connections left behind between scrapes
	if o.token != "" {
		req.Header.Set("Authorization", "Bearer "+o.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %s", url, resp.Status)
	}
	s, err := ParseExposition(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return s, nil
}

// Has reports whether the family name is exported.
func (s Scrape) Has(name string) bool {
	_, ok := s[name]
	return ok
}

// Sum adds the values of the counter (or untyped/gauge) series of name
// whose labels satisfy match (nil: all series), and of a histogram its
// observations' sum. ok is false when the family is not exported at all.
func (s Scrape) Sum(name string, match func(labels map[string]string) bool) (sum float64, ok bool) {
	f, ok := s[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if match != nil {
			labels := make(map[string]string, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if !match(labels) {
				continue
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		case m.Histogram != nil:
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return sum, true
}

// TrafficFigures are the broker-side figures of one measured window. A
// nil pointer means the metric is not exported (printed as n/a).
type TrafficFigures struct {
	// CrossZoneReplicationBytes: bytes sent (direction=out) between
	// brokers of different zones on the replication paths, all brokers.
	CrossZoneReplicationBytes *float64 `json:"cross_zone_replication_bytes"`
	// ProduceBytesIn: Produce request bytes received by all brokers.
	ProduceBytesIn *float64 `json:"produce_bytes_in"`
	// CrossZoneProduceBytesIn: the part of ProduceBytesIn a broker received
	// from a client of another zone (a client's zone: client.rack, or
	// strata_az= in its client ID; clients of unknown zone not counted).
	// Zero when the topic's leaders are pinned to the producers' zone.
	CrossZoneProduceBytesIn *float64 `json:"cross_zone_produce_bytes_in"`
	// CrossZonePerProducedByte = CrossZoneReplicationBytes / ProduceBytesIn.
	CrossZonePerProducedByte *float64 `json:"cross_zone_bytes_per_produced_byte"`
	// CrossZoneClientBytes: bytes the brokers exchanged, both directions,
	// with producers and consumers of another zone (clients of unknown
	// zone not counted: give them one with --client-zones).
	CrossZoneClientBytes *float64 `json:"cross_zone_client_bytes"`
	// TotalCrossZonePerProducedByte = (CrossZoneReplicationBytes +
	// CrossZoneClientBytes) / ProduceBytesIn: the whole transfer bill per
	// produced byte (about 0.67 of it producers' when they are spread
	// over three zones and send to the partitions' leaders).
	TotalCrossZonePerProducedByte *float64 `json:"total_cross_zone_bytes_per_produced_byte"`
	// CrossZoneByPath: the cross-zone bytes of the window (all brokers,
	// between a broker and a peer of a known other zone) by
	// "<path>/<direction>" of strata_traffic_bytes_total: where the
	// transfer bill comes from. Replication paths count both directions
	// here (each byte once per broker that saw it), so their sum is not
	// CrossZoneReplicationBytes, which counts the sender's side only.
	CrossZoneByPath map[string]float64 `json:"cross_zone_bytes_by_path,omitempty"`
	// PutsPerSecond per broker (metrics URL order) and their mean.
	PutsPerSecond          []*float64 `json:"puts_per_second_by_broker"`
	PutsPerSecondPerBroker *float64   `json:"puts_per_second_per_broker"`
	// GetsPerSecond: object GETs per second, all brokers.
	GetsPerSecond *float64 `json:"gets_per_second"`
	// HedgedPutsPerSecond and HedgedGetsPerSecond: twin PUTs and GETs
	// per second, all brokers (their share of PutsPerSecond and
	// GetsPerSecond, which count them too); nil when a broker does not
	// export the counter (classic mode, an older broker).
	HedgedPutsPerSecond *float64 `json:"hedged_puts_per_second"`
	HedgedGetsPerSecond *float64 `json:"hedged_gets_per_second"`
	// ZoneLocalObjectsPerSecond: objects of zone-local produce each
	// broker PUT per second (its forwarded requests' records; part of
	// PutsPerSecond), and ZoneLocalRequestsPerObject the client produce
	// requests per such object, all brokers (group commit: 1 without
	// it); absent when a broker does not export them or nothing was
	// forwarded.
	ZoneLocalObjectsPerSecond  []*float64 `json:"zonelocal_objects_per_second_by_broker,omitempty"`
	ZoneLocalRequestsPerObject *float64   `json:"zonelocal_requests_per_object,omitempty"`
	// Problems lists scrapes that failed and counters that went backwards.
	Problems []string `json:"problems,omitempty"`
}

// ComputeTraffic turns per-broker scrapes taken before and after a window
// of the given length into TrafficFigures. before[i] and after[i] belong
// to broker i; a nil scrape is a failed one.
func ComputeTraffic(before, after []Scrape, window time.Duration) TrafficFigures {
	var tf TrafficFigures
	secs := window.Seconds()
	n := min(len(before), len(after))
	if n == 0 || secs <= 0 {
		return tf
	}
	crossZone := func(l map[string]string) bool {
		return replicationPaths[l["path"]] && l["direction"] == "out" &&
			l["peer_zone"] != "unknown" && l["peer_zone"] != "other" && l["peer_zone"] != "" && l["peer_zone"] != l["local_zone"]
	}
	produceIn := func(l map[string]string) bool { return l["path"] == "produce" && l["direction"] == "in" }
	op := func(o string) func(map[string]string) bool {
		return func(l map[string]string) bool { return l["op"] == o }
	}

	// delta sums after-before per broker; it is absent unless every
	// broker's after scrape exports the family (a missing family in a
	// before scrape is a counter not yet created: 0).
	delta := func(name string, match func(map[string]string) bool, present func(Scrape) bool) (*float64, []*float64) {
		total := 0.0
		per := make([]*float64, n)
		complete := true
		for i := 0; i < n; i++ {
			if after[i] == nil || before[i] == nil || !present(after[i]) {
				complete = false
				continue
			}
			a, _ := after[i].Sum(name, match)
			b, _ := before[i].Sum(name, match)
			if a < b {
				tf.Problems = append(tf.Problems, fmt.Sprintf("broker %d: %s went backwards (restart?)", i, name))
				complete = false
				continue
			}
			d := a - b
			per[i] = &d
			total += d
		}
		if !complete {
			return nil, per
		}
		return &total, per
	}
	has := func(name string) func(Scrape) bool { return func(s Scrape) bool { return s.Has(name) } }
	hasObjStore := func(s Scrape) bool { return s.Has(metricObjRequests) || s.Has(metricWALDegraded) }

	for i := 0; i < n; i++ {
		if before[i] == nil || after[i] == nil {
			tf.Problems = append(tf.Problems, fmt.Sprintf("broker %d: metrics scrape failed", i))
		}
	}
	tf.CrossZoneReplicationBytes, _ = delta(metricTraffic, crossZone, has(metricTraffic))
	tf.ProduceBytesIn, _ = delta(metricTraffic, produceIn, has(metricTraffic))
	tf.CrossZoneProduceBytesIn, _ = delta(metricTraffic, func(l map[string]string) bool {
		return produceIn(l) && l["peer_zone"] != "unknown" && l["peer_zone"] != "other" && l["peer_zone"] != "" && l["peer_zone"] != l["local_zone"]
	}, has(metricTraffic))
	tf.CrossZoneClientBytes, _ = delta(metricTraffic, func(l map[string]string) bool {
		return clientPaths[l["path"]] && l["peer_zone"] != "unknown" && l["peer_zone"] != "other" && l["peer_zone"] != "" && l["peer_zone"] != l["local_zone"]
	}, has(metricTraffic))
	if tf.CrossZoneReplicationBytes != nil && tf.ProduceBytesIn != nil && *tf.ProduceBytesIn > 0 {
		r := *tf.CrossZoneReplicationBytes / *tf.ProduceBytesIn
		tf.CrossZonePerProducedByte = &r
		if tf.CrossZoneClientBytes != nil {
			r := (*tf.CrossZoneReplicationBytes + *tf.CrossZoneClientBytes) / *tf.ProduceBytesIn
			tf.TotalCrossZonePerProducedByte = &r
		}
	}
	tf.CrossZoneByPath = crossZoneByPath(before[:n], after[:n])
	puts, perPuts := delta(metricObjRequests, op("put"), hasObjStore)
	tf.PutsPerSecond = make([]*float64, n)
	for i, p := range perPuts {
		if p != nil {
			r := *p / secs
			tf.PutsPerSecond[i] = &r
		}
	}
	if puts != nil {
		r := *puts / secs / float64(n)
		tf.PutsPerSecondPerBroker = &r
	}
	if gets, _ := delta(metricObjRequests, op("get"), hasObjStore); gets != nil {
		r := *gets / secs
		tf.GetsPerSecond = &r
	}
	all := func(map[string]string) bool { return true }
	if h, _ := delta(metricPutHedges, all, has(metricPutHedges)); h != nil {
		r := *h / secs
		tf.HedgedPutsPerSecond = &r
	}
	if h, _ := delta(metricGetHedges, all, has(metricGetHedges)); h != nil {
		r := *h / secs
		tf.HedgedGetsPerSecond = &r
	}
	if objs, per := delta(metricZLObjects, all, has(metricZLObjects)); objs != nil && *objs > 0 {
		tf.ZoneLocalObjectsPerSecond = make([]*float64, n)
		for i, p := range per {
			r := *p / secs
			tf.ZoneLocalObjectsPerSecond[i] = &r
		}
		if reqs, _ := delta(metricZLRequests, all, has(metricZLRequests)); reqs != nil {
			r := *reqs / *objs
			tf.ZoneLocalRequestsPerObject = &r
		}
	}
	return tf
}

// ScrapeAll scrapes every URL concurrently; a failed scrape is nil and its
// error is returned in errs.
func ScrapeAll(ctx context.Context, urls []string, opts ...ScrapeOption) (out []Scrape, errs []error) {
	out = make([]Scrape, len(urls))
	errc := make([]error, len(urls))
	done := make(chan struct{}, len(urls))
	for i, u := range urls {
		go func() {
			out[i], errc[i] = ScrapeURL(ctx, u, opts...)
			done <- struct{}{}
		}()
	}
	for range urls {
		<-done
	}
	for _, e := range errc {
		if e != nil {
			errs = append(errs, e)
		}
	}
	return out, errs
}

// ScrapeOption changes how ScrapeURL asks for /metrics.
type ScrapeOption func(*scrapeOptions)

type scrapeOptions struct{ token string }

// WithBearerToken sends "Authorization: Bearer <token>": brokers with
// metrics.auth.token.file (every broker the operator runs) answer
// /metrics 401 without it.
func WithBearerToken(token string) ScrapeOption {
	return func(o *scrapeOptions) { o.token = token }
}

// crossZoneByPath sums, per "<path>/<direction>", the growth of
// strata_traffic_bytes_total between brokers (or clients) of different
// known zones; nil when a scrape is missing.
func crossZoneByPath(before, after []Scrape) map[string]float64 {
	sums := func(s Scrape) map[string]float64 {
		out := map[string]float64{}
		f, ok := s[metricTraffic]
		if !ok {
			return out
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			pz := l["peer_zone"]
			if pz == "" || pz == "unknown" || pz == "other" || pz == l["local_zone"] {
				continue
			}
			out[l["path"]+"/"+l["direction"]] += m.GetCounter().GetValue()
		}
		return out
	}
	total := map[string]float64{}
	for i := range after {
		if before[i] == nil || after[i] == nil {
			return nil
		}
		b := sums(before[i])
		for k, v := range sums(after[i]) {
			if d := v - b[k]; d > 0 {
				total[k] += d
			}
		}
	}
	if len(total) == 0 {
		return nil
	}
	return total
}
