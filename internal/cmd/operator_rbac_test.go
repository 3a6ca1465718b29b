package cmd

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestLeaderElectionRoleAllowsItsEvents: the operator's leader election
// (client-go leaderelection under controller-runtime) records "became
// leader" as a core/v1 Event in the operator's namespace. The e2e cluster
// showed it refused ("events is forbidden ... in API group \"\"") with a
// Role that granted only events.k8s.io.
func TestLeaderElectionRoleAllowsItsEvents(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "leader_election_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(b, &role); err != nil {
		t.Fatal(err)
	}
	allows := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct{ group, resource, verb string }{
		{"coordination.k8s.io", "leases", "create"},
		{"coordination.k8s.io", "leases", "update"},
		{"", "events", "create"},
		{"", "events", "patch"},
	} {
		if !allows(c.group, c.resource, c.verb) {
			t.Errorf("leader election Role does not allow %s on %q %s", c.verb, c.group, c.resource)
		}
	}
}
