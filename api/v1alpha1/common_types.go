package v1alpha1

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// Name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// CredentialsSource says where S3 credentials come from.
// +kubebuilder:validation:Enum=Secret;Ambient
type CredentialsSource string

const (
	// CredentialsFromSecret reads an access key pair from a Secret.
	CredentialsFromSecret CredentialsSource = "Secret"
	// CredentialsAmbient uses the SDK's default chain: the pod's service
	// account (IRSA / EKS Pod Identity), instance profile or environment.
	CredentialsAmbient CredentialsSource = "Ambient"
)

// S3Credentials selects the credentials for an S3 bucket. Keys are never
// written inline into a custom resource: either a Secret holds them, or the
// ambient identity of the pod is used.
// +kubebuilder:validation:XValidation:rule="!has(self.source) || self.source != 'Secret' || has(self.secretRef)",message="credentials.source Secret needs credentials.secretRef"
// +kubebuilder:validation:XValidation:rule="!has(self.source) || self.source != 'Ambient' || !has(self.secretRef)",message="credentials.source Ambient must not set credentials.secretRef"
type S3Credentials struct {
	// Source of the credentials: Secret or Ambient. When unset it is Secret
	// if secretRef is given and Ambient otherwise.
	// +optional
	Source CredentialsSource `json:"source,omitempty"`

	// SecretRef names a Secret in the same namespace holding the key pair.
	// +optional
	SecretRef *S3SecretReference `json:"secretRef,omitempty"`
}

// EffectiveSource resolves an unset Source: Secret when a secretRef is
// given, Ambient otherwise.
func (c S3Credentials) EffectiveSource() CredentialsSource {
	if c.Source != "" {
		return c.Source
	}
	if c.SecretRef != nil {
		return CredentialsFromSecret
	}
	return CredentialsAmbient
}

// S3SecretReference names a Secret and the keys inside it that hold an
// access key pair.
type S3SecretReference struct {
	// Name of the Secret, in the namespace of the referring object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// AccessKeyIDKey is the Secret key holding the access key ID.
	// +kubebuilder:default=accessKeyID
	// +optional
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty"`

	// SecretAccessKeyKey is the Secret key holding the secret access key.
	// +kubebuilder:default=secretAccessKey
	// +optional
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`

	// SessionTokenKey optionally names the Secret key holding a session token.
	// +optional
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
}

// Condition types and reasons shared by the controllers. Reasons are
// constants so that users and tests can match on them.
const (
	ConditionReady = "Ready"
	// ConditionReconciling (kstatus): True while the controller works
	// towards the spec (a roll, pods not ready yet, a retried error).
	ConditionReconciling = "Reconciling"
	// ConditionStalled (kstatus): True when the spec cannot be realised
	// until someone changes something; the reason says what.
	ConditionStalled   = "Stalled"
	ConditionDegraded  = "Degraded"
	ConditionReachable = "Reachable"
	// ConditionMetadataHealthy is a KafkaCluster's etcd health: every
	// endpoint answers and no alarm is raised.
	ConditionMetadataHealthy = "MetadataHealthy"
	// ConditionKafkaReachable is whether the operator's Kafka admin client
	// got an answer from the brokers on its last probe.
	ConditionKafkaReachable = "KafkaReachable"
	// ConditionWALDegraded (KafkaCluster): True while a broker replicates
	// inline because its zone's fast bucket fails (not when
	// spec.wal.policy chose inline), with the zones and brokers.
	ConditionWALDegraded = "WALDegraded"
	// ConditionTierDegraded (KafkaCluster): True while a broker's uploads
	// to the slow tier fail or its disk headroom (free bytes minus what is
	// not uploaded yet) is low, with the zones, brokers and reason.
	ConditionTierDegraded = "TierDegraded"
	// ConditionWALSwept is a FastBucket's last WAL sweep: True when it
	// listed the bucket and every delete it decided on succeeded.
	ConditionWALSwept = "WALSwept"
	// ConditionLifecycleRuleApplied says whether the bucket's lifecycle
	// configuration holds the operator's wal/ expiration rule.
	ConditionLifecycleRuleApplied = "LifecycleRuleApplied"
)
