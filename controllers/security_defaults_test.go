package controllers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/server"
)

// TestLegacySecurityDefaults: a cluster whose brokers run a config of a
// release before secure defaults keeps PLAINTEXT and no authorizer, and
// the operator's own render of that keeps the decision (no flip-flop); a
// new cluster, or one that sets the fields, gets what it says.
func TestLegacySecurityDefaults(t *testing.T) {
	const (
		// What releases before secure defaults rendered for empty
		// spec.listeners (the REPLICATION listener already there).
		earlier = "# header\ninter.broker.listener.name=REPLICATION\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"
		// ...with authorizer.class.name in spec.config.
		earlierACL = "# header\nauthorizer.class.name=strata.acl\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"
		// ...as this release renders a cluster of the first kind: an
		// authorizer open where no ACL is set.
		earlierOpen = "# header\nallow.everyone.if.no.acl.found=true\nauthorizer.class.name=strata.acl\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"
	)
	secured := threeZoneCluster()
	secure := RenderBrokerConfig(secured, ZoneInput{Zone: secured.Spec.Zones[0]})
	explicit := threeZoneCluster()
	explicit.Spec.Listeners = []strata.ListenerSpec{{Name: "CLIENT", Port: 9093, Protocol: "SASL_SSL"}}
	explicit.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationACL}

	for _, tc := range []struct {
		name    string
		kc      *strata.KafkaCluster
		configs []string
		want    SecurityDefaults
	}{
		{"new cluster", threeZoneCluster(), nil, SecurityDefaults{}},
		{"earlier release", threeZoneCluster(), []string{earlier, earlier}, SecurityDefaults{PlaintextListener: true, NoAuthorizer: true}},
		{"earlier release with an authorizer in spec.config", threeZoneCluster(), []string{earlierACL}, SecurityDefaults{PlaintextListener: true}},
		{"earlier release, rendered open since", threeZoneCluster(), []string{earlierOpen, earlier}, SecurityDefaults{PlaintextListener: true, NoAuthorizer: true}},
		{"created secure", threeZoneCluster(), []string{secure}, SecurityDefaults{}},
		{"fields set", explicit, []string{earlier}, SecurityDefaults{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LegacySecurityDefaults(tc.kc, tc.configs); got != tc.want {
				t.Fatalf("LegacySecurityDefaults = %+v, want %+v", got, tc.want)
			}
		})
	}

	// Stable: what the operator renders for a legacy cluster is read as
	// legacy again at the next reconcile.
	kc := threeZoneCluster()
	d := LegacySecurityDefaults(kc, []string{earlier})
	rendered := RenderBrokerConfig(WithSecurityDefaults(kc, d), ZoneInput{Zone: kc.Spec.Zones[0]})
	if again := LegacySecurityDefaults(kc, []string{rendered}); again != d {
		t.Fatalf("re-read %+v, first %+v; rendered:\n%s", again, d, rendered)
	}
	if len(kc.Spec.Listeners) != 0 || kc.Spec.Security.Authorization != nil {
		t.Fatal("WithSecurityDefaults changed its argument")
	}
	// An authorizer on every cluster (issue #26), open where no ACL is
	// set so that the clients keep every right they had.
	for _, line := range []string{"\nauthorizer.class.name=strata.acl\n", "\nallow.everyone.if.no.acl.found=true\n", "\nsuper.users=User:CN=strata-operator,O=strata;User:CN=strata-broker,O=strata\n"} {
		if !strings.Contains(rendered, line) {
			t.Errorf("legacy render lacks %q:\n%s", line, rendered)
		}
	}
}

// TestClientsCAMount: a client listener asking for client certificates
// gets the clients CA's certificate mounted, and only that key of the
// Secret: the CA's private key never reaches a broker pod.
func TestClientsCAMount(t *testing.T) {
	kc := threeZoneCluster()
	zi := zoneInputs(kc, nil)[0]
	hasVolume := func(kc *strata.KafkaCluster) bool {
		for _, v := range BuildZoneStatefulSet(kc, zi, "h").Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == ClientsCASecretName(kc.Name) {
				if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != CACertKey {
					t.Fatalf("clients CA volume projects %v, want ca.crt only", v.Secret.Items)
				}
				return true
			}
		}
		return false
	}
	if hasVolume(kc) {
		t.Fatal("default SASL_SSL listener (no client certificates): clients CA mounted")
	}
	kc.Spec.Listeners = []strata.ListenerSpec{{Name: "MTLS", Port: 9094, Protocol: "SSL", TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequested}}}
	if !hasVolume(kc) {
		t.Fatal("listener with tls.clientAuth: clients CA not mounted")
	}
	kc.Spec.Security.ListenerCertificate = &strata.SecretReference{Name: "public-tls"}
	if hasVolume(kc) {
		t.Fatal("listener certificate with its own ca.crt: clients CA mounted anyway")
	}
}

// TestReservedUserNames are the common names of the certificates the
// cluster CA issues, as the CRD rule lists them.
func TestReservedUserNames(t *testing.T) {
	want := []string{"strata-broker", "strata-operator", "strata-etcd"}
	if len(ReservedUserNames) != len(want) {
		t.Fatalf("ReservedUserNames = %v, want %v (keep the KafkaUser CEL rule in step)", ReservedUserNames, want)
	}
	for i := range want {
		if ReservedUserNames[i] != want[i] {
			t.Fatalf("ReservedUserNames = %v, want %v (keep the KafkaUser CEL rule in step)", ReservedUserNames, want)
		}
	}
}

// TestReauthOnSASLListeners: a cluster with a SASL listener gets
// connections.max.reauth.ms (DefaultConnectionsMaxReauth), which the
// broker reads as its SASL session lifetime; spec.config overrides it
// (0 turns expiry off); a cluster without SASL listeners gets no key.
func TestReauthOnSASLListeners(t *testing.T) {
	brokerReauth := func(t *testing.T, kc *strata.KafkaCluster) (string, time.Duration) {
		t.Helper()
		t.Setenv(EnvPodName, ZoneStatefulSetName(kc.Name, kc.Spec.Zones[0].Name)+"-0")
		path := filepath.Join(t.TempDir(), BrokerConfigFile)
		if err := os.WriteFile(path, []byte(RenderBrokerConfig(kc, ZoneInput{Zone: kc.Spec.Zones[0]})), 0o644); err != nil {
			t.Fatal(err)
		}
		kv, err := server.ReadConfigFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg := server.DefaultConfig()
		if _, err := server.ApplySettings(&cfg, kv); err != nil {
			t.Fatalf("the broker rejects the operator's config: %v", err)
		}
		return kv["connections.max.reauth.ms"], cfg.Security.ReauthMax
	}
	for _, tc := range []struct {
		name      string
		listeners []strata.ListenerSpec
		config    map[string]string
		wantKey   string
		want      time.Duration
	}{
		{"default SASL_SSL listener", nil, nil, "3600000", time.Hour},
		{"SASL_PLAINTEXT", []strata.ListenerSpec{{Name: "SASL", Port: 9093, Protocol: "SASL_PLAINTEXT"}}, nil, "3600000", time.Hour},
		{"SSL and SASL_SSL", []strata.ListenerSpec{{Name: "TLS", Port: 9093, Protocol: "SSL"}, {Name: "SASL", Port: 9094, Protocol: "SASL_SSL"}}, nil, "3600000", time.Hour},
		{"spec.config overrides", nil, map[string]string{"connections.max.reauth.ms": "600000"}, "600000", 10 * time.Minute},
		{"spec.config turns it off", nil, map[string]string{"connections.max.reauth.ms": "0"}, "0", 0},
		{"no SASL listener", []strata.ListenerSpec{{Name: "TLS", Port: 9093, Protocol: "SSL"}}, nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := threeZoneCluster()
			kc.Spec.Listeners = tc.listeners
			kc.Spec.Config = tc.config
			key, got := brokerReauth(t, kc)
			if key != tc.wantKey || got != tc.want {
				t.Errorf("connections.max.reauth.ms=%q, broker session lifetime %v; want %q, %v", key, got, tc.wantKey, tc.want)
			}
		})
	}
}
