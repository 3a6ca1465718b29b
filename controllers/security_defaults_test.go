package controllers

import (
	"testing"

	strata "github.com/strata-dev/strata/api/v1alpha1"
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
}
