package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KafkaUserAuthenticationType is how a KafkaUser authenticates.
// +kubebuilder:validation:Enum=scram-sha-512;scram-sha-256;tls
type KafkaUserAuthenticationType string

const (
	// AuthenticationScramSha512 is SASL SCRAM-SHA-512.
	AuthenticationScramSha512 KafkaUserAuthenticationType = "scram-sha-512"
	// AuthenticationScramSha256 is SASL SCRAM-SHA-256.
	AuthenticationScramSha256 KafkaUserAuthenticationType = "scram-sha-256"
	// AuthenticationTLS is a client certificate from the cluster's
	// clients CA (<cluster>-clients-ca); the principal is User:CN=<name>.
	AuthenticationTLS KafkaUserAuthenticationType = "tls"
)

// KafkaUserSpec declares a Kafka user of a KafkaCluster: its credential
// (SCRAM or a client certificate) and its ACLs. The Kafka user name is
// metadata.name (a DNS subdomain, so it always meets Kafka's rules: not
// empty, no '/'); the ACL principal is User:<metadata.name> for a SCRAM
// user and User:CN=<metadata.name> (the certificate subject under the
// brokers' DEFAULT principal mapping) for a tls user.
//
// +kubebuilder:validation:XValidation:rule="self.clusterRef.name == oldSelf.clusterRef.name",message="clusterRef is immutable"
type KafkaUserSpec struct {
	// ClusterRef names the KafkaCluster (same namespace) the user belongs to.
	// +required
	ClusterRef LocalObjectReference `json:"clusterRef"`

	// Authentication says how the user logs in; the operator keeps the
	// credential in the brokers and the client settings in a Secret named
	// like the KafkaUser.
	// +required
	Authentication KafkaUserAuthentication `json:"authentication"`

	// Authorization lists the user's ACLs. The operator makes the ACLs of
	// principal User:<name> exactly this set: ACLs of that principal added
	// with other tools are removed. Without it the user has no ACLs.
	// +optional
	Authorization *KafkaUserAuthorization `json:"authorization,omitempty"`

	// Quotas bound the user's byte rates: Kafka's client quotas of the
	// user entity (the principal's name: <name>, or CN=<name> for tls
	// users), shared by all the user's connections on each broker. The
	// operator sets them with AlterClientQuotas and removes the ones
	// taken out of the spec; without it the user has none of its own
	// (default quotas still apply).
	// +optional
	Quotas *KafkaUserQuotas `json:"quotas,omitempty"`
}

// KafkaUserQuotas are a user's client quotas, per broker: Kafka's
// producer_byte_rate, consumer_byte_rate, request_percentage and
// controller_mutation_rate.
type KafkaUserQuotas struct {
	// ProducerByteRate bounds the Produce request bytes per second the
	// user may send to each broker; over it, answers carry a throttle
	// time and the connection waits it out.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProducerByteRate *int64 `json:"producerByteRate,omitempty"`

	// ConsumerByteRate bounds the record bytes per second each broker
	// answers the user's fetches with.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ConsumerByteRate *int64 `json:"consumerByteRate,omitempty"`

	// RequestPercentage bounds the time each broker spends handling the
	// user's requests, as a percentage of one thread (KIP-124): 50 is
	// half a thread, 200 two. Over it, answers carry a throttle time.
	// +kubebuilder:validation:Minimum=1
	// +optional
	RequestPercentage *int32 `json:"requestPercentage,omitempty"`

	// ControllerMutationRate bounds the partitions per second the user
	// may create or delete (CreateTopics, CreatePartitions, DeleteTopics;
	// KIP-599). Over it, requests are refused with
	// THROTTLING_QUOTA_EXCEEDED until the budget refills. Whole
	// partitions per second here; a fractional rate can be set with
	// AlterClientQuotas on another entity.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ControllerMutationRate *int32 `json:"controllerMutationRate,omitempty"`
}

// KafkaUserAuthentication is the user's credential.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'tls' || !has(self.password)",message="a tls user has no password: its credential is the client certificate the operator issues from the clients CA"
type KafkaUserAuthentication struct {
	// Type: scram-sha-512 or scram-sha-256 (the SASL mechanism clients
	// use), or tls: a client certificate of the cluster's clients CA,
	// for SSL listeners with tls.clientAuth (the user is not Ready while
	// its cluster has none).
	// +required
	Type KafkaUserAuthenticationType `json:"type"`

	// Password, when set, is taken from a Secret key; otherwise the
	// operator generates a random one. SCRAM users only. Either way it is written to the
	// Secret named like the KafkaUser.
	// +optional
	Password *KafkaUserPassword `json:"password,omitempty"`
}

// KafkaUserPassword says where a user's password comes from.
type KafkaUserPassword struct {
	// ValueFrom names the Secret key holding the password.
	// +required
	ValueFrom KafkaUserPasswordSource `json:"valueFrom"`
}

// KafkaUserPasswordSource is a reference to a Secret key.
type KafkaUserPasswordSource struct {
	// SecretKeyRef is a key of a Secret in the KafkaUser's namespace. The
	// operator reads it at every reconcile (DefaultUserResync at the
	// latest after a change).
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// SecretKeySelector selects one key of a Secret in the same namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// KafkaUserAuthorization holds the user's ACLs.
type KafkaUserAuthorization struct {
	// ACLs of principal User:<name>.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	ACLs []KafkaUserACL `json:"acls,omitempty"`
}

// ACLResourceType is the kind of resource an ACL applies to.
// +kubebuilder:validation:Enum=topic;group;cluster;transactionalId
type ACLResourceType string

// ACL resource types.
const (
	ACLResourceTopic           ACLResourceType = "topic"
	ACLResourceGroup           ACLResourceType = "group"
	ACLResourceCluster         ACLResourceType = "cluster"
	ACLResourceTransactionalID ACLResourceType = "transactionalId"
)

// ACLPatternType says how an ACL's resource name matches.
// +kubebuilder:validation:Enum=literal;prefixed
type ACLPatternType string

// ACL pattern types.
const (
	ACLPatternLiteral  ACLPatternType = "literal"
	ACLPatternPrefixed ACLPatternType = "prefixed"
)

// ACLOperation is a Kafka ACL operation.
// +kubebuilder:validation:Enum=All;Read;Write;Create;Delete;Alter;Describe;ClusterAction;DescribeConfigs;AlterConfigs;IdempotentWrite
type ACLOperation string

// ACLRuleType allows or denies.
// +kubebuilder:validation:Enum=allow;deny
type ACLRuleType string

// ACL rule types.
const (
	ACLAllow ACLRuleType = "allow"
	ACLDeny  ACLRuleType = "deny"
)

// ACLResource is what an ACL applies to.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'cluster' || !has(self.name)",message="a cluster resource has no name: it is the whole cluster"
// +kubebuilder:validation:XValidation:rule="self.type == 'cluster' || has(self.name)",message="a topic, group or transactionalId resource needs a name (\"*\" for all)"
// +kubebuilder:validation:XValidation:rule="self.type != 'cluster' || !has(self.patternType) || self.patternType == 'literal'",message="a cluster resource has no name to match a prefix against: patternType must be literal"
// +kubebuilder:validation:XValidation:rule="!has(self.patternType) || self.patternType != 'prefixed' || !has(self.name) || self.name != '*'",message="a prefixed resource needs a name prefix, not \"*\" (use patternType literal with name \"*\" for all)"
type ACLResource struct {
	// Type: topic, group, cluster or transactionalId.
	// +required
	Type ACLResourceType `json:"type"`
	// Name of the resource, or its prefix with patternType prefixed; "*"
	// (literal) is every resource of the type. A cluster resource has no
	// name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Name string `json:"name,omitempty"`
	// PatternType: literal (default) or prefixed.
	// +kubebuilder:default=literal
	// +optional
	PatternType ACLPatternType `json:"patternType,omitempty"`
}

// KafkaUserACL is one ACL rule: the operations it allows (or denies) on a
// resource, from a host.
//
// +kubebuilder:validation:XValidation:rule="self.resource.type != 'topic' || self.operations.all(o, o in ['All', 'Read', 'Write', 'Create', 'Delete', 'Alter', 'Describe', 'DescribeConfigs', 'AlterConfigs'])",message="operations on a topic must be among All, Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs"
// +kubebuilder:validation:XValidation:rule="self.resource.type != 'group' || self.operations.all(o, o in ['All', 'Read', 'Describe', 'Delete'])",message="operations on a group must be among All, Read, Describe, Delete"
// +kubebuilder:validation:XValidation:rule="self.resource.type != 'cluster' || self.operations.all(o, o in ['All', 'Create', 'ClusterAction', 'DescribeConfigs', 'AlterConfigs', 'IdempotentWrite', 'Alter', 'Describe'])",message="operations on the cluster must be among All, Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe"
// +kubebuilder:validation:XValidation:rule="self.resource.type != 'transactionalId' || self.operations.all(o, o in ['All', 'Describe', 'Write'])",message="operations on a transactionalId must be among All, Describe, Write"
type KafkaUserACL struct {
	// Resource the rule applies to.
	// +required
	Resource ACLResource `json:"resource"`
	// Operations the rule allows or denies.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=11
	// +listType=set
	// +required
	Operations []ACLOperation `json:"operations"`
	// Host the client connects from: "*" (default, any host) or an IP
	// address.
	// +kubebuilder:default="*"
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="self == '*' || isIP(self)",message="host must be \"*\" or an IP address"
	// +optional
	Host string `json:"host,omitempty"`
	// Type: allow (default) or deny. A deny wins over any allow.
	// +kubebuilder:default=allow
	// +optional
	Type ACLRuleType `json:"type,omitempty"`
}

// KafkaUserStatus is the observed state of a KafkaUser.
type KafkaUserStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (reasons UserReady, ClusterNotFound,
	// KafkaUnreachable, KafkaError, SecretConflict, PasswordSecretNotFound,
	// AclsNotSupported, AclsRefused, QuotasNotSupported, QuotasRefused),
	// plus Reconciling and Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Username is the Kafka user name (metadata.name); the ACL principal is
	// User:<username>.
	// +optional
	Username string `json:"username,omitempty"`

	// Mechanism is the SASL mechanism the brokers hold a credential for
	// (SCRAM-SHA-512 or SCRAM-SHA-256), or TLS once a tls user's
	// certificate is issued.
	// +optional
	Mechanism string `json:"mechanism,omitempty"`

	// Principal is the user's ACL principal: User:<name> (SCRAM) or
	// User:CN=<name> (tls).
	// +optional
	Principal string `json:"principal,omitempty"`

	// SecretName is the Secret with the client settings: keys username,
	// password, mechanism and sasl.jaas.config (SCRAM), or ca.crt,
	// user.crt, user.key, user.p12 and user.password (tls).
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// ACLCount is the number of ACL bindings (one per operation of each
	// rule) the brokers hold for the user.
	// +optional
	ACLCount int32 `json:"aclCount,omitempty"`
}

// KafkaUser is a Kafka user (SCRAM credential and ACLs) managed through the
// Kafka admin API.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ku;kuser,categories=strata
// +kubebuilder:validation:XValidation:rule="!has(self.spec.authentication.password) || self.spec.authentication.password.valueFrom.secretKeyRef.name != self.metadata.name",message="the password Secret must not be the KafkaUser's own Secret (the operator writes that one): name another Secret"
// +kubebuilder:validation:XValidation:rule="!(self.metadata.name in ['strata-broker', 'strata-operator', 'strata-etcd'])",message="KafkaUser names strata-broker, strata-operator and strata-etcd are reserved: they are the identities of the brokers, the operator and the managed etcd (their certificates' common names), and a user of that name could take their place; choose another name"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Authentication",type=string,JSONPath=`.spec.authentication.type`
// +kubebuilder:printcolumn:name="ACLs",type=integer,JSONPath=`.status.aclCount`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secretName`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KafkaUser struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KafkaUserSpec   `json:"spec,omitempty"`
	Status KafkaUserStatus `json:"status,omitempty"`
}

// KafkaUserList is a list of KafkaUsers.
//
// +kubebuilder:object:root=true
type KafkaUserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaUser `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KafkaUser{}, &KafkaUserList{})
}
