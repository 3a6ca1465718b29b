package controllers

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// The TierDegraded condition (issue #16 item 5; docs/operator.md
// "Status"): the slow tier's health as the brokers report it in the same
// /metrics scrape as the WAL state and the cost (scrapeWAL). A broker
// whose uploads fail keeps its closed segments on disk until the tier
// takes them again, so a long outage fills the data volumes: the
// condition says so while there is time to act.

// Reasons of the TierDegraded condition.
const (
	// ReasonTierUploadsFailing: a broker's uploads to the slow tier fail
	// (bucket unreachable or refusing); its local segments stay and its
	// upload lag grows.
	ReasonTierUploadsFailing = "TierUploadsFailing"
	// ReasonTierDiskHeadroomLow: a broker's free disk minus its upload lag
	// fell below TierHeadroomMinFraction of its data volume.
	ReasonTierDiskHeadroomLow = "TierDiskHeadroomLow"
	// ReasonTierHealthy: every broker that reports the tier uploads, with
	// headroom.
	ReasonTierHealthy = "TierHealthy"
	// ReasonTierDisabled: spec.tieredStorage is not set.
	ReasonTierDisabled = "TierDisabled"
)

// Events of the TierDegraded transitions.
const (
	EventTierDegraded  = "TierDegraded"
	EventTierRecovered = "TierRecovered"
)

// TierHeadroomMinFraction is the share of a broker's data volume below
// which its tier disk headroom (strata_tier_disk_headroom_bytes: free bytes
// minus the bytes not uploaded yet) sets TierDegraded. The alert
// StrataTierDiskHeadroomLow uses the same bound.
const TierHeadroomMinFraction = 0.10

// Broker metrics of the slow tier the operator reads (broker/server
// tier.go).
const (
	metricTierLeaderPartitions = "strata_tier_leader_partitions"
	metricTierFailing          = "strata_tier_upload_failing_partitions"
	metricTierLag              = "strata_tier_upload_lag_bytes"
	metricTierHeadroom         = "strata_tier_disk_headroom_bytes"
	metricLogDirCapacity       = "strata_log_dir_capacity_bytes"
)

// TierMetrics is the slow tier's part of a broker's /metrics.
type TierMetrics struct {
	// Exported: the broker runs the slow tier.
	Exported bool
	// FailingPartitions are led partitions whose last upload failed.
	FailingPartitions int64
	// LagBytes are the bytes not in the tier yet; HeadroomBytes the free
	// disk minus them (HeadroomKnown: exported); CapacityBytes the data
	// volume's size (0: unknown).
	LagBytes, HeadroomBytes, CapacityBytes int64
	HeadroomKnown                          bool
}

// headroomLow reports whether the headroom is below the bound (or
// negative: the disk cannot take what is not uploaded).
func (t TierMetrics) headroomLow() bool {
	if !t.HeadroomKnown {
		return false
	}
	return t.HeadroomBytes < 0 || t.CapacityBytes > 0 && float64(t.HeadroomBytes) < TierHeadroomMinFraction*float64(t.CapacityBytes)
}

// TierProblems lists, per zone, the brokers whose uploads fail and those
// low on headroom, from the scrapes that succeeded; reported counts the
// brokers that export the tier's metrics.
func TierProblems(scrapes []brokerWAL) (failing, low []string, reported int) {
	type zoneList struct {
		zone string
		ids  []string
	}
	add := func(lists *[]zoneList, zone, entry string) {
		for i := range *lists {
			if (*lists)[i].zone == zone {
				(*lists)[i].ids = append((*lists)[i].ids, entry)
				return
			}
		}
		*lists = append(*lists, zoneList{zone, []string{entry}})
	}
	var f, l []zoneList
	for _, s := range scrapes {
		tm := s.metrics.Tier
		if s.err != nil || !tm.Exported {
			continue
		}
		reported++
		if tm.FailingPartitions > 0 {
			add(&f, s.zone, fmt.Sprintf("%d (%d partitions, %s not uploaded)", s.id, tm.FailingPartitions, humanBytes(tm.LagBytes)))
		}
		if tm.headroomLow() {
			add(&l, s.zone, fmt.Sprintf("%d (%s headroom of %s, %s not uploaded)", s.id, humanBytes(tm.HeadroomBytes), humanBytes(tm.CapacityBytes), humanBytes(tm.LagBytes)))
		}
	}
	format := func(lists []zoneList) []string {
		slices.SortFunc(lists, func(a, b zoneList) int { return strings.Compare(a.zone, b.zone) })
		var out []string
		for _, z := range lists {
			out = append(out, fmt.Sprintf("zone %s: brokers %s", z.zone, strings.Join(z.ids, ", ")))
		}
		return out
	}
	return format(f), format(l), reported
}

// humanBytes prints a byte count in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	v, exp := float64(n), 0
	for v >= unit*unit || v <= -unit*unit {
		v /= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", v/unit, "KMGTPE"[exp])
}

// setTierDegradedCondition sets TierDegraded from this reconcile's
// scrapes (scraped false: the brokers were not scraped, the condition
// stays as it was) and records a Warning event when it turns True, a
// Normal one when it clears.
func (r *KafkaClusterReconciler) setTierDegradedCondition(kc *strata.KafkaCluster, scrapes []brokerWAL, scraped bool) {
	if kc.Spec.TieredStorage == nil {
		setCondition(kc, strata.ConditionTierDegraded, metav1.ConditionFalse, ReasonTierDisabled, "spec.tieredStorage is not set")
		return
	}
	if !scraped {
		return
	}
	wasTrue, wasReason := false, ""
	if was := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionTierDegraded); was != nil {
		wasTrue, wasReason = was.Status == metav1.ConditionTrue, was.Reason
	}
	failing, low, reported := TierProblems(scrapes)
	if len(failing) == 0 && len(low) == 0 {
		msg := fmt.Sprintf("%d brokers report the slow tier: uploads succeed, disk headroom above %.0f%% of the data volume", reported, 100*TierHeadroomMinFraction)
		setCondition(kc, strata.ConditionTierDegraded, metav1.ConditionFalse, ReasonTierHealthy, msg)
		if wasTrue {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventTierRecovered, "ScrapeTier", "%s", msg)
		}
		return
	}
	var parts []string
	reason := ReasonTierDiskHeadroomLow
	if len(failing) > 0 {
		reason = ReasonTierUploadsFailing
		parts = append(parts, "uploads to the slow tier fail, local segments are kept until it recovers: "+strings.Join(failing, "; "))
	}
	if len(low) > 0 {
		parts = append(parts, fmt.Sprintf("disk headroom (free minus not uploaded) below %.0f%% of the data volume: %s", 100*TierHeadroomMinFraction, strings.Join(low, "; ")))
	}
	msg := strings.Join(parts, "; ")
	setCondition(kc, strata.ConditionTierDegraded, metav1.ConditionTrue, reason, msg)
	if !wasTrue || wasReason != reason {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventTierDegraded, "ScrapeTier", "%s", msg)
	}
}
