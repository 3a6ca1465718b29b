package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Ports and paths of the managed etcd.
const (
	etcdClientPort = 2379
	etcdPeerPort   = 2380
	etcdDataDir    = "/var/lib/etcd"
	// etcdMetricsPort serves /readyz, /health and /metrics without TLS.
	etcdMetricsPort = 2381
	// etcdTLSDir holds <cluster>-etcd-certs.
	etcdTLSDir = "/etc/etcd-tls"
)

// brokerMetricsPort is where `strata broker` serves /metrics, /healthz
// and /readyz by default (--metrics-listen 0.0.0.0:9644).
const brokerMetricsPort = 9644

// BrokerMetricsPortName names brokerMetricsPort in the broker pods (the
// PodMonitor of config/components/monitoring scrapes it by this name).
const BrokerMetricsPortName = "broker-metrics"

// Pods run as the distroless nonroot user.
const nonRootUID = 65532

// ownerRef makes the KafkaCluster the controlling owner of an object, so
// that deleting the cluster garbage-collects it and its changes requeue
// the cluster.
func ownerRef(kc *strata.KafkaCluster) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         strata.GroupVersion.String(),
		Kind:               "KafkaCluster",
		Name:               kc.Name,
		UID:                kc.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

func objectMeta(kc *strata.KafkaCluster, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       kc.Namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{ownerRef(kc)},
	}
}

// BuildZoneConfigMap renders the ConfigMap holding a zone's broker
// configuration: its rack, ID block base and fast bucket.
func BuildZoneConfigMap(kc *strata.KafkaCluster, zi ZoneInput) *corev1.ConfigMap {
	labels := clusterLabels(kc, ComponentBroker)
	labels[LabelZone] = zi.Zone.Name
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: objectMeta(kc, ZoneConfigMapName(kc.Name, zi.Zone.Name), labels),
		Data:       map[string]string{BrokerConfigFile: RenderBrokerConfig(kc, zi)},
	}
}

// BuildZoneStatefulSet renders the StatefulSet of one zone's brokers,
// pinned to the zone by required node affinity on
// topology.kubernetes.io/zone, spread over the zone's nodes, with one
// volume per broker. configHash goes into the pod template so that a
// configuration change rolls the pods.
//
// The update strategy is OnDelete: the StatefulSet controller never
// replaces a running pod by itself; the operator rolls the brokers one at
// a time across all zones (kafkacluster_roll.go), deleting the pod that
// plan.NextRestart names. A pod runs the current template when its
// AnnotationTemplateHash equals the template's (TemplateHash).
// podManagementPolicy stays Parallel: it only governs creation and
// scale-down, so a cold start brings every broker up at once, and with
// OnDelete it never replaces pods on its own; the operator shrinks
// replicas only after the broker is drained.
func BuildZoneStatefulSet(kc *strata.KafkaCluster, zi ZoneInput, configHash string) *appsv1.StatefulSet {
	sts := buildZoneStatefulSet(kc, zi, configHash)
	sts.Spec.Template.Annotations[AnnotationTemplateHash] = TemplateHash(&sts.Spec.Template)
	return sts
}

// TemplateHash is the SHA-256 (first 16 hex digits) of a pod template as
// the operator renders it, without AnnotationTemplateHash itself: any
// change of config, image, FastBucket, resources or pod settings changes
// it.
func TemplateHash(t *corev1.PodTemplateSpec) string {
	c := t.DeepCopy()
	delete(c.Annotations, AnnotationTemplateHash)
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshal pod template: %v", err)) // a PodTemplateSpec always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func buildZoneStatefulSet(kc *strata.KafkaCluster, zi ZoneInput, configHash string) *appsv1.StatefulSet {
	zone := zi.Zone
	name := ZoneStatefulSetName(kc.Name, zone.Name)
	labels := clusterLabels(kc, ComponentBroker)
	labels[LabelZone] = zone.Name
	selector := zoneSelector(kc, zone.Name)

	podLabels := map[string]string{}
	for k, v := range kc.Spec.PodTemplate.Labels {
		podLabels[k] = v
	}
	for k, v := range labels { // operator labels win: selectors depend on them
		podLabels[k] = v
	}
	podAnnotations := map[string]string{}
	for k, v := range kc.Spec.PodTemplate.Annotations {
		podAnnotations[k] = v
	}
	podAnnotations[AnnotationConfigHash] = configHash

	var ports []corev1.ContainerPort
	for _, l := range Listeners(kc) {
		ports = append(ports, corev1.ContainerPort{Name: portName(l.Name), ContainerPort: l.Port, Protocol: corev1.ProtocolTCP})
	}
	ports = append(ports, corev1.ContainerPort{Name: portName(ReplicationListener), ContainerPort: ReplicationPort, Protocol: corev1.ProtocolTCP})
	// Declared so that a PodMonitor finds /metrics by name (Prometheus'
	// pod discovery makes targets of declared ports only); see
	// config/components/monitoring.
	ports = append(ports, corev1.ContainerPort{Name: BrokerMetricsPortName, ContainerPort: brokerMetricsPort, Protocol: corev1.ProtocolTCP})

	env := []corev1.EnvVar{
		{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: EnvPodNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
	}
	if b := zi.Bucket; b != nil {
		env = append(env, secretEnv(b.Spec.Credentials, EnvWALAccessKeyID, EnvWALSecretKey, EnvWALSessionToken)...)
	}
	// Other zones' bucket keys, when their Secret is not the own one.
	for _, z := range sortedZones(zi.ZoneBuckets) {
		b := zi.ZoneBuckets[z]
		if p := walEnvPrefix(zi, z, b); p != "" && p != walEnvOwnPrefix {
			env = append(env, secretEnv(b.Spec.Credentials, p+"_ACCESS_KEY_ID", p+"_SECRET_ACCESS_KEY", p+"_SESSION_TOKEN")...)
		}
	}
	if ts := kc.Spec.TieredStorage; ts != nil {
		env = append(env, secretEnv(ts.Credentials, EnvTierAccessKeyID, EnvTierSecretKey, EnvTierSessionToken)...)
	}

	image := orDefault(kc.Spec.Image, strata.DefaultImage)

	whenScaled := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if kc.Spec.Storage.DeleteClaimOnScaleDown {
		whenScaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	whenDeleted := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if kc.Spec.DeletionPolicy == strata.DeletionPolicyDelete {
		whenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}

	size := mustQuantity("100Gi")
	if q := kc.Spec.Storage.Size; q != nil && !q.IsZero() {
		size = *q
	}

	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: objectMeta(kc, name, labels),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(zone.Brokers),
			ServiceName:         HeadlessServiceName(kc.Name),
			Selector:            &metav1.LabelSelector{MatchLabels: selector},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: whenDeleted,
				WhenScaled:  whenScaled,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: kc.Spec.PodTemplate.ServiceAccountName,
					NodeSelector:       copyMap(zone.NodeSelector),
					Tolerations:        zone.Tolerations,
					Affinity: &corev1.Affinity{
						NodeAffinity: &corev1.NodeAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
								NodeSelectorTerms: []corev1.NodeSelectorTerm{{
									MatchExpressions: []corev1.NodeSelectorRequirement{{
										Key:      corev1.LabelTopologyZone,
										Operator: corev1.NodeSelectorOpIn,
										Values:   []string{zone.Name},
									}},
								}},
							},
						},
					},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       corev1.LabelHostname,
						WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: selector},
					}},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true),
						RunAsUser:    ptr.To[int64](nonRootUID),
						FSGroup:      ptr.To[int64](nonRootUID),
						// The restricted Pod Security Standard requires an
						// explicit seccomp profile; without it a namespace
						// enforcing restricted rejects every pod.
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					TerminationGracePeriodSeconds: ptr.To[int64](120),
					Containers: []corev1.Container{{
						Name:         "broker",
						Image:        image,
						Command:      []string{"/strata", "broker", "--config", BrokerConfigDir + "/" + BrokerConfigFile},
						Ports:        ports,
						Env:          env,
						Resources:    kc.Spec.Resources,
						VolumeMounts: brokerVolumeMounts(kc),
						// /readyz on the broker's metrics listener (its default
						// 0.0.0.0:9644; the ConfigMap does not move it): ready only
						// after log recovery and while its registration in etcd is
						// alive and visible, which an open Kafka port does not say.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/readyz", Port: intstr.FromInt32(brokerMetricsPort),
							}},
							PeriodSeconds:    5,
							FailureThreshold: 3,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: brokerVolumes(kc, zone.Name),
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: copyMap(selector)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: kc.Spec.Storage.StorageClassName,
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: size},
					},
				},
			}},
		},
	}
}

// secretEnv maps a Secret-sourced key pair to environment variables.
// Ambient credentials need none: the SDK finds them itself.
func secretEnv(c strata.S3Credentials, idVar, secretVar, tokenVar string) []corev1.EnvVar {
	ref := c.SecretRef
	if c.EffectiveSource() != strata.CredentialsFromSecret || ref == nil {
		return nil
	}
	sel := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
			Key:                  key,
		}}
	}
	env := []corev1.EnvVar{
		{Name: idVar, ValueFrom: sel(orDefault(ref.AccessKeyIDKey, "accessKeyID"))},
		{Name: secretVar, ValueFrom: sel(orDefault(ref.SecretAccessKeyKey, "secretAccessKey"))},
	}
	if ref.SessionTokenKey != "" {
		env = append(env, corev1.EnvVar{Name: tokenVar, ValueFrom: sel(ref.SessionTokenKey)})
	}
	return env
}

// brokerVolumeMounts: data, the zone's config, the cluster certificates
// and the client listeners' own certificate when the spec names one.
// Secrets are mounted whole (not with subPath) so that the kubelet's
// updates reach the files the broker re-reads.
func brokerVolumeMounts(kc *strata.KafkaCluster) []corev1.VolumeMount {
	m := []corev1.VolumeMount{
		{Name: "data", MountPath: BrokerDataDir},
		{Name: "config", MountPath: BrokerConfigDir, ReadOnly: true},
		{Name: "cluster-tls", MountPath: ClusterTLSDir, ReadOnly: true},
		{Name: "metrics-token", MountPath: MetricsTokenDir, ReadOnly: true},
	}
	if kc.Spec.Security.ListenerCertificate != nil {
		m = append(m, corev1.VolumeMount{Name: "listener-tls", MountPath: ListenerTLSDir, ReadOnly: true})
	}
	if externalEtcdTLSSecret(kc) != "" {
		m = append(m, corev1.VolumeMount{Name: "etcd-tls", MountPath: EtcdTLSDir, ReadOnly: true})
	}
	if trustsClientsCA(kc) {
		m = append(m, corev1.VolumeMount{Name: "clients-ca", MountPath: ClientsCADir, ReadOnly: true})
	}
	return m
}

// externalEtcdTLSSecret is the Secret of spec.metadata.externalTLS the
// brokers mount, "" when they mount none (no such Secret, or the managed
// etcd, whose client certificate is the broker's own).
func externalEtcdTLSSecret(kc *strata.KafkaCluster) string {
	if _, managed := ManagedEtcd(kc); managed || kc.Spec.Metadata.ExternalTLS == nil {
		return ""
	}
	return kc.Spec.Metadata.ExternalTLS.Name
}

// trustsClientsCA: some client listener asks for client certificates and
// chains them to the clients CA (no spec.security.listenerCertificate).
func trustsClientsCA(kc *strata.KafkaCluster) bool {
	if kc.Spec.Security.ListenerCertificate != nil {
		return false
	}
	return slices.ContainsFunc(Listeners(kc), func(l strata.ListenerSpec) bool {
		return l.TLS != nil && l.TLS.ClientAuth != "" && l.TLS.ClientAuth != strata.ClientAuthNone
	})
}

func brokerVolumes(kc *strata.KafkaCluster, zone string) []corev1.Volume {
	v := []corev1.Volume{{
		Name: "config",
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ZoneConfigMapName(kc.Name, zone)},
		}},
	}, {
		Name: "cluster-tls",
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: BrokerCertsSecretName(kc.Name), DefaultMode: ptr.To[int32](0o400),
		}},
	}, {
		Name: "metrics-token",
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: MetricsTokenSecret(kc), DefaultMode: ptr.To[int32](0o400),
			Items: []corev1.KeyToPath{{Key: MetricsTokenKey, Path: MetricsTokenKey}},
		}},
	}}
	if ref := kc.Spec.Security.ListenerCertificate; ref != nil {
		v = append(v, corev1.Volume{
			Name: "listener-tls",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: ref.Name, DefaultMode: ptr.To[int32](0o400),
			}},
		})
	}
	if name := externalEtcdTLSSecret(kc); name != "" {
		v = append(v, corev1.Volume{
			Name: "etcd-tls",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: name, DefaultMode: ptr.To[int32](0o400),
				Items: []corev1.KeyToPath{{Key: CACertKey, Path: CACertKey}, {Key: TLSCertKey, Path: TLSCertKey}, {Key: TLSKeyKey, Path: TLSKeyKey}},
			}},
		})
	}
	if trustsClientsCA(kc) {
		// Only the certificate: the brokers never get the clients CA key.
		v = append(v, corev1.Volume{
			Name: "clients-ca",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: ClientsCASecretName(kc.Name), DefaultMode: ptr.To[int32](0o400),
				Items: []corev1.KeyToPath{{Key: CACertKey, Path: CACertKey}},
			}},
		})
	}
	return v
}

// BuildServices renders the headless Service (stable per-broker DNS,
// published before readiness so brokers can find each other at start) and
// the bootstrap Service clients connect to.
func BuildServices(kc *strata.KafkaCluster) []*corev1.Service {
	var ports []corev1.ServicePort
	for _, l := range Listeners(kc) {
		ports = append(ports, corev1.ServicePort{
			Name: portName(l.Name), Port: l.Port, TargetPort: intstr.FromInt32(l.Port), Protocol: corev1.ProtocolTCP,
		})
	}
	labels := clusterLabels(kc, ComponentBroker)
	// The inter-broker listener is on the headless Service only: brokers
	// and the operator reach it by pod name, clients never.
	headlessPorts := append(append([]corev1.ServicePort(nil), ports...), corev1.ServicePort{
		Name: portName(ReplicationListener), Port: ReplicationPort, TargetPort: intstr.FromInt32(ReplicationPort), Protocol: corev1.ProtocolTCP,
	})
	headless := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(kc, HeadlessServiceName(kc.Name), labels),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 brokerSelector(kc),
			Ports:                    headlessPorts,
		},
	}
	bootstrap := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(kc, BootstrapServiceName(kc.Name), copyMap(labels)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: brokerSelector(kc),
			Ports:    append([]corev1.ServicePort(nil), ports...),
		},
	}
	return []*corev1.Service{headless, bootstrap}
}

// BuildBrokerPDB renders the PodDisruptionBudget of the brokers: it
// allows no voluntary disruption, so no Eviction (kubectl drain, a node
// upgrade, the cluster autoscaler) takes a broker down; the operator
// deletes a broker pod on a cordoned node itself, one at a time, when the
// roll's gate lets it go (kafkacluster_eviction.go).
func BuildBrokerPDB(kc *strata.KafkaCluster) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(kc, BrokerPDBName(kc.Name), clusterLabels(kc, ComponentBroker)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{MatchLabels: brokerSelector(kc)},
		},
	}
}

// EtcdObjects are the objects of a managed etcd.
type EtcdObjects struct {
	Service     *corev1.Service
	StatefulSet *appsv1.StatefulSet
	PDB         *policyv1.PodDisruptionBudget
}

// BuildEtcd renders the managed etcd: a headless Service for stable peer
// DNS (<cluster>-etcd-<i>.<cluster>-etcd.<ns>.svc), a StatefulSet whose
// members are spread across the cluster's zones, and a PodDisruptionBudget.
// It returns nil when the cluster uses external endpoints.
func BuildEtcd(kc *strata.KafkaCluster) *EtcdObjects {
	m, managed := ManagedEtcd(kc)
	if !managed {
		return nil
	}
	name := EtcdName(kc.Name)
	labels := clusterLabels(kc, ComponentEtcd)
	selector := map[string]string{LabelCluster: kc.Name, LabelComponent: ComponentEtcd}

	var initial []string
	for i := int32(0); i < m.Replicas; i++ {
		initial = append(initial, fmt.Sprintf("%s=https://%s.%s:%d", etcdMemberName(kc, i), etcdMemberName(kc, i), etcdServiceDomain(kc), etcdPeerPort))
	}
	zones := make([]string, 0, len(kc.Spec.Zones))
	for _, z := range kc.Spec.Zones {
		zones = append(zones, z.Name)
	}
	sort.Strings(zones)
	self := fmt.Sprintf("$(%s).%s", EnvPodName, etcdServiceDomain(kc))

	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(kc, name, labels),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true, // peers must resolve each other before quorum
			Selector:                 selector,
			Ports: []corev1.ServicePort{
				{Name: "client", Port: etcdClientPort, TargetPort: intstr.FromInt32(etcdClientPort), Protocol: corev1.ProtocolTCP},
				{Name: "peer", Port: etcdPeerPort, TargetPort: intstr.FromInt32(etcdPeerPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: objectMeta(kc, name, labels),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(m.Replicas),
			ServiceName:         name,
			Selector:            &metav1.LabelSelector{MatchLabels: selector},
			PodManagementPolicy: appsv1.ParallelPodManagement, // all members must start to form the cluster
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: copyMap(labels)},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{
						NodeAffinity: &corev1.NodeAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
								NodeSelectorTerms: []corev1.NodeSelectorTerm{{
									MatchExpressions: []corev1.NodeSelectorRequirement{{
										Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones,
									}},
								}},
							},
						},
						PodAntiAffinity: &corev1.PodAntiAffinity{
							PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
								Weight: 100,
								PodAffinityTerm: corev1.PodAffinityTerm{
									TopologyKey:   corev1.LabelHostname,
									LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
								},
							}},
						},
					},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       corev1.LabelTopologyZone,
						WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: selector},
					}},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true),
						RunAsUser:    ptr.To[int64](nonRootUID),
						FSGroup:      ptr.To[int64](nonRootUID),
						// The restricted Pod Security Standard requires an
						// explicit seccomp profile; without it a namespace
						// enforcing restricted rejects every pod.
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  "etcd",
						Image: m.Image,
						Command: []string{
							"etcd",
							"--name=$(" + EnvPodName + ")",
							"--data-dir=" + etcdDataDir + "/data",
							fmt.Sprintf("--listen-client-urls=https://0.0.0.0:%d", etcdClientPort),
							fmt.Sprintf("--listen-peer-urls=https://0.0.0.0:%d", etcdPeerPort),
							fmt.Sprintf("--advertise-client-urls=https://%s:%d", self, etcdClientPort),
							fmt.Sprintf("--initial-advertise-peer-urls=https://%s:%d", self, etcdPeerPort),
							// TLS with certificates of the cluster CA, and client
							// certificates required from clients (brokers, the
							// operator) and peers alike. /readyz and /metrics stay
							// on plain HTTP on their own port for the kubelet.
							"--cert-file=" + etcdTLSDir + "/" + TLSCertKey,
							"--key-file=" + etcdTLSDir + "/" + TLSKeyKey,
							"--trusted-ca-file=" + etcdTLSDir + "/" + CACertKey,
							"--client-cert-auth",
							"--peer-cert-file=" + etcdTLSDir + "/" + TLSCertKey,
							"--peer-key-file=" + etcdTLSDir + "/" + TLSKeyKey,
							"--peer-trusted-ca-file=" + etcdTLSDir + "/" + CACertKey,
							"--peer-client-cert-auth",
							fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", etcdMetricsPort),
							"--initial-cluster=" + strings.Join(initial, ","),
							"--initial-cluster-state=new",
							fmt.Sprintf("--initial-cluster-token=%s-%s", kc.Namespace, name),
							// Keep one hour of history: enough for a broker's watch
							// to resume after a restart, bounded in time whatever
							// the offset-commit rate (see etcdAutoCompaction*).
							"--auto-compaction-mode=" + etcdAutoCompactionMode,
							"--auto-compaction-retention=" + etcdAutoCompactionRetention,
							fmt.Sprintf("--quota-backend-bytes=%d", EtcdQuotaBackendBytes(m.StorageSize)),
						},
						Env: []corev1.EnvVar{
							{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						},
						Ports: []corev1.ContainerPort{
							{Name: "client", ContainerPort: etcdClientPort, Protocol: corev1.ProtocolTCP},
							{Name: "peer", ContainerPort: etcdPeerPort, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: etcdMetricsPort, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/readyz", Port: intstr.FromInt32(etcdMetricsPort),
							}},
							PeriodSeconds: 5,
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "data", MountPath: etcdDataDir},
							{Name: "tls", MountPath: etcdTLSDir, ReadOnly: true},
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{{
						Name: "tls",
						VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: EtcdCertsSecretName(kc.Name), DefaultMode: ptr.To[int32](0o400),
						}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: copyMap(selector)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: kc.Spec.Storage.StorageClassName,
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: *m.StorageSize},
					},
				},
			}},
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(kc, name, copyMap(labels)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: copyMap(selector)},
		},
	}
	return &EtcdObjects{Service: svc, StatefulSet: sts, PDB: pdb}
}

// Auto-compaction of the managed etcd. Periodic rather than revision-based:
// committed offsets make the write rate of the metadata store follow the
// client load, so a revision count would keep anything from hours to
// seconds of history; a time window keeps what a watcher needs to resume
// predictable, and the backend quota below is sized to hold it.
const (
	etcdAutoCompactionMode      = "periodic"
	etcdAutoCompactionRetention = "1h"
)

// Bounds of the managed etcd backend quota.
const (
	// etcdMaxQuotaBytes is the largest backend etcd recommends (8 GiB):
	// beyond it, defragmentation and snapshots stall the member.
	etcdMaxQuotaBytes int64 = 8 << 30
	// etcdMinQuotaBytes keeps tiny test volumes usable.
	etcdMinQuotaBytes int64 = 256 << 20
)

// EtcdQuotaBackendBytes sizes --quota-backend-bytes from the member volume:
// half of it, so the volume still holds the WAL, the snapshots and the
// second copy of the database that a defragmentation writes before it
// swaps files; capped at etcd's recommended 8 GiB, and at least 256 MiB
// (but never more than the volume). The default 10Gi volume gives 5 GiB.
func EtcdQuotaBackendBytes(storage *resource.Quantity) int64 {
	if storage == nil || storage.Value() <= 0 {
		return etcdMinQuotaBytes
	}
	v := storage.Value()
	q := v / 2
	q = min(q, etcdMaxQuotaBytes)
	q = max(q, min(etcdMinQuotaBytes, v))
	return q
}

func etcdMemberName(kc *strata.KafkaCluster, i int32) string {
	return fmt.Sprintf("%s-%d", EtcdName(kc.Name), i)
}

func etcdServiceDomain(kc *strata.KafkaCluster) string {
	return fmt.Sprintf("%s.%s.svc", EtcdName(kc.Name), kc.Namespace)
}

// portName turns a listener name into a port name. The CRD schema keeps
// listener names to 15 characters without doubled or trailing
// underscores, so the result is a valid IANA service name.
func portName(listener string) string {
	return strings.ToLower(strings.ReplaceAll(listener, "_", "-"))
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
