package controllers_test

import (
	"context"
	"time"

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

// staleOnce answers the first Get of one KafkaCluster with an older
// copy of it and then calls changed (which writes to the cluster), as if
// another writer changed it right after the reconcile read it.
type staleOnce struct {
	client.Reader
	key     types.NamespacedName
	stale   *strata.KafkaCluster
	changed func()
	done    bool
}

func (c *staleOnce) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if kc, ok := obj.(*strata.KafkaCluster); ok && key == c.key && !c.done {
		c.done = true
		c.stale.DeepCopyInto(kc)
		c.changed()
		return nil
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// settledCluster creates kc (no brokers run) and waits until the
// operator's reconciles no longer change it; reconcileStale runs a
// reconcile of it that reads a given version and has changed run right
// after that read.
func settledCluster(ctx SpecContext, ns string, kc *strata.KafkaCluster) types.NamespacedName {
	key := types.NamespacedName{Namespace: ns, Name: "stale"}
	createCluster(ns, key.Name, kc)
	// Settled: the operator's reconciles no longer change it (its first
	// ones write the objects and status step by step).
	var rv string
	Eventually(func(g Gomega) {
		kc := getCluster(ns, key.Name)
		g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
		prev := rv
		rv = kc.ResourceVersion
		g.Expect(rv).To(Equal(prev), "changed in the last 2 s")
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(2 * time.Second).Should(Succeed())
	return key
}

func reconcileStale(ctx SpecContext, key types.NamespacedName, stale *strata.KafkaCluster, changed func()) ctrl.Result {
	admin := controllers.NewAdminPool(loopback)
	defer admin.Close()
	r := &controllers.KafkaClusterReconciler{
		Client: k8sClient, LiveReader: &staleOnce{Reader: k8sClient, key: key, stale: stale, changed: changed},
		Recorder: &events.FakeRecorder{}, Admin: admin,
	}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	Expect(err).NotTo(HaveOccurred())
	return res
}

var _ = Describe("KafkaCluster status writes", func() {
	It("do not overwrite a status another writer changed after the reconcile read the cluster", func(ctx SpecContext) {
		ns := newNamespace()
		key := settledCluster(ctx, ns, &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{
			WAL: strata.WALSpec{Enabled: ptr.To(false)}, Zones: []strata.ZoneSpec{{Name: "a", Brokers: 1}},
		}})
		// Without Ready, which the reconcile sets again, so that its
		// status patch carries the conditions list (a merge patch
		// replaces a list whole).
		stale := getCluster(ns, key.Name)
		Expect(meta.FindStatusCondition(stale.Status.Conditions, strata.ConditionReady)).NotTo(BeNil())
		meta.RemoveStatusCondition(&stale.Status.Conditions, strata.ConditionReady)
		res := reconcileStale(ctx, key, stale, func() {
			// As the throttle step writes ReplicationThrottled.
			kc := getCluster(ns, key.Name)
			meta.SetStatusCondition(&kc.Status.Conditions, metav1.Condition{
				Type: controllers.ConditionReplicationThrottled, Status: metav1.ConditionTrue,
				Reason: controllers.ReasonMovesThrottled, Message: "written after the read",
			})
			Expect(k8sClient.Status().Update(suiteCtx, kc)).To(Succeed())
		})
		Expect(res.RequeueAfter).To(Equal(controllers.ConflictRequeue), "reconciled again")
		c := meta.FindStatusCondition(getCluster(ns, key.Name).Status.Conditions, controllers.ConditionReplicationThrottled)
		Expect(c).NotTo(BeNil(), "the reconcile's status patch dropped the newer condition")
		Expect(c.Message).To(Equal("written after the read"))
	})

	It("are still written when only the spec or metadata changed after the reconcile read the cluster", func(ctx SpecContext) {
		ns := newNamespace()
		// Its FastBucket does not exist: the reconciles stop at that
		// (Stalled), so the operator's own, which the change below brings,
		// write no new status (one that probes the brokers would, and the
		// status would rightly not be overwritten).
		key := settledCluster(ctx, ns, clusterSpec(map[string]int32{"a": 1}, "a"))
		stale := getCluster(ns, key.Name)
		res := reconcileStale(ctx, key, stale, func() {
			kc := getCluster(ns, key.Name)
			Expect(k8sClient.Patch(suiteCtx, kc, client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"example.com/edited":"after the read"}}}`)))).To(Succeed())
		})
		// The patch named the version read and was refused; the status
		// was unchanged since, so it went again over the newer version.
		Expect(res.RequeueAfter).NotTo(Equal(controllers.ConflictRequeue), "the status was not written")
		Expect(getCluster(ns, key.Name).Annotations).To(HaveKeyWithValue("example.com/edited", "after the read"))
	})
})
