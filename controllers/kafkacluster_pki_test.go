package controllers

import (
	"maps"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

func TestBrokerCertHosts(t *testing.T) {
	kc := threeZoneCluster()
	hosts := BrokerCertHosts(kc, map[string]int32{"zone-a": 2, "zone-b": 1})
	for _, h := range []string{
		"demo-bootstrap", "demo-bootstrap.kafka.svc", "demo-bootstrap.kafka.svc.cluster.local",
		"demo-brokers.kafka.svc",
		// Each broker's advertised name on every listener.
		"demo-zone-a-0.demo-brokers.kafka.svc", "demo-zone-a-1.demo-brokers.kafka.svc",
		"demo-zone-b-0.demo-brokers.kafka.svc", "demo-zone-b-0.demo-brokers.kafka.svc.cluster.local",
	} {
		if !slices.Contains(hosts, h) {
			t.Errorf("missing SAN %s in %v", h, hosts)
		}
	}
	if slices.Contains(hosts, "demo-zone-a-2.demo-brokers.kafka.svc") {
		t.Errorf("SAN for a broker beyond the replicas: %v", hosts)
	}
	etcd := EtcdCertHosts(kc)
	if !slices.Contains(etcd, "demo-etcd-2.demo-etcd.kafka.svc") || !slices.Contains(etcd, "demo-etcd.kafka.svc") {
		t.Errorf("etcd SANs %v", etcd)
	}
}

func TestBuildNetworkPolicies(t *testing.T) {
	kc := threeZoneCluster()
	kc.Spec.Listeners = []strata.ListenerSpec{{Name: "PLAIN", Port: 9092}, {Name: "TLS", Port: 9093, Protocol: "SSL"}}
	nps := BuildNetworkPolicies(kc, "ops")
	if len(nps) != 2 || nps[0].Name != "demo-brokers" || nps[1].Name != "demo-etcd" {
		t.Fatalf("policies %v", names(nps))
	}
	brokers := nps[0].Spec
	if brokers.PodSelector.MatchLabels[LabelComponent] != ComponentBroker {
		t.Fatalf("broker policy selects %v", brokers.PodSelector.MatchLabels)
	}
	// Rule 0: client ports and metrics from anywhere.
	if got := ports(brokers.Ingress[0]); !slices.Equal(got, []int32{9092, 9093, 9644}) || len(brokers.Ingress[0].From) != 0 {
		t.Errorf("open rule: ports %v from %v", got, brokers.Ingress[0].From)
	}
	// Rule 1: the inter-broker port from the cluster's brokers and the operator only.
	repl := brokers.Ingress[1]
	if got := ports(repl); !slices.Equal(got, []int32{ReplicationPort}) || len(repl.From) != 2 ||
		repl.From[0].PodSelector.MatchLabels[LabelCluster] != "demo" || repl.From[0].NamespaceSelector != nil ||
		repl.From[1].PodSelector.MatchLabels[LabelComponent] != "operator" || repl.From[1].NamespaceSelector == nil {
		t.Errorf("replication rule %+v", repl)
	}
	// The operator's peer: its labels in its own namespace only, never
	// in any namespace (whoever may create pods anywhere could label one
	// like the operator).
	ops := map[string]string{"kubernetes.io/metadata.name": "ops"}
	for _, rule := range []networkingv1.NetworkPolicyIngressRule{repl, nps[1].Spec.Ingress[0]} {
		var operator []networkingv1.NetworkPolicyPeer
		for _, peer := range rule.From {
			if peer.PodSelector != nil && peer.PodSelector.MatchLabels[LabelComponent] == "operator" {
				operator = append(operator, peer)
			}
		}
		if len(operator) != 1 || operator[0].NamespaceSelector == nil || !maps.Equal(operator[0].NamespaceSelector.MatchLabels, ops) ||
			len(operator[0].NamespaceSelector.MatchExpressions) != 0 {
			t.Errorf("operator peers %+v, want one selecting namespace ops only", operator)
		}
	}
	if sel := BuildNetworkPolicies(kc, "")[0].Spec.Ingress[1].From[1].NamespaceSelector.MatchLabels; sel["kubernetes.io/metadata.name"] != DefaultOperatorNamespace {
		t.Errorf("no operator namespace given: peer namespace %v, want %s", sel, DefaultOperatorNamespace)
	}
	etcd := nps[1].Spec
	if got := ports(etcd.Ingress[0]); !slices.Equal(got, []int32{2379}) || len(etcd.Ingress[0].From) != 3 {
		t.Errorf("etcd client rule %+v", etcd.Ingress[0])
	}
	if got := ports(etcd.Ingress[1]); !slices.Equal(got, []int32{2380}) || len(etcd.Ingress[1].From) != 1 ||
		etcd.Ingress[1].From[0].PodSelector.MatchLabels[LabelComponent] != ComponentEtcd {
		t.Errorf("etcd peer rule %+v", etcd.Ingress[1])
	}
	for _, p := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress} {
		if !slices.Equal(brokers.PolicyTypes, []networkingv1.PolicyType{p}) {
			t.Errorf("policy types %v: egress must stay open", brokers.PolicyTypes)
		}
	}

	kc.Spec.Metadata = strata.MetadataSpec{ExternalEndpoints: []string{"https://etcd:2379"}}
	if got := names(BuildNetworkPolicies(kc, "ops")); !slices.Equal(got, []string{"demo-brokers"}) {
		t.Errorf("external etcd: %v", got)
	}
	kc.Spec.Security.NetworkPolicy.Enabled = ptr.To(false)
	if got := BuildNetworkPolicies(kc, "ops"); got != nil {
		t.Errorf("disabled: %v", names(got))
	}
}

func names(nps []*networkingv1.NetworkPolicy) []string {
	var out []string
	for _, np := range nps {
		out = append(out, np.Name)
	}
	return out
}

func ports(r networkingv1.NetworkPolicyIngressRule) []int32 {
	var out []int32
	for _, p := range r.Ports {
		out = append(out, p.Port.IntVal)
	}
	return out
}

func TestUpgradingInterBroker(t *testing.T) {
	const (
		old     = "# before REPLICATION\nlisteners=PLAINTEXT://0.0.0.0:9092\n"
		phase1  = "# header\ninter.broker.listener.name=PLAINTEXT\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"
		current = "# header\ninter.broker.listener.name=REPLICATION\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"
	)
	for _, tc := range []struct {
		name        string
		configs     []string
		podsCurrent bool
		want        bool
	}{
		{"new cluster", nil, true, false},
		{"old config: first serve REPLICATION", []string{old, old}, true, true},
		{"mid first roll", []string{phase1, phase1}, false, true},
		{"one zone's config not yet rewritten", []string{phase1, old}, true, true},
		{"first roll done: switch", []string{phase1, phase1}, true, false},
		{"switched: never back, even mid-roll", []string{current, phase1}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UpgradingInterBroker(tc.configs, tc.podsCurrent); got != tc.want {
				t.Fatalf("UpgradingInterBroker = %v, want %v", got, tc.want)
			}
		})
	}
	// The rendered configs are what the function reads (a cluster with
	// a PLAINTEXT first listener, as the clusters of those releases).
	kc := threeZoneCluster()
	kc.Spec.Listeners = legacyDefaultListeners
	legacy := RenderBrokerConfig(kc, ZoneInput{Zone: kc.Spec.Zones[0], LegacyInterBroker: true})
	now := RenderBrokerConfig(kc, ZoneInput{Zone: kc.Spec.Zones[0]})
	if !strings.Contains(legacy, "\ninter.broker.listener.name=PLAINTEXT\n") || !strings.Contains(legacy, "REPLICATION://0.0.0.0:9091") {
		t.Fatalf("legacy render:\n%s", legacy)
	}
	if UpgradingInterBroker([]string{legacy}, true) || !UpgradingInterBroker([]string{legacy}, false) || UpgradingInterBroker([]string{now}, false) {
		t.Fatal("the rendered configs are not read as their phase")
	}
}
