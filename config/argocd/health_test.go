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
