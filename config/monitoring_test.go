package config

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// TestMonitoringRenders checks the monitoring component: off in
// config/default, and in config/monitoring every object present and wired
// to what the operator and its broker pods really carry.
func TestMonitoringRenders(t *testing.T) {
	for _, o := range build(t, "default") {
		if strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") || o.GetLabels()["grafana_dashboard"] != "" {
			t.Errorf("config/default renders %s %s: monitoring must be off by default", o.GetKind(), o.GetName())
		}
	}

	objs := index(build(t, "monitoring"))
	for _, k := range []string{"Deployment/strata-operator", "PodMonitor/strata-brokers", "ServiceMonitor/strata-operator",
		"Service/strata-operator-metrics", "PrometheusRule/strata-rules", "ConfigMap/strata-dashboard-cluster", "ConfigMap/strata-dashboard-operator"} {
		if objs[k] == nil {
			t.Fatalf("config/monitoring does not render %s; have %v", k, keys(objs))
		}
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") && ns != "strata-system" {
			t.Errorf("%s %s in namespace %q, want strata-system", o.GetKind(), o.GetName(), ns)
		}
	}

	// Dashboards: the files themselves, for Grafana's sidecar.
	for name, file := range map[string]string{"strata-dashboard-cluster": "strata-cluster.json", "strata-dashboard-operator": "strata-operator.json"} {
		cm := objs["ConfigMap/"+name]
		if cm.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap %s lacks the label grafana_dashboard=1", name)
		}
		want, err := os.ReadFile("grafana/" + file)
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedString(cm.Object, "data", file)
		if got != string(want) {
			t.Errorf("ConfigMap %s data[%s] is not grafana/%s", name, file, file)
		}
		if !json.Valid(want) {
			t.Errorf("grafana/%s is not JSON", file)
		}
	}

	// The rules are config/prometheus/rules.yaml's.
	data, err := os.ReadFile("prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedFieldNoCopy(objs["PrometheusRule/strata-rules"].Object, "spec")
	if !equalJSON(got, file["spec"]) {
		t.Error("PrometheusRule strata-rules' spec differs from config/prometheus/rules.yaml")
	}

	// Operator: ServiceMonitor -> Service -> the Deployment's pods and port.
	dep := objs["Deployment/strata-operator"]
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	svc := objs["Service/strata-operator-metrics"]
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if !subset(sel, podLabels) {
		t.Errorf("Service strata-operator-metrics selects %v; the operator pods carry %v", sel, podLabels)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	var portNames []string
	for _, c := range containers {
		ports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
		for _, p := range ports {
			portNames = append(portNames, p.(map[string]any)["name"].(string))
		}
	}
	svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var svcPortNames []string
	for _, p := range svcPorts {
		pm := p.(map[string]any)
		svcPortNames = append(svcPortNames, pm["name"].(string))
		if tp, ok := pm["targetPort"].(string); ok && !slices.Contains(portNames, tp) {
			t.Errorf("Service strata-operator-metrics targets port %q; the operator container has %v", tp, portNames)
		}
	}
	sm := objs["ServiceMonitor/strata-operator"]
	smSel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !subset(smSel, svc.GetLabels()) {
		t.Errorf("ServiceMonitor selects %v; the Service carries %v", smSel, svc.GetLabels())
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	for _, e := range endpoints {
		if p := e.(map[string]any)["port"]; !slices.Contains(svcPortNames, p.(string)) {
			t.Errorf("ServiceMonitor scrapes port %v; the Service has %v", p, svcPortNames)
		}
	}

	// Brokers: the PodMonitor against a broker StatefulSet the operator
	// renders for the sample cluster.
	kc := sampleCluster(t)
	sts := controllers.BuildZoneStatefulSet(kc, controllers.ZoneInput{Zone: kc.Spec.Zones[0]}, "h")
	brokerLabels := sts.Spec.Template.Labels
	var brokerPorts []string
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			brokerPorts = append(brokerPorts, p.Name)
		}
	}
	pm := objs["PodMonitor/strata-brokers"]
	pmSel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	if !subset(pmSel, brokerLabels) {
		t.Errorf("PodMonitor selects %v; broker pods carry %v", pmSel, brokerLabels)
	}
	if anyNS, _, _ := unstructured.NestedBool(pm.Object, "spec", "namespaceSelector", "any"); !anyNS {
		t.Error("PodMonitor strata-brokers does not look in every namespace (KafkaClusters live anywhere)")
	}
	pmEndpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(pmEndpoints) != 1 {
		t.Fatalf("PodMonitor has %d endpoints", len(pmEndpoints))
	}
	ep := pmEndpoints[0].(map[string]any)
	if ep["port"] != controllers.BrokerMetricsPortName || !slices.Contains(brokerPorts, ep["port"].(string)) {
		t.Errorf("PodMonitor scrapes port %v; broker pods name their ports %v (metrics: %s)", ep["port"], brokerPorts, controllers.BrokerMetricsPortName)
	}
	// The brokers the operator renders require a bearer token on
	// /metrics (metrics.auth.token.file): the PodMonitor must send one.
	if !strings.Contains(controllers.BuildZoneConfigMap(kc, controllers.ZoneInput{Zone: kc.Spec.Zones[0]}).Data[controllers.BrokerConfigFile], "\nmetrics.auth.token.file=") {
		t.Error("the rendered broker config sets no metrics.auth.token.file")
	}
	if typ, _, _ := unstructured.NestedString(ep, "authorization", "type"); typ != "Bearer" {
		t.Errorf("PodMonitor sends no bearer token (authorization.type %q); the brokers answer /metrics 401 without one", typ)
	}
	if key, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "key"); key != controllers.MetricsTokenKey {
		t.Errorf("PodMonitor reads the token from key %q of its Secret, want %q (the key brokers mount)", key, controllers.MetricsTokenKey)
	}
	// The relabelings read pod labels that exist and write the labels the
	// rules and dashboards group by.
	sanitize := regexp.MustCompile(`[^a-zA-Z0-9_]`)
	targets := map[string]bool{}
	relabelings, _, _ := unstructured.NestedSlice(ep, "relabelings")
	for _, r := range relabelings {
		rm := r.(map[string]any)
		targets[rm["targetLabel"].(string)] = true
		srcs, _, _ := unstructured.NestedStringSlice(rm, "sourceLabels")
		for _, src := range srcs {
			found := false
			for l := range brokerLabels {
				found = found || "__meta_kubernetes_pod_label_"+sanitize.ReplaceAllString(l, "_") == src
			}
			if !found {
				t.Errorf("PodMonitor relabels from %s; broker pods have no such label (%v)", src, brokerLabels)
			}
		}
	}
	for _, l := range []string{"kafkacluster", "broker_zone"} {
		if !targets[l] {
			t.Errorf("PodMonitor does not set the %s label the alerts and dashboards use", l)
		}
	}
}

func sampleCluster(t *testing.T) *strata.KafkaCluster {
	t.Helper()
	for _, o := range build(t, "samples") {
		if o.GetKind() == "KafkaCluster" {
			kc := &strata.KafkaCluster{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, kc); err != nil {
				t.Fatal(err)
			}
			return kc
		}
	}
	t.Fatal("config/samples renders no KafkaCluster")
	return nil
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
