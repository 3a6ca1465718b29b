package protocol_test

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// gatherFamily returns the broker's metric family name, nil if absent.
func gatherFamily(t *testing.T, b *brokertest.Broker, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := b.Server().Metrics().Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// requestsOf returns strata_requests_total of api.
func requestsOf(t *testing.T, b *brokertest.Broker, api string) float64 {
	t.Helper()
	for _, m := range gatherFamily(t, b, "strata_requests_total").GetMetric() {
		if labelOf(m, "api") == api {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// produceOne makes the client talk to the broker, which starts franz-go's
// telemetry loop (it waits for the client's first observation).
func produceOne(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// A franz-go client with default options against a broker that wants its
// producer metrics pushes them, and /metrics shows them per client.
func TestClientTelemetryPushed(t *testing.T) {
	b := brokertest.Start(t,
		brokertest.WithSetting("telemetry.requested.metrics", "org.apache.kafka.producer."),
		brokertest.WithSetting("telemetry.push.interval.ms", "1000"),
		brokertest.WithSetting("metrics.listen", "127.0.0.1:0"))
	createTopic(t, newAdmin(t, b.Addr()), "telemetry", 1, nil)
	cl := newClient(t, b.Addr(), kgo.ClientID("telemetry-test"))
	produceOne(t, cl, "telemetry")

	var seen []string
	waitFor(t, "the client's pushed metrics on /metrics", func() bool {
		resp, err := http.Get("http://" + b.Server().MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen = seen[:0]
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "strata_client_telemetry_value{") && strings.Contains(line, `client_id="telemetry-test"`) {
				seen = append(seen, line)
			}
		}
		return len(seen) > 0
	})
	for _, line := range seen {
		if !strings.Contains(line, `metric="org.apache.kafka.producer.`) {
			t.Fatalf("a series outside the requested prefix: %s", line)
		}
	}
	var accepted float64
	for _, m := range gatherFamily(t, b, "strata_client_telemetry_pushes_total").GetMetric() {
		if labelOf(m, "error") == "NONE" {
			accepted = m.GetCounter().GetValue()
		}
	}
	if accepted < 1 {
		t.Fatalf("accepted pushes %v, want at least 1", accepted)
	}
	// Closing sends the terminating push, accepted however soon.
	cl.Close()
	waitFor(t, "the terminating push", func() bool { return requestsOf(t, b, "PushTelemetry") >= 2 })
}

// With the default config a franz-go client asks for its subscription,
// is told no metrics are wanted, and never pushes: not while it runs, not
// when it closes (a client with a subscription sends a terminating push).
func TestClientTelemetryDefaultAsksOnly(t *testing.T) {
	b := brokertest.Start(t)
	createTopic(t, newAdmin(t, b.Addr()), "quiet", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produceOne(t, cl, "quiet")
	waitFor(t, "GetTelemetrySubscriptions", func() bool { return requestsOf(t, b, "GetTelemetrySubscriptions") >= 1 })
	cl.Close()
	if n := requestsOf(t, b, "PushTelemetry"); n != 0 {
		t.Fatalf("PushTelemetry requests: %v, want none", n)
	}
	if f := gatherFamily(t, b, "strata_client_telemetry_clients"); f.GetMetric()[0].GetGauge().GetValue() != 0 {
		t.Fatalf("the broker keeps telemetry state of %v clients with nothing requested", f.GetMetric()[0].GetGauge().GetValue())
	}
}

// PushTelemetry's checks over the wire: wrong subscription, too soon, too
// large, a gzip bomb, a terminating push and a push after it.
func TestPushTelemetryErrors(t *testing.T) {
	b := brokertest.Start(t,
		brokertest.WithSetting("telemetry.requested.metrics", "*"),
		brokertest.WithSetting("telemetry.max.bytes", "65536"))
	cl := newClient(t, b.Addr(), kgo.DisableClientMetrics())
	ctx := testCtx(t)
	subscribe := func() *kmsg.GetTelemetrySubscriptionsResponse {
		t.Helper()
		resp, err := kmsg.NewPtrGetTelemetrySubscriptionsRequest().RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("GetTelemetrySubscriptions: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
		}
		if len(resp.RequestedMetrics) != 1 || resp.RequestedMetrics[0] != "" || resp.TelemetryMaxBytes != 65536 || resp.PushIntervalMillis != 300000 {
			t.Fatalf("subscription %+v: want all metrics, 64 KiB, 5 min", resp)
		}
		return resp
	}
	push := func(sub *kmsg.GetTelemetrySubscriptionsResponse, mutate func(*kmsg.PushTelemetryRequest)) error {
		t.Helper()
		req := kmsg.NewPtrPushTelemetryRequest()
		req.ClientInstanceID, req.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
		if mutate != nil {
			mutate(req)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("PushTelemetry: %v", err)
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	if _, err := io.Copy(zw, io.LimitReader(zeros{}, 64<<20)); err != nil {
		t.Fatal(err)
	}
	zw.Close()

	sub := subscribe()
	steps := []struct {
		name   string
		sub    *kmsg.GetTelemetrySubscriptionsResponse
		mutate func(*kmsg.PushTelemetryRequest)
		want   error
	}{
		{"wrong subscription", sub, func(r *kmsg.PushTelemetryRequest) { r.SubscriptionID ^= 1 }, kerr.UnknownSubscriptionID},
		{"first push", sub, nil, nil},
		{"too soon", sub, nil, kerr.ThrottlingQuotaExceeded},
		{"terminating, however soon", sub, func(r *kmsg.PushTelemetryRequest) { r.Terminating = true }, nil},
		{"after terminating", sub, nil, kerr.InvalidRequest},
		{"too large", subscribe(), func(r *kmsg.PushTelemetryRequest) { r.Metrics = make([]byte, 65537) }, kerr.TelemetryTooLarge},
		{"gzip bomb", subscribe(), func(r *kmsg.PushTelemetryRequest) { r.CompressionType, r.Metrics = 1, bomb.Bytes() }, kerr.TelemetryTooLarge},
		{"not OTLP", subscribe(), func(r *kmsg.PushTelemetryRequest) { r.Metrics = []byte("not protobuf") }, kerr.InvalidRecord},
		{"zero instance ID", subscribe(), func(r *kmsg.PushTelemetryRequest) { r.ClientInstanceID = [16]byte{} }, kerr.InvalidRequest},
	}
	if bomb.Len() > 65536 {
		t.Fatalf("the bomb is %d bytes, over telemetry.max.bytes itself", bomb.Len())
	}
	for _, s := range steps {
		if got := push(s.sub, s.mutate); got != s.want {
			t.Fatalf("%s: got %v, want %v", s.name, got, s.want)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// apiVersions sends ApiVersions of version v on a fresh connection.
func apiVersions(t *testing.T, addr string, v int16) *kmsg.ApiVersionsResponse {
	t.Helper()
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1.0"
	if _, err := c.Write(rawFrame(req, 1)); err != nil {
		t.Fatal(err)
	}
	_, body := readResponse(t, c)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = v
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v%d: %v %v", v, err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

func TestApiVersionsFeatures(t *testing.T) {
	b := brokertest.Start(t)
	type rng struct{ min, max int16 }
	supported := func(resp *kmsg.ApiVersionsResponse) map[string]rng {
		out := map[string]rng{}
		for _, f := range resp.SupportedFeatures {
			out[f.Name] = rng{f.MinVersion, f.MaxVersion}
		}
		return out
	}
	finalized := func(resp *kmsg.ApiVersionsResponse) map[string]rng {
		out := map[string]rng{}
		for _, f := range resp.FinalizedFeatures {
			out[f.Name] = rng{f.MinVersionLevel, f.MaxVersionLevel}
		}
		return out
	}
	for _, tc := range []struct {
		version   int16
		supported map[string]rng
	}{
		// v4 lists ranges from 0; v3 clients fail on a minimum of 0
		// (KIP-1022), so 0 becomes 1 and a range of only 0 is left out.
		{4, map[string]rng{"group.version": {0, 1}, "share.version": {0, 1}, "transaction.version": {0, 0}}},
		{3, map[string]rng{"group.version": {1, 1}, "share.version": {1, 1}}},
	} {
		resp := apiVersions(t, b.Addr(), tc.version)
		if got := supported(resp); !maps.Equal(got, tc.supported) {
			t.Errorf("v%d SupportedFeatures %v, want %v", tc.version, got, tc.supported)
		}
		if got := finalized(resp); !maps.Equal(got, map[string]rng{"group.version": {1, 1}, "share.version": {1, 1}}) || resp.FinalizedFeaturesEpoch < 0 {
			t.Errorf("v%d FinalizedFeatures %v (epoch %d), want group.version 1 and share.version 1", tc.version, got, resp.FinalizedFeaturesEpoch)
		}
	}
	if resp := apiVersions(t, b.Addr(), 2); len(resp.SupportedFeatures) != 0 || resp.FinalizedFeaturesEpoch != -1 {
		t.Errorf("v2 carries features: %+v", resp)
	}

	// kadm has no features view of its own; its ApiVersions keeps the
	// raw answer, and franz-go reads FinalizedFeatures from it (for
	// transaction.version 2, which must not be claimed).
	vs, err := newAdmin(t, b.Addr()).ApiVersions(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Err != nil {
			t.Fatal(v.Err)
		}
		raw := v.Raw()
		if got := finalized(raw); got["group.version"] != (rng{1, 1}) || got["transaction.version"].max >= 2 {
			t.Fatalf("kadm ApiVersions of broker %d: finalized %v", v.NodeID, got)
		}
	}
}

// UpdateFeatures answers per feature: the level in force is accepted as a
// no-op, any other level and unknown features INVALID_UPDATE_VERSION.
func TestUpdateFeatures(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	got, err := adm.UpdateFeatures(testCtx(t), false,
		kadm.FeatureUpdate{Feature: "group.version", MaxVersionLevel: 1, UpgradeType: 1},
		kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1},
		kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 20, UpgradeType: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]error{"group.version": nil, "transaction.version": kerr.InvalidUpdateVersion, "metadata.version": kerr.InvalidUpdateVersion}
	for name, w := range want {
		if r, ok := got[name]; !ok || r.Err != w {
			t.Errorf("%s: got %+v, want %v", name, r, w)
		}
	}
	// The levels did not move.
	if f := apiVersions(t, b.Addr(), 4).FinalizedFeatures; len(f) != 2 || f[0].MaxVersionLevel != 1 || f[1].MaxVersionLevel != 1 {
		t.Fatalf("finalized after the update: %+v", f)
	}
}
