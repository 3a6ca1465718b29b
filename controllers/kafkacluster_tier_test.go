package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

const tierMetricsText = `# TYPE strata_tier_leader_partitions gauge
strata_tier_leader_partitions 4
# TYPE strata_tier_upload_failing_partitions gauge
strata_tier_upload_failing_partitions 2
# TYPE strata_tier_upload_lag_bytes gauge
strata_tier_upload_lag_bytes 3221225472
# TYPE strata_tier_disk_headroom_bytes gauge
strata_tier_disk_headroom_bytes 5368709120
# TYPE strata_log_dir_capacity_bytes gauge
strata_log_dir_capacity_bytes{dir="/var/lib/strata"} 107374182400
`

// TestTierDegradedCondition: a broker whose tier uploads fail sets
// TierDegraded (TierUploadsFailing) with its zone, broker, failing
// partitions and lag, and a Warning event; low headroom alone is
// TierDiskHeadroomLow; recovery clears it with a Normal event; without
// spec.tieredStorage it is False (TierDisabled); a reconcile that did not
// scrape keeps it.
func TestTierDegradedCondition(t *testing.T) {
	bm, err := ParseBrokerMetrics(strings.NewReader(tierMetricsText))
	if err != nil {
		t.Fatal(err)
	}
	want := TierMetrics{Exported: true, FailingPartitions: 2, LagBytes: 3 << 30, HeadroomBytes: 5 << 30, HeadroomKnown: true, CapacityBytes: 100 << 30}
	if bm.Tier != want {
		t.Fatalf("parsed %+v, want %+v", bm.Tier, want)
	}
	rec := events.NewFakeRecorder(10)
	r := &KafkaClusterReconciler{Recorder: rec}
	kc := &strata.KafkaCluster{}
	r.setTierDegradedCondition(kc, nil, false)
	if c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionTierDegraded); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonTierDisabled {
		t.Fatalf("without spec.tieredStorage: %+v", c)
	}
	kc.Spec.TieredStorage = &strata.TieredStorageSpec{Bucket: "tier", Region: "r"}
	healthy := BrokerMetrics{Tier: TierMetrics{Exported: true, HeadroomBytes: 50 << 30, HeadroomKnown: true, CapacityBytes: 100 << 30}}
	noTier := BrokerMetrics{}
	scrapes := []brokerWAL{{id: 0, zone: "a", metrics: healthy}, {id: 100, zone: "b", metrics: bm}, {id: 200, zone: "c", metrics: noTier}}
	cond := func() *metav1.Condition {
		return meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionTierDegraded)
	}
	event := func(want string) {
		t.Helper()
		select {
		case e := <-rec.Events:
			if !strings.Contains(e, want) {
				t.Fatalf("event %q, want %q", e, want)
			}
		default:
			if want != "" {
				t.Fatalf("no event, want %q", want)
			}
		}
	}

	r.setTierDegradedCondition(kc, scrapes, true)
	c := cond()
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonTierUploadsFailing ||
		!strings.Contains(c.Message, "zone b: brokers 100 (2 partitions, 3.0 GiB not uploaded)") ||
		!strings.Contains(c.Message, "below 10% of the data volume: zone b: brokers 100 (5.0 GiB headroom of 100.0 GiB") {
		t.Fatalf("uploads failing and headroom low: %+v", c)
	}
	event("Warning TierDegraded")
	// Still failing: no second event.
	r.setTierDegradedCondition(kc, scrapes, true)
	event("")
	// Not scraped this time: kept.
	r.setTierDegradedCondition(kc, nil, false)
	if cond().Status != metav1.ConditionTrue {
		t.Fatal("a reconcile without a scrape changed TierDegraded")
	}

	// The bucket is back but the disk stays short: headroom only.
	bm.Tier.FailingPartitions = 0
	scrapes[1].metrics = bm
	r.setTierDegradedCondition(kc, scrapes, true)
	if c = cond(); c.Status != metav1.ConditionTrue || c.Reason != ReasonTierDiskHeadroomLow || strings.Contains(c.Message, "uploads to the slow tier fail") {
		t.Fatalf("headroom low only: %+v", c)
	}
	event("Warning TierDegraded")

	// A disk that cannot take the lag at all (headroom below zero) with
	// the volume size unknown.
	neg := BrokerMetrics{Tier: TierMetrics{Exported: true, HeadroomBytes: -1, HeadroomKnown: true}}
	if _, low, _ := TierProblems([]brokerWAL{{id: 1, zone: "a", metrics: neg}}); len(low) != 1 {
		t.Fatalf("negative headroom not reported: %v", low)
	}

	scrapes[1].metrics = healthy
	r.setTierDegradedCondition(kc, scrapes, true)
	if c = cond(); c.Status != metav1.ConditionFalse || c.Reason != ReasonTierHealthy || !strings.Contains(c.Message, "2 brokers report the slow tier") {
		t.Fatalf("after recovery: %+v", c)
	}
	event("Normal TierRecovered")
}
