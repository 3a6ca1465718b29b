// Package v1alpha1 holds the Strata custom resource types of the
// kafka.strata.dev API group: KafkaCluster (a Kafka-compatible cluster laid
// out zone by zone), FastBucket (one per-zone fast object-storage bucket that
// carries the write-ahead log) and KafkaTopic.
//
// Validation lives next to the types as OpenAPI and CEL markers, so the API
// server rejects bad specs with readable messages before any controller runs.
//
// +kubebuilder:object:generate=true
// +groupName=kafka.strata.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "kafka.strata.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
