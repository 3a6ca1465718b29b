package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// ReasonDraining (and ReasonRebalancing) are the reasons of Reconciling
// True while replicas move (issue #27: a drain or rebalance read
// Current/Healthy, as Reconciling came only from the StatefulSets and
// rolls).
const ReasonDraining = "Draining"

// reconcilingForMoves sets Reconciling True while the cluster's replicas
// move and nothing else set it (a roll, StatefulSets rolling out): the
// operator's own drain or scale-up rebalance (status.scaling), or a
// KafkaRebalance of the cluster whose moves run. kstatus reads the cluster
// InProgress, Argo CD Progressing, until the moves end. A blocked
// scale-down is not progress: it sets s.stalled where a person must act
// (reconcileScaleDown) and otherwise reads as the drain waiting.
func (r *KafkaClusterReconciler) reconcilingForMoves(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	if meta.IsStatusConditionTrue(kc.Status.Conditions, strata.ConditionReconciling) {
		return nil
	}
	if sc := kc.Status.Scaling; sc != nil {
		switch sc.Phase {
		case ScalingPhaseDraining:
			setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonDraining, "scale-down: "+sc.Message)
			return nil
		case ScalingPhaseRebalancing:
			setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonRebalancing, "scale-up rebalance: "+sc.Message)
			return nil
		}
	}
	var list strata.KafkaRebalanceList
	if err := r.List(ctx, &list, client.InNamespace(kc.Namespace)); err != nil {
		return fmt.Errorf("list KafkaRebalances: %w", err)
	}
	for _, kr := range list.Items {
		if kr.Spec.ClusterRef.Name == kc.Name && kr.Status.State == strata.RebalanceStateRebalancing && !metav1.IsControlledBy(&kr, kc) {
			setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonRebalancing,
				fmt.Sprintf("KafkaRebalance %s moves replicas", kr.Name))
			return nil
		}
	}
	return nil
}
