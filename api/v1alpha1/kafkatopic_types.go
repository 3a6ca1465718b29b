package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KafkaTopicSpec declares a topic of a KafkaCluster.
//
// +kubebuilder:validation:XValidation:rule="self.clusterRef.name == oldSelf.clusterRef.name",message="clusterRef is immutable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.topicName) || (has(self.topicName) && self.topicName == oldSelf.topicName)",message="topicName is immutable"
type KafkaTopicSpec struct {
	// ClusterRef names the KafkaCluster (same namespace) the topic lives in.
	// +required
	ClusterRef LocalObjectReference `json:"clusterRef"`

	// TopicName is the Kafka topic name; defaults to metadata.name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +optional
	TopicName string `json:"topicName,omitempty"`

	// Partitions of the topic. Partitions may only grow.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="partitions may only grow"
	// +kubebuilder:default=1
	// +optional
	Partitions int32 `json:"partitions"`

	// ReplicationFactor of every partition; replicas sit in distinct zones
	// as far as the zones allow.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +kubebuilder:default=3
	// +optional
	ReplicationFactor int32 `json:"replicationFactor"`

	// Config holds topic-level configuration (retention.ms, cleanup.policy,
	// min.insync.replicas, ...).
	// +kubebuilder:validation:MaxProperties=128
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// LeaderZone pins partition leaders to one zone when set. Refused for
	// now: the broker has no zone leader placement yet.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="false",message="leaderZone is not supported yet: the broker has no zone leader placement; remove leaderZone"
	// +optional
	LeaderZone string `json:"leaderZone,omitempty"`
}

// KafkaTopicStatus is the observed state of a KafkaTopic.
type KafkaTopicStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Partitions reports each partition's leader and in-sync replicas.
	// +listType=atomic
	// +optional
	Partitions []PartitionStatus `json:"partitions,omitempty"`
}

// PartitionStatus reports one partition.
type PartitionStatus struct {
	// Partition index.
	Partition int32 `json:"partition"`
	// Leader broker ID.
	Leader int32 `json:"leader"`
	// LeaderZone is the leader's zone.
	// +optional
	LeaderZone string `json:"leaderZone,omitempty"`
	// ISR lists the in-sync replica broker IDs.
	// +listType=atomic
	// +optional
	ISR []int32 `json:"isr,omitempty"`
}

// KafkaTopic is a Kafka topic managed through the Kafka admin API.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kt;ktopic,categories=strata
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.spec.partitions`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicationFactor`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KafkaTopic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KafkaTopicSpec   `json:"spec,omitempty"`
	Status KafkaTopicStatus `json:"status,omitempty"`
}

// KafkaTopicList is a list of KafkaTopics.
//
// +kubebuilder:object:root=true
type KafkaTopicList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaTopic `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KafkaTopic{}, &KafkaTopicList{})
}
