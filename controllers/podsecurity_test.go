package controllers

import (
	"strings"
	"testing"

	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestPodsMeetRestrictedPodSecurity evaluates the pod templates the operator
// renders (every zone's brokers, the managed etcd) with the Pod Security
// Standards evaluator kube-apiserver's PodSecurity admission uses, at level
// restricted. A namespace labelled pod-security.kubernetes.io/enforce=restricted
// (as the operator's own is) otherwise rejects the StatefulSets' pods; the
// e2e cluster's API server answered a pod with the broker's former security
// context with `violates PodSecurity "restricted:latest": seccompProfile
// (pod or container "broker" must set securityContext.seccompProfile.type
// to "RuntimeDefault" or "Localhost")`.
func TestPodsMeetRestrictedPodSecurity(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	kc := threeZoneCluster()
	for i, z := range kc.Spec.Zones {
		sts := BuildZoneStatefulSet(kc, ZoneInput{Zone: z, IDBase: int32(i) * 100}, "h")
		t.Run("brokers-"+z.Name, func(t *testing.T) {
			r := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &sts.Spec.Template.ObjectMeta, &sts.Spec.Template.Spec))
			if !r.Allowed {
				t.Errorf("broker pod of zone %s violates restricted: %s", z.Name, reasons(r))
			}
		})
	}
	etcd := BuildEtcd(kc)
	if etcd == nil {
		t.Fatal("threeZoneCluster renders no managed etcd")
	}
	t.Run("etcd", func(t *testing.T) {
		tpl := etcd.StatefulSet.Spec.Template
		r := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &tpl.ObjectMeta, &tpl.Spec))
		if !r.Allowed {
			t.Errorf("etcd pod violates restricted: %s", reasons(r))
		}
	})
}

func reasons(r policy.AggregateCheckResult) string {
	var out []string
	for i, reason := range r.ForbiddenReasons {
		out = append(out, reason+" ("+r.ForbiddenDetails[i]+")")
	}
	return strings.Join(out, "; ")
}
