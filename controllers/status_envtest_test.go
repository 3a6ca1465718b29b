package controllers_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// staleReads answers Gets of one KafkaCluster with an older copy of it,
// as the manager's cache does while it lags a write.
type staleReads struct {
	client.Client
	key   types.NamespacedName
	stale *strata.KafkaCluster
}

func (c staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if kc, ok := obj.(*strata.KafkaCluster); ok && key == c.key {
		c.stale.DeepCopyInto(kc)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

var _ = Describe("KafkaCluster status writes", func() {
	It("refuses the status of a reconcile that read a stale KafkaCluster instead of dropping a newer condition", func(ctx SpecContext) {
		ns := newNamespace()
		key := types.NamespacedName{Namespace: ns, Name: "stale"}
		createCluster(ns, key.Name, &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{
			WAL: strata.WALSpec{Enabled: ptr.To(false)}, Zones: []strata.ZoneSpec{{Name: "a", Brokers: 1}},
		}})
		Eventually(func(g Gomega) {
			kc := getCluster(ns, key.Name)
			g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
			g.Expect(meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionReady)).NotTo(BeNil())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		// The version a lagging cache would hand out; without Ready, which
		// the reconcile sets again, so its status patch carries the
		// conditions list (a merge patch replaces a list whole).
		stale := getCluster(ns, key.Name)
		meta.RemoveStatusCondition(&stale.Status.Conditions, strata.ConditionReady)
		// Since then a reconcile wrote a condition (as the throttle step
		// writes ReplicationThrottled when it throttles moves).
		Eventually(func() error {
			kc := getCluster(ns, key.Name)
			meta.SetStatusCondition(&kc.Status.Conditions, metav1.Condition{
				Type: controllers.ConditionReplicationThrottled, Status: metav1.ConditionTrue,
				Reason: controllers.ReasonMovesThrottled, Message: "written after the stale read",
			})
			return k8sClient.Status().Update(suiteCtx, kc)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		admin := controllers.NewAdminPool(loopback)
		defer admin.Close()
		r := &controllers.KafkaClusterReconciler{
			Client: staleReads{Client: k8sClient, key: key, stale: stale}, LiveReader: k8sClient,
			Recorder: &events.FakeRecorder{}, Admin: admin,
		}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(BeNumerically(">", 0), "reconciled again")

		c := meta.FindStatusCondition(getCluster(ns, key.Name).Status.Conditions, controllers.ConditionReplicationThrottled)
		Expect(c).NotTo(BeNil(), "the stale reconcile's status patch dropped the newer condition")
		Expect(c.Message).To(Equal("written after the stale read"))
	})
})
