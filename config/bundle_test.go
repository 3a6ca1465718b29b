package config

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestBundleIsComplete checks the committed OLM bundle (make bundle): the
// CSV's install strategy carries the operator Deployment and its RBAC for
// the account the Deployment runs as, AllNamespaces is the only install
// mode, and every CRD of config/crd/bases is in the bundle unchanged.
// test/olm runs the operator-framework validators on it.
func TestBundleIsComplete(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "bundle", "manifests", "strata.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatalf("read CSV (run `make bundle`): %v", err)
	}
	csv := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &csv.Object); err != nil {
		t.Fatalf("parse CSV: %v", err)
	}
	deps, _, _ := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", "deployments")
	if len(deps) != 1 {
		t.Fatalf("CSV has %d deployments, want 1", len(deps))
	}
	containers, _, _ := unstructured.NestedSlice(deps[0].(map[string]any), "spec", "template", "spec", "containers")
	if len(containers) != 1 || containers[0].(map[string]any)["image"] == nil {
		t.Fatalf("CSV deployment containers = %v", containers)
	}
	// OLM creates the permissions' ServiceAccount and binds the rules to
	// it; a Deployment running as another account has no rights at all.
	sa, _, _ := unstructured.NestedString(deps[0].(map[string]any), "spec", "template", "spec", "serviceAccountName")
	for _, kind := range []string{"clusterPermissions", "permissions"} {
		perms, _, _ := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", kind)
		if len(perms) != 1 {
			t.Fatalf("CSV %s = %v", kind, perms)
		}
		rules, _, _ := unstructured.NestedSlice(perms[0].(map[string]any), "rules")
		if len(rules) == 0 {
			t.Errorf("CSV %s carry no rules", kind)
		}
		if got, _, _ := unstructured.NestedString(perms[0].(map[string]any), "serviceAccountName"); got != sa {
			t.Errorf("CSV %s go to ServiceAccount %q, the Deployment runs as %q", kind, got, sa)
		}
	}
	// The operator watches every namespace: AllNamespaces is its only mode.
	modes, _, _ := unstructured.NestedSlice(csv.Object, "spec", "installModes")
	for _, m := range modes {
		mm := m.(map[string]any)
		if supported := mm["supported"] == true; supported != (mm["type"] == "AllNamespaces") {
			t.Errorf("CSV install mode %v supported=%v; only AllNamespaces is", mm["type"], supported)
		}
	}
	owned, _, _ := unstructured.NestedSlice(csv.Object, "spec", "customresourcedefinitions", "owned")
	bases, err := filepath.Glob(filepath.Join("crd", "bases", "*.yaml"))
	if err != nil || len(bases) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	if len(owned) != len(bases) {
		t.Errorf("CSV owns %d CRDs, config/crd/bases has %d", len(owned), len(bases))
	}
	for _, base := range bases {
		want := &unstructured.Unstructured{}
		b, _ := os.ReadFile(base)
		if err := yaml.Unmarshal(b, &want.Object); err != nil {
			t.Fatal(err)
		}
		got := &unstructured.Unstructured{}
		b, err := os.ReadFile(filepath.Join("..", "bundle", "manifests", filepath.Base(base)))
		if err != nil {
			t.Errorf("bundle lacks %s (run `make bundle`): %v", filepath.Base(base), err)
			continue
		}
		if err := yaml.Unmarshal(b, &got.Object); err != nil {
			t.Fatal(err)
		}
		wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
		gotSpec, _, _ := unstructured.NestedMap(got.Object, "spec")
		wb, _ := yaml.Marshal(wantSpec)
		gb, _ := yaml.Marshal(gotSpec)
		if string(wb) != string(gb) {
			t.Errorf("bundle CRD %s differs from config/crd/bases (run `make bundle`)", filepath.Base(base))
		}
	}
}
