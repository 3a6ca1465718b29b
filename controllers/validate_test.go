package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// renderedKeys returns the keys of a rendered broker.properties.
func renderedKeys(t *testing.T, props string) []string {
	t.Helper()
	var keys []string
	for _, l := range strings.Split(props, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("line %q is not key=value", l)
		}
		keys = append(keys, k)
	}
	return keys
}

// TestOwnedConfigKeysCoverRender: every key the operator renders from a
// field is one spec.config may not set, so a user cannot override what
// another field says. The cluster sets every field that renders keys
// (tiered storage, leader placement zones, the zone map).
func TestOwnedConfigKeysCoverRender(t *testing.T) {
	kc := threeZoneCluster()
	kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone, Zone: "zone-a"}
	kc.Spec.WAL.MaxLatency = &metav1.Duration{Duration: 100 * time.Millisecond}
	kc.Spec.WAL.MaxCostPercent = ptr.To[int32](100)
	kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true}
	for _, zi := range zoneInputs(kc, nil) {
		keys := renderedKeys(t, RenderBrokerConfig(kc, zi))
		if len(keys) < 40 {
			t.Fatalf("only %d keys rendered", len(keys))
		}
		for _, k := range keys {
			if _, ok := ConfigKeyOwner(k); !ok && !OverridableDefaultKeys[k] {
				t.Errorf("zone %s: the operator renders %s but spec.config may set it", zi.Zone.Name, k)
			}
		}
	}
	// The broker's aliases of rendered keys (broker/server ApplySettings).
	for _, k := range []string{"broker.id", "node.id", "listen", "advertised.address", "log.dir", "data.dir", "wal.enabled"} {
		if _, ok := ConfigKeyOwner(k); !ok {
			t.Errorf("alias %s may be set in spec.config", k)
		}
	}
	// wal.zonelocal.* tuning keys that no field renders stay the user's.
	for _, k := range []string{"num.partitions", "min.insync.replicas", "auto.leader.rebalance.enable", "broker.session.timeout.ms", "wal", "tier", "connections.max.reauth.ms", "wal.zonelocal.put.concurrency"} {
		if owner, ok := ConfigKeyOwner(k); ok {
			t.Errorf("%s is a user setting, not owned by %s", k, owner)
		}
	}
}

func TestUnsupportedSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*strata.KafkaCluster)
		want   string // substring of the problems; "" for none
	}{
		{"supported", func(*strata.KafkaCluster) {}, ""},
		{"user config", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"num.partitions": "6"} }, ""},
		{"owned key", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"wal.retention.ms": "1000"} },
			"spec.config must not set wal.retention.ms: it is owned by spec.wal.retention"},
		{"owned prefix", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"wal.zone.x.bucket.name": "b"} },
			"spec.config must not set wal.zone.x.bucket.name: it is owned by spec.zones[].fastBucketRef"},
		{"tiered storage", func(kc *strata.KafkaCluster) {
			kc.Spec.TieredStorage = &strata.TieredStorageSpec{Bucket: "tier", Region: "r"}
		}, ""},
		{"tier key in spec.config", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"remote.log.manager.task.interval.ms": "1000"}
		},
			"spec.config must not set remote.log.manager.task.interval.ms: it is owned by spec.tieredStorage"},
		{"secured listeners", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "PLAIN", Port: 9092}, {Name: "TLS", Port: 9093, Protocol: "SSL",
				TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequired}}, {Name: "SASL", Port: 9094, Protocol: "SASL_SSL"}}
			kc.Spec.Security.ListenerCertificate = &strata.SecretReference{Name: "tls"}
		}, ""},
		{"listener named REPLICATION", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "REPLICATION", Port: 9092}}
		}, "listener REPLICATION: the name REPLICATION and the ports 9091 and 9644 are the operator's"},
		{"listener on 9091", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "A", Port: 9091}}
		}, "listener A: the name REPLICATION and the ports 9091 and 9644 are the operator's"},
		{"tls on a plaintext listener", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "A", Port: 9092, Protocol: "SASL_PLAINTEXT", TLS: &strata.ListenerTLS{}}}
		}, "listener A: tls applies to protocol SSL or SASL_SSL only"},
		{"listener certificate without a TLS listener", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "A", Port: 9092, Protocol: "PLAINTEXT"}}
			kc.Spec.Security.ListenerCertificate = &strata.SecretReference{Name: "tls"}
		}, "security.listenerCertificate needs a listener of protocol SSL or SASL_SSL to serve it"},
		{"ssl key", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"ssl.client.auth": "required"} },
			"spec.config must not set ssl.client.auth: it is owned by spec.listeners[].tls and spec.security"},
		{"sasl key", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"sasl.enabled.mechanisms": "PLAIN"} },
			"spec.config must not set sasl.enabled.mechanisms: it is owned by the KafkaUser resource"},
		{"listener.name key", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"listener.name.plaintext.ssl.key.location": "/k"}
		}, "spec.config must not set listener.name.plaintext.ssl.key.location: it is owned by spec.listeners"},
		{"inter-broker keys", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"inter.broker.sasl.username": "x", "security.inter.broker.protocol": "SSL"}
		}, "spec.config must not set inter.broker.sasl.username: it is owned by the operator (inter-broker listener REPLICATION, mTLS); spec.config must not set security.inter.broker.protocol: it is owned by the operator (inter-broker listener REPLICATION, mTLS)"},
		{"zone leaders", func(kc *strata.KafkaCluster) {
			kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone, Zone: "zone-a"}
		}, ""},
		{"zone leaders without a zone", func(kc *strata.KafkaCluster) {
			kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone}
		}, "leaderPlacement.policy Zone needs leaderPlacement.zone"},
		{"zone without policy Zone", func(kc *strata.KafkaCluster) {
			kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementBalanced, Zone: "zone-a"}
		}, "leaderPlacement.zone needs leaderPlacement.policy Zone"},
		{"leader zone not in spec.zones", func(kc *strata.KafkaCluster) {
			kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone, Zone: "nowhere"}
		}, "leaderPlacement.zone must name a zone listed in spec.zones"},
		{"retention beyond int32 ms", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.Retention = &metav1.Duration{Duration: 600 * time.Hour}
		}, "wal.retention 600h0m0s is outside 1ms..2147483647ms"},
		{"listener certificate on the default SASL_SSL listener", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = nil
			kc.Spec.Security.ListenerCertificate = &strata.SecretReference{Name: "tls"}
		}, ""},
		{"retention at the int32 limit", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.Retention = &metav1.Duration{Duration: MaxBrokerMillis * time.Millisecond}
		}, ""},
		// Zone-local produce: spec.config was the only way before
		// spec.wal.zoneLocalProduce, so a stored cluster keeps those keys
		// working, but not beside the field.
		{"zone-local produce", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, InlineFallback: &metav1.Duration{}}
		}, ""},
		{"zone-local produce through spec.config, stored before the field", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"wal.zonelocal.produce.enable": "true", "wal.zonelocal.produce.inline.ms": "0"}
		}, ""},
		{"zone-local produce in spec.config and spec.wal.zoneLocalProduce", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{}
			kc.Spec.Config = map[string]string{"wal.zonelocal.produce.enable": "true"}
		}, "spec.config sets wal.zonelocal.produce.enable and spec.wal.zoneLocalProduce is set"},
		{"zone-local policy in spec.config", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"wal.zonelocal.produce.policy": "auto"}
		}, "spec.config must not set wal.zonelocal.produce.policy: it is owned by spec.wal.zoneLocalProduce.policy"},
		{"zone-local produce without WAL", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.Enabled = ptr.To(false)
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true}
		}, "wal.zoneLocalProduce.enabled needs wal.enabled"},
		{"zone-local inline fallback over an hour", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{InlineFallback: &metav1.Duration{Duration: time.Hour + time.Millisecond}}
		}, "wal.zoneLocalProduce.inlineFallback 1h0m0.001s is neither 0s nor within 1ms..1h"},
		{"zone-local inline fallback under a millisecond", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{InlineFallback: &metav1.Duration{Duration: 500 * time.Microsecond}}
		}, "wal.zoneLocalProduce.inlineFallback 500µs is neither 0s nor within 1ms..1h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := threeZoneCluster()
			kc.Spec.TieredStorage = nil
			tt.mutate(kc)
			got := strings.Join(UnsupportedSpec(kc), "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("UnsupportedSpec = %q, want %q", got, tt.want)
			}
		})
	}
}
