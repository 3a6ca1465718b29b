package controllers

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/cost"
)

// The cost report and the WALDegraded condition (issue #15; docs/operator.md
// "Cost report"). The health probe scrapes every registered broker's
// /metrics (scrapeWAL); from the same scrape come the WAL state of its
// zone (strata_wal_degraded: bucket trouble; strata_wal_policy_inline:
// inline by spec.wal.policy, not a degradation) and the broker's cost
// counters, which CostReport sums into status.cost.

// Reasons of the WALDegraded condition.
const (
	// ReasonBucketUploadsFailing: a broker's uploads to its zone's fast
	// bucket fail (its breaker is open) and it replicates inline.
	ReasonBucketUploadsFailing = "BucketUploadsFailing"
	// ReasonWALHealthy: no broker replicates inline because of its bucket.
	ReasonWALHealthy = "WALHealthy"
	// ReasonWALDisabled: spec.wal.enabled is false.
	ReasonWALDisabled = "WALDisabled"
)

// Broker metrics the operator reads.
const (
	metricCostUSD          = "strata_replication_cost_usd_total"
	metricCostProduced     = "strata_replication_produced_bytes_total"
	metricCostClassicBytes = "strata_replication_classic_bytes_total"
	metricCostCrossZone    = "strata_replication_cross_zone_bytes_total"
	metricCostStart        = "strata_replication_cost_start_time_seconds"
	metricClientCrossZone  = "strata_client_cross_zone_bytes_total"
	metricClientCostUSD    = "strata_client_cost_usd_total"
	metricPolicyInline     = "strata_wal_policy_inline"
	metricCutInterval      = "strata_wal_cut_interval_seconds"
	metricPolicyBound      = "strata_wal_policy_bound"
	metricPolicyCostRatio  = "strata_wal_policy_cost_ratio"
	metricPolicyAddedP99   = "strata_wal_policy_added_p99_seconds"
	metricObjRequests      = "strata_objstore_requests_total"
	// Zone-local produce (docs/wal.md "Zone-local produce"): the path
	// gauge is 1 for the path the broker's next forwarded request takes;
	// only a broker that forwards exports its series.
	metricZoneLocalPath  = "strata_zonelocal_path"
	metricZoneLocalParts = "strata_zonelocal_partitions_total"
)

// The paths of strata_zonelocal_path.
const (
	zoneLocalPathBucket       = "bucket"
	zoneLocalPathInlineCost   = "inline-cost"
	zoneLocalPathInlineOutage = "inline-outage"
)

var zoneLocalPaths = []string{zoneLocalPathBucket, zoneLocalPathInlineCost, zoneLocalPathInlineOutage}

// BrokerMetrics is what the operator reads from one broker's /metrics.
type BrokerMetrics struct {
	// WALExported: strata_wal_degraded is exported (the broker runs a
	// WAL uploader); Degraded: it is 1 (bucket trouble).
	WALExported, Degraded bool
	// PolicyInline: spec.wal.policy replicates inline now.
	PolicyInline bool
	// Point is the broker's wal.policy operating point (nil: it exports
	// none, an older broker or no WAL).
	Point *PolicyPoint
	// CostExported: the broker exports the cost counters.
	CostExported bool
	// Counters since Start (the broker's meter start).
	Start                                   time.Time
	Produced, ClassicBytes, CrossZoneBytes  float64
	Puts, Gets                              float64
	USDWAL, USDInline, USDClassicEquivalent float64
	// Clients: cross-zone client bytes and their cost, all and the
	// producers' (ClientExported: the broker counts them).
	ClientExported             bool
	ClientBytes, ProducerBytes float64
	USDClients, USDProducers   float64
	// Tier is the slow tier's health (kafkacluster_tier.go).
	Tier TierMetrics
	// ZoneLocal is the broker's zone-local produce forwarding (nil: it
	// does not export the three series of strata_zonelocal_path: it does
	// not forward, or it predates the gauge).
	ZoneLocal *ZoneLocalMetrics
}

// ZoneLocalMetrics is a broker's zone-local produce forwarding.
type ZoneLocalMetrics struct {
	// Path is the strata_zonelocal_path label set to 1 ("" when none is).
	Path string
	// Forwarded and Inline are strata_zonelocal_partitions_total's
	// forwarded and inline partitions since the broker started.
	Forwarded, Inline float64
}

// PolicyPoint is a broker's wal.policy operating point, from
// strata_wal_cut_interval_seconds, strata_wal_policy_bound,
// strata_wal_policy_cost_ratio and strata_wal_policy_added_p99_seconds.
type PolicyPoint struct {
	CutInterval, AddedP99 time.Duration
	// CostRatio is the estimated cost over classic's (< 0: unknown).
	CostRatio float64
	// Bound is the bound label set to 1 (""; the latency and cost
	// policies).
	Bound string
}

// boundNames are the status spellings of strata_wal_policy_bound's
// labels (cost.Bounds).
var boundNames = map[string]string{
	cost.BoundTarget: "Target", cost.BoundLatency: "Latency", cost.BoundMaxInterval: "MaxInterval",
	cost.BoundCostCeiling: "CostCeiling", cost.BoundNoCrossZone: "NoCrossZoneCopies", cost.BoundUnknown: "Unknown",
}

// OperatingPoint is the status form of a broker's point.
func OperatingPoint(id int32, inline bool, p PolicyPoint) strata.WALOperatingPoint {
	op := strata.WALOperatingPoint{BrokerID: id, Path: "WAL", Bound: boundNames[p.Bound]}
	if inline {
		op.Path = "Inline"
	} else {
		op.CutInterval = &metav1.Duration{Duration: p.CutInterval}
	}
	op.ExpectedAddedP99 = &metav1.Duration{Duration: p.AddedP99}
	if p.CostRatio >= 0 && !math.IsInf(p.CostRatio, 0) && !math.IsNaN(p.CostRatio) {
		op.CostPercent = ptr.To(int32(math.Round(min(p.CostRatio, 1e6) * 100)))
	}
	return op
}

// ParseBrokerMetrics reads a broker's /metrics text exposition.
func ParseBrokerMetrics(r io.Reader) (BrokerMetrics, error) {
	var bm BrokerMetrics
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return bm, fmt.Errorf("parse metrics: %w", err)
	}
	sum := func(name string, match func(map[string]string) bool) (float64, bool) {
		mf, ok := families[name]
		if !ok {
			return 0, false
		}
		total := 0.0
		for _, m := range mf.GetMetric() {
			if match != nil && !match(metricLabels(m)) {
				continue
			}
			total += metricValue(m)
		}
		return total, true
	}
	label := func(k, v string) func(map[string]string) bool {
		return func(l map[string]string) bool { return l[k] == v }
	}
	var v float64
	v, bm.WALExported = sum(walDegradedMetric, nil)
	bm.Degraded = v != 0
	v, _ = sum(metricPolicyInline, nil)
	bm.PolicyInline = v != 0
	if iv, ok := sum(metricCutInterval, nil); ok {
		pt := &PolicyPoint{CutInterval: time.Duration(math.Round(iv * float64(time.Second))), CostRatio: -1}
		if r, ok := sum(metricPolicyCostRatio, nil); ok {
			pt.CostRatio = r
		}
		if a, ok := sum(metricPolicyAddedP99, nil); ok {
			pt.AddedP99 = time.Duration(math.Round(a * float64(time.Second)))
		}
		if mf, ok := families[metricPolicyBound]; ok {
			for _, m := range mf.GetMetric() {
				if metricValue(m) == 1 {
					pt.Bound = metricLabels(m)["bound"]
				}
			}
		}
		bm.Point = pt
	}
	// A forwarding broker exports all three paths of the gauge; one that
	// does not forward exports fewer (or none), an older one none.
	if mf, ok := families[metricZoneLocalPath]; ok && len(mf.GetMetric()) >= len(zoneLocalPaths) {
		zl := &ZoneLocalMetrics{}
		seen := 0
		for _, m := range mf.GetMetric() {
			path := metricLabels(m)["path"]
			if slices.Contains(zoneLocalPaths, path) {
				seen++
			}
			if metricValue(m) == 1 {
				zl.Path = path
			}
		}
		if seen < len(zoneLocalPaths) {
			zl = nil
		}
		if zl != nil {
			zl.Forwarded, _ = sum(metricZoneLocalParts, label("role", "forwarded"))
			zl.Inline, _ = sum(metricZoneLocalParts, label("role", "inline"))
			bm.ZoneLocal = zl
		}
	}
	if _, bm.Tier.Exported = sum(metricTierLeaderPartitions, nil); bm.Tier.Exported {
		v, _ = sum(metricTierFailing, nil)
		bm.Tier.FailingPartitions = int64(v)
		v, _ = sum(metricTierLag, nil)
		bm.Tier.LagBytes = int64(v)
		v, bm.Tier.HeadroomKnown = sum(metricTierHeadroom, nil)
		bm.Tier.HeadroomBytes = int64(v)
		v, _ = sum(metricLogDirCapacity, nil)
		bm.Tier.CapacityBytes = int64(v)
	}
	start, ok := sum(metricCostStart, nil)
	if !ok {
		return bm, nil
	}
	bm.CostExported = true
	bm.Start = time.Unix(0, int64(start*1e9))
	bm.Produced, _ = sum(metricCostProduced, nil)
	bm.ClassicBytes, _ = sum(metricCostClassicBytes, nil)
	bm.CrossZoneBytes, _ = sum(metricCostCrossZone, nil)
	bm.USDWAL, _ = sum(metricCostUSD, label("path", cost.CostWAL))
	bm.USDInline, _ = sum(metricCostUSD, label("path", cost.CostInline))
	bm.USDClassicEquivalent, _ = sum(metricCostUSD, label("path", cost.CostClassicEquivalent))
	bm.ClientBytes, bm.ClientExported = sum(metricClientCrossZone, nil)
	bm.ProducerBytes, _ = sum(metricClientCrossZone, label("path", cost.ClientProduce))
	bm.USDClients, _ = sum(metricClientCostUSD, nil)
	bm.USDProducers, _ = sum(metricClientCostUSD, label("path", cost.ClientProduce))
	bm.Puts, _ = sum(metricObjRequests, label("op", "put"))
	bm.Gets, _ = sum(metricObjRequests, label("op", "get"))
	return bm, nil
}

func metricLabels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func metricValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return gaugeValue(m)
}

// costMonth is the month of the estimates: 30 days.
const costMonth = 30 * 24 * time.Hour

// CostReport sums the brokers' cost counters at now into status.cost:
// totals since each broker started, and the monthly estimates from each
// broker's rate over its own time. Nil when no broker exports them.
func CostReport(brokers []BrokerMetrics, now time.Time) *strata.CostStatus {
	st := &strata.CostStatus{}
	var actual, classic, clients, producers float64
	var window time.Duration
	clientsKnown := false
	for _, b := range brokers {
		if !b.CostExported {
			continue
		}
		st.Brokers++
		st.BytesProduced += int64(b.Produced)
		st.CrossZoneBytes += int64(b.CrossZoneBytes)
		st.ClassicCrossZoneBytes += int64(b.ClassicBytes)
		st.Puts += int64(b.Puts)
		st.Gets += int64(b.Gets)
		st.ClientCrossZoneBytes += int64(b.ClientBytes)
		st.ProducerCrossZoneBytes += int64(b.ProducerBytes)
		clientsKnown = clientsKnown || b.ClientExported
		up := now.Sub(b.Start)
		window = max(window, up)
		if up < time.Second {
			continue // too short for a rate
		}
		perMonth := float64(costMonth) / float64(up)
		actual += (b.USDWAL + b.USDInline) * perMonth
		classic += b.USDClassicEquivalent * perMonth
		clients += b.USDClients * perMonth
		producers += b.USDProducers * perMonth
	}
	if st.Brokers == 0 {
		return nil
	}
	st.Window = metav1.Duration{Duration: window.Round(time.Second)}
	st.EstimatedUSDPerMonth = strata.CostEstimate{Actual: formatUSD(actual), Classic: formatUSD(classic)}
	if clientsKnown {
		st.EstimatedUSDPerMonth.Clients, st.EstimatedUSDPerMonth.Producers = formatUSD(clients), formatUSD(producers)
	}
	if classic > 0 {
		p := int32(math.Round(100 * (1 - actual/classic)))
		st.SavingPercent = &p
		t := int32(math.Round(100 * (1 - (actual+clients)/(classic+clients))))
		st.TotalSavingPercent = &t
	}
	t := metav1.NewTime(now)
	st.LastUpdateTime = &t
	return st
}

// formatUSD prints dollars with cents, more digits below a cent.
func formatUSD(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// setWALDegradedCondition sets WALDegraded from the zones' WAL states:
// True while a broker replicates inline because its bucket fails, with
// the zones and brokers; inline by spec.wal.policy is not a degradation.
func setWALDegradedCondition(kc *strata.KafkaCluster) {
	if !kc.Spec.WAL.IsEnabled() {
		setCondition(kc, strata.ConditionWALDegraded, metav1.ConditionFalse, ReasonWALDisabled, "spec.wal.enabled is false: classic replication")
		return
	}
	var degraded, policy []string
	for _, z := range kc.Status.Zones {
		if z.WAL == nil {
			continue
		}
		if z.WAL.State == strata.WALDegraded {
			degraded = append(degraded, fmt.Sprintf("zone %s: brokers %v", z.Name, z.WAL.DegradedBrokers))
		}
		if len(z.WAL.PolicyInlineBrokers) > 0 {
			policy = append(policy, fmt.Sprintf("zone %s: brokers %v", z.Name, z.WAL.PolicyInlineBrokers))
		}
	}
	if len(degraded) > 0 {
		setCondition(kc, strata.ConditionWALDegraded, metav1.ConditionTrue, ReasonBucketUploadsFailing,
			"uploads to the zone's fast bucket fail, these brokers replicate inline until it recovers: "+strings.Join(degraded, "; "))
		return
	}
	msg := "no broker replicates inline because of its bucket"
	if len(policy) > 0 {
		msg += "; inline by spec.wal.policy (cheaper at their throughput, not a degradation): " + strings.Join(policy, "; ")
	}
	setCondition(kc, strata.ConditionWALDegraded, metav1.ConditionFalse, ReasonWALHealthy, msg)
}

// renderCostConfig adds wal.policy, wal.upload.max.interval.ms, auto's
// bounds (wal.auto.max.latency.ms, wal.auto.max.cost.ratio; only those
// the spec sets) and the price table's cost.price.* keys (only those the
// spec sets).
func renderCostConfig(kc *strata.KafkaCluster, kv map[string]string) {
	wal := kc.Spec.WAL
	kv["wal.policy"] = strings.ToLower(string(orDefault(string(wal.Policy), string(strata.WALPolicyAuto))))
	kv["wal.upload.max.interval.ms"] = millis(durationOr(wal.MaxUploadInterval, 100*time.Millisecond))
	if wal.MaxLatency != nil {
		kv["wal.auto.max.latency.ms"] = millis(wal.MaxLatency.Duration)
	}
	if wal.MaxCostPercent != nil {
		kv["wal.auto.max.cost.ratio"] = strconv.FormatFloat(float64(*wal.MaxCostPercent)/100, 'f', -1, 64)
	}
	if kc.Spec.Cost == nil || kc.Spec.Cost.Prices == nil {
		return
	}
	p := kc.Spec.Cost.Prices
	for k, v := range map[string]string{
		cost.KeyPutPer1000: p.PutPer1000, cost.KeyGetPer1000: p.GetPer1000,
		cost.KeyUploadPerGB: p.UploadPerGB, cost.KeyRetrievalPerGB: p.RetrievalPerGB,
		cost.KeyCrossZoneOutPerGB: p.CrossZoneOutPerGB, cost.KeyCrossZoneInPerGB: p.CrossZoneInPerGB,
	} {
		if v != "" {
			kv[k] = v
		}
	}
	if p.IncludedBytesPerRequest != nil {
		kv[cost.KeyIncludedBytesPerRequest] = strconv.FormatInt(*p.IncludedBytesPerRequest, 10)
	}
}

// zoneLocalInlineReasons are the status reasons of the inline paths of
// strata_zonelocal_path.
var zoneLocalInlineReasons = map[string]strata.ZoneLocalInlineReason{
	zoneLocalPathInlineCost:   strata.ZoneLocalInlineCost,
	zoneLocalPathInlineOutage: strata.ZoneLocalInlineOutage,
}

// ZoneLocalStatus sums the zone-local forwarding of a zone's scraped
// brokers: which forward inline and why, and the partitions forwarded
// each way. Nil when none of them reports it (zone-local produce off, or
// brokers without the metrics).
func ZoneLocalStatus(scrapes []brokerWAL) *strata.ZoneLocalStatus {
	var st *strata.ZoneLocalStatus
	for _, s := range scrapes {
		zl := s.metrics.ZoneLocal
		if s.err != nil || zl == nil {
			continue
		}
		if st == nil {
			st = &strata.ZoneLocalStatus{}
		}
		st.Brokers++
		st.ForwardedPartitions += int64(zl.Forwarded)
		st.InlinePartitions += int64(zl.Inline)
		if reason, ok := zoneLocalInlineReasons[zl.Path]; ok {
			st.InlineBrokers = append(st.InlineBrokers, strata.ZoneLocalInline{BrokerID: s.id, Reason: reason})
		}
	}
	return st
}
