package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// The conditions every Strata resource carries follow the kstatus
// conventions (sigs.k8s.io/cli-utils/pkg/kstatus), which Flux, Argo CD
// (with config/argocd/health.lua) and `kubectl wait` read without custom
// code:
//
//   - status.observedGeneration is the generation the status describes;
//     a newer generation means InProgress.
//   - Reconciling True: the controller is working towards the spec
//     (InProgress).
//   - Stalled True: the spec cannot be realised until someone changes
//     something; the reason says what (Failed).
//   - otherwise the resource is Current. Ready says whether what it
//     describes is usable.
//
// Reconciling and Stalled are never both True. The helpers below keep
// that rule; every condition carries the generation it was decided on.

// Reasons shared by the kstatus conditions of every kind.
const (
	// ReasonObjectConflict: an object the operator must write exists and
	// belongs to someone else.
	ReasonObjectConflict = "ObjectConflict"
	// ReasonProgressing: the spec is realised as far as the controller
	// can tell; nothing stands in its way.
	ReasonProgressing = "Progressing"
)

// SetCondition sets one condition, stamped with the object's generation.
func SetCondition(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation,
	})
}

// MarkStalled records that the spec cannot be realised as it is: Stalled
// True, Reconciling False, Ready False, all with the reason and message.
// kstatus computes Failed.
func MarkStalled(conds *[]metav1.Condition, generation int64, reason, msg string) {
	SetCondition(conds, generation, strata.ConditionStalled, metav1.ConditionTrue, reason, msg)
	SetCondition(conds, generation, strata.ConditionReconciling, metav1.ConditionFalse, reason, "waiting for the spec to be fixed: "+msg)
	SetCondition(conds, generation, strata.ConditionReady, metav1.ConditionFalse, reason, msg)
}

// MarkReconciling records that the controller is still working towards
// the spec: Reconciling True, Stalled False. Ready is left to the caller.
// kstatus computes InProgress.
func MarkReconciling(conds *[]metav1.Condition, generation int64, reason, msg string) {
	SetCondition(conds, generation, strata.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	SetCondition(conds, generation, strata.ConditionStalled, metav1.ConditionFalse, ReasonProgressing, "nothing stands in the way of the spec")
}

// MarkNotStalled sets Stalled False and leaves Reconciling as it is: for
// a reconciler that decides Reconciling itself (from rolls in progress)
// and got through every step.
func MarkNotStalled(conds *[]metav1.Condition, generation int64) {
	SetCondition(conds, generation, strata.ConditionStalled, metav1.ConditionFalse, ReasonProgressing, "nothing stands in the way of the spec")
}

// MarkReconciled records that nothing is left to do for this
// generation: Reconciling False, Stalled False. kstatus computes Current.
func MarkReconciled(conds *[]metav1.Condition, generation int64, reason, msg string) {
	SetCondition(conds, generation, strata.ConditionReconciling, metav1.ConditionFalse, reason, msg)
	MarkNotStalled(conds, generation)
}

// setReadyCondition sets Ready and, from its reason, the kstatus
// conditions of a resource the operator keeps in Kafka (KafkaTopic,
// KafkaUser): Ready is reconciled (Current) with readyMsg; a reason in
// stalled needs someone to act (Stalled); anything else the controller
// retries on its own (Reconciling).
func setReadyCondition(conds *[]metav1.Condition, gen int64, stalled map[string]bool, readyMsg string, status metav1.ConditionStatus, reason, msg string) {
	switch {
	case status == metav1.ConditionTrue:
		SetCondition(conds, gen, strata.ConditionReady, status, reason, msg)
		MarkReconciled(conds, gen, reason, readyMsg)
	case stalled[reason]:
		MarkStalled(conds, gen, reason, msg)
	default:
		SetCondition(conds, gen, strata.ConditionReady, status, reason, msg)
		MarkReconciling(conds, gen, reason, msg)
	}
}
