package controllers

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/server"
)

// zoneLocalKeys returns the wal.zonelocal.* keys of a rendered config.
func zoneLocalKeys(t *testing.T, kc *strata.KafkaCluster, zi ZoneInput) map[string]string {
	t.Helper()
	kv, err := brokerReads(t, RenderBrokerConfig(kc, zi), false)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range kv {
		if strings.HasPrefix(k, "wal.zonelocal.") {
			out[k] = v
		}
	}
	return out
}

// TestRenderZoneLocalProduce: spec.wal.zoneLocalProduce enabled renders
// the three wal.zonelocal.produce.* keys; unset, disabled or without WAL
// it renders nothing, so the ConfigMap and the hash that rolls the
// brokers stay what they were before the field existed, and enabling it
// changes the hash (a roll, as for any static key).
func TestRenderZoneLocalProduce(t *testing.T) {
	base := threeZoneCluster()
	zi := zoneInputs(base, nil)[0]
	baseHash := RolloutConfigHash(base, zi)

	withZL := func(wal func(*strata.WALSpec)) *strata.KafkaCluster {
		kc := threeZoneCluster()
		wal(&kc.Spec.WAL)
		return kc
	}
	tests := []struct {
		name string
		kc   *strata.KafkaCluster
		want map[string]string // nil: nothing rendered, config unchanged
	}{
		{"unset", base, nil},
		{"disabled", withZL(func(w *strata.WALSpec) {
			w.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Policy: strata.ZoneLocalProduceAuto, InlineFallback: &metav1.Duration{}}
		}), nil},
		{"enabled without WAL", withZL(func(w *strata.WALSpec) {
			w.Enabled = ptr.To(false)
			w.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true}
		}), nil},
		{"enabled, defaults", withZL(func(w *strata.WALSpec) {
			w.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true}
		}), map[string]string{"wal.zonelocal.produce.enable": "true", "wal.zonelocal.produce.policy": "bucket", "wal.zonelocal.produce.inline.ms": "10000"}},
		{"enabled, as the API server defaults it", withZL(func(w *strata.WALSpec) {
			w.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, Policy: strata.ZoneLocalProduceBucket, InlineFallback: &metav1.Duration{Duration: 10 * time.Second}}
		}), map[string]string{"wal.zonelocal.produce.enable": "true", "wal.zonelocal.produce.policy": "bucket", "wal.zonelocal.produce.inline.ms": "10000"}},
		{"Auto, no inline fallback", withZL(func(w *strata.WALSpec) {
			w.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, Policy: strata.ZoneLocalProduceAuto, InlineFallback: &metav1.Duration{}}
		}), map[string]string{"wal.zonelocal.produce.enable": "true", "wal.zonelocal.produce.policy": "auto", "wal.zonelocal.produce.inline.ms": "0"}},
		{"an hour's fallback", withZL(func(w *strata.WALSpec) {
			w.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, InlineFallback: &metav1.Duration{Duration: time.Hour}}
		}), map[string]string{"wal.zonelocal.produce.enable": "true", "wal.zonelocal.produce.policy": "bucket", "wal.zonelocal.produce.inline.ms": "3600000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := zoneLocalKeys(t, tt.kc, zi)
			hash := RolloutConfigHash(tt.kc, zi)
			if tt.want == nil {
				if len(got) != 0 {
					t.Errorf("rendered %v, want no wal.zonelocal key", got)
				}
				// The same cluster without the field.
				without := tt.kc.DeepCopy()
				without.Spec.WAL.ZoneLocalProduce = nil
				data, wantData := BuildZoneConfigMap(tt.kc, zi).Data, BuildZoneConfigMap(without, zi).Data
				if data[BrokerConfigFile] != wantData[BrokerConfigFile] {
					t.Errorf("the config differs from the cluster's without the field:\n%s\nwant\n%s", data[BrokerConfigFile], wantData[BrokerConfigFile])
				}
				if want := RolloutConfigHash(without, zi); hash != want {
					t.Errorf("config hash %s, want the unchanged %s: the brokers would roll", hash, want)
				}
				return
			}
			if len(got) != len(tt.want) {
				t.Errorf("rendered %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s=%q, want %q (rendered %v)", k, got[k], v, got)
				}
			}
			if hash == baseHash {
				t.Error("enabling zone-local produce leaves the config hash as it was: the brokers would not roll onto it")
			}
		})
	}
}

// TestZoneLocalProduceRoundTrip: the rendered zone-local keys, read by
// the broker's own parser, turn zone-local produce on with the inline
// fallback the spec asks for (0s: off).
func TestZoneLocalProduceRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		fallback *metav1.Duration
		want     time.Duration // the broker's ZoneLocalInline: -1 off
	}{
		{nil, 10 * time.Second},
		{&metav1.Duration{Duration: 90 * time.Second}, 90 * time.Second},
		{&metav1.Duration{}, -1},
	} {
		kc := threeZoneCluster()
		kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, Policy: strata.ZoneLocalProduceAuto, InlineFallback: tc.fallback}
		zi := zoneInputs(kc, nil)[1]
		t.Setenv(EnvPodName, ZoneStatefulSetName(kc.Name, zi.Zone.Name)+"-0")
		kv, err := brokerReads(t, RenderBrokerConfig(kc, zi), false)
		if err != nil {
			t.Fatal(err)
		}
		cfg := server.DefaultConfig()
		unknown, err := server.ApplySettings(&cfg, kv)
		if err != nil {
			t.Fatalf("the broker rejects the operator's config: %v", err)
		}
		for _, k := range unknown {
			if strings.HasPrefix(k, "wal.zonelocal.") {
				t.Errorf("the broker ignores the operator's %s", k)
			}
		}
		w := cfg.Cluster.WAL
		if !w.Enable || !w.ZoneLocalProduce || w.ZoneLocalInline != tc.want || w.ZoneLocalPolicy != "auto" {
			t.Errorf("fallback %v: the broker runs WAL %v, zone-local produce %v, inline fallback %v, policy %q; want true, true, %v, auto", tc.fallback, w.Enable, w.ZoneLocalProduce, w.ZoneLocalInline, w.ZoneLocalPolicy, tc.want)
		}
	}
}

// TestZoneLocalStatus: strata_zonelocal_path and
// strata_zonelocal_partitions_total land in the zone's status: the
// brokers forwarding inline with the reason, the partitions forwarded
// each way; a broker without the gauge (zone-local produce off, or an
// older broker), or whose scrape failed, adds nothing, and a zone
// without any such broker has no zoneLocal at all.
func TestZoneLocalStatus(t *testing.T) {
	metrics := func(path string) string {
		var sb strings.Builder
		sb.WriteString("# TYPE strata_wal_degraded gauge\nstrata_wal_degraded 0\n# TYPE strata_zonelocal_path gauge\n")
		for _, p := range []string{zoneLocalPathBucket, zoneLocalPathInlineCost, zoneLocalPathInlineOutage} {
			v := "0"
			if p == path {
				v = "1"
			}
			sb.WriteString("strata_zonelocal_path{path=\"" + p + "\"} " + v + "\n")
		}
		sb.WriteString(`# TYPE strata_zonelocal_partitions_total counter
strata_zonelocal_partitions_total{role="forwarded"} 120
strata_zonelocal_partitions_total{role="inline"} 7
strata_zonelocal_partitions_total{role="appended"} 300
`)
		return sb.String()
	}
	scrape := func(t *testing.T, id int32, text string) brokerWAL {
		t.Helper()
		bm, err := ParseBrokerMetrics(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return brokerWAL{id: id, metrics: bm}
	}
	older := "# TYPE strata_wal_degraded gauge\nstrata_wal_degraded 0\n"
	// A broker with WAL but not forwarding: its counters may appear (it
	// appends other brokers' objects as leader), the gauge has no series.
	notForwarding := older + "# TYPE strata_zonelocal_partitions_total counter\nstrata_zonelocal_partitions_total{role=\"appended\"} 5\n"
	// Should such a broker export part of the gauge, it is still not
	// forwarding: a forwarding broker exports all three paths.
	partialGauge := notForwarding + "# TYPE strata_zonelocal_path gauge\nstrata_zonelocal_path{path=\"bucket\"} 1\nstrata_zonelocal_path{path=\"other\"} 0\nstrata_zonelocal_path{path=\"inline-cost\"} 0\n"

	bm, err := ParseBrokerMetrics(strings.NewReader(metrics(zoneLocalPathInlineOutage)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (ZoneLocalMetrics{Path: "inline-outage", Forwarded: 120, Inline: 7}); bm.ZoneLocal == nil || *bm.ZoneLocal != want {
		t.Fatalf("parsed %+v, want %+v", bm.ZoneLocal, want)
	}

	tests := []struct {
		name    string
		scrapes func(t *testing.T) []brokerWAL
		want    *strata.ZoneLocalStatus
	}{
		{"older brokers", func(t *testing.T) []brokerWAL { return []brokerWAL{scrape(t, 0, older), scrape(t, 1, older)} }, nil},
		{"zone-local produce off", func(t *testing.T) []brokerWAL { return []brokerWAL{scrape(t, 0, notForwarding)} }, nil},
		{"part of the gauge", func(t *testing.T) []brokerWAL { return []brokerWAL{scrape(t, 0, partialGauge)} }, nil},
		{"no broker scraped", func(*testing.T) []brokerWAL { return nil }, nil},
		{"all through the bucket", func(t *testing.T) []brokerWAL {
			return []brokerWAL{scrape(t, 0, metrics(zoneLocalPathBucket)), scrape(t, 1, metrics(zoneLocalPathBucket))}
		}, &strata.ZoneLocalStatus{Brokers: 2, ForwardedPartitions: 240, InlinePartitions: 14}},
		{"inline by cost and by outage", func(t *testing.T) []brokerWAL {
			failed := scrape(t, 3, metrics(zoneLocalPathInlineOutage))
			failed.err = errNoMetrics
			return []brokerWAL{
				scrape(t, 0, metrics(zoneLocalPathBucket)), scrape(t, 1, metrics(zoneLocalPathInlineCost)),
				scrape(t, 2, metrics(zoneLocalPathInlineOutage)), failed, scrape(t, 4, older),
			}
		}, &strata.ZoneLocalStatus{Brokers: 3, ForwardedPartitions: 360, InlinePartitions: 21, InlineBrokers: []strata.ZoneLocalInline{
			{BrokerID: 1, Reason: strata.ZoneLocalInlineCost}, {BrokerID: 2, Reason: strata.ZoneLocalInlineOutage},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := ZoneWAL(tt.scrapes(t))
			got := st.ZoneLocal
			switch {
			case tt.want == nil && got != nil:
				t.Fatalf("zoneLocal %+v, want none", *got)
			case tt.want == nil:
				return
			case got == nil:
				t.Fatalf("no zoneLocal, want %+v", *tt.want)
			}
			if got.Brokers != tt.want.Brokers || got.ForwardedPartitions != tt.want.ForwardedPartitions ||
				got.InlinePartitions != tt.want.InlinePartitions || !slices.Equal(got.InlineBrokers, tt.want.InlineBrokers) {
				t.Fatalf("zoneLocal %+v, want %+v", *got, *tt.want)
			}
			// Inline forwarding is not the WAL's degradation: the zone's
			// state is the uploaders'.
			if st.State == strata.WALDegraded {
				t.Fatalf("zone state %s from zone-local forwarding", st.State)
			}
		})
	}
}

var errNoMetrics = errors.New("scrape metrics: 503 Service Unavailable")
