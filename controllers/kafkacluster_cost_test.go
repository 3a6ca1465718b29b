package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/server"
)

const brokerMetricsText = `# TYPE strata_wal_degraded gauge
strata_wal_degraded 0
# TYPE strata_wal_policy_inline gauge
strata_wal_policy_inline 1
# TYPE strata_replication_cost_start_time_seconds gauge
strata_replication_cost_start_time_seconds 1.7e+09
# TYPE strata_replication_produced_bytes_total counter
strata_replication_produced_bytes_total 1e+09
# TYPE strata_replication_classic_bytes_total counter
strata_replication_classic_bytes_total 2e+09
# TYPE strata_replication_cross_zone_bytes_total counter
strata_replication_cross_zone_bytes_total{path="inline"} 1000
strata_replication_cross_zone_bytes_total{path="wal"} 500
# TYPE strata_replication_cost_usd_total counter
strata_replication_cost_usd_total{path="wal"} 0.01
strata_replication_cost_usd_total{path="inline"} 0.002
strata_replication_cost_usd_total{path="classic_equivalent"} 0.04
# TYPE strata_client_cross_zone_bytes_total counter
strata_client_cross_zone_bytes_total{path="produce"} 3e+08
strata_client_cross_zone_bytes_total{path="consume"} 1e+08
# TYPE strata_client_cost_usd_total counter
strata_client_cost_usd_total{path="produce"} 0.006
strata_client_cost_usd_total{path="consume"} 0.002
# TYPE strata_objstore_requests_total counter
strata_objstore_requests_total{bucket="b",op="put",result="ok",zone="a"} 7000
strata_objstore_requests_total{bucket="b",op="put",result="error",zone="a"} 3
strata_objstore_requests_total{bucket="c",op="get",result="ok",zone="c"} 14000
strata_objstore_requests_total{bucket="b",op="delete_many",result="ok",zone="a"} 9
`

func TestParseBrokerMetrics(t *testing.T) {
	bm, err := ParseBrokerMetrics(strings.NewReader(brokerMetricsText))
	if err != nil {
		t.Fatal(err)
	}
	want := BrokerMetrics{WALExported: true, PolicyInline: true, CostExported: true, Start: time.Unix(1_700_000_000, 0),
		Produced: 1e9, ClassicBytes: 2e9, CrossZoneBytes: 1500, Puts: 7003, Gets: 14000, USDWAL: 0.01, USDInline: 0.002, USDClassicEquivalent: 0.04,
		ClientExported: true, ClientBytes: 4e8, ProducerBytes: 3e8, USDClients: 0.008, USDProducers: 0.006}
	if !bm.Start.Equal(want.Start) {
		t.Fatalf("start %v, want %v", bm.Start, want.Start)
	}
	bm.Start = want.Start
	if bm != want {
		t.Fatalf("parsed\n %+v\nwant\n %+v", bm, want)
	}
	// A broker of an older version: no cost counters, no report.
	old, err := ParseBrokerMetrics(strings.NewReader("# TYPE strata_wal_degraded gauge\nstrata_wal_degraded 1\n"))
	if err != nil || old.CostExported || !old.Degraded {
		t.Fatalf("older broker: %+v, %v", old, err)
	}
}

func TestCostReport(t *testing.T) {
	now := time.Unix(1_700_000_000, 0).Add(10 * 24 * time.Hour) // 10 days after start
	bm, _ := ParseBrokerMetrics(strings.NewReader(brokerMetricsText))
	young := bm
	young.Start = now.Add(-5 * 24 * time.Hour) // restarted 5 days ago: twice the rate
	got := CostReport([]BrokerMetrics{bm, young, {WALExported: true}}, now)
	// Monthly: broker 1 $0.012 over 10 days → $0.036; broker 2 over 5
	// days → $0.072; classic $0.12 + $0.24. Clients $0.008 → $0.024 +
	// $0.048, producers $0.006 → $0.018 + $0.036; the whole bill's saving
	// 1 − (0.108 + 0.072) / (0.36 + 0.072) = 58 %.
	want := &strata.CostStatus{
		Window: metav1.Duration{Duration: 10 * 24 * time.Hour}, BytesProduced: 2e9, CrossZoneBytes: 3000, ClassicCrossZoneBytes: 4e9,
		Puts: 14006, Gets: 28000, Brokers: 2, ClientCrossZoneBytes: 8e8, ProducerCrossZoneBytes: 6e8,
		EstimatedUSDPerMonth: strata.CostEstimate{Actual: "0.11", Classic: "0.36", Clients: "0.07", Producers: "0.05"}, SavingPercent: ptr.To[int32](70),
		TotalSavingPercent: ptr.To[int32](58),
	}
	if got == nil || got.LastUpdateTime == nil {
		t.Fatalf("report %+v", got)
	}
	got.LastUpdateTime = nil
	if got.Window != want.Window || got.BytesProduced != want.BytesProduced || got.CrossZoneBytes != want.CrossZoneBytes ||
		got.ClassicCrossZoneBytes != want.ClassicCrossZoneBytes || got.Puts != want.Puts || got.Gets != want.Gets || got.Brokers != want.Brokers ||
		got.EstimatedUSDPerMonth != want.EstimatedUSDPerMonth || *got.SavingPercent != *want.SavingPercent ||
		got.ClientCrossZoneBytes != want.ClientCrossZoneBytes || got.ProducerCrossZoneBytes != want.ProducerCrossZoneBytes ||
		got.TotalSavingPercent == nil || *got.TotalSavingPercent != *want.TotalSavingPercent {
		t.Fatalf("report\n %+v (saving %d)\nwant\n %+v (saving %d)", *got, *got.SavingPercent, *want, *want.SavingPercent)
	}
	if CostReport([]BrokerMetrics{{WALExported: true}}, now) != nil {
		t.Fatal("a report without any broker's cost counters")
	}
}

// TestWALDegradedCondition: bucket trouble sets WALDegraded with the
// zone and brokers; inline by policy does not, and is named in the
// message; recovery clears it.
func TestWALDegradedCondition(t *testing.T) {
	kc := &strata.KafkaCluster{}
	kc.Spec.WAL.Enabled = ptr.To(true)
	kc.Status.Zones = []strata.ZoneStatus{
		{Name: "a", WAL: ZoneWAL([]brokerWAL{{id: 0, policyInline: true}, {id: 1}})},
		{Name: "b", WAL: ZoneWAL([]brokerWAL{{id: 100}})},
	}
	setWALDegradedCondition(kc)
	c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionWALDegraded)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "zone a: brokers [0]") || !strings.Contains(c.Message, "not a degradation") {
		t.Fatalf("inline by policy: condition %+v, want False naming zone a broker 0 as policy", c)
	}
	if got := kc.Status.Zones[0].WAL; got.State != strata.WALHealthy || len(got.PolicyInlineBrokers) != 1 {
		t.Fatalf("zone a WAL %+v: inline by policy is healthy", got)
	}
	kc.Status.Zones[1].WAL = ZoneWAL([]brokerWAL{{id: 100, degraded: true}})
	setWALDegradedCondition(kc)
	c = meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionWALDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonBucketUploadsFailing || !strings.Contains(c.Message, "zone b: brokers [100]") {
		t.Fatalf("bucket trouble: condition %+v", c)
	}
	kc.Status.Zones[1].WAL = ZoneWAL([]brokerWAL{{id: 100}})
	setWALDegradedCondition(kc)
	if c = meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionWALDegraded); c.Status != metav1.ConditionFalse || c.Reason != ReasonWALHealthy {
		t.Fatalf("after recovery: %+v", c)
	}
}

// TestCostConfigRoundTrip: spec.wal.policy, maxUploadInterval and
// spec.cost.prices rendered as broker keys read back by the broker's
// parser into the same settings; unset prices keep the defaults.
func TestCostConfigRoundTrip(t *testing.T) {
	kc := &strata.KafkaCluster{}
	kc.Spec.WAL.Policy = strata.WALPolicyCost
	kc.Spec.WAL.MaxUploadInterval = &metav1.Duration{Duration: 250 * time.Millisecond}
	kc.Spec.Cost = &strata.CostSpec{Prices: &strata.PriceTable{PutPer1000: "0.005", CrossZoneInPerGB: "0", IncludedBytesPerRequest: ptr.To[int64](0)}}
	kv := map[string]string{}
	renderCostConfig(kc, kv)
	cfg := server.DefaultConfig()
	if unknown, err := server.ApplySettings(&cfg, kv); err != nil || len(unknown) > 0 {
		t.Fatalf("broker refused %v: %v (unknown %v)", kv, err, unknown)
	}
	want := cost.Default()
	want.PutPer1000, want.CrossZoneInPerGB, want.IncludedBytesPerRequest = 0.005, 0, 0
	if cfg.Cluster.WAL.Policy != cost.PolicyCost || cfg.Cluster.WAL.MaxUploadInterval != 250*time.Millisecond || cfg.Prices != want {
		t.Fatalf("broker read policy %q, max interval %v, prices %+v from %v", cfg.Cluster.WAL.Policy, cfg.Cluster.WAL.MaxUploadInterval, cfg.Prices, kv)
	}
	// auto's bounds: spec.wal.maxLatency and maxCostPercent.
	kc = &strata.KafkaCluster{}
	kc.Spec.WAL.MaxLatency = &metav1.Duration{Duration: 120 * time.Millisecond}
	kc.Spec.WAL.MaxCostPercent = ptr.To[int32](150)
	kv = map[string]string{}
	renderCostConfig(kc, kv)
	cfg = server.DefaultConfig()
	if unknown, err := server.ApplySettings(&cfg, kv); err != nil || len(unknown) > 0 {
		t.Fatalf("broker refused %v: %v (unknown %v)", kv, err, unknown)
	}
	if cfg.Cluster.WAL.AutoMaxLatency != 120*time.Millisecond || cfg.Cluster.WAL.AutoMaxCostRatio != 1.5 {
		t.Fatalf("broker read max latency %v, max cost ratio %v from %v; want 120ms, 1.5", cfg.Cluster.WAL.AutoMaxLatency, cfg.Cluster.WAL.AutoMaxCostRatio, kv)
	}
	// Defaults: auto, 100 ms, no price key, auto's bounds left to the
	// brokers' defaults (wal.auto.max.latency.ms 50 ms, cost ratio 1).
	kv = map[string]string{}
	renderCostConfig(&strata.KafkaCluster{}, kv)
	if len(kv) != 2 || kv["wal.policy"] != "auto" || kv["wal.upload.max.interval.ms"] != "100" {
		t.Fatalf("default keys %v", kv)
	}
}

// TestOperatingPoints: a broker's wal.policy operating point, read from
// its metrics, lands in its zone's status.
func TestOperatingPoints(t *testing.T) {
	text := `# TYPE strata_wal_cut_interval_seconds gauge
strata_wal_cut_interval_seconds 0.05
# TYPE strata_wal_policy_bound gauge
strata_wal_policy_bound{bound="latency"} 1
strata_wal_policy_bound{bound="target"} 0
strata_wal_policy_bound{bound="unknown"} 0
# TYPE strata_wal_policy_cost_ratio gauge
strata_wal_policy_cost_ratio 0.1834
# TYPE strata_wal_policy_added_p99_seconds gauge
strata_wal_policy_added_p99_seconds 0.1
`
	bm, err := ParseBrokerMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := PolicyPoint{CutInterval: 50 * time.Millisecond, AddedP99: 100 * time.Millisecond, CostRatio: 0.1834, Bound: "latency"}
	if bm.Point == nil || *bm.Point != want {
		t.Fatalf("point %+v, want %+v", bm.Point, want)
	}
	// Before traffic: no ratio (-1), inline, bound unknown.
	idle, err := ParseBrokerMetrics(strings.NewReader(`strata_wal_cut_interval_seconds 0.1
strata_wal_policy_bound{bound="unknown"} 1
strata_wal_policy_cost_ratio -1
strata_wal_policy_added_p99_seconds 0
strata_wal_policy_inline 1
`))
	if err != nil {
		t.Fatal(err)
	}
	// An older broker exports no point.
	old, err := ParseBrokerMetrics(strings.NewReader("strata_wal_degraded 0\n"))
	if err != nil || old.Point != nil {
		t.Fatalf("older broker: point %+v, %v", old.Point, err)
	}
	st := ZoneWAL([]brokerWAL{{id: 0, metrics: bm}, {id: 1, policyInline: true, metrics: idle}, {id: 2, metrics: old}, {id: 3, err: errors.New("refused"), metrics: bm}})
	got := st.OperatingPoints
	if len(got) != 2 {
		t.Fatalf("points %+v, want brokers 0 and 1 (2 exports none, 3 was not read)", got)
	}
	if p := got[0]; p.BrokerID != 0 || p.Path != "WAL" || p.Bound != "Latency" || p.CutInterval.Duration != 50*time.Millisecond ||
		p.ExpectedAddedP99.Duration != 100*time.Millisecond || p.CostPercent == nil || *p.CostPercent != 18 {
		t.Fatalf("broker 0: %+v", p)
	}
	if p := got[1]; p.BrokerID != 1 || p.Path != "Inline" || p.Bound != "Unknown" || p.CutInterval != nil || p.CostPercent != nil || p.ExpectedAddedP99.Duration != 0 {
		t.Fatalf("broker 1: %+v", p)
	}
	// Every bound label the broker exports has a status spelling.
	for _, b := range cost.Bounds() {
		if boundNames[b] == "" {
			t.Errorf("bound %q has no status name", b)
		}
	}
}
