package controllers

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// OperatorPodLabels are the labels of the operator's pods
// (config/manager): the NetworkPolicies admit them, from the operator's
// namespace only, to the inter-broker listener and etcd.
var OperatorPodLabels = map[string]string{LabelName: "strata", LabelComponent: "operator"}

// DefaultOperatorNamespace is where config/default installs the
// operator; the operator's namespace when it cannot tell its own (run
// outside a pod).
const DefaultOperatorNamespace = "strata-system"

// namespaceNameLabel is the label the API server sets on every namespace
// to its name (Kubernetes 1.21+) and keeps there: a namespace editor
// cannot give another namespace the operator's name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// BuildNetworkPolicies renders the cluster's NetworkPolicies, nil when
// spec.security.networkPolicy.enabled is false:
//
//   - <cluster>-brokers: the client listeners and the metrics/readiness
//     port are open to all; the inter-broker listener only to the
//     cluster's brokers and the operator's pods in operatorNamespace
//     (pods with the operator's labels elsewhere are not the operator).
//   - <cluster>-etcd (managed etcd only): the client port only to the
//     cluster's brokers, the members and the operator; the peer port
//     only to the members; /readyz and /metrics open.
//
// Only ingress is restricted: egress (buckets, DNS, etcd) stays open.
// The mTLS of those ports is the authentication; the policy keeps
// everything else from even reaching them.
func BuildNetworkPolicies(kc *strata.KafkaCluster, operatorNamespace string) []*networkingv1.NetworkPolicy {
	if !kc.Spec.Security.NetworkPolicy.IsEnabled() {
		return nil
	}
	brokers := metav1.LabelSelector{MatchLabels: brokerSelector(kc)}
	etcd := metav1.LabelSelector{MatchLabels: etcdSelector(kc)}
	operator := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{namespaceNameLabel: cmp.Or(operatorNamespace, DefaultOperatorNamespace)}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: copyMap(OperatorPodLabels)},
	}
	var open []networkingv1.NetworkPolicyPort
	for _, l := range Listeners(kc) {
		open = append(open, tcpPort(l.Port))
	}
	open = append(open, tcpPort(brokerMetricsPort))
	out := []*networkingv1.NetworkPolicy{networkPolicy(kc, NetworkPolicyName(kc.Name, ComponentBroker), ComponentBroker, brokers,
		networkingv1.NetworkPolicyIngressRule{Ports: open},
		networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{tcpPort(ReplicationPort)},
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: brokers.DeepCopy()}, operator},
		},
	)}
	if _, managed := ManagedEtcd(kc); managed {
		out = append(out, networkPolicy(kc, NetworkPolicyName(kc.Name, ComponentEtcd), ComponentEtcd, etcd,
			networkingv1.NetworkPolicyIngressRule{
				Ports: []networkingv1.NetworkPolicyPort{tcpPort(etcdClientPort)},
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: brokers.DeepCopy()}, {PodSelector: etcd.DeepCopy()}, operator},
			},
			networkingv1.NetworkPolicyIngressRule{
				Ports: []networkingv1.NetworkPolicyPort{tcpPort(etcdPeerPort)},
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: etcd.DeepCopy()}},
			},
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{tcpPort(etcdMetricsPort)}},
		))
	}
	return out
}

func networkPolicy(kc *strata.KafkaCluster, name, component string, pods metav1.LabelSelector, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(kc, name, clusterLabels(kc, component)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: pods,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     rules,
		},
	}
}

func tcpPort(p int32) networkingv1.NetworkPolicyPort {
	port := intstr.FromInt32(p)
	proto := corev1.ProtocolTCP
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port}
}

// etcdSelector selects the managed etcd's pods.
func etcdSelector(kc *strata.KafkaCluster) map[string]string {
	return map[string]string{LabelCluster: kc.Name, LabelComponent: ComponentEtcd}
}
