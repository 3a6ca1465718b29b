package olm

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	"sigs.k8s.io/yaml"
)

// bundleDir is the repository's bundle/ (manifests/ and metadata/).
var bundleDir = filepath.Join("..", "..", "bundle")

// TestBundleValidates runs the validators of `operator-sdk bundle
// validate` (CSV, CRDs, bundle: owned CRDs present, versions served,
// install strategy, install modes, ...) on the committed bundle. Errors
// fail; warnings are logged.
func TestBundleValidates(t *testing.T) {
	bundle, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatalf("load bundle %s (run `make bundle`): %v", bundleDir, err)
	}
	if bundle.CSV == nil || len(bundle.V1CRDs) != 5 {
		t.Fatalf("bundle has CSV %v and %d CRDs, want a CSV and 5 CRDs (FastBucket, KafkaCluster, KafkaRebalance, KafkaTopic, KafkaUser)", bundle.CSV != nil, len(bundle.V1CRDs))
	}
	results := validation.DefaultBundleValidators.Validate(bundle.ObjectsToValidate()...)
	checked := 0
	for _, r := range results {
		checked++
		for _, w := range r.Warnings {
			t.Logf("warning: %s: %v", r.Name, w)
		}
		for _, e := range r.Errors {
			t.Errorf("%s: %v", r.Name, e)
		}
	}
	if checked == 0 {
		t.Fatal("the validators returned no result at all")
	}
}

// TestValidatorsCatchABrokenBundle makes sure the validators run on what
// the test thinks they run on: the committed bundle without one of its
// CRDs must fail (the CSV owns a CRD the bundle lacks).
func TestValidatorsCatchABrokenBundle(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"manifests", "metadata"} {
		if err := os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join(bundleDir, sub))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "manifests", "kafka.strata.dev_kafkatopics.yaml")); err != nil {
		t.Fatal(err)
	}
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, r := range validation.DefaultBundleValidators.Validate(bundle.ObjectsToValidate()...) {
		for _, e := range r.Errors {
			errs = append(errs, e.Error())
		}
	}
	if len(errs) == 0 {
		t.Fatal("a bundle missing an owned CRD passed validation")
	}
	t.Logf("as expected: %v", errs)
}

// TestCSVInstall checks what OLM does with the CSV that the validators do
// not: the operator's Deployment runs as the ServiceAccount the CSV grants
// its permissions to (OLM creates that account and binds the rules to it;
// a Deployment on any other account runs without them), and the install
// modes say what the operator does: it watches every namespace, so
// AllNamespaces is the only mode it supports.
func TestCSVInstall(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(bundleDir, "manifests", "strata.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var csv operatorsv1alpha1.ClusterServiceVersion
	if err := yaml.UnmarshalStrict(data, &csv); err != nil {
		t.Fatalf("parse CSV: %v", err)
	}
	spec := csv.Spec.InstallStrategy.StrategySpec
	if len(spec.DeploymentSpecs) != 1 {
		t.Fatalf("CSV installs %d Deployments, want 1", len(spec.DeploymentSpecs))
	}
	var granted []string
	for _, p := range append(append([]operatorsv1alpha1.StrategyDeploymentPermissions{}, spec.Permissions...), spec.ClusterPermissions...) {
		if len(p.Rules) == 0 {
			t.Errorf("permissions for %s carry no rules", p.ServiceAccountName)
		}
		granted = append(granted, p.ServiceAccountName)
	}
	if len(spec.ClusterPermissions) == 0 || len(spec.Permissions) == 0 {
		t.Fatalf("CSV grants cluster permissions to %d and namespace permissions to %d accounts, want both", len(spec.ClusterPermissions), len(spec.Permissions))
	}
	for _, d := range spec.DeploymentSpecs {
		sa := d.Spec.Template.Spec.ServiceAccountName
		for _, p := range append(append([]operatorsv1alpha1.StrategyDeploymentPermissions{}, spec.Permissions...), spec.ClusterPermissions...) {
			if p.ServiceAccountName != sa {
				t.Errorf("Deployment %s runs as ServiceAccount %q, but the CSV grants rules to %q", d.Name, sa, p.ServiceAccountName)
			}
		}
		if sa == "" || !slices.Contains(granted, sa) {
			t.Errorf("Deployment %s runs as ServiceAccount %q, which the CSV grants nothing", d.Name, sa)
		}
	}
	supported := map[operatorsv1alpha1.InstallModeType]bool{}
	for _, m := range csv.Spec.InstallModes {
		supported[m.Type] = m.Supported
	}
	want := map[operatorsv1alpha1.InstallModeType]bool{
		operatorsv1alpha1.InstallModeTypeOwnNamespace:    false,
		operatorsv1alpha1.InstallModeTypeSingleNamespace: false,
		operatorsv1alpha1.InstallModeTypeMultiNamespace:  false,
		operatorsv1alpha1.InstallModeTypeAllNamespaces:   true,
	}
	for mode, w := range want {
		if got, listed := supported[mode]; !listed || got != w {
			t.Errorf("install mode %s: supported=%v (listed %v), want %v: the operator always watches all namespaces", mode, got, listed, w)
		}
	}
}
