package argocd

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func cond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "observedGeneration": int64(2)}
}

func object(observed any, conds ...map[string]any) map[string]any {
	status := map[string]any{}
	if observed != nil {
		status["observedGeneration"] = observed
	}
	var list []any
	for _, c := range conds {
		list = append(list, c)
	}
	if list != nil {
		status["conditions"] = list
	}
	return map[string]any{
		"apiVersion": "kafka.strata.dev/v1alpha1", "kind": "KafkaCluster",
		"metadata": map[string]any{"name": "demo", "generation": int64(2)},
		"status":   status,
	}
}

// rebalance is a KafkaRebalance in state with conds.
func rebalance(state string, conds ...map[string]any) map[string]any {
	obj := object(int64(2), conds...)
	obj["kind"] = "KafkaRebalance"
	obj["status"].(map[string]any)["state"] = state
	return obj
}

func TestHealth(t *testing.T) {
	notStalled := cond("Stalled", "False", "Progressing", "")
	tests := []struct {
		name        string
		obj         map[string]any
		wantStatus  string
		wantMessage string
	}{
		{"no status yet", map[string]any{"metadata": map[string]any{"generation": int64(1)}}, Progressing, "Waiting for the Strata operator to report status"},
		{"status without observedGeneration", object(nil, cond("Ready", "True", "BrokersReady", "")), Progressing, "observe generation 2"},
		{"older generation observed", object(int64(1), cond("Ready", "True", "BrokersReady", "3/3")), Progressing, "observe generation 2"},
		{"rolling", object(int64(2), cond("Ready", "True", "BrokersReady", "3/3"), cond("Reconciling", "True", "RollingOut", "StatefulSets are rolling out"), notStalled),
			Progressing, "RollingOut: StatefulSets are rolling out"},
		{"stalled on a missing bucket", object(int64(2), cond("Ready", "False", "FastBucketNotFound", "x"), cond("Reconciling", "False", "FastBucketNotFound", "x"),
			cond("Stalled", "True", "FastBucketNotFound", `zone a: FastBucket "wal-a" not found`)),
			Degraded, `FastBucketNotFound: zone a: FastBucket "wal-a" not found`},
		{"healthy", object(int64(2), cond("Ready", "True", "BrokersReady", "3/3 brokers ready"), cond("Reconciling", "False", "UpToDate", ""), notStalled),
			Healthy, "BrokersReady: 3/3 brokers ready"},
		{"settled but not ready", object(int64(2), cond("Ready", "False", "OfflinePartitions", "2 partitions offline"), cond("Reconciling", "False", "UpToDate", ""), notStalled),
			Degraded, "OfflinePartitions: 2 partitions offline"},
		{"no conditions of its own yet", object(int64(2)), Progressing, "report status"},
		{"paused", object(int64(1), cond("ReconciliationPaused", "True", "ReconciliationPaused", "kafka.strata.dev/pause-reconciliation is \"true\""),
			cond("Reconciling", "False", "ReconciliationPaused", ""), notStalled), Suspended, "ReconciliationPaused: kafka.strata.dev/pause-reconciliation"},
		{"draining", object(int64(2), cond("Ready", "True", "ClusterHealthy", ""), cond("Reconciling", "True", "Draining", "scale-down: draining broker 1"), notStalled),
			Progressing, "Draining: scale-down: draining broker 1"},
		// KafkaRebalance: a proposal waiting for approval is a decision
		// left to a person, not a failure.
		{"rebalance proposal waits for approval", rebalance("ProposalReady", cond("Ready", "False", "ProposalReady", "12 moves, 3 GiB, $0.06"),
			cond("Reconciling", "False", "ProposalReady", ""), notStalled), Suspended, "waiting for approval (annotate kafka.strata.dev/rebalance=approve); 12 moves, 3 GiB, $0.06"},
		{"rebalance stopped", rebalance("Stopped", cond("Ready", "False", "RebalanceStopped", "stopped"), cond("Reconciling", "False", "RebalanceStopped", ""), notStalled),
			Suspended, "refresh"},
		{"rebalance computing its proposal", rebalance("PendingProposal", cond("Ready", "False", "ProposalPending", ""), cond("Reconciling", "True", "ProposalPending", "computing"), notStalled),
			Progressing, "ProposalPending"},
		{"rebalance running", rebalance("Rebalancing", cond("Ready", "False", "Rebalancing", ""), cond("Reconciling", "True", "Rebalancing", "4 of 12 moves done"), notStalled),
			Progressing, "Rebalancing: 4 of 12 moves done"},
		{"rebalance stalled", rebalance("Rebalancing", cond("Ready", "False", "MovesStalled", ""), cond("Reconciling", "False", "MovesStalled", ""),
			cond("Stalled", "True", "MovesStalled", "no progress for 10m")), Degraded, "MovesStalled: no progress for 10m"},
		{"rebalance refused", rebalance("NotReady", cond("Ready", "False", "RebalanceRefused", "broker 7 is not registered"), cond("Reconciling", "False", "RebalanceRefused", ""),
			cond("Stalled", "True", "RebalanceRefused", "broker 7 is not registered")), Degraded, "RebalanceRefused"},
		{"rebalance done", rebalance("Ready", cond("Ready", "True", "RebalanceDone", "12 moves made"), cond("Reconciling", "False", "RebalanceDone", ""), notStalled),
			Healthy, "RebalanceDone: 12 moves made"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Health(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.wantStatus || !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("Health = %+v, want status %s with message containing %q", got, tt.wantStatus, tt.wantMessage)
			}
		})
	}
}

// TestConfigMapSnippet keeps argocd-cm.yaml installing health.lua, as it
// is, for every kind.
func TestConfigMapSnippet(t *testing.T) {
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(ConfigMapSnippet), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Kind != "ConfigMap" || cm.Name != "argocd-cm" {
		t.Fatalf("argocd-cm.yaml is a %s named %q, want the ConfigMap argocd-cm", cm.Kind, cm.Name)
	}
	if len(cm.Data) != len(Kinds) {
		t.Errorf("argocd-cm.yaml has %d keys, want one per kind %v", len(cm.Data), Kinds)
	}
	for _, kind := range Kinds {
		if got := cm.Data[ConfigMapKey(kind)]; got != HealthLua {
			t.Errorf("argocd-cm.yaml key %s is not health.lua verbatim", ConfigMapKey(kind))
		}
	}
}
