package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BucketType is the kind of object storage behind a FastBucket.
// +kubebuilder:validation:Enum=S3Express;S3
type BucketType string

const (
	// BucketTypeS3Express is an S3 Express One Zone directory bucket.
	BucketTypeS3Express BucketType = "S3Express"
	// BucketTypeS3 is any S3-API bucket (S3 Standard, MinIO, Versity, ...).
	BucketTypeS3 BucketType = "S3"
)

// FastBucketSpec declares one zone's fast bucket.
//
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'S3Express' || self.bucket.endsWith('--x-s3')",message="an S3Express bucket name must end with --x-s3 (e.g. strata-wal--use1-az4--x-s3)"
// +kubebuilder:validation:XValidation:rule="self.zone == oldSelf.zone",message="zone is immutable: brokers are bound to the bucket of their own zone"
// +kubebuilder:validation:XValidation:rule="!has(self.probeInterval) || duration(self.probeInterval) >= duration('5s')",message="probeInterval must be at least 5s"
type FastBucketSpec struct {
	// Zone the bucket lives in, as nodes label it in
	// topology.kubernetes.io/zone. Only brokers of this zone write to it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Zone string `json:"zone"`

	// Bucket name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	// +required
	Bucket string `json:"bucket"`

	// Region of the bucket.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Region string `json:"region"`

	// Endpoint overrides the S3 endpoint URL (S3-compatible stores, tests).
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Type of the bucket: S3Express (directory bucket in one zone) or S3.
	// +kubebuilder:default=S3
	// +optional
	Type BucketType `json:"type,omitempty"`

	// ForcePathStyle addresses the bucket in the URL path instead of the
	// host name, as most S3-compatible stores need.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`

	// Credentials: a Secret reference or the pod's ambient identity.
	// Access keys are never written inline.
	// +kubebuilder:default={}
	// +optional
	Credentials S3Credentials `json:"credentials,omitempty"`

	// ProbeInterval is how often the operator probes the bucket.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	ProbeInterval *metav1.Duration `json:"probeInterval,omitempty"`

	// LifecycleRule lets the operator keep one rule (ID
	// strata-wal-expiration) in the bucket's lifecycle configuration that
	// expires objects under wal/ after ceil(longest wal.retention of the
	// clusters using the bucket, in days) + 1 days: the last safety net
	// behind the brokers' own deletes and the operator's sweeps. Other
	// rules of the bucket are kept. Set false to manage lifecycle rules
	// yourself.
	// +kubebuilder:default=true
	// +optional
	LifecycleRule *bool `json:"lifecycleRule,omitempty"`
}

// LifecycleRuleEnabled reports whether the operator manages the WAL
// expiration rule (the default).
func (s FastBucketSpec) LifecycleRuleEnabled() bool {
	return s.LifecycleRule == nil || *s.LifecycleRule
}

// FastBucketStatus is the result of the last probe.
type FastBucketStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Reachable, WALSwept, LifecycleRuleApplied, and the
	// kstatus ones: Ready (as Reachable), Reconciling (not probed yet),
	// Stalled (unreachable, with the probe's reason).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastProbeTime is when the last probe finished.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`

	// LastProbeLatency is how long the last successful probe took
	// (HeadBucket plus a put, get and delete of a small probe object).
	// +optional
	LastProbeLatency *metav1.Duration `json:"lastProbeLatency,omitempty"`

	// WAL is what the operator's WAL sweeper found and deleted.
	// +optional
	WAL *FastBucketWALStatus `json:"wal,omitempty"`
}

// FastBucketWALStatus reports the WAL objects in a bucket and the
// operator's sweeps of them.
type FastBucketWALStatus struct {
	// LastSweepTime is when the last sweep listed the bucket.
	// +optional
	LastSweepTime *metav1.Time `json:"lastSweepTime,omitempty"`

	// Objects under wal/ after the last sweep (every cluster's).
	Objects int64 `json:"objects"`

	// Bytes of the objects under wal/ after the last sweep.
	Bytes int64 `json:"bytes"`

	// SweptObjects counts the WAL objects the operator deleted from this
	// bucket since the FastBucket was created.
	SweptObjects int64 `json:"sweptObjects"`

	// SweptBytes counts the bytes of those objects.
	SweptBytes int64 `json:"sweptBytes"`

	// Clusters are the KafkaClusters using the bucket, with the retention
	// the sweeper applies to their objects under wal/<cluster>/<zone>/.
	// +optional
	Clusters []FastBucketWALCluster `json:"clusters,omitempty"`

	// LifecycleExpirationDays is the expiration of the wal/ lifecycle rule
	// the operator last applied (0: none).
	// +optional
	LifecycleExpirationDays int32 `json:"lifecycleExpirationDays,omitempty"`
}

// FastBucketWALCluster is one cluster's share of a bucket's WAL objects.
type FastBucketWALCluster struct {
	// Name of the cluster as its WAL object keys carry it:
	// <namespace>/<KafkaCluster name> (the brokers' metadata.etcd.prefix).
	Name string `json:"name"`

	// Retention is the cluster's wal.retention.ms; unset when it cannot be
	// determined, and then nothing of the cluster is deleted.
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`

	// Objects of the cluster in this bucket's zone after the last sweep.
	Objects int64 `json:"objects"`

	// Bytes of those objects.
	Bytes int64 `json:"bytes"`
}

// FastBucket is one availability zone's fast object-storage bucket, the
// target of the write-ahead log of that zone's brokers.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fb;fbucket,categories=strata
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.spec.zone`
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.bucket`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Reachable",type=string,JSONPath=`.status.conditions[?(@.type=="Reachable")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Reachable")].reason`,priority=1
// +kubebuilder:printcolumn:name="Latency",type=string,JSONPath=`.status.lastProbeLatency`
// +kubebuilder:printcolumn:name="WAL Objects",type=integer,JSONPath=`.status.wal.objects`
// +kubebuilder:printcolumn:name="WAL Bytes",type=integer,JSONPath=`.status.wal.bytes`
// +kubebuilder:printcolumn:name="Swept",type=integer,JSONPath=`.status.wal.sweptObjects`,priority=1
// +kubebuilder:printcolumn:name="Last Sweep",type=date,JSONPath=`.status.wal.lastSweepTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FastBucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FastBucketSpec   `json:"spec,omitempty"`
	Status FastBucketStatus `json:"status,omitempty"`
}

// FastBucketList is a list of FastBuckets.
//
// +kubebuilder:object:root=true
type FastBucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FastBucket `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FastBucket{}, &FastBucketList{})
}
