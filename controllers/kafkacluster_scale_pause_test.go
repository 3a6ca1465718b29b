package controllers

import (
	"context"
	"strings"
	"testing"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// TestRebalancePausedSaysWhy: a rebalance under way that a gate holds (a
// broker pod not ready, a roll, a scale-down's drain) keeps its progress
// but replaces the last round's plan in status.scaling with why it waits,
// and comes back (requeue): before, the status kept saying "2 replica
// moves ... to start" while none started, for minutes, on a loaded
// machine whose readiness probes failed (make test-stress).
func TestRebalancePausedSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scope func(*clusterScope)
		want  string
	}{
		{"pods not ready", func(s *clusterScope) { s.podsMsg = "3/4 brokers ready in 3 zones" }, "paused: waiting for every broker pod to be ready (3/4 brokers ready in 3 zones)"},
		{"roll", func(s *clusterScope) { s.podsReady = true; s.cluster.Status.Roll = &strata.RollStatus{} }, "paused: waiting for the roll to end"},
		{"drain", func(s *clusterScope) { s.podsReady = true; s.keepReplicas = map[string]int32{"a": 2} }, "paused: waiting for the scale-down's drain to end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := &strata.KafkaCluster{}
			kc.Status.Scaling = &strata.ScalingStatus{Phase: ScalingPhaseRebalancing, MovesStarted: 4, MovesDone: 2,
				Message: "2 replica moves and 0 leader reorderings to start, 0 reassignments in flight; 7 replica moves (813087 bytes) planned"}
			s := &clusterScope{cluster: kc}
			tc.scope(s)
			if err := (&KafkaClusterReconciler{}).reconcileRebalance(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			sc := kc.Status.Scaling
			if sc == nil || sc.Message != tc.want || sc.MovesStarted != 4 || sc.MovesDone != 2 {
				t.Errorf("status.scaling %+v, want the progress kept and message %q", sc, tc.want)
			}
			if s.requeueAfter <= 0 || !strings.HasPrefix(sc.Message, "paused: ") {
				t.Errorf("requeueAfter %v: a paused rebalance must come back", s.requeueAfter)
			}
		})
	}
}
