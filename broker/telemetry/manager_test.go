package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// clock is a manual clock for a Manager.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newTestManager(cfg Config) (*Manager, *clock) {
	m := New(cfg)
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	m.now = c.now
	return m, c
}

func subscribe(t *testing.T, m *Manager, id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
	t.Helper()
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	resp := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
	m.GetSubscriptions("client-1", req, resp)
	return resp
}

func push(m *Manager, sub *kmsg.GetTelemetrySubscriptionsResponse, payload []byte, terminating bool) int16 {
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
	req.Metrics, req.Terminating = payload, terminating
	return m.Push("client-1", req)
}

type dp struct {
	name  string
	kind  pointKind
	value int64
	attrs map[string]string
}

// otlp marshals the points as one resource and scope of OTLP metrics.
func otlp(t testing.TB, points ...dp) []byte {
	t.Helper()
	var ms []*metricspb.Metric
	for _, p := range points {
		var kvs []*commonpb.KeyValue
		for k, v := range p.attrs {
			kvs = append(kvs, &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}})
		}
		ndp := []*metricspb.NumberDataPoint{{Attributes: kvs, TimeUnixNano: 1, Value: &metricspb.NumberDataPoint_AsInt{AsInt: p.value}}}
		m := &metricspb.Metric{Name: p.name}
		switch p.kind {
		case kindGauge:
			m.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: ndp}}
		case kindDeltaSum:
			m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{DataPoints: ndp, IsMonotonic: true,
				AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA}}
		case kindCumulativeSum:
			m.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{DataPoints: ndp, IsMonotonic: true,
				AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE}}
		}
		ms = append(ms, m)
	}
	b, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: ms}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gather returns the manager's series as "metric{attributes}" → value,
// and the other families by name.
func gather(t *testing.T, m *Manager) (values map[string]float64, fams map[string]*dto.MetricFamily) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collector())
	got, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	values, fams = map[string]float64{}, map[string]*dto.MetricFamily{}
	for _, f := range got {
		fams[f.GetName()] = f
		if f.GetName() != "strata_client_telemetry_value" {
			continue
		}
		for _, mt := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range mt.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			values[l["metric"]+"{"+l["attributes"]+"}"] = mt.GetGauge().GetValue()
		}
	}
	return values, fams
}

func wantedConfig() Config {
	cfg := DefaultConfig()
	cfg.RequestedMetrics = []string{"org.apache.kafka."}
	cfg.PushInterval = time.Minute
	return cfg
}

// With the default config the answer asks for nothing and the broker
// keeps nothing, whatever clients send.
func TestDefaultRequestsNothing(t *testing.T) {
	for name, m := range map[string]*Manager{"nil": nil, "default": New(DefaultConfig())} {
		t.Run(name, func(t *testing.T) {
			resp := subscribe(t, m, [16]byte{})
			if resp.ErrorCode != 0 || len(resp.RequestedMetrics) != 0 || reserved(resp.ClientInstanceID) {
				t.Fatalf("answer %+v: want no error, no metrics, an assigned instance ID", resp)
			}
			if resp.PushIntervalMillis != 300000 || resp.TelemetryMaxBytes != 1<<20 || !resp.DeltaTemporality {
				t.Fatalf("answer %+v: want Kafka's defaults", resp)
			}
			again := subscribe(t, m, resp.ClientInstanceID)
			if again.ClientInstanceID != resp.ClientInstanceID || again.SubscriptionID != resp.SubscriptionID || again.ErrorCode != 0 {
				t.Fatalf("second answer %+v, first %+v: want the same instance and subscription, no throttle", again, resp)
			}
			if code := push(m, resp, otlp(t, dp{name: "org.apache.kafka.x", value: 1}), false); code != kerr.UnknownSubscriptionID.Code {
				t.Fatalf("push: got %v, want UNKNOWN_SUBSCRIPTION_ID", kerr.ErrorForCode(code))
			}
			if m != nil && len(m.clients) != 0 {
				t.Fatalf("the manager keeps %d clients with nothing requested", len(m.clients))
			}
		})
	}
}

func TestParseRequestedMetrics(t *testing.T) {
	for in, want := range map[string][]string{
		"":                      nil,
		" , ":                   nil,
		"*":                     {""},
		"a.b, *":                {""},
		"org.apache.kafka.,x.y": {"org.apache.kafka.", "x.y"},
	} {
		got := ParseRequestedMetrics(in)
		if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("ParseRequestedMetrics(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPushChecks(t *testing.T) {
	payload := otlp(t, dp{name: "org.apache.kafka.producer.connection.creation.total", kind: kindDeltaSum, value: 1})
	steps := []struct {
		name    string
		advance time.Duration
		mutate  func(*kmsg.PushTelemetryRequest)
		want    *kerr.Error // nil: accepted
	}{
		{name: "first push right after the subscription", want: nil},
		{name: "second push too soon", advance: 30 * time.Second, want: kerr.ThrottlingQuotaExceeded},
		{name: "after the interval", advance: 30 * time.Second, want: nil},
		{name: "wrong subscription", advance: time.Minute, mutate: func(r *kmsg.PushTelemetryRequest) { r.SubscriptionID++ }, want: kerr.UnknownSubscriptionID},
		{name: "unknown codec", mutate: func(r *kmsg.PushTelemetryRequest) { r.CompressionType = 9 }, want: kerr.UnsupportedCompressionType},
		{name: "too large", advance: time.Minute, mutate: func(r *kmsg.PushTelemetryRequest) { r.Metrics = make([]byte, 1<<20+1) }, want: kerr.TelemetryTooLarge},
		{name: "not OTLP", advance: time.Minute, mutate: func(r *kmsg.PushTelemetryRequest) { r.Metrics = []byte{0xff, 0xff, 0xff} }, want: kerr.InvalidRecord},
		{name: "reserved instance ID", mutate: func(r *kmsg.PushTelemetryRequest) { r.ClientInstanceID = [16]byte{} }, want: kerr.InvalidRequest},
		{name: "terminating push too soon is still accepted", advance: time.Second, mutate: func(r *kmsg.PushTelemetryRequest) { r.Terminating = true }, want: nil},
		{name: "nothing after the terminating push", advance: time.Minute, want: kerr.InvalidRequest},
	}
	m, clk := newTestManager(wantedConfig())
	sub := subscribe(t, m, [16]byte{})
	if sub.ErrorCode != 0 || len(sub.RequestedMetrics) != 1 {
		t.Fatalf("subscription %+v", sub)
	}
	for _, s := range steps {
		clk.advance(s.advance)
		req := kmsg.NewPtrPushTelemetryRequest()
		req.ClientInstanceID, req.SubscriptionID, req.Metrics = sub.ClientInstanceID, sub.SubscriptionID, payload
		if s.mutate != nil {
			s.mutate(req)
		}
		got := m.Push("client-1", req)
		if want := int16(0); s.want != nil && got != s.want.Code || s.want == nil && got != want {
			t.Fatalf("%s: got %v, want %v", s.name, kerr.ErrorForCode(got), s.want)
		}
	}
	values, fams := gather(t, m)
	// Three accepted pushes of a delta of one each.
	if v := values["org.apache.kafka.producer.connection.creation.total{}"]; v != 3 {
		t.Fatalf("delta sum: got %v, want 3 (values %v)", v, values)
	}
	counts := map[string]float64{}
	for _, mt := range fams["strata_client_telemetry_pushes_total"].GetMetric() {
		counts[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
	}
	if counts["NONE"] != 3 || counts["THROTTLING_QUOTA_EXCEEDED"] != 1 || counts["INVALID_REQUEST"] != 2 {
		t.Fatalf("pushes by error: %v", counts)
	}
}

// A second subscription request within the push interval is throttled,
// as in Kafka, unless the last push said the subscription is stale.
func TestSubscriptionThrottle(t *testing.T) {
	m, clk := newTestManager(wantedConfig())
	sub := subscribe(t, m, [16]byte{})
	clk.advance(time.Second)
	if again := subscribe(t, m, sub.ClientInstanceID); again.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("second request within the interval: got %v", kerr.ErrorForCode(again.ErrorCode))
	}
	stale := *sub
	stale.SubscriptionID++
	if code := push(m, &stale, nil, false); code != kerr.UnknownSubscriptionID.Code {
		t.Fatalf("stale push: got %v", kerr.ErrorForCode(code))
	}
	if again := subscribe(t, m, sub.ClientInstanceID); again.ErrorCode != 0 || again.SubscriptionID != sub.SubscriptionID {
		t.Fatalf("request after UNKNOWN_SUBSCRIPTION_ID: got %v", kerr.ErrorForCode(again.ErrorCode))
	}
	clk.advance(time.Minute)
	if again := subscribe(t, m, sub.ClientInstanceID); again.ErrorCode != 0 {
		t.Fatalf("request after the interval: got %v", kerr.ErrorForCode(again.ErrorCode))
	}
}

// Every broker with the same config hands out the same subscription ID:
// a client may push to a broker it did not subscribe through.
func TestSubscriptionIDIsTheConfigs(t *testing.T) {
	a, _ := newTestManager(wantedConfig())
	b, _ := newTestManager(wantedConfig())
	sub := subscribe(t, a, [16]byte{})
	if code := push(b, sub, otlp(t, dp{name: "org.apache.kafka.a", value: 1}), false); code != 0 {
		t.Fatalf("push to another broker: %v", kerr.ErrorForCode(code))
	}
	other := wantedConfig()
	other.PushInterval = 2 * time.Minute
	c, _ := newTestManager(other)
	if code := push(c, sub, nil, false); code != kerr.UnknownSubscriptionID.Code {
		t.Fatalf("push to a broker with another subscription: %v", kerr.ErrorForCode(code))
	}
}

func TestSeries(t *testing.T) {
	cfg := wantedConfig()
	cfg.MaxSeriesPerClient = 3
	m, clk := newTestManager(cfg)
	sub := subscribe(t, m, [16]byte{})
	if code := push(m, sub, otlp(t,
		dp{name: "g", value: 5},
		dp{name: "lat", value: 7, attrs: map[string]string{"node_id": "2"}},
		dp{name: "d", kind: kindDeltaSum, value: 2},
		dp{name: "over.the.cap", value: 1},
	), false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	values, fams := gather(t, m)
	want := map[string]float64{"g{}": 5, "lat{node_id=2}": 7, "d{}": 2}
	if len(values) != len(want) {
		t.Fatalf("series %v, want %v", values, want)
	}
	for k, v := range want {
		if values[k] != v {
			t.Fatalf("series %v, want %v", values, want)
		}
	}
	if d := fams["strata_client_telemetry_series_dropped_total"].GetMetric()[0].GetCounter().GetValue(); d != 1 {
		t.Fatalf("dropped %v, want 1", d)
	}
	// The next push leaves out gauge g (franz-go leaves out zero gauges):
	// its old value goes; the delta sum adds up; cumulative sums replace.
	clk.advance(time.Minute)
	if code := push(m, sub, otlp(t, dp{name: "lat", value: 9, attrs: map[string]string{"node_id": "2"}},
		dp{name: "d", kind: kindDeltaSum, value: 3}, dp{name: "c", kind: kindCumulativeSum, value: 10}), false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	values, _ = gather(t, m)
	if len(values) != 3 || values["lat{node_id=2}"] != 9 || values["d{}"] != 5 || values["c{}"] != 10 {
		t.Fatalf("after the second push: %v", values)
	}
	// Three push intervals without a request: the instance and its
	// series expire.
	clk.advance(3 * time.Minute)
	values, fams = gather(t, m)
	if len(values) != 0 || len(m.clients) != 0 || m.series != 0 {
		t.Fatalf("after expiry: series %v, %d clients, %d series counted", values, len(m.clients), m.series)
	}
	if c := fams["strata_client_telemetry_clients"].GetMetric()[0].GetGauge().GetValue(); c != 0 {
		t.Fatalf("clients gauge %v", c)
	}
}

// The instance and series caps hold however many clients push.
func TestCardinalityBounds(t *testing.T) {
	cfg := wantedConfig()
	cfg.MaxClients, cfg.MaxSeries, cfg.MaxSeriesPerClient = 5, 12, 4
	m, clk := newTestManager(cfg)
	for i := range 50 {
		clk.advance(time.Millisecond)
		sub := subscribe(t, m, [16]byte{})
		var points []dp
		for j := range 10 {
			points = append(points, dp{name: "m" + strings.Repeat("x", j), value: int64(i + 1)})
		}
		points = append(points, dp{name: strings.Repeat("n", maxLabelBytes+1), value: 1})
		if code := push(m, sub, otlp(t, points...), false); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	values, fams := gather(t, m)
	series := 0
	for _, f := range fams["strata_client_telemetry_value"].GetMetric() {
		_ = f
		series++
	}
	if len(m.clients) > 5 || series > 12 || m.series != series || len(values) == 0 {
		t.Fatalf("%d clients, %d series exposed (%d counted), want at most 5 and 12", len(m.clients), series, m.series)
	}
}
