package controllers

import (
	"slices"
	"strings"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Secure by default: a KafkaCluster that sets neither spec.listeners nor
// spec.security.authorization gets a SASL_SSL client listener and Kafka
// ACLs enforced, with the operator's and the brokers' certificate
// principals as super users. Operator releases before this rendered one
// PLAINTEXT listener and no authorizer for the same spec; turning either
// on under a running cluster would cut off every client it has (a
// PLAINTEXT client cannot speak SASL_SSL, an anonymous one has no ACLs).
// So the defaults of a cluster are decided from what its brokers already
// run (LegacySecurityDefaults), as UpgradingInterBroker decides the
// inter-broker listener: a new cluster gets the secure defaults, an
// existing one keeps what it had until the user sets the fields.
//
// The defaults are not CRD defaults on purpose: the API server applies a
// CRD default also when it reads an object stored before the default
// existed, so an upgraded CRD would have switched every existing cluster
// with empty listeners to SASL_SSL, silently.

// SecurityDefaults says which of the pre-secure defaults a cluster keeps.
type SecurityDefaults struct {
	// PlaintextListener: spec.listeners is empty and the brokers run the
	// old default PLAINTEXT listener on 9092.
	PlaintextListener bool
	// NoAuthorizer: spec.security.authorization is unset and the brokers
	// ran without an authorizer (or run the open one this keeps them on):
	// they get an authorizer that allows every principal where no ACL is
	// set (allow.everyone.if.no.acl.found=true), so their clients keep
	// every right while ACLs, super users and the ACL APIs work.
	NoAuthorizer bool
}

// Any reports whether a legacy default is kept.
func (d SecurityDefaults) Any() bool { return d.PlaintextListener || d.NoAuthorizer }

// LegacySecurityDefaults decides the defaults of kc from the zones'
// stored broker configs (none for a new cluster: the secure defaults).
// A config rendered from empty listeners by an earlier release names the
// listener PLAINTEXT://0.0.0.0:9092; one rendered without authorizer has
// no authorizer.class.name line, and what the operator renders for it
// since has allow.everyone.if.no.acl.found=true (a cluster created with
// the secure defaults has false). Both stay so in what this function
// makes the operator render, so the decision is stable across
// reconciles; setting the fields ends it.
func LegacySecurityDefaults(kc *strata.KafkaCluster, configs []string) SecurityDefaults {
	var d SecurityDefaults
	if len(configs) == 0 {
		return d
	}
	if len(kc.Spec.Listeners) == 0 {
		d.PlaintextListener = slices.ContainsFunc(configs, func(c string) bool {
			return strings.Contains(c, "\nlisteners=PLAINTEXT://0.0.0.0:9092")
		})
	}
	if kc.Spec.Security.Authorization == nil {
		d.NoAuthorizer = !slices.ContainsFunc(configs, func(c string) bool {
			return strings.Contains(c, "\nauthorizer.class.name=") && !strings.Contains(c, "\nallow.everyone.if.no.acl.found=true")
		})
	}
	return d
}

// WithSecurityDefaults is kc with the legacy defaults d written into its
// spec (a copy; kc is not changed), for the builders to render.
func WithSecurityDefaults(kc *strata.KafkaCluster, d SecurityDefaults) *strata.KafkaCluster {
	if !d.Any() {
		return kc
	}
	out := kc.DeepCopy()
	if d.PlaintextListener {
		out.Spec.Listeners = slices.Clone(legacyDefaultListeners)
	}
	if d.NoAuthorizer {
		// An authorizer on every cluster, this one included: open where
		// no ACL is set, as its clients had it without one.
		out.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationACL, AllowEveryoneIfNoACLFound: true}
	}
	return out
}

// AuthorizationEnabled reports whether the brokers of kc enforce ACLs:
// spec.security.authorization.type acl, or unset.
func AuthorizationEnabled(kc *strata.KafkaCluster) bool {
	a := kc.Spec.Security.Authorization
	return a == nil || a.Type != strata.AuthorizationNone
}

// SuperUsers are the super.users of kc's brokers: the principals of the
// brokers' and the operator's certificates (the cluster CA's subjects
// under the DEFAULT principal mapping), then spec's superUsers.
func SuperUsers(kc *strata.KafkaCluster) []string {
	out := []string{"User:" + OperatorCertSubject.String(), "User:" + BrokerCertSubject.String()}
	if a := kc.Spec.Security.Authorization; a != nil {
		for _, u := range a.SuperUsers {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// renderAuthorization writes the authorizer keys. The operator needs
// ALTER and DESCRIBE on the cluster (users, ACLs, topics, reassignments)
// and the brokers CLUSTER_ACTION (replica fetches): both are super users.
func renderAuthorization(kc *strata.KafkaCluster, kv map[string]string) {
	if !AuthorizationEnabled(kc) {
		return
	}
	kv["authorizer.class.name"] = "strata.acl"
	kv["super.users"] = strings.Join(SuperUsers(kc), ";")
	kv["allow.everyone.if.no.acl.found"] = "false"
	if a := kc.Spec.Security.Authorization; a != nil && a.AllowEveryoneIfNoACLFound {
		kv["allow.everyone.if.no.acl.found"] = "true"
	}
}
