package controllers

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// TestRecordEtcdHealth: the probe's figures become the gauges the etcd
// alerts read, a disarmed alarm goes back to 0 (so the alert resolves
// rather than losing its series), and a deleted cluster's series go.
func TestRecordEtcdHealth(t *testing.T) {
	h := &strata.MetadataHealth{
		Endpoints:      []string{"e0:2379", "e1:2379", "e2:2379"},
		HealthyMembers: 2,
		DBSizeBytes:    900,
		QuotaBytes:     1000,
		Alarms:         []string{"NOSPACE on member 8e9e05c52164694d"},
	}
	recordEtcdHealth("ns", "c", h)
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"db size", testutil.ToFloat64(etcdDBSize.WithLabelValues("ns", "c")), 900},
		{"quota", testutil.ToFloat64(etcdQuota.WithLabelValues("ns", "c")), 1000},
		{"healthy members", testutil.ToFloat64(etcdHealthyMembers.WithLabelValues("ns", "c")), 2},
		{"members", testutil.ToFloat64(etcdMembers.WithLabelValues("ns", "c")), 3},
		{"NOSPACE", testutil.ToFloat64(etcdAlarm.WithLabelValues("ns", "c", "NOSPACE")), 1},
		{"CORRUPT", testutil.ToFloat64(etcdAlarm.WithLabelValues("ns", "c", "CORRUPT")), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}

	h.Alarms = nil
	recordEtcdHealth("ns", "c", h)
	if got := testutil.ToFloat64(etcdAlarm.WithLabelValues("ns", "c", "NOSPACE")); got != 0 {
		t.Errorf("NOSPACE after the alarm was disarmed = %v, want 0", got)
	}

	recordEtcdHealth("ns", "other", h)
	forgetClusterMetrics("ns", "c")
	if n := testutil.CollectAndCount(etcdAlarm); n != 2 {
		t.Errorf("%d alarm series after the cluster was deleted, want the other cluster's 2", n)
	}
	if n := testutil.CollectAndCount(etcdDBSize); n != 1 {
		t.Errorf("%d db size series after the cluster was deleted, want 1", n)
	}
	forgetClusterMetrics("ns", "other")
}
