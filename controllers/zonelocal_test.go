package controllers

import (
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

// pendingBrokerKeys are keys the operator renders that the broker of this
// tree does not parse yet, because the change that adds them to
// broker/server ApplySettings is landing separately.
// TestZoneLocalProduceRoundTrip fails once the broker knows one of them,
// so the entry is removed and the key checked like every other.
var pendingBrokerKeys = []string{"wal.zonelocal.produce.policy"}

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
		for _, k := range pendingBrokerKeys {
			if !slices.Contains(unknown, k) {
				t.Errorf("the broker parses %s now: remove it from pendingBrokerKeys and check its value here", k)
			}
		}
		for _, k := range unknown {
			if strings.HasPrefix(k, "wal.zonelocal.") && !slices.Contains(pendingBrokerKeys, k) {
				t.Errorf("the broker ignores the operator's %s", k)
			}
		}
		w := cfg.Cluster.WAL
		if !w.Enable || !w.ZoneLocalProduce || w.ZoneLocalInline != tc.want {
			t.Errorf("fallback %v: the broker runs WAL %v, zone-local produce %v, inline fallback %v; want true, true, %v", tc.fallback, w.Enable, w.ZoneLocalProduce, w.ZoneLocalInline, tc.want)
		}
	}
}
