package controllers

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
)

// SetupWithManager registers every Strata reconciler with a manager.
// `strata operator` and the envtest suite both use it, so the suite tests
// the wiring that ships.
func SetupWithManager(mgr ctrl.Manager) error {
	if err := (&KafkaClusterReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("strata-kafkacluster"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("KafkaCluster controller: %w", err)
	}
	if err := (&FastBucketReconciler{
		Client:       mgr.GetClient(),
		SecretReader: mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorder("strata-fastbucket"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("FastBucket controller: %w", err)
	}
	return nil
}
