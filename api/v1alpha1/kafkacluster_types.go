package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BrokerIDBlockSize is the number of broker IDs reserved for each zone. A
// broker's ID is its zone's block base plus its StatefulSet ordinal, so a
// zone holds at most BrokerIDBlockSize brokers.
const BrokerIDBlockSize = 100

// DefaultImage is the Strata image brokers run when spec.image is empty.
const DefaultImage = "ghcr.io/strata-dev/strata:latest"

// DefaultEtcdImage is the image of the managed etcd members.
const DefaultEtcdImage = "quay.io/coreos/etcd:v3.7.3"

// KafkaClusterSpec declares a Strata cluster laid out zone by zone.
//
// +kubebuilder:validation:XValidation:rule="self.zones.all(z, self.zones.exists_one(y, y.name == z.name))",message="zone names must be unique"
// +kubebuilder:validation:XValidation:rule="!has(self.wal) || !has(self.wal.enabled) || !self.wal.enabled || self.zones.all(z, has(z.fastBucketRef))",message="wal.enabled requires a fastBucketRef in every zone"
// +kubebuilder:validation:XValidation:rule="!has(self.leaderPlacement) || !has(self.leaderPlacement.zone) || self.zones.exists(z, z.name == self.leaderPlacement.zone)",message="leaderPlacement.zone must name a zone listed in spec.zones"
// +kubebuilder:validation:XValidation:rule="!has(self.listeners) || self.listeners.all(l, self.listeners.exists_one(m, m.name == l.name))",message="listener names must be unique"
// +kubebuilder:validation:XValidation:rule="!has(self.listeners) || self.listeners.all(l, self.listeners.exists_one(m, m.port == l.port))",message="listener ports must be unique"
// +kubebuilder:validation:XValidation:rule="!has(self.listeners) || self.listeners.all(l, l.name != 'REPLICATION' && l.port != 9091 && l.port != 9644)",message="spec.listeners: the name REPLICATION and the ports 9091 and 9644 are the operator's (the brokers' mTLS inter-broker listener and their metrics and readiness port)"
// +kubebuilder:validation:XValidation:rule="!has(self.wal) || !has(self.wal.zoneLocalProduce) || !has(self.config) || self.config.all(k, !(k.trim() in ['wal.zonelocal.produce.enable', 'wal.zonelocal.produce.inline.ms', 'wal.zonelocal.produce.policy']))",message="spec.wal.zoneLocalProduce and spec.config's wal.zonelocal.produce.* keys (kept from before the field) cannot be used together: remove the keys from spec.config"
// +kubebuilder:validation:XValidation:rule="!has(self.security) || !has(self.security.listenerCertificate) || !has(self.listeners) || size(self.listeners) == 0 || self.listeners.exists(l, l.protocol == 'SSL' || l.protocol == 'SASL_SSL')",message="security.listenerCertificate needs a listener of protocol SSL or SASL_SSL to serve it (the default listener is SASL_SSL)"
type KafkaClusterSpec struct {
	// Image is the Strata container image the brokers run.
	// +kubebuilder:default="ghcr.io/strata-dev/strata:latest"
	// +kubebuilder:validation:MinLength=1
	// +optional
	Image string `json:"image,omitempty"`

	// Zones lists the availability zones the cluster spans. Each zone gets
	// its own StatefulSet pinned to the zone, and its brokers write the
	// write-ahead log to that zone's FastBucket.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +required
	Zones []ZoneSpec `json:"zones"`

	// Storage configures each broker's persistent volume.
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// WAL configures replication through the per-zone fast buckets.
	// +kubebuilder:default={enabled:true,uploadInterval:"10ms",maxObjectBytes:262144,retention:"1h"}
	// +optional
	WAL WALSpec `json:"wal,omitempty"`

	// Cost overrides the price table of the cost report (status.cost) and
	// of spec.wal.policy.
	// +optional
	Cost *CostSpec `json:"cost,omitempty"`

	// TieredStorage configures the regional slow tier for closed segments
	// (docs/tiered-storage.md): the brokers upload rolled segments to the
	// bucket, serve reads below their local logs from it, and keep
	// localRetention on disk. Topics are tiered by default
	// (remote.storage.enable); compacted topics are not.
	// +optional
	TieredStorage *TieredStorageSpec `json:"tieredStorage,omitempty"`

	// Metadata selects the etcd cluster holding the cluster metadata.
	// +kubebuilder:default={}
	// +optional
	Metadata MetadataSpec `json:"metadata,omitempty"`

	// Config holds broker configuration overrides, written into every
	// broker's configuration file beside the operator's own keys. Keys the
	// operator renders from other fields (broker identity, rack, metadata
	// store, data directory, listeners, metrics.listen, wal.*, tier.*,
	// leader.placement.*) and TLS/SASL keys (ssl.*, sasl.*, listener.*,
	// inter.broker.*) are refused: set the field that owns them
	// (docs/operator.md). Keys are lower case letters, digits, '.', '_'
	// and '-' (^[a-z0-9][a-z0-9._-]*$); the rules on owned keys compare
	// them without surrounding whitespace, so that such a key is refused
	// with the name of the field that owns it.
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9][a-z0-9._-]*$'))",message="spec.config keys must be lower case letters, digits, '.', '_' and '-', starting with a letter or digit, as Kafka's keys are: a key with spaces or control characters (node.id followed by a form feed) would be read by the brokers as another key"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['broker.id', 'node.id', 'broker.id.base', 'broker.id.source']))",message="spec.config must not set broker.id, node.id, broker.id.base or broker.id.source: broker IDs are owned by the operator (the zone's ID block in status plus the pod ordinal)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['broker.rack', 'zone']))",message="spec.config must not set broker.rack or zone: they are spec.zones[].name"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['cluster.name', 'cluster.namespace']) && !k.trim().startsWith('metadata.etcd.'))",message="spec.config must not set cluster.name, cluster.namespace or metadata.etcd.*: the metadata store is spec.metadata and the cluster's key space is its namespace and name"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['log.dirs', 'log.dir', 'data.dir']))",message="spec.config must not set log.dirs, log.dir or data.dir: the data directory is the volume of spec.storage"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['listeners', 'advertised.listeners', 'listen', 'advertised.address', 'security.inter.broker.protocol']) && !k.trim().startsWith('listener.') && !k.trim().startsWith('inter.broker.'))",message="spec.config must not set listeners, advertised.listeners, listener.*, inter.broker.*, security.inter.broker.protocol, listen or advertised.address: client listeners are spec.listeners and the inter-broker listener is the operator's (mTLS with cluster CA certificates)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.trim().startsWith('ssl.') && !k.trim().startsWith('sasl.'))",message="spec.config must not set ssl.* or sasl.*: listener TLS is spec.listeners[].tls and spec.security (certificates from the operator's cluster CA or spec.security.listenerCertificate); SASL settings come with the KafkaUser resource"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['wal.enable', 'wal.enabled', 'wal.upload.interval.ms', 'wal.object.max.bytes', 'wal.retention.ms']))",message="spec.config must not set wal.enable, wal.enabled, wal.upload.interval.ms, wal.object.max.bytes or wal.retention.ms: they are spec.wal.enabled, spec.wal.uploadInterval, spec.wal.maxObjectBytes and spec.wal.retention"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['wal.policy', 'wal.upload.max.interval.ms', 'wal.auto.max.latency.ms', 'wal.auto.max.cost.ratio']) && !k.trim().startsWith('cost.price.'))",message="spec.config must not set wal.policy, wal.upload.max.interval.ms, wal.auto.max.latency.ms, wal.auto.max.cost.ratio or cost.price.*: they are spec.wal.policy, spec.wal.maxUploadInterval, spec.wal.maxLatency, spec.wal.maxCostPercent and spec.cost.prices"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['wal.zonelocal.produce.enable', 'wal.zonelocal.produce.inline.ms', 'wal.zonelocal.produce.policy']))",message="spec.config must not set wal.zonelocal.produce.enable, wal.zonelocal.produce.inline.ms or wal.zonelocal.produce.policy: they are spec.wal.zoneLocalProduce (enabled, inlineFallback, policy)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.trim().startsWith('wal.bucket.') && !k.trim().startsWith('wal.zone.'))",message="spec.config must not set wal.bucket.* or wal.zone.*: the buckets are the zones' FastBuckets (spec.zones[].fastBucketRef)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.trim().startsWith('tier.') && !k.trim().startsWith('remote.log.') && !(k.trim() in ['log.local.retention.ms', 'log.remote.storage.enable']))",message="spec.config must not set tier.*, remote.log.*, log.local.retention.ms or log.remote.storage.enable: they belong to spec.tieredStorage"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.trim().startsWith('leader.placement.'))",message="spec.config must not set leader.placement.*: it is spec.leaderPlacement"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.trim().startsWith('metrics.'))",message="spec.config must not set metrics.*: the operator serves /metrics and the /readyz readiness probe on port 9644 (its address, pprof and access control are the operator's: pprof would be open to every pod that reaches the port, and a token file or certificate the pod does not mount stops the brokers)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.trim() in ['authorizer.class.name', 'super.users', 'allow.everyone.if.no.acl.found']))",message="spec.config must not set authorizer.class.name, super.users or allow.everyone.if.no.acl.found: they are spec.security.authorization (type acl or none, and superUsers; the operator's and the brokers' principals are always super users)"
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// Listeners are the Kafka client listeners every broker opens.
	// Defaults to one SASL_SSL listener named SASL_SSL on port 9092
	// (SCRAM-SHA-512 and SCRAM-SHA-256, users from KafkaUser resources),
	// except for a cluster whose brokers already run a configuration of an
	// operator release from before that default: it keeps the PLAINTEXT
	// listener it had until listeners are set (docs/security.md, "Secure
	// by default"). A PLAINTEXT listener serves anyone who reaches the
	// port without authentication. SSL and SASL_SSL
	// listeners serve a certificate of the operator's cluster CA (or
	// spec.security.listenerCertificate). Besides these, every broker has
	// the operator's inter-broker listener REPLICATION on port 9091: TLS
	// with client certificates of the cluster CA required, used by replica
	// fetches and by the operator itself.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Listeners []ListenerSpec `json:"listeners,omitempty"`

	// Security configures the cluster and clients CAs, the client
	// listeners' certificate, authorization and the NetworkPolicy.
	// +optional
	Security SecuritySpec `json:"security,omitempty"`

	// Resources of each broker container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodTemplate adds metadata and a service account to the broker pods.
	// +optional
	PodTemplate PodTemplateSpec `json:"podTemplate,omitempty"`

	// LeaderPlacement says where partition leaders should go: Balanced
	// (default) spreads preferred leaders over zones and brokers; Zone pins
	// them to one zone, so producers in that zone send no produce traffic
	// across zones. Rendered as the brokers' leader.placement.policy and
	// leader.placement.zone; a topic's own leader.placement.zone config
	// (KafkaTopic spec.leaderZone) overrides the zone per topic.
	// +kubebuilder:default={policy:"Balanced"}
	// +optional
	LeaderPlacement LeaderPlacementSpec `json:"leaderPlacement,omitempty"`

	// Rebalance bounds the replica moves the operator makes when brokers
	// are added (moves onto the new brokers) or removed (the broker is
	// drained before its pod goes).
	// +optional
	Rebalance RebalanceSpec `json:"rebalance,omitempty"`

	// Roll configures rolling restarts.
	// +optional
	Roll RollSpec `json:"roll,omitempty"`

	// DeletionPolicy says what happens to the brokers' volumes when the
	// KafkaCluster is deleted: Retain (default) keeps the
	// PersistentVolumeClaims, Delete removes them. Buckets are never deleted.
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// DeletionPolicy decides the fate of volumes when their owner goes away.
type DeletionPolicy string

const (
	// DeletionPolicyRetain keeps PersistentVolumeClaims.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete removes PersistentVolumeClaims.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// ZoneSpec is one availability zone of the cluster.
//
// +kubebuilder:validation:XValidation:rule="self.name != 'etcd'",message="zone name etcd is reserved: <cluster>-etcd is the managed etcd StatefulSet"
type ZoneSpec struct {
	// Name is the zone as nodes label it in topology.kubernetes.io/zone,
	// e.g. us-east-1a. It also names the zone's StatefulSet and is the
	// brokers' broker.rack.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// Brokers is the number of brokers in this zone.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Brokers int32 `json:"brokers"`

	// FastBucketRef names the FastBucket (same namespace) this zone's
	// brokers write their write-ahead log to. Its spec.zone must equal
	// this zone's name.
	// +optional
	FastBucketRef *LocalObjectReference `json:"fastBucketRef,omitempty"`

	// NodeSelector further restricts the nodes of this zone's brokers.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of this zone's broker pods.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// StorageSpec configures each broker's persistent volume.
type StorageSpec struct {
	// Size of each broker's volume.
	// +kubebuilder:default="100Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the volumes; empty uses the cluster default.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// DeleteClaimOnScaleDown removes a broker's PersistentVolumeClaim when
	// its zone scales down. By default the claim is kept, so scaling back
	// up reuses the data.
	// +kubebuilder:default=false
	// +optional
	DeleteClaimOnScaleDown bool `json:"deleteClaimOnScaleDown,omitempty"`
}

// WALSpec configures replication through the per-zone fast buckets.
//
// The broker reads wal.*.ms as a positive int32 of milliseconds, so no
// duration may exceed 2147483647ms (24d20h31m23.647s) or round down to 0.
//
// +kubebuilder:validation:XValidation:rule="!has(self.uploadInterval) || (duration(self.uploadInterval) >= duration('1ms') && duration(self.uploadInterval) <= duration('10s'))",message="wal.uploadInterval must be between 1ms and 10s"
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || (duration(self.retention) >= duration('1ms') && duration(self.retention) <= duration('2147483647ms'))",message="wal.retention must be between 1ms and 2147483647ms (596h31m23.647s): the broker reads wal.retention.ms as a positive int32"
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || !has(self.uploadInterval) || duration(self.retention) >= duration(self.uploadInterval)",message="wal.retention must be at least wal.uploadInterval"
// +kubebuilder:validation:XValidation:rule="!has(self.maxUploadInterval) || duration(self.maxUploadInterval) >= duration(has(self.uploadInterval) ? self.uploadInterval : '10ms')",message="maxUploadInterval must be at least uploadInterval"
// +kubebuilder:validation:XValidation:rule="!has(self.maxLatency) || duration(self.maxLatency) <= duration('2147483647ms')",message="wal.maxLatency must be at most 2147483647ms: the broker reads wal.auto.max.latency.ms as an int32"
// +kubebuilder:validation:XValidation:rule="!has(self.zoneLocalProduce) || !has(self.zoneLocalProduce.enabled) || !self.zoneLocalProduce.enabled || !has(self.enabled) || self.enabled",message="wal.zoneLocalProduce.enabled needs wal.enabled: zone-local produce forwards records through the zones' fast buckets"
type WALSpec struct {
	// Enabled turns WAL replication on. When off, followers fetch record
	// bytes from the leader as in classic Kafka.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// UploadInterval is the longest time a pending byte waits before its
	// WAL object is uploaded (wal.upload.interval.ms). 1ms to 10s.
	// +kubebuilder:default="10ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	UploadInterval *metav1.Duration `json:"uploadInterval,omitempty"`

	// MaxObjectBytes cuts a WAL object once this many bytes are pending
	// (wal.object.max.bytes).
	// +kubebuilder:default=262144
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=67108864
	// +optional
	MaxObjectBytes int64 `json:"maxObjectBytes,omitempty"`

	// Retention is the hard cap on a WAL object's life (wal.retention.ms);
	// objects are normally deleted as soon as every replica has them.
	// 1ms to 2147483647ms (about 596h), at least uploadInterval.
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`

	// --- cost (issue #15; docs/wal.md "Cost and wal.policy") ---

	// Policy is wal.policy: Latency cuts an object every uploadInterval;
	// Cost cuts it when it costs 8 % of classic replication of its bytes
	// (about 379 KB with RF 3) or after maxUploadInterval; Auto (default) chooses per broker, from its
	// throughput, between WAL objects and inline replication and the cut
	// interval within [uploadInterval, maxUploadInterval], so that
	// replication never costs more than classic. Inline chosen by the
	// policy is not a degradation (no WALDegraded).
	// +kubebuilder:validation:Enum=Latency;Cost;Auto
	// +kubebuilder:default=Auto
	// +optional
	Policy WALPolicy `json:"policy,omitempty"`

	// MaxUploadInterval is the latency budget of the Cost and Auto
	// policies (wal.upload.max.interval.ms): the longest a byte waits for
	// its object. At least uploadInterval.
	// +kubebuilder:default="100ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	MaxUploadInterval *metav1.Duration `json:"maxUploadInterval,omitempty"`

	// MaxLatency is the Auto policy's latency budget
	// (wal.auto.max.latency.ms): the acks=all p99 its objects may add.
	// Auto cuts objects at least every half of it (an acks=all p99 was
	// about twice the cut interval in the measured frontier,
	// docs/bench.md), never more often than uploadInterval, and
	// replicates inline where objects cut that often would cost more than
	// maxCostPercent of classic. Unset: the brokers' default, 50ms
	// (docs/wal.md "auto's bounds": about 60 ms acks=all p99 in the
	// measured frontier, objects where 25 ms objects cost no more than
	// classic, inline below). 0s: no bound but maxUploadInterval, the
	// cheapest point whatever its latency.
	// status.zones[].wal.operatingPoints shows each broker's point.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	MaxLatency *metav1.Duration `json:"maxLatency,omitempty"`

	// MaxCostPercent is the Auto policy's cost ceiling
	// (wal.auto.max.cost.ratio): the most its objects may cost, in percent
	// of what classic replication of their bytes costs. Objects turn on
	// at 80 % of it and off above it. Unset: 100 (never dearer than
	// classic).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxCostPercent *int32 `json:"maxCostPercent,omitempty"`

	// ZoneLocalProduce lets producers send their records to a broker of
	// their own zone, which forwards them to the partitions' leaders
	// through an object in its zone's fast bucket instead of across zones
	// (docs/wal.md "Zone-local produce"). Unset or enabled false: the
	// brokers' settings are not rendered and every producer sends to the
	// leaders, as before.
	// +optional
	ZoneLocalProduce *ZoneLocalProduceSpec `json:"zoneLocalProduce,omitempty"`
}

// ZoneLocalProduceSpec is spec.wal.zoneLocalProduce, rendered as the
// brokers' wal.zonelocal.produce.* settings (docs/wal.md "Zone-local
// produce").
//
// +kubebuilder:validation:XValidation:rule="!has(self.inlineFallback) || duration(self.inlineFallback) == duration('0s') || (duration(self.inlineFallback) >= duration('1ms') && duration(self.inlineFallback) <= duration('1h'))",message="wal.zoneLocalProduce.inlineFallback must be 0s (no inline fallback) or between 1ms and 1h: the broker reads wal.zonelocal.produce.inline.ms as whole milliseconds from 0 to 3600000"
type ZoneLocalProduceSpec struct {
	// Enabled turns zone-local produce on (wal.zonelocal.produce.enable);
	// it needs spec.wal.enabled. Only clients that name their zone in
	// their client ID are served this way: client.id containing
	// strata_az=<zone> (alone or as one part of a ',', ';' or
	// blank-separated ID, e.g. "orders-svc,strata_az=us-east-1a"), <zone>
	// being one of spec.zones[].name. Such a client sees its zone's
	// replica of every partition as the leader; nothing else changes for
	// it (bootstrap servers, acks, idempotence, transactions). Other
	// clients keep the plain path. A partition without a replica in the
	// client's zone is still produced to across zones.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Policy chooses the path of a forwarded request
	// (wal.zonelocal.produce.policy). Bucket (default): always through
	// the zone's fast bucket, so no record byte crosses a zone on its way
	// to the leader, at the price of one PUT (and the leader's GET) per
	// forwarded batch group and that much latency. Auto: through the
	// bucket only when the object would cost no more than sending its
	// bytes across zones, by the brokers' price table (spec.cost.prices),
	// inline (across zones) otherwise: the cheaper of the two per request.
	// +kubebuilder:validation:Enum=Bucket;Auto
	// +kubebuilder:default=Bucket
	// +optional
	Policy ZoneLocalProducePolicy `json:"policy,omitempty"`

	// InlineFallback is how long a broker forwards inline (across zones)
	// after the bucket path failed (a PUT, the leader's GET or a checksum)
	// before it tries the bucket again (wal.zonelocal.produce.inline.ms):
	// a zone whose bucket is out keeps its producers going. 0s: no inline
	// fallback, a failure answers KAFKA_STORAGE_ERROR and the clients
	// retry through a new object. 0s, or 1ms to 1h; unset: 10s.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	InlineFallback *metav1.Duration `json:"inlineFallback,omitempty"`
}

// ZoneLocalProducePolicy is spec.wal.zoneLocalProduce.policy.
type ZoneLocalProducePolicy string

// The zone-local produce policies (broker values bucket, auto).
const (
	ZoneLocalProduceBucket ZoneLocalProducePolicy = "Bucket"
	ZoneLocalProduceAuto   ZoneLocalProducePolicy = "Auto"
)

// ZoneLocalEnabled reports whether zone-local produce is to be rendered:
// spec.wal.zoneLocalProduce.enabled with WAL on.
func (w WALSpec) ZoneLocalEnabled() bool {
	return w.IsEnabled() && w.ZoneLocalProduce != nil && w.ZoneLocalProduce.Enabled
}

// WALPolicy is spec.wal.policy.
type WALPolicy string

// The WAL policies (broker values latency, cost, auto).
const (
	WALPolicyLatency WALPolicy = "Latency"
	WALPolicyCost    WALPolicy = "Cost"
	WALPolicyAuto    WALPolicy = "Auto"
)

// CostSpec configures the cost estimates and wal.policy.
type CostSpec struct {
	// Prices overrides the price table (defaults: S3 Express One Zone and
	// AWS cross-AZ transfer). Rendered as the brokers' cost.price.* keys.
	// +optional
	Prices *PriceTable `json:"prices,omitempty"`
}

// PriceTable is the price table in US dollars, as decimal strings (e.g.
// "0.00113"); an empty field keeps the default. Per-GB prices are per
// 1e9 bytes.
type PriceTable struct {
	// PutPer1000 is the price of 1,000 PUTs to a fast bucket (default
	// 0.00113).
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	PutPer1000 string `json:"putPer1000,omitempty"`
	// GetPer1000 is the price of 1,000 GETs (default 0.00003).
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	GetPer1000 string `json:"getPer1000,omitempty"`
	// UploadPerGB is charged per GB a PUT carries beyond
	// includedBytesPerRequest (default 0.0032).
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	UploadPerGB string `json:"uploadPerGB,omitempty"`
	// RetrievalPerGB is charged per GB a GET returns beyond
	// includedBytesPerRequest (default 0.0006).
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	RetrievalPerGB string `json:"retrievalPerGB,omitempty"`
	// IncludedBytesPerRequest are the bytes of a request its request price
	// covers (default 524288).
	// +kubebuilder:validation:Minimum=0
	// +optional
	IncludedBytesPerRequest *int64 `json:"includedBytesPerRequest,omitempty"`
	// CrossZoneOutPerGB and CrossZoneInPerGB are charged per GB crossing
	// a zone boundary, in the sending and the receiving zone (default
	// 0.01 each).
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	CrossZoneOutPerGB string `json:"crossZoneOutPerGB,omitempty"`
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	CrossZoneInPerGB string `json:"crossZoneInPerGB,omitempty"`
}

// TieredStorageSpec configures the regional slow tier.
type TieredStorageSpec struct {
	// Bucket is the slow-tier bucket name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +required
	Bucket string `json:"bucket"`

	// Region of the bucket.
	// +kubebuilder:validation:MinLength=1
	// +required
	Region string `json:"region"`

	// Endpoint overrides the S3 endpoint URL (for S3-compatible stores).
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// ForcePathStyle addresses the bucket in the URL path instead of the
	// host name, as most S3-compatible stores need.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`

	// Credentials for the bucket.
	// +optional
	Credentials S3Credentials `json:"credentials,omitempty"`

	// LocalRetention is how long closed segments stay on the broker's disk
	// after being copied to the slow tier (local.retention.ms).
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	LocalRetention *metav1.Duration `json:"localRetention,omitempty"`
}

// MetadataSpec selects the etcd cluster that holds the cluster metadata:
// a managed one run by the operator (default), or external endpoints.
//
// The transition rules sit here, on the parent, and not on
// managed.replicas: Kubernetes skips a rule comparing self with oldSelf
// when the old object has no value there, so a rule on replicas alone
// lets a cluster created without managed (3 members) become managed
// with 1. spec.metadata is defaulted to {}, so these rules always have
// an old value to compare with.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.managed) && has(self.externalEndpoints))",message="metadata: set either managed or externalEndpoints, not both"
// +kubebuilder:validation:XValidation:rule="has(self.externalEndpoints) == has(oldSelf.externalEndpoints)",message="metadata: the choice between a managed etcd and externalEndpoints cannot change after creation: the brokers would move to another, empty metadata store and lose every topic, offset and ACL (move the metadata by hand: docs/operator.md)"
// +kubebuilder:validation:XValidation:rule="has(self.externalEndpoints) || has(oldSelf.externalEndpoints) || ((has(self.managed) && has(self.managed.replicas)) ? self.managed.replicas : 3) == ((has(oldSelf.managed) && has(oldSelf.managed.replicas)) ? oldSelf.managed.replicas : 3)",message="metadata.managed.replicas cannot change after creation (a cluster created without metadata.managed has 3 members): etcd membership changes are not automated, and fewer members than the running ones would lose the etcd quorum"
// +kubebuilder:validation:XValidation:rule="!has(self.externalTLS) || (has(self.externalEndpoints) && self.externalEndpoints.all(e, e.startsWith('https://')))",message="metadata.externalTLS needs externalEndpoints, every one https://"
type MetadataSpec struct {
	// Managed runs an etcd StatefulSet for this cluster, its members spread
	// across the cluster's zones. Used when externalEndpoints is empty.
	// +optional
	Managed *ManagedEtcdSpec `json:"managed,omitempty"`

	// ExternalEndpoints are client URLs of an existing etcd cluster.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:Pattern=`^https?://`
	// +listType=atomic
	// +optional
	ExternalEndpoints []string `json:"externalEndpoints,omitempty"`

	// ExternalTLS names a Secret in the cluster's namespace with the TLS
	// settings towards externalEndpoints, in cert-manager's layout:
	// ca.crt (the CA etcd's server certificate chains to), tls.crt and
	// tls.key (the client certificate the brokers and the operator
	// present, for an etcd run with --client-cert-auth). The endpoints
	// must be https://. The brokers re-read the files when the Secret
	// changes.
	// +optional
	ExternalTLS *SecretReference `json:"externalTLS,omitempty"`
}

// ManagedEtcdSpec configures the operator-run etcd.
type ManagedEtcdSpec struct {
	// Replicas is the number of etcd members; odd, so quorum survives the
	// loss of a zone when there are three zones.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=7
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1",message="metadata.managed.replicas must be odd"
	// It cannot change after creation, set or not (the rule is on
	// MetadataSpec).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Image of the etcd members.
	// +kubebuilder:default="quay.io/coreos/etcd:v3.7.3"
	// +optional
	Image string `json:"image,omitempty"`

	// StorageSize of each member's volume.
	// +kubebuilder:default="10Gi"
	// +optional
	StorageSize *resource.Quantity `json:"storageSize,omitempty"`
}

// ListenerProtocol is a Kafka security protocol.
// +kubebuilder:validation:Enum=PLAINTEXT;SSL;SASL_PLAINTEXT;SASL_SSL
type ListenerProtocol string

// ListenerSpec is one Kafka listener.
//
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || (has(self.protocol) && (self.protocol == 'SSL' || self.protocol == 'SASL_SSL'))",message="listener tls applies to protocol SSL or SASL_SSL only"
type ListenerSpec struct {
	// Name of the listener, upper-case as in Kafka's listeners setting
	// (e.g. PLAINTEXT, INTERNAL). Lower-cased it names the container and
	// Service port, hence at most 15 characters and no doubled or trailing
	// underscore.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Z](_?[A-Z0-9])*$`
	// +required
	Name string `json:"name"`

	// Port the brokers listen on.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`

	// Protocol of the listener: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or
	// SASL_SSL (SCRAM-SHA-256/512; users come with the KafkaUser
	// resource).
	// +kubebuilder:default=PLAINTEXT
	// +optional
	Protocol ListenerProtocol `json:"protocol,omitempty"`

	// TLS settings of an SSL or SASL_SSL listener.
	// +optional
	TLS *ListenerTLS `json:"tls,omitempty"`
}

// ClientAuth says whether a TLS listener asks for client certificates.
// +kubebuilder:validation:Enum=none;requested;required
type ClientAuth string

const (
	ClientAuthNone      ClientAuth = "none"
	ClientAuthRequested ClientAuth = "requested"
	ClientAuthRequired  ClientAuth = "required"
)

// ListenerTLS is a TLS listener's client authentication.
type ListenerTLS struct {
	// ClientAuth: none (default), requested or required. Client
	// certificates must chain to the cluster CA, or to the ca.crt of
	// spec.security.listenerCertificate when it has one; the principal is
	// the certificate subject (User:CN=...,O=...).
	// +kubebuilder:default=none
	// +optional
	ClientAuth ClientAuth `json:"clientAuth,omitempty"`
}

// SecuritySpec configures certificates and network access.
type SecuritySpec struct {
	// ClusterCA is the operator's certificate authority of this cluster.
	// +optional
	ClusterCA ClusterCASpec `json:"clusterCA,omitempty"`

	// ListenerCertificate names a Secret in the cluster's namespace with
	// the certificate the SSL and SASL_SSL client listeners serve, in
	// cert-manager's layout: tls.crt (chain), tls.key, and optionally
	// ca.crt (the CA client certificates must chain to when a listener
	// asks for them). Without it they serve a certificate of the cluster
	// CA. The brokers re-read the files when the Secret changes; no roll.
	// The inter-broker listener and etcd always use the cluster CA.
	// +optional
	ListenerCertificate *SecretReference `json:"listenerCertificate,omitempty"`

	// Authorization turns Kafka ACLs on (type acl: authorizer.class.name
	// strata.acl, allow.everyone.if.no.acl.found false unless
	// allowEveryoneIfNoACLFound, the operator's and the brokers'
	// certificate principals as super users) or off (none: every client
	// that gets in may do everything). Unset means acl, except for a
	// cluster whose brokers ran without an authorizer under an operator
	// release from before this field: it runs acl with
	// allowEveryoneIfNoACLFound, so its clients keep every right they had,
	// until the field is set (docs/security.md).
	// +optional
	Authorization *AuthorizationSpec `json:"authorization,omitempty"`

	// NetworkPolicy renders a NetworkPolicy per cluster: client listener
	// and metrics ports open to all, the inter-broker port only to the
	// cluster's brokers and the operator, etcd only to the brokers, its
	// members and the operator. Turn it off where the CNI does not
	// implement NetworkPolicy or another policy governs the namespace.
	// +kubebuilder:default={enabled:true}
	// +optional
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// MetricsToken names a Secret in the cluster's namespace whose key
	// "token" is the bearer token of the brokers' HTTP listener (port
	// 9644): every path but /healthz and /readyz needs
	// "Authorization: Bearer <token>". Without it the operator generates
	// one per cluster in Secret <cluster>-metrics-token. Name your own
	// Secret to share one token with a Prometheus that scrapes several
	// clusters. The brokers re-read the token when the Secret changes.
	// +optional
	MetricsToken *SecretReference `json:"metricsToken,omitempty"`
}

// AuthorizationType is spec.security.authorization.type.
// +kubebuilder:validation:Enum=acl;none
type AuthorizationType string

// The authorization types.
const (
	AuthorizationACL  AuthorizationType = "acl"
	AuthorizationNone AuthorizationType = "none"
)

// AuthorizationSpec configures the brokers' authorizer.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'acl' || !has(self.superUsers) || size(self.superUsers) == 0",message="security.authorization.superUsers needs type acl: without an authorizer every principal may do everything"
// +kubebuilder:validation:XValidation:rule="self.type == 'acl' || !has(self.allowEveryoneIfNoACLFound) || !self.allowEveryoneIfNoACLFound",message="security.authorization.allowEveryoneIfNoACLFound needs type acl: without an authorizer every principal may do everything anyway"
type AuthorizationSpec struct {
	// Type: acl (Kafka ACLs enforced, KafkaUser ACLs apply) or none.
	// +required
	Type AuthorizationType `json:"type"`

	// SuperUsers are further principals allowed everything (super.users),
	// besides the operator's and the brokers' (User:CN=strata-operator,O=strata
	// and User:CN=strata-broker,O=strata), e.g. User:admin or, for a
	// KafkaUser of type tls, User:CN=<name>. Only with type acl.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^User:[^;]+$`
	// +kubebuilder:validation:items:MaxLength=255
	// +listType=set
	// +optional
	SuperUsers []string `json:"superUsers,omitempty"`

	// AllowEveryoneIfNoACLFound opens a resource that no ACL names to
	// every principal (Kafka's allow.everyone.if.no.acl.found=true): ACLs
	// are enforced where they exist and restrict only what they name. For
	// moving a cluster whose clients have no KafkaUsers yet to ACLs one
	// resource at a time; a cluster created before secure defaults runs
	// so while spec.security.authorization is unset. Only with type acl;
	// default false (a resource without ACLs is refused to all but super
	// users).
	// +optional
	AllowEveryoneIfNoACLFound bool `json:"allowEveryoneIfNoACLFound,omitempty"`
}

// SecretReference names a Secret in the same namespace.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// ClusterCASpec sets the cluster CA's lifetime and renewal.
//
// +kubebuilder:validation:XValidation:rule="!has(self.validity) || (duration(self.validity) >= duration('8760h') && duration(self.validity) <= duration('43800h'))",message="clusterCA.validity must be between 8760h (1 year) and 43800h (5 years)"
// +kubebuilder:validation:XValidation:rule="!has(self.renewBefore) || (duration(self.renewBefore) >= duration('24h') && duration(self.renewBefore) <= duration('4380h'))",message="clusterCA.renewBefore must be between 24h and 4380h (half of the shortest CA validity)"
type ClusterCASpec struct {
	// Validity of a new or renewed CA certificate (default 17520h, two
	// years; 1 to 5 years). Broker, etcd and operator certificates live
	// one year, never past the CA certificate.
	// +optional
	Validity *metav1.Duration `json:"validity,omitempty"`

	// RenewBefore: a certificate is renewed when less than this is left
	// (default 720h, 30 days). The CA is renewed with its key, so
	// certificates issued before stay valid.
	// +optional
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`

	// RenewPercent, 1-90: also renew when less than this share of a
	// certificate's validity is left (0: only renewBefore).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=90
	// +optional
	RenewPercent int32 `json:"renewPercent,omitempty"`
}

// NetworkPolicySpec switches the rendered NetworkPolicy.
type NetworkPolicySpec struct {
	// Enabled (default true).
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// IsEnabled is Enabled with its default.
func (n NetworkPolicySpec) IsEnabled() bool { return n.Enabled == nil || *n.Enabled }

// PodTemplateSpec adds metadata and identity to the broker pods.
type PodTemplateSpec struct {
	// Labels added to every broker pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to every broker pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// ServiceAccountName the broker pods run as (e.g. one bound to an IAM
	// role for ambient bucket credentials).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// LeaderPlacementPolicy says how partition leaders are placed.
// +kubebuilder:validation:Enum=Balanced;Zone
type LeaderPlacementPolicy string

const (
	// LeaderPlacementBalanced spreads leaders evenly over zones and brokers.
	LeaderPlacementBalanced LeaderPlacementPolicy = "Balanced"
	// LeaderPlacementZone pins preferred leaders to LeaderPlacementSpec.Zone.
	LeaderPlacementZone LeaderPlacementPolicy = "Zone"
)

// LeaderPlacementSpec says where partition leaders should go.
//
// +kubebuilder:validation:XValidation:rule="!has(self.policy) || self.policy != 'Zone' || (has(self.zone) && size(self.zone) > 0)",message="leaderPlacement.policy Zone needs leaderPlacement.zone"
// +kubebuilder:validation:XValidation:rule="!has(self.zone) || (has(self.policy) && self.policy == 'Zone')",message="leaderPlacement.zone needs leaderPlacement.policy Zone (Balanced spreads leaders over all zones)"
type LeaderPlacementSpec struct {
	// Policy is Balanced (default: preferred leaders spread over zones and
	// brokers) or Zone (preferred leaders in Zone; the controller broker
	// moves them there and elects them, also after failovers and restarts).
	// +kubebuilder:default=Balanced
	// +optional
	Policy LeaderPlacementPolicy `json:"policy,omitempty"`

	// Zone holds the preferred leaders with policy Zone; it must be one of
	// spec.zones. Followers stay one per other zone.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Zone string `json:"zone,omitempty"`
}

// RollSpec configures rolling restarts.
//
// +kubebuilder:validation:XValidation:rule="!has(self.stuckAfter) || (duration(self.stuckAfter) >= duration('1m') && duration(self.stuckAfter) <= duration('168h'))",message="roll.stuckAfter must be between 1m and 168h"
type RollSpec struct {
	// StuckAfter is how long a rolling restart may go without progress
	// before it is reported Stalled with reason RollStuck. Progress is a
	// broker restarted, or fewer of what the next restart waits for
	// (broker pods not ready, partitions not fully in sync or offline)
	// than at the previous look: a slow but steady catch-up after a
	// restart is not stuck. Unset: the operator's default, 10 minutes.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	StuckAfter *metav1.Duration `json:"stuckAfter,omitempty"`
}

// RebalanceSpec bounds the operator's partition reassignments.
//
// +kubebuilder:validation:XValidation:rule="!has(self.movesStalledAfter) || (duration(self.movesStalledAfter) >= duration('1s') && duration(self.movesStalledAfter) <= duration('168h'))",message="rebalance.movesStalledAfter must be between 1s and 168h"
type RebalanceSpec struct {
	// MaxConcurrentMoves caps the partition reassignments in flight in the
	// cluster at a time, counting those started by others (default 10).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=10
	// +optional
	MaxConcurrentMoves int32 `json:"maxConcurrentMoves,omitempty"`

	// Throttle is the replication throttle of the operator's moves, in
	// bytes per second per broker: while its reassignments (rebalance
	// after a scale-up, drain before a scale-down) are in flight, the
	// operator sets Kafka's leader/follower.replication.throttled.rate on
	// the brokers involved and the topic configs
	// leader/follower.replication.throttled.replicas for the moving
	// partitions, and removes them when the moves end (or this field is
	// removed). Only catch-up traffic of the moving replicas is throttled,
	// never in-sync replication. Unset: moves are bounded by
	// MaxConcurrentMoves only.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Throttle *int64 `json:"throttle,omitempty"`

	// MovesStalledAfter is how long the operator's moves (a drain, a
	// scale-up rebalance) may go without progress (bytes left falling or
	// a move finishing) while reassignments are in flight before the
	// MovesStalled condition is set, and Stalled: a person must look.
	// Unset: 10 minutes.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	MovesStalledAfter *metav1.Duration `json:"movesStalledAfter,omitempty"`

	// ImbalanceTolerancePercent starts the operator's rebalance when a
	// broker's replica count or bytes differ from the mean of its zone's
	// brokers by more than this percent of that mean (and by more than
	// one replica or 1 MiB): a new broker that got a topic first, or data
	// grown unevenly, is rebalanced, not only a broker that holds nothing.
	// The rebalance evens counts to within one and bytes to within 5%, so
	// a cluster it ends on does not start another. Default 10.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=10
	// +optional
	ImbalanceTolerancePercent int32 `json:"imbalanceTolerancePercent,omitempty"`
}

// DefaultMaxConcurrentMoves is RebalanceSpec.MaxConcurrentMoves when unset.
const DefaultMaxConcurrentMoves = 10

// DefaultImbalanceTolerancePercent is
// RebalanceSpec.ImbalanceTolerancePercent when unset.
const DefaultImbalanceTolerancePercent = 10

// IsEnabled reports whether WAL replication is on (the default).
func (w WALSpec) IsEnabled() bool { return w.Enabled == nil || *w.Enabled }

// KafkaClusterStatus is the observed state of a KafkaCluster.
type KafkaClusterStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions (kstatus conventions, each with observedGeneration):
	// Ready (Kafka serves: pods, brokers registered, no offline partition,
	// metadata healthy), Reconciling (a roll, RollingOut or RollBlocked, or
	// a retried error), Stalled (the spec cannot be realised: InvalidSpec,
	// FastBucketNotFound, FastBucketZoneMismatch, ObjectConflict; or a roll
	// stuck for spec.roll.stuckAfter: RollStuck; or moves without progress
	// for spec.rebalance.movesStalledAfter: MovesStalled), Degraded
	// (under-replicated partitions, brokers falling back to inline
	// replication, unreachable buckets), MetadataHealthy, KafkaReachable,
	// ScaleDownBlocked (a scale-down that cannot be done; nothing is
	// removed), MovesStalled (a drain's or rebalance's moves made no
	// progress), ReplicationThrottled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// BrokerIDBlocks records the broker ID block of every zone that ever
	// appeared, in order of first appearance. Blocks are never renumbered
	// or handed to another zone; a zone that is removed keeps its block,
	// marked retired, and gets a fresh block if it comes back. This is a
	// copy: the durable record is the ConfigMap <cluster>-broker-ids,
	// which survives the loss of status and a re-created KafkaCluster.
	// +listType=atomic
	// +optional
	BrokerIDBlocks []BrokerIDBlock `json:"brokerIDBlocks,omitempty"`

	// Zones reports each current zone.
	// +listType=map
	// +listMapKey=name
	// +optional
	Zones []ZoneStatus `json:"zones,omitempty"`

	// Brokers lists every desired broker.
	// +listType=atomic
	// +optional
	Brokers []BrokerStatus `json:"brokers,omitempty"`

	// ReadyBrokers counts ready brokers over all zones.
	// +optional
	ReadyBrokers int32 `json:"readyBrokers"`

	// DesiredBrokers counts desired brokers over all zones.
	// +optional
	DesiredBrokers int32 `json:"desiredBrokers"`

	// ZoneCount is the number of zones in the spec.
	// +optional
	ZoneCount int32 `json:"zoneCount"`

	// MetadataEndpoints are the etcd client URLs the brokers use.
	// +listType=atomic
	// +optional
	MetadataEndpoints []string `json:"metadataEndpoints,omitempty"`

	// Certificates the cluster uses, with their expiry and when the
	// operator renews them: cluster-ca, broker, etcd, operator (its
	// client certificate) and listener (spec.security.listenerCertificate,
	// renewed by its issuer).
	// +listType=map
	// +listMapKey=name
	// +optional
	Certificates []CertificateStatus `json:"certificates,omitempty"`

	// Metadata is the health of the etcd cluster holding the metadata, as
	// the operator last saw it (Status and AlarmList of every endpoint).
	// +optional
	Metadata *MetadataHealth `json:"metadata,omitempty"`

	// Kafka is the cluster's health as the brokers report it through the
	// Kafka admin API, as the operator last saw it.
	// +optional
	Kafka *KafkaHealth `json:"kafka,omitempty"`

	// Roll is the rolling restart in progress: broker pods that do not run
	// the current pod template are restarted one at a time across the
	// cluster. Absent when every pod is current.
	// +optional
	Roll *RollStatus `json:"roll,omitempty"`

	// Scaling is the replica moves of a scale-up (rebalance) or
	// scale-down (drain) in progress. Absent when there is none.
	// +optional
	Scaling *ScalingStatus `json:"scaling,omitempty"`

	// CordonedBrokers are the brokers the operator cordoned (their
	// dynamic broker config cordoned.log.dirs is "*": they take no new
	// replica) because a scale-down removes them; each is uncordoned once
	// it is gone from the metadata or the spec wants it again.
	// +optional
	// +listType=set
	CordonedBrokers []int32 `json:"cordonedBrokers,omitempty"`

	// Cost is the replication cost report from the brokers' counters,
	// priced with the price table. Absent until brokers were scraped.
	// +optional
	Cost *CostStatus `json:"cost,omitempty"`

	// DynamicConfig is what became of the spec.config keys that are
	// dynamic broker configs (the broker defaults of topic configs:
	// log.retention.ms, message.max.bytes, min.insync.replicas, ...):
	// they are applied cluster-wide through the admin API without
	// restarting a broker, while every other key is in the brokers'
	// config file and a change rolls them.
	// +optional
	DynamicConfig *DynamicConfigStatus `json:"dynamicConfig,omitempty"`
}

// DynamicConfigStatus reports the spec.config keys applied as dynamic
// broker configs.
type DynamicConfigStatus struct {
	// Applied lists the keys the operator set as cluster-wide dynamic
	// broker configs (IncrementalAlterConfigs on the broker resource "",
	// as kafka-configs --entity-default does), at their spec values; a
	// key that leaves spec.config is deleted there, and the brokers go
	// back to their defaults.
	// +listType=set
	// +optional
	Applied []string `json:"applied,omitempty"`
	// Pending lists keys not applied yet: the brokers were not reachable,
	// or refused the value (Message says which and why).
	// +listType=set
	// +optional
	Pending []string `json:"pending,omitempty"`
	// Message is the last problem, empty when every key is applied.
	// +optional
	Message string `json:"message,omitempty"`
	// LastUpdateTime is when the operator last changed a dynamic config.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// CostStatus is the replication cost report of a KafkaCluster: the sums
// of the registered brokers' counters since each started
// (strata_replication_*), and the monthly estimate from their rates.
type CostStatus struct {
	// Window is the longest time a broker's counters cover (since it
	// started); each broker's rate is over its own time.
	Window metav1.Duration `json:"window"`
	// BytesProduced: record bytes the brokers appended as leaders.
	BytesProduced int64 `json:"bytesProduced"`
	// CrossZoneBytes: replication bytes sent between zones (inline
	// records and WAL pointers).
	CrossZoneBytes int64 `json:"crossZoneBytes"`
	// ClassicCrossZoneBytes: what classic replication would have sent
	// across zones for the same appends.
	ClassicCrossZoneBytes int64 `json:"classicCrossZoneBytes"`
	// Puts and Gets: the brokers' fast-bucket requests.
	Puts int64 `json:"puts"`
	Gets int64 `json:"gets"`
	// ClientCrossZoneBytes: bytes the brokers exchanged (both directions)
	// with producers and consumers in another zone than their broker's —
	// the rest of the transfer bill. A client's zone is its client.rack
	// or strata_az=<zone> in its client ID; clients that say neither are
	// not counted (docs/operator.md "Cost report").
	// +optional
	ClientCrossZoneBytes int64 `json:"clientCrossZoneBytes,omitempty"`
	// ProducerCrossZoneBytes: the producers' part of ClientCrossZoneBytes.
	// +optional
	ProducerCrossZoneBytes int64 `json:"producerCrossZoneBytes,omitempty"`
	// EstimatedUSDPerMonth: the replication cost at the brokers' rates
	// over 30 days, actual and with classic replication, and the clients'
	// cross-zone transfer beside it.
	EstimatedUSDPerMonth CostEstimate `json:"estimatedUSDPerMonth"`
	// SavingPercent is 100 × (1 − actual/classic), rounded; negative when
	// replication costs more than classic. Absent before any byte.
	// +optional
	SavingPercent *int32 `json:"savingPercent,omitempty"`
	// TotalSavingPercent is the saving on the whole bill, the clients'
	// cross-zone transfer included on both sides: 100 × (1 − (actual +
	// clients) / (classic + clients)), rounded. Absent before any byte.
	// +optional
	TotalSavingPercent *int32 `json:"totalSavingPercent,omitempty"`
	// Brokers is the number of brokers whose counters are included.
	Brokers int32 `json:"brokers"`
	// LastUpdateTime is when the counters were read.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// CostEstimate is a cost in US dollars per month, as decimal strings.
type CostEstimate struct {
	// Actual and Classic: replication, as it runs and with classic
	// replication of the same appends.
	Actual  string `json:"actual"`
	Classic string `json:"classic"`
	// Clients: the clients' cross-zone transfer (both directions);
	// Producers its producers' part. Absent from brokers that do not
	// count it.
	// +optional
	Clients string `json:"clients,omitempty"`
	// +optional
	Producers string `json:"producers,omitempty"`
}

// RollStatus is a rolling restart in progress.
type RollStatus struct {
	// Pending lists the broker IDs whose pod runs an outdated template.
	// +listType=atomic
	// +optional
	Pending []int32 `json:"pending,omitempty"`
	// Restarting is the broker whose pod the operator deleted last; the
	// next restart waits until it is ready, and until the next broker's
	// restart keeps every partition it is in sync for at or above
	// min.insync.replicas.
	// +optional
	Restarting *int32 `json:"restarting,omitempty"`
	// Message is the last decision and why (plan.NextRestart).
	// +optional
	Message string `json:"message,omitempty"`
	// BlockedReason says why no pod may be restarted now (for the
	// availability gate: which partitions block which broker, with their
	// ISR and min.insync.replicas); empty while the roll proceeds.
	// +optional
	BlockedReason string `json:"blockedReason,omitempty"`
	// BlockedSince is when the roll last stopped restarting brokers.
	// +optional
	BlockedSince *metav1.Time `json:"blockedSince,omitempty"`
	// LastProgressTime is when the roll last made progress: a broker
	// restarted, or WaitingFor went down. Without progress for
	// spec.roll.stuckAfter (default 10 minutes) the roll is reported
	// Stalled with reason RollStuck.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// WaitingFor counts what the next restart waits for, at the last
	// look: broker pods not ready plus, per outdated broker, the
	// partitions its restart would take below min.insync.replicas
	// (blockedReason names them). Partitions no outdated broker is in
	// sync for are not counted. Absent while the roll restarts or when the Kafka metadata
	// cannot be read.
	// +optional
	WaitingFor *int32 `json:"waitingFor,omitempty"`
}

// ScalingStatus is a scale-up rebalance or scale-down drain in progress.
type ScalingStatus struct {
	// Phase is Draining (a broker to remove is being emptied), Rebalancing
	// (replicas move onto new brokers) or Blocked (a scale-down that
	// cannot be done; nothing is removed).
	Phase string `json:"phase"`
	// Broker is the broker being drained.
	// +optional
	Broker *int32 `json:"broker,omitempty"`
	// MovesStarted counts the reassignments that move replicas the
	// operator started for this scaling so far (MovesPlanned and MovesDone
	// count the same kind; leader reorderings, which copy nothing and end
	// at once, are not counted).
	// +optional
	MovesStarted int32 `json:"movesStarted,omitempty"`
	// MovesInFlight counts the reassignments in flight in the cluster.
	// +optional
	MovesInFlight int32 `json:"movesInFlight,omitempty"`
	// PartitionsLeft counts the partitions still holding a replica on the
	// broker being drained.
	// +optional
	PartitionsLeft int32 `json:"partitionsLeft,omitempty"`
	// MovesPlanned counts the reassignments this scaling makes in all:
	// the ones started so far plus the ones its plan still has (for a
	// drain, the plan of the broker being drained).
	// +optional
	MovesPlanned int32 `json:"movesPlanned,omitempty"`
	// MovesDone counts the reassignments started for this scaling that
	// have finished.
	// +optional
	MovesDone int32 `json:"movesDone"`
	// BytesToMove is the bytes this scaling copies in all, an estimate:
	// BytesLeft when it starts, grown by every rise of BytesLeft (data
	// grew, the next broker's drain started). Replica sizes come from the
	// brokers (DescribeLogDirs); 0 when they could not be read.
	// +optional
	BytesToMove int64 `json:"bytesToMove"`
	// BytesLeft is the bytes still to copy: the planned moves' partitions
	// plus what the new replicas of reassignments in flight still lack.
	// +optional
	BytesLeft int64 `json:"bytesLeft"`
	// Message is the last decision and why.
	// +optional
	Message string `json:"message,omitempty"`
	// The clock of the moves: start, last progress, bytes copied, rate
	// and estimated completion.
	MoveClock `json:",inline"`
	// KafkaRebalance names the KafkaRebalance (owned by the cluster) that
	// shows this drain or rebalance among the others, mode remove-brokers
	// or add-brokers.
	// +optional
	KafkaRebalance string `json:"kafkaRebalance,omitempty"`
}

// KafkaHealth is what the operator last read from the brokers through the
// Kafka admin API (Metadata): which brokers are registered, which one is
// the controller, and the state of every partition.
type KafkaHealth struct {
	// Reachable is set when the last probe got a Metadata answer.
	Reachable bool `json:"reachable"`
	// Error is why the last probe failed.
	// +optional
	Error string `json:"error,omitempty"`
	// Controller is the broker ID of the controller, or -1 when none.
	// +optional
	Controller int32 `json:"controller"`
	// RegisteredBrokers counts the brokers registered in the cluster
	// metadata, wanted or not.
	// +optional
	RegisteredBrokers int32 `json:"registeredBrokers"`
	// UnregisteredBrokers lists the IDs of brokers the spec wants
	// (status.brokers) that are not registered.
	// +listType=atomic
	// +optional
	UnregisteredBrokers []int32 `json:"unregisteredBrokers,omitempty"`
	// Topics counts topics.
	// +optional
	Topics int32 `json:"topics"`
	// Partitions counts partitions over all topics.
	// +optional
	Partitions int32 `json:"partitions"`
	// OfflinePartitions counts partitions without a leader.
	// +optional
	OfflinePartitions int32 `json:"offlinePartitions"`
	// UnderReplicatedPartitions counts partitions whose ISR is smaller
	// than their replica set.
	// +optional
	UnderReplicatedPartitions int32 `json:"underReplicatedPartitions"`
	// NonPreferredLeaders counts partitions led by another replica than
	// their preferred (first) one.
	// +optional
	NonPreferredLeaders int32 `json:"nonPreferredLeaders"`
	// LeadersPerZone counts partition leaders by the zone (broker rack)
	// of their broker, cluster-wide, zones in name order.
	// +listType=atomic
	// +optional
	LeadersPerZone []ZoneLeaders `json:"leadersPerZone,omitempty"`
	// LastProbeTime is when the operator last asked the brokers.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
	// LastLeaderElectionTime is when the operator last asked the
	// controller for preferred-leader election; it rate-limits the
	// elections and, kept in status, survives an operator restart.
	// +optional
	LastLeaderElectionTime *metav1.Time `json:"lastLeaderElectionTime,omitempty"`
}

// ZoneLeaders is the number of partitions led by brokers of one zone.
type ZoneLeaders struct {
	// Zone is the brokers' rack.
	Zone string `json:"zone"`
	// Leaders counts partitions led in the zone.
	Leaders int32 `json:"leaders"`
}

// WALState is a zone's write-ahead log state as its brokers report it.
// +kubebuilder:validation:Enum=Healthy;Degraded;Disabled;Unknown
type WALState string

const (
	// WALHealthy: every broker of the zone uploads WAL objects.
	WALHealthy WALState = "Healthy"
	// WALDegraded: at least one broker's uploads fail and it replicates
	// inline (strata_wal_degraded is 1).
	WALDegraded WALState = "Degraded"
	// WALDisabled: spec.wal.enabled is false; replication is inline.
	WALDisabled WALState = "Disabled"
	// WALUnknown: some broker's metrics could not be read.
	WALUnknown WALState = "Unknown"
)

// ZoneWALStatus is the WAL state of one zone, from its brokers' metrics.
type ZoneWALStatus struct {
	// State of the zone's WAL.
	State WALState `json:"state"`
	// DegradedBrokers lists the IDs of the zone's brokers that fell back
	// to inline replication.
	// +listType=atomic
	// +optional
	DegradedBrokers []int32 `json:"degradedBrokers,omitempty"`
	// PolicyInlineBrokers lists the zone's brokers that replicate inline
	// because spec.wal.policy found it cheaper (not a degradation).
	// +listType=atomic
	// +optional
	PolicyInlineBrokers []int32 `json:"policyInlineBrokers,omitempty"`
	// Message says why the state is Unknown.
	// +optional
	Message string `json:"message,omitempty"`
	// OperatingPoints is each of the zone's brokers' wal.policy operating
	// point, from its metrics (brokers that export one; the Auto policy
	// names its bound).
	// +listType=atomic
	// +optional
	OperatingPoints []WALOperatingPoint `json:"operatingPoints,omitempty"`
	// ZoneLocal is the zone's zone-local produce forwarding
	// (spec.wal.zoneLocalProduce), from its brokers' metrics; absent when
	// none of them forwards (zone-local produce off) or says (a broker
	// release without the metrics).
	// +optional
	ZoneLocal *ZoneLocalStatus `json:"zoneLocal,omitempty"`
}

// ZoneLocalStatus is one zone's zone-local produce forwarding, from its
// brokers' strata_zonelocal_path and strata_zonelocal_partitions_total.
type ZoneLocalStatus struct {
	// Brokers counts the zone's brokers that report their forwarding path.
	Brokers int32 `json:"brokers"`
	// InlineBrokers lists the zone's brokers whose next forwarded produce
	// request goes to the leaders inline (its record bytes cross zones)
	// rather than through the zone's fast bucket, and why. The others
	// forward through the bucket.
	// +listType=atomic
	// +optional
	InlineBrokers []ZoneLocalInline `json:"inlineBrokers,omitempty"`
	// ForwardedPartitions counts the partitions the zone's brokers
	// forwarded through the bucket since each started
	// (strata_zonelocal_partitions_total{role="forwarded"}).
	ForwardedPartitions int64 `json:"forwardedPartitions"`
	// InlinePartitions counts the partitions they forwarded inline since
	// each started (role="inline").
	InlinePartitions int64 `json:"inlinePartitions"`
}

// ZoneLocalInline is a broker that forwards zone-local produce inline.
type ZoneLocalInline struct {
	// BrokerID of the broker.
	BrokerID int32 `json:"brokerID"`
	// Reason: Cost (policy Auto found an object dearer than sending the
	// bytes across zones; not a degradation) or Outage (the bucket path
	// failed; inline for spec.wal.zoneLocalProduce.inlineFallback, then
	// the bucket is tried again).
	Reason ZoneLocalInlineReason `json:"reason"`
}

// ZoneLocalInlineReason says why a broker forwards inline.
type ZoneLocalInlineReason string

// Why a broker forwards zone-local produce inline.
const (
	ZoneLocalInlineCost   ZoneLocalInlineReason = "Cost"
	ZoneLocalInlineOutage ZoneLocalInlineReason = "Outage"
)

// WALOperatingPoint is where a broker's wal.policy replicates on the
// latency/cost frontier (docs/wal.md "Cost and wal.policy").
type WALOperatingPoint struct {
	// BrokerID of the broker.
	BrokerID int32 `json:"brokerID"`
	// Path is WAL (objects) or Inline (replica fetches carry the bytes,
	// chosen by the policy).
	Path string `json:"path"`
	// CutInterval is the longest a byte waits for its object.
	// +optional
	CutInterval *metav1.Duration `json:"cutInterval,omitempty"`
	// ExpectedAddedP99 is the acks=all p99 its objects are expected to
	// add (twice the cut interval; 0 inline).
	// +optional
	ExpectedAddedP99 *metav1.Duration `json:"expectedAddedP99,omitempty"`
	// CostPercent is its objects' estimated cost in percent of classic
	// replication of their bytes at the current rate (absent before any
	// traffic).
	// +optional
	CostPercent *int32 `json:"costPercent,omitempty"`
	// Bound is what set the Auto policy's point: Target (objects reach
	// the size that costs 8 % of classic), Latency (spec.wal.maxLatency
	// caps the interval), MaxInterval (spec.wal.maxUploadInterval caps
	// it), CostCeiling (inline: objects within the latency bound would
	// cost more than spec.wal.maxCostPercent), NoCrossZoneCopies (inline:
	// nothing to save), Unknown (no traffic yet). Empty for the Latency
	// and Cost policies.
	// +optional
	Bound string `json:"bound,omitempty"`
}

// MetadataHealth is the etcd health line of a KafkaCluster.
type MetadataHealth struct {
	// Endpoints probed.
	// +listType=atomic
	// +optional
	Endpoints []string `json:"endpoints,omitempty"`
	// HealthyMembers counts endpoints that answered Status without errors.
	HealthyMembers int32 `json:"healthyMembers"`
	// DBSizeBytes is the largest backend size over the members.
	// +optional
	DBSizeBytes int64 `json:"dbSizeBytes,omitempty"`
	// QuotaBytes is the backend quota the members report.
	// +optional
	QuotaBytes int64 `json:"quotaBytes,omitempty"`
	// Alarms raised in the cluster, as "<alarm> on member <id>" (NOSPACE:
	// the quota is hit and etcd refuses writes).
	// +listType=atomic
	// +optional
	Alarms []string `json:"alarms,omitempty"`
	// Members reports each endpoint.
	// +listType=atomic
	// +optional
	Members []MetadataMemberHealth `json:"members,omitempty"`
	// LastProbeTime is when the operator last probed the endpoints.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
}

// MetadataMemberHealth reports one etcd endpoint.
type MetadataMemberHealth struct {
	// Endpoint is the client URL probed.
	Endpoint string `json:"endpoint"`
	// MemberID is the member's etcd ID in hex, once it answered.
	// +optional
	MemberID string `json:"memberID,omitempty"`
	// Healthy is set when the member answered Status without errors.
	Healthy bool `json:"healthy"`
	// DBSizeBytes is the size of the member's backend file.
	// +optional
	DBSizeBytes int64 `json:"dbSizeBytes,omitempty"`
	// DBSizeInUseBytes is the part of the backend file in use; the rest
	// is what a defragmentation gives back.
	// +optional
	DBSizeInUseBytes int64 `json:"dbSizeInUseBytes,omitempty"`
	// Error is why the member is not healthy.
	// +optional
	Error string `json:"error,omitempty"`
	// LastDefragTime is when the operator last defragmented the member;
	// it rate-limits defragmentation.
	// +optional
	LastDefragTime *metav1.Time `json:"lastDefragTime,omitempty"`
}

// BrokerIDBlock reserves broker IDs [base, base+size) for one zone.
type BrokerIDBlock struct {
	// Zone the block belongs to.
	Zone string `json:"zone"`
	// Base is the first broker ID of the block.
	Base int32 `json:"base"`
	// Retired is set once the zone left the spec; the block is never reused.
	// +optional
	Retired bool `json:"retired,omitempty"`
}

// ZoneStatus reports one zone.
type ZoneStatus struct {
	// Name of the zone.
	Name string `json:"name"`
	// BrokerIDBase is the zone's broker ID block base.
	BrokerIDBase int32 `json:"brokerIDBase"`
	// StatefulSet of the zone's brokers.
	StatefulSet string `json:"statefulSet"`
	// FastBucket the zone's brokers write to.
	// +optional
	FastBucket string `json:"fastBucket,omitempty"`
	// DesiredBrokers in the zone.
	DesiredBrokers int32 `json:"desiredBrokers"`
	// ReadyBrokers in the zone.
	ReadyBrokers int32 `json:"readyBrokers"`
	// WAL is the zone's WAL state from its brokers' metrics, once scraped.
	// +optional
	WAL *ZoneWALStatus `json:"wal,omitempty"`
}

// BrokerStatus reports one broker.
type BrokerStatus struct {
	// ID is the broker ID: zone block base + pod ordinal.
	ID int32 `json:"id"`
	// Zone of the broker.
	Zone string `json:"zone"`
	// Pod running the broker.
	Pod string `json:"pod"`
	// Ready is the pod's Ready condition.
	Ready bool `json:"ready"`
	// Registered is set when the broker is registered in the cluster
	// metadata, as the last Kafka probe saw it.
	// +optional
	Registered bool `json:"registered,omitempty"`
	// Image is the image the broker's pod runs, shown while a roll is in
	// progress (status.roll) so an upgrade's progress is visible.
	// +optional
	Image string `json:"image,omitempty"`
	// Outdated is set while the broker's pod runs an outdated pod
	// template and waits for its restart.
	// +optional
	Outdated bool `json:"outdated,omitempty"`
}

// KafkaCluster is a Kafka-compatible Strata cluster spread over
// availability zones, each zone's brokers bound to that zone's fast bucket.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kc;kcluster,categories=strata
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Brokers",type=integer,JSONPath=`.status.readyBrokers`,description="Ready brokers"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredBrokers`,description="Desired brokers"
// +kubebuilder:printcolumn:name="Zones",type=integer,JSONPath=`.status.zoneCount`
// +kubebuilder:printcolumn:name="WAL",type=boolean,JSONPath=`.spec.wal.enabled`,priority=1
// +kubebuilder:printcolumn:name="Offline",type=integer,JSONPath=`.status.kafka.offlinePartitions`,priority=1,description="Partitions without a leader"
// +kubebuilder:printcolumn:name="URP",type=integer,JSONPath=`.status.kafka.underReplicatedPartitions`,priority=1,description="Under-replicated partitions"
// +kubebuilder:printcolumn:name="Roll",type=string,JSONPath=`.status.roll.pending`,description="Brokers a rolling restart has left to restart"
// +kubebuilder:printcolumn:name="Moves",type=string,JSONPath=`.status.scaling.phase`,description="Draining, Rebalancing or Blocked while the operator moves replicas"
// +kubebuilder:printcolumn:name="MovesDone",type=integer,JSONPath=`.status.scaling.movesDone`,priority=1,description="Moves of the scaling done"
// +kubebuilder:printcolumn:name="MovesPlanned",type=integer,JSONPath=`.status.scaling.movesPlanned`,priority=1,description="Moves of the scaling planned"
// +kubebuilder:printcolumn:name="MovesETA",type=date,JSONPath=`.status.scaling.estimatedCompletionTime`,priority=1,description="When the moves are expected to end at the current rate"
// +kubebuilder:printcolumn:name="Saving",type=integer,JSONPath=`.status.cost.savingPercent`,description="Replication cost saved against classic replication, in percent"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.spec.zones.all(z, size(self.metadata.name) + size(z.name) <= 50)",message="metadata.name and each zone name together must be at most 50 characters (StatefulSet and pod names are <cluster>-<zone>-<ordinal>)"
type KafkaCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KafkaClusterSpec   `json:"spec,omitempty"`
	Status KafkaClusterStatus `json:"status,omitempty"`
}

// KafkaClusterList is a list of KafkaClusters.
//
// +kubebuilder:object:root=true
type KafkaClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KafkaCluster{}, &KafkaClusterList{})
}

// CertificateStatus is one certificate of the cluster.
type CertificateStatus struct {
	// Name: cluster-ca, broker, etcd, operator or listener.
	Name string `json:"name"`
	// Secret holding it.
	Secret string `json:"secret"`
	// Subject of the certificate.
	// +optional
	Subject string `json:"subject,omitempty"`
	// NotAfter is when it expires.
	NotAfter metav1.Time `json:"notAfter"`
	// RenewAt is when the operator renews it (absent for a certificate
	// it does not issue).
	// +optional
	RenewAt *metav1.Time `json:"renewAt,omitempty"`
}
