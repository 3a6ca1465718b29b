package cmd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/controllers"
)

// TestOperatorNamespace: the flag wins, then $POD_NAMESPACE; outside a
// pod the default install's namespace.
func TestOperatorNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "from-env")
	if got := operatorNamespace("from-flag"); got != "from-flag" {
		t.Errorf("flag: %q", got)
	}
	if got := operatorNamespace(""); got != "from-env" {
		t.Errorf("env: %q", got)
	}
	t.Setenv("POD_NAMESPACE", "")
	if _, err := os.Stat(serviceAccountNamespaceFile); err == nil {
		t.Skip("running in a pod: the service account's namespace is the answer")
	}
	if got := operatorNamespace(""); got != controllers.DefaultOperatorNamespace {
		t.Errorf("default: %q", got)
	}
}

// TestManagerSetsPodNamespace: the operator's Deployment gives it
// POD_NAMESPACE from the downward API, so the NetworkPolicies admit it
// from the namespace it is installed in, whatever that is.
func TestManagerSetsPodNamespace(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	for _, doc := range docs {
		if !strings.Contains(doc, "kind: Deployment") {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
				return
			}
		}
		t.Fatalf("operator container env %+v: no POD_NAMESPACE from metadata.namespace", d.Spec.Template.Spec.Containers[0].Env)
	}
	t.Fatal("no Deployment in config/manager/manager.yaml")
}

// TestWatchedNamespaces: --watch-namespaces and --namespace together,
// blanks and repeats dropped; none means every namespace.
func TestWatchedNamespaces(t *testing.T) {
	for _, tc := range []struct {
		list []string
		one  string
		want []string
	}{
		{nil, "", nil},
		{nil, "kafka", []string{"kafka"}},
		{[]string{"a", " b", "", "a"}, "", []string{"a", "b"}},
		{[]string{"a"}, "c", []string{"a", "c"}},
	} {
		o := &operatorOptions{watchNamespaces: tc.list, watchNamespace: tc.one}
		if got := o.watched(); !slices.Equal(got, tc.want) {
			t.Errorf("%v + %q: %v, want %v", tc.list, tc.one, got, tc.want)
		}
	}
}
