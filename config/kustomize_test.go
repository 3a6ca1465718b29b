package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// build runs `$STRATA_KUSTOMIZE build dir` and decodes the objects.
func build(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin := os.Getenv("STRATA_KUSTOMIZE")
	if bin == "" {
		t.Fatal("STRATA_KUSTOMIZE is not set: run `make test` (or `make test-deps`) to build kustomize")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("STRATA_KUSTOMIZE=%s: %v: run `make test` (or `make test-deps`) to build kustomize", bin, err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "build", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode kustomize output of %s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

func index(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()+"/"+o.GetName()] = o
	}
	return m
}

func TestDefaultRenders(t *testing.T) {
	objs := index(build(t, "default"))

	for _, crd := range []string{"kafkaclusters.kafka.strata.dev", "fastbuckets.kafka.strata.dev", "kafkatopics.kafka.strata.dev", "kafkausers.kafka.strata.dev"} {
		if objs["CustomResourceDefinition/"+crd] == nil {
			t.Errorf("CRD %s missing", crd)
		}
	}
	ns := objs["Namespace/strata-system"]
	if ns == nil {
		t.Fatal("Namespace strata-system missing")
	}

	dep := objs["Deployment/strata-operator"]
	if dep == nil {
		t.Fatalf("Deployment strata-operator missing; have %v", keys(objs))
	}
	if dep.GetNamespace() != "strata-system" {
		t.Errorf("Deployment namespace = %q", dep.GetNamespace())
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("Deployment has %d containers", len(containers))
	}
	c := containers[0].(map[string]any)
	if c["image"] != "ghcr.io/strata-dev/strata:latest" {
		t.Errorf("operator image = %v", c["image"])
	}
	cmd, _, _ := unstructured.NestedStringSlice(c, "command")
	if len(cmd) != 2 || cmd[0] != "/strata" || cmd[1] != "operator" {
		t.Errorf("operator command = %v, want [/strata operator]", cmd)
	}
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	if objs["ServiceAccount/"+sa] == nil {
		t.Errorf("Deployment runs as ServiceAccount %q, which is not rendered", sa)
	}

	role := objs["ClusterRole/strata-operator"]
	if role == nil {
		t.Fatalf("ClusterRole strata-operator missing; have %v", keys(objs))
	}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	granted := map[string]bool{}
	for _, r := range rules {
		rm := r.(map[string]any)
		res, _, _ := unstructured.NestedStringSlice(rm, "resources")
		for _, x := range res {
			granted[x] = true
		}
	}
	for _, want := range []string{"kafkaclusters", "kafkaclusters/status", "fastbuckets/status", "statefulsets", "configmaps", "services", "poddisruptionbudgets", "secrets", "events"} {
		if !granted[want] {
			t.Errorf("ClusterRole strata-operator does not cover %s", want)
		}
	}

	// Bindings must point at what was rendered, after the name prefix.
	for key, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		refKind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		refName, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if objs[refKind+"/"+refName] == nil {
			t.Errorf("%s refers to %s %s, which is not rendered", key, refKind, refName)
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			sm := s.(map[string]any)
			if sm["kind"] == "ServiceAccount" && (objs["ServiceAccount/"+sm["name"].(string)] == nil || sm["namespace"] != "strata-system") {
				t.Errorf("%s binds ServiceAccount %v/%v, which is not rendered", key, sm["namespace"], sm["name"])
			}
		}
	}
}

func TestSamplesRender(t *testing.T) {
	objs := build(t, "samples")
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	if kinds["KafkaCluster"] != 1 || kinds["FastBucket"] != 3 || kinds["KafkaTopic"] != 1 || kinds["KafkaUser"] != 2 || kinds["KafkaRebalance"] != 1 {
		t.Fatalf("samples render %v, want 1 KafkaCluster, 3 FastBuckets, 1 KafkaTopic, 2 KafkaUsers (SCRAM and TLS), 1 KafkaRebalance", kinds)
	}
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
