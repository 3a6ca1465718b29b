package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Label keys and values on every object the operator writes.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelCluster   = "kafka.strata.dev/cluster"
	LabelZone      = "kafka.strata.dev/zone"
	// LabelSecretAccess = "true" on a Secret lets the operator read it
	// for a spec that names it by key (KafkaUser
	// spec.authentication.password.valueFrom.secretKeyRef): its owner
	// consents to the copy. The operator never sets it on its own
	// Secrets.
	LabelSecretAccess = "kafka.strata.dev/secret-access"

	ComponentBroker = "broker"
	ComponentEtcd   = "etcd"
	ManagedBy       = "strata-operator"

	// AnnotationConfigHash on the broker pod template is the SHA-256 of
	// the zone's broker configuration; changing the config changes the
	// template and so rolls the zone's pods.
	AnnotationConfigHash = "kafka.strata.dev/config-hash"

	// AnnotationTemplateHash on the broker pod template (and so on every
	// pod created from it) is TemplateHash of the rendered template. The
	// StatefulSets use OnDelete; a pod whose annotation differs from its
	// StatefulSet's runs an outdated revision and is restarted by the
	// operator's roll, one broker at a time.
	AnnotationTemplateHash = "kafka.strata.dev/template-hash"

	// Finalizer lets the operator clean up volumes per deletionPolicy
	// before a KafkaCluster goes away.
	Finalizer = "kafka.strata.dev/finalizer"

	// BrokerConfigFile is the key of the broker configuration in the zone
	// ConfigMap and its file name in the pod.
	BrokerConfigFile = "broker.properties"
	// BrokerConfigDir is where the ConfigMap is mounted.
	BrokerConfigDir = "/etc/strata"
	// BrokerDataDir is where the broker's volume is mounted.
	BrokerDataDir = "/var/lib/strata"
)

// Log verbosity levels: Info (V(0)) for decisions a user would want to
// see, logDebug for per-reconcile detail.
const logDebug = 1

// ZoneStatefulSetName is the StatefulSet of a zone's brokers.
func ZoneStatefulSetName(cluster, zone string) string { return fmt.Sprintf("%s-%s", cluster, zone) }

// ZoneConfigMapName is the ConfigMap with a zone's broker configuration.
func ZoneConfigMapName(cluster, zone string) string {
	return fmt.Sprintf("%s-%s-config", cluster, zone)
}

// BrokerIDsConfigMapName is the ConfigMap recording the cluster's broker
// ID blocks (BuildBrokerIDRecord).
func BrokerIDsConfigMapName(cluster string) string { return cluster + "-broker-ids" }

// HeadlessServiceName is the Service giving each broker a stable DNS name.
func HeadlessServiceName(cluster string) string { return cluster + "-brokers" }

// BootstrapServiceName is the Service clients bootstrap through.
func BootstrapServiceName(cluster string) string { return cluster + "-bootstrap" }

// BrokerPDBName is the PodDisruptionBudget over all brokers.
func BrokerPDBName(cluster string) string { return cluster + "-brokers" }

// EtcdName names the managed etcd StatefulSet, its headless Service and
// its PodDisruptionBudget.
func EtcdName(cluster string) string { return cluster + "-etcd" }

// ClusterCASecretName holds the cluster CA: tls.crt, tls.key and ca.crt
// (the trust bundle: the current CA certificate and older ones not yet
// expired). It holds the CA's key: for the operator only, never for
// clients (they read ClusterCACertSecretName).
func ClusterCASecretName(cluster string) string { return cluster + "-cluster-ca" }

// ClusterCACertSecretName is the public Secret clients trust the brokers'
// client listeners with: ca.crt, ca.p12 and ca.password (Strimzi's
// <cluster>-cluster-ca-cert), never a private key.
func ClusterCACertSecretName(cluster string) string { return cluster + "-cluster-ca-cert" }

// ClientsCASecretName holds the clients CA, which issues the client
// certificates of KafkaUsers of type tls (same keys as the cluster CA).
// Client listeners with tls.clientAuth trust its ca.crt; the brokers
// mount that key only.
func ClientsCASecretName(cluster string) string { return cluster + "-clients-ca" }

// BrokerCertsSecretName holds the brokers' certificate (tls.crt, tls.key,
// SANs for every broker pod and the bootstrap Service) and ca.crt.
func BrokerCertsSecretName(cluster string) string { return cluster + "-broker-certs" }

// EtcdCertsSecretName holds the managed etcd members' certificate.
func EtcdCertsSecretName(cluster string) string { return cluster + "-etcd-certs" }

// OperatorCertSecretName holds the operator's client certificate
// (CN=strata-operator) for the cluster's REPLICATION listener and etcd.
func OperatorCertSecretName(cluster string) string { return cluster + "-operator-cert" }

// MetricsTokenSecretName holds the bearer token of the brokers' HTTP
// listener (key MetricsTokenKey) the operator generates when
// spec.security.metricsToken names no Secret of the user's.
func MetricsTokenSecretName(cluster string) string { return cluster + "-metrics-token" }

// NetworkPolicyName names the cluster's NetworkPolicies (<cluster>-brokers
// and <cluster>-etcd).
func NetworkPolicyName(cluster, component string) string {
	if component == ComponentEtcd {
		return EtcdName(cluster)
	}
	return HeadlessServiceName(cluster)
}

// BrokerPodName is the pod of the broker with the given ordinal.
func BrokerPodName(cluster, zone string, ordinal int32) string {
	return fmt.Sprintf("%s-%d", ZoneStatefulSetName(cluster, zone), ordinal)
}

// clusterLabels are the labels shared by all objects of a cluster.
func clusterLabels(kc *strata.KafkaCluster, component string) map[string]string {
	return map[string]string{
		LabelName:      "strata",
		LabelInstance:  kc.Name,
		LabelComponent: component,
		LabelManagedBy: ManagedBy,
		LabelCluster:   kc.Name,
	}
}

// brokerSelector selects all broker pods of a cluster.
func brokerSelector(kc *strata.KafkaCluster) map[string]string {
	return map[string]string{LabelCluster: kc.Name, LabelComponent: ComponentBroker}
}

// zoneSelector selects the broker pods of one zone.
func zoneSelector(kc *strata.KafkaCluster, zone string) map[string]string {
	s := brokerSelector(kc)
	s[LabelZone] = zone
	return s
}

// SecretAccessGranted reports whether sec is labelled LabelSecretAccess=true
// and is not one of the operator's own Secrets (CA keys, certificates,
// tokens), whatever its labels say.
func SecretAccessGranted(sec *corev1.Secret) bool {
	return sec.Labels[LabelSecretAccess] == "true" && sec.Labels[LabelManagedBy] != ManagedBy
}
