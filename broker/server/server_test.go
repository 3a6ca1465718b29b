package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startTest(t *testing.T) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.Broker.DataDir = t.TempDir()
	s, err := Start(context.Background(), cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestHTTPEndpoints(t *testing.T) {
	s := startTest(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("m"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.MetricsAddr()
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz %d", code)
	}
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{
		`strata_requests_total{api="Produce"}`,
		`strata_request_duration_seconds_bucket{api="Metadata"`,
		`strata_log_end_offset{partition="0",topic="m"} 2`,
		"strata_network_bytes_in_total",
		"strata_connections",
		"\nstrata_broker_ready 1\n",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Shutting down: unready with the reason (the HTTP listener itself
	// closes during Shutdown, so ask the handler directly).
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.httpHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != "shutting down\n" {
		t.Fatalf("/readyz after shutdown: %d %q", rec.Code, rec.Body.String())
	}
}

// TestShutdownAnswersParkedFetch checks that a graceful shutdown answers a
// long-poll fetch that is parked (instead of cutting the connection) and
// then closes the logs.
func TestShutdownAnswersParkedFetch(t *testing.T) {
	s := startTest(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("lp"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxWaitMillis = 600_000 // far longer than the test's context
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	b, _ := s.Broker().Topic("lp")
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "lp", TopicID: b.ID, Partitions: []kmsg.FetchRequestTopicPartition{
		{Partition: 0, FetchOffset: 1, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1},
	}}}
	type result struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := req.RequestWith(ctx, cl)
		done <- result{resp, err}
	}()
	// Wait until the fetch is parked on the broker.
	waitFor(t, func() bool { return s.Metrics().InFlight(kmsg.Fetch.Int16()) == 1 })
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("parked fetch got %v instead of an answer", res.err)
	}
	if p := res.resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) != 0 {
		t.Fatalf("parked fetch answered %+v", p)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRetentionLoop checks that log.retention.check.interval.ms drives
// retention: old segments of a topic with a short retention.ms go away
// without any client action.
func TestRetentionLoop(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Broker.DataDir = t.TempDir()
	if _, err := ApplySettings(&cfg, map[string]string{"log.retention.check.interval.ms": "10"}); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.DefaultProduceTopic("short"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"retention.ms": ptr("60000"), "segment.bytes": ptr("1024"),
	}, "short"); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for range 50 {
		r := &kgo.Record{Value: make([]byte, 200), Timestamp: old}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.Broker().Partition("short", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return p.Log.StartOffset() > 0 })
	if p.Log.EndOffset() != 50 {
		t.Fatalf("end offset %d, want 50", p.Log.EndOffset())
	}
}

func ptr(s string) *string { return &s }
