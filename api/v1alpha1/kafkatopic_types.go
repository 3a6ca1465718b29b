package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LeaderZoneConfig is the topic config the KafkaTopic controller sets from
// spec.leaderZone: the broker makes each partition's preferred replica the
// one in that zone and elects it. spec.config must not set it.
const LeaderZoneConfig = "leader.placement.zone"

// KafkaTopicSpec declares a topic of a KafkaCluster.
//
// The config rules mirror the topic configs the broker accepts
// (broker/config.go, topicConfigs): a value the broker would refuse is
// refused here with a message instead of leaving the topic NotReady.
//
// +kubebuilder:validation:XValidation:rule="self.clusterRef.name == oldSelf.clusterRef.name",message="clusterRef is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.config) || !('min.insync.replicas' in self.config) || !self.config['min.insync.replicas'].matches('^[0-9]{1,9}$') || (int(self.config['min.insync.replicas']) >= 1 && int(self.config['min.insync.replicas']) <= self.replicationFactor)",message="config min.insync.replicas must be between 1 and replicationFactor: with more, no acks=all write could ever succeed"
type KafkaTopicSpec struct {
	// ClusterRef names the KafkaCluster (same namespace) the topic lives in.
	// +required
	ClusterRef LocalObjectReference `json:"clusterRef"`

	// TopicName is the Kafka topic name; defaults to metadata.name. Set it
	// for names Kubernetes cannot hold (upper case, '_', longer than a
	// DNS subdomain allows). Kafka's rules apply: 1-249 of [a-zA-Z0-9._-],
	// not "." or "..". Topic names that differ only in '.' and '_' collide
	// in Kafka's metric names; avoid mixing them. It cannot change after
	// creation, and cannot be added later unless it is metadata.name (the
	// rule is on KafkaTopic: it compares with metadata.name, and a rule
	// here would be skipped when the old object has no topicName).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="topicName must not be \".\" or \"..\" (Kafka refuses them)"
	// +optional
	TopicName string `json:"topicName,omitempty"`

	// Partitions of the topic. Partitions may only grow: Kafka cannot
	// remove a partition without losing its data.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="partitions may only grow"
	// +kubebuilder:default=1
	// +optional
	Partitions int32 `json:"partitions"`

	// ReplicationFactor of every partition; replicas sit in distinct zones
	// as far as the zones allow. Changing it moves replicas through a
	// partition reassignment, one replica per zone kept.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	// +kubebuilder:default=3
	// +optional
	ReplicationFactor int32 `json:"replicationFactor"`

	// Config holds the topic configs the operator manages (retention.ms,
	// min.insync.replicas, ...). Keys set on the topic by other tools and
	// not listed here are reported in status.unmanagedConfigs, never
	// removed; a key removed from here is removed from the topic.
	// +kubebuilder:validation:MaxProperties=128
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cleanup.policy', 'compression.type', 'retention.ms', 'retention.bytes', 'local.retention.ms', 'local.retention.bytes', 'remote.storage.enable', 'segment.bytes', 'segment.ms', 'max.message.bytes', 'min.insync.replicas', 'unclean.leader.election.enable', 'message.timestamp.type', 'flush.ms', 'flush.messages', 'index.interval.bytes', 'min.cleanable.dirty.ratio', 'min.compaction.lag.ms', 'max.compaction.lag.ms', 'delete.retention.ms', 'leader.placement.zone'])",message="config keys must be topic configs the broker knows: cleanup.policy, compression.type, retention.ms, retention.bytes, local.retention.ms, local.retention.bytes, remote.storage.enable, segment.bytes, segment.ms, max.message.bytes, min.insync.replicas, unclean.leader.election.enable, message.timestamp.type, flush.ms, flush.messages, index.interval.bytes, min.cleanable.dirty.ratio, min.compaction.lag.ms, max.compaction.lag.ms, delete.retention.ms"
	// +kubebuilder:validation:XValidation:rule="!('leader.placement.zone' in self)",message="config must not set leader.placement.zone: set spec.leaderZone"
	// +kubebuilder:validation:XValidation:rule="!('cleanup.policy' in self) || self['cleanup.policy'] in ['delete', 'compact', 'compact,delete', 'delete,compact']",message="config cleanup.policy must be delete, compact or compact,delete"
	// +kubebuilder:validation:XValidation:rule="!('min.cleanable.dirty.ratio' in self) || self['min.cleanable.dirty.ratio'].matches('^(0([.][0-9]{1,17})?|1([.]0{1,17})?)$')",message="config min.cleanable.dirty.ratio must be a decimal from 0 to 1"
	// +kubebuilder:validation:XValidation:rule="!('min.compaction.lag.ms' in self) || self['min.compaction.lag.ms'].matches('^[0-9]{1,18}$')",message="config min.compaction.lag.ms must be an integer >= 0 (milliseconds)"
	// +kubebuilder:validation:XValidation:rule="!('max.compaction.lag.ms' in self) || (self['max.compaction.lag.ms'].matches('^[0-9]{1,19}$') && !self['max.compaction.lag.ms'].matches('^0+$'))",message="config max.compaction.lag.ms must be an integer >= 1 (milliseconds)"
	// +kubebuilder:validation:XValidation:rule="!('delete.retention.ms' in self) || self['delete.retention.ms'].matches('^[0-9]{1,18}$')",message="config delete.retention.ms must be an integer >= 0 (milliseconds)"
	// +kubebuilder:validation:XValidation:rule="!('compression.type' in self) || self['compression.type'] == 'producer'",message="config compression.type must be producer: batches are stored as the producer compressed them"
	// +kubebuilder:validation:XValidation:rule="!('retention.ms' in self) || self['retention.ms'].matches('^(-1|[0-9]{1,18})$')",message="config retention.ms must be an integer >= -1 (milliseconds; -1 keeps data forever)"
	// +kubebuilder:validation:XValidation:rule="!('retention.bytes' in self) || self['retention.bytes'].matches('^(-1|[0-9]{1,18})$')",message="config retention.bytes must be an integer >= -1 (bytes per partition; -1 means no limit)"
	// +kubebuilder:validation:XValidation:rule="!('local.retention.ms' in self) || self['local.retention.ms'].matches('^(-2|-1|[0-9]{1,18})$')",message="config local.retention.ms must be an integer >= -2 (-2 means retention.ms)"
	// +kubebuilder:validation:XValidation:rule="!('local.retention.bytes' in self) || self['local.retention.bytes'].matches('^(-2|-1|[0-9]{1,18})$')",message="config local.retention.bytes must be an integer >= -2 (-2 means retention.bytes)"
	// +kubebuilder:validation:XValidation:rule="!('remote.storage.enable' in self) || self['remote.storage.enable'] in ['true', 'false']",message="config remote.storage.enable must be true or false (true needs spec.tieredStorage on the cluster)"
	// +kubebuilder:validation:XValidation:rule="!('segment.bytes' in self) || (self['segment.bytes'].matches('^[0-9]{1,10}$') && int(self['segment.bytes']) >= 14 && int(self['segment.bytes']) <= 2147483647)",message="config segment.bytes must be an integer between 14 and 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('segment.ms' in self) || (self['segment.ms'].matches('^[0-9]{1,18}$') && !self['segment.ms'].matches('^0+$'))",message="config segment.ms must be an integer >= 1 (milliseconds)"
	// +kubebuilder:validation:XValidation:rule="!('max.message.bytes' in self) || (self['max.message.bytes'].matches('^[0-9]{1,10}$') && int(self['max.message.bytes']) <= 2147483647)",message="config max.message.bytes must be an integer between 0 and 2147483647"
	// +kubebuilder:validation:XValidation:rule="!('min.insync.replicas' in self) || self['min.insync.replicas'].matches('^[0-9]{1,9}$')",message="config min.insync.replicas must be an integer"
	// +kubebuilder:validation:XValidation:rule="!('unclean.leader.election.enable' in self) || self['unclean.leader.election.enable'] in ['true', 'false']",message="config unclean.leader.election.enable must be true or false"
	// +kubebuilder:validation:XValidation:rule="!('message.timestamp.type' in self) || self['message.timestamp.type'] in ['CreateTime', 'LogAppendTime']",message="config message.timestamp.type must be CreateTime or LogAppendTime"
	// +kubebuilder:validation:XValidation:rule="!('flush.ms' in self) || self['flush.ms'].matches('^[0-9]{1,19}$')",message="config flush.ms must be an integer >= 0 (milliseconds)"
	// +kubebuilder:validation:XValidation:rule="!('flush.messages' in self) || (self['flush.messages'].matches('^[0-9]{1,19}$') && !self['flush.messages'].matches('^0+$'))",message="config flush.messages must be an integer >= 1"
	// +kubebuilder:validation:XValidation:rule="!('index.interval.bytes' in self) || (self['index.interval.bytes'].matches('^[0-9]{1,10}$') && int(self['index.interval.bytes']) <= 2147483647)",message="config index.interval.bytes must be an integer between 0 and 2147483647"
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// LeaderZone, when set, puts every partition's leader in that zone,
	// which must be a zone of the cluster: the operator sets the topic config
	// leader.placement.zone, and the broker makes each partition's
	// replica in that zone its preferred leader and elects it. Producers
	// in that zone then send no cross-zone produce traffic.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	LeaderZone string `json:"leaderZone,omitempty"`

	// DeletionPolicy says what deleting the KafkaTopic does to the Kafka
	// topic: Delete (default, what Kafka users and Strimzi expect) deletes
	// it and its data, Retain leaves it in Kafka, unmanaged.
	// +kubebuilder:validation:Enum=Delete;Retain
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// KafkaTopicStatus is the observed state of a KafkaTopic, as the brokers
// report it.
type KafkaTopicStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (reasons TopicReady, Creating, Reassigning,
	// PartitionDecreaseRefused, ReplicationFactorInvalid,
	// LeaderZoneNotInCluster, TopicConflict, ClusterNotFound, KafkaUnreachable,
	// KafkaError).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TopicName is the Kafka topic the KafkaTopic manages.
	// +optional
	TopicName string `json:"topicName,omitempty"`

	// TopicID is Kafka's topic ID (base64, as Kafka tools print it).
	// +optional
	TopicID string `json:"topicId,omitempty"`

	// PartitionCount is the number of partitions the topic has.
	// +optional
	PartitionCount int32 `json:"partitionCount,omitempty"`

	// ReplicationFactor is the smallest replica count of the topic's
	// partitions (during a reassignment, the count the brokers report).
	// +optional
	ReplicationFactor int32 `json:"replicationFactor,omitempty"`

	// Configs are the managed configs as set on the topic (spec.config
	// plus leader.placement.zone from spec.leaderZone). A key that leaves
	// spec.config is removed from the topic because it is listed here.
	// +optional
	Configs map[string]string `json:"configs,omitempty"`

	// UnmanagedConfigs are config overrides set on the topic by other
	// tools that spec.config does not mention. They are left alone.
	// +optional
	UnmanagedConfigs map[string]string `json:"unmanagedConfigs,omitempty"`

	// LeadersPerZone counts the partitions whose leader sits in each zone.
	// +optional
	LeadersPerZone map[string]int32 `json:"leadersPerZone,omitempty"`

	// ReassigningPartitions is the number of partitions with a replica
	// reassignment in progress (a replication factor change).
	// +optional
	ReassigningPartitions int32 `json:"reassigningPartitions,omitempty"`

	// Partitions reports each partition's replicas, leader and in-sync
	// replicas.
	// +listType=atomic
	// +optional
	Partitions []PartitionStatus `json:"partitions,omitempty"`
}

// PartitionStatus reports one partition.
type PartitionStatus struct {
	// Partition index.
	Partition int32 `json:"partition"`
	// Leader broker ID (-1 when the partition has no leader).
	Leader int32 `json:"leader"`
	// LeaderZone is the leader's zone.
	// +optional
	LeaderZone string `json:"leaderZone,omitempty"`
	// Replicas lists the replica broker IDs, preferred leader first.
	// +listType=atomic
	// +optional
	Replicas []int32 `json:"replicas,omitempty"`
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
// +kubebuilder:validation:XValidation:rule="has(self.spec.topicName) || size(self.metadata.name) <= 249",message="metadata.name is longer than Kafka's 249-character topic name limit: set spec.topicName"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.spec.topicName) ? (has(self.spec.topicName) && self.spec.topicName == oldSelf.spec.topicName) : (!has(self.spec.topicName) || self.spec.topicName == self.metadata.name)",message="topicName is immutable: it is the Kafka topic this KafkaTopic manages, spec.topicName as created or else metadata.name; another name would leave that topic in Kafka unmanaged (create another KafkaTopic for another topic)"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Topic",type=string,JSONPath=`.status.topicName`
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.status.partitionCount`
// +kubebuilder:printcolumn:name="RF",type=integer,JSONPath=`.status.replicationFactor`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KafkaTopic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KafkaTopicSpec   `json:"spec,omitempty"`
	Status KafkaTopicStatus `json:"status,omitempty"`
}

// KafkaTopicName is the Kafka topic name: spec.topicName, or metadata.name.
func (t *KafkaTopic) KafkaTopicName() string {
	if t.Spec.TopicName != "" {
		return t.Spec.TopicName
	}
	return t.Name
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
