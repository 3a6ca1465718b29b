package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Annotations a person puts on a KafkaCluster or a broker pod (Strimzi's
// strimzi.io/pause-reconciliation and strimzi.io/manual-rolling-update).
const (
	// AnnotationPauseReconciliation "true" on a KafkaCluster: the operator
	// applies nothing (no StatefulSet, pod, Kafka or status change but
	// the ReconciliationPaused condition) until it is removed or not
	// "true".
	AnnotationPauseReconciliation = "kafka.strata.dev/pause-reconciliation"
	// AnnotationManualRollingUpdate "true" on a KafkaCluster restarts
	// every broker, on a broker pod that broker, through the rolling
	// restart's gate (one broker at a time, each restart keeping every
	// partition at min.insync.replicas). The operator moves the
	// cluster's annotation onto its broker pods and removes it; a pod's
	// goes with the pod when it is restarted.
	AnnotationManualRollingUpdate = "kafka.strata.dev/manual-rolling-update"

	// ConditionReconciliationPaused is True while
	// AnnotationPauseReconciliation holds the cluster (reason
	// ReconciliationPaused); absent otherwise.
	ConditionReconciliationPaused = "ReconciliationPaused"
	ReasonReconciliationPaused    = "ReconciliationPaused"

	EventManualRollingUpdate = "ManualRollingUpdate"
)

// reconciliationPaused reports whether kc carries
// AnnotationPauseReconciliation "true". Paused, it writes only the
// ReconciliationPaused condition (with Reconciling False and Stalled
// False: nothing moves, on purpose; kstatus reads Current, Argo CD
// Suspended through config/argocd/health.lua) and leaves observedGeneration
// where it was, as the spec is not applied; unpaused, it removes the
// condition and the reconcile goes on.
func (r *KafkaClusterReconciler) reconciliationPaused(ctx context.Context, kc *strata.KafkaCluster) (bool, error) {
	if kc.Annotations[AnnotationPauseReconciliation] != "true" {
		if meta.FindStatusCondition(kc.Status.Conditions, ConditionReconciliationPaused) != nil {
			base := kc.DeepCopy()
			meta.RemoveStatusCondition(&kc.Status.Conditions, ConditionReconciliationPaused)
			if err := r.Status().Patch(ctx, kc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				return false, fmt.Errorf("remove ReconciliationPaused: %w", err)
			}
		}
		return false, nil
	}
	if meta.IsStatusConditionTrue(kc.Status.Conditions, ConditionReconciliationPaused) {
		return true, nil
	}
	base := kc.DeepCopy()
	msg := fmt.Sprintf("%s is \"true\": nothing is applied until it is removed", AnnotationPauseReconciliation)
	setCondition(kc, ConditionReconciliationPaused, metav1.ConditionTrue, ReasonReconciliationPaused, msg)
	setCondition(kc, strata.ConditionReconciling, metav1.ConditionFalse, ReasonReconciliationPaused, msg)
	setCondition(kc, strata.ConditionStalled, metav1.ConditionFalse, ReasonReconciliationPaused, msg)
	if err := r.Status().Patch(ctx, kc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return true, fmt.Errorf("write ReconciliationPaused: %w", err)
	}
	r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, ReasonReconciliationPaused, "Pause", "%s", msg)
	return true, nil
}

// manualRollingUpdate moves AnnotationManualRollingUpdate from kc onto
// every broker pod (pods), then removes it from kc, so that each broker is
// restarted once by the roll (RollPods reads a pod's annotation as
// outdated) and the request survives the operator's own restart.
func (r *KafkaClusterReconciler) manualRollingUpdate(ctx context.Context, kc *strata.KafkaCluster, pods map[string]*corev1.Pod) error {
	if kc.Annotations[AnnotationManualRollingUpdate] != "true" {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		pod := pods[name]
		if pod.DeletionTimestamp != nil || pod.Annotations[AnnotationManualRollingUpdate] == "true" {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[AnnotationManualRollingUpdate] = "true"
		if err := r.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("mark pod %s for a manual rolling update: %w", name, err)
		}
	}
	// Only the annotation: the reconcile's status patch goes on its own.
	obj := &strata.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: kc.Name}}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, AnnotationManualRollingUpdate))
	if err := r.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("remove %s from the cluster: %w", AnnotationManualRollingUpdate, err)
	}
	delete(kc.Annotations, AnnotationManualRollingUpdate)
	r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventManualRollingUpdate, "Roll", "manual rolling update asked: %d broker pods to restart one at a time", len(pods))
	return nil
}

// manualRollPods maps a broker pod that asks for a manual rolling update
// to its KafkaCluster (pods are otherwise not watched: the roll polls
// them while it runs).
func manualRollPods(_ context.Context, obj client.Object) []reconcile.Request {
	l := obj.GetLabels()
	if l[LabelComponent] != ComponentBroker || l[LabelCluster] == "" || obj.GetAnnotations()[AnnotationManualRollingUpdate] != "true" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: l[LabelCluster]}}}
}
