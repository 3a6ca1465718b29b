package controllers_test

import (
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// staleTopicOnce answers the first Get of one KafkaTopic with an older
// copy of it, as the manager's cache does while it lags a write, and then
// calls changed (which writes to the KafkaTopic), as if another writer
// changed it right after the reconcile read it.
type staleTopicOnce struct {
	client.Client
	key     types.NamespacedName
	stale   *strata.KafkaTopic
	changed func()
	done    *bool
}

func (c staleTopicOnce) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if kt, ok := obj.(*strata.KafkaTopic); ok && key == c.key && !*c.done {
		*c.done = true
		c.stale.DeepCopyInto(kt)
		c.changed()
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// List serves the reconciler's list of a cluster's KafkaTopics by the
// field the manager's cache indexes (the API server has no such field
// selector).
func (c staleTopicOnce) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	kl, ok := list.(*strata.KafkaTopicList)
	if !ok || lo.FieldSelector == nil {
		return c.Client.List(ctx, list, opts...)
	}
	cluster, found := lo.FieldSelector.RequiresExactMatch("spec.clusterRef.name")
	Expect(found).To(BeTrue(), "a field selector other than the cluster index: %s", lo.FieldSelector)
	if err := c.Client.List(ctx, kl, client.InNamespace(lo.Namespace)); err != nil {
		return err
	}
	kl.Items = slices.DeleteFunc(kl.Items, func(kt strata.KafkaTopic) bool { return kt.Spec.ClusterRef.Name != cluster })
	return nil
}

var _ = Describe("KafkaTopic status writes", func() {
	// settledDuplicate is a KafkaTopic naming the topic an older one
	// manages: its reconciles stop at the owner check (TopicConflict,
	// nothing done in Kafka), so no broker is needed, and once its status
	// says so they change nothing more.
	settledDuplicate := func(ctx SpecContext, ns string) types.NamespacedName {
		// The owner is the oldest, ties (creation times are in seconds)
		// broken by name.
		first := newTopic(ns, "a-owner", "nowhere", 1, 1, nil)
		first.Spec.TopicName = "shared"
		Expect(k8sClient.Create(suiteCtx, first)).To(Succeed())
		dup := newTopic(ns, "b-dup", "nowhere", 1, 1, nil)
		dup.Spec.TopicName = "shared"
		Expect(k8sClient.Create(suiteCtx, dup)).To(Succeed())
		key := client.ObjectKeyFromObject(dup)
		var rv string
		Eventually(func(g Gomega) {
			got := &strata.KafkaTopic{}
			g.Expect(k8sClient.Get(suiteCtx, key, got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(controllers.ReasonTopicConflict))
			prev := rv
			rv = got.ResourceVersion
			g.Expect(rv).To(Equal(prev), "changed in the last 2 s")
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(2 * time.Second).Should(Succeed())
		return key
	}
	reconcileStale := func(ctx SpecContext, key types.NamespacedName, stale *strata.KafkaTopic, changed func()) ctrl.Result {
		admin := controllers.NewAdminPool(loopback)
		defer admin.Close()
		r := &controllers.KafkaTopicReconciler{
			Client:     staleTopicOnce{Client: k8sClient, key: key, stale: stale, changed: changed, done: new(bool)},
			LiveReader: k8sClient, Recorder: &events.FakeRecorder{}, Admin: admin,
		}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		Expect(err).NotTo(HaveOccurred())
		return res
	}
	getTopic := func(key types.NamespacedName) *strata.KafkaTopic {
		GinkgoHelper()
		got := &strata.KafkaTopic{}
		Expect(k8sClient.Get(suiteCtx, key, got)).To(Succeed())
		return got
	}

	It("do not overwrite a status written after the reconcile read the KafkaTopic", func(ctx SpecContext) {
		ns := newNamespace()
		key := settledDuplicate(ctx, ns)
		// Without Ready, which the reconcile sets again, so that its status
		// patch carries the conditions list (a merge patch replaces a list
		// whole).
		stale := getTopic(key)
		meta.RemoveStatusCondition(&stale.Status.Conditions, strata.ConditionReady)
		res := reconcileStale(ctx, key, stale, func() {
			// Another writer's status: a condition of a type the
			// reconciler never writes, so that the suite's own reconciles
			// of this KafkaTopic (every resync) keep it, and a list
			// replaced from the stale copy loses it for good.
			kt := getTopic(key)
			meta.SetStatusCondition(&kt.Status.Conditions, metav1.Condition{
				Type: "example.com/Checked", Status: metav1.ConditionTrue,
				Reason: "Checked", Message: "written after the read",
			})
			Expect(k8sClient.Status().Update(suiteCtx, kt)).To(Succeed())
		})
		Expect(res.RequeueAfter).To(Equal(controllers.ConflictRequeue), "reconciled again")
		c := meta.FindStatusCondition(getTopic(key).Status.Conditions, "example.com/Checked")
		Expect(c).NotTo(BeNil(), "the reconcile's status patch, computed from the stale copy, dropped the newer condition")
		Expect(c.Message).To(Equal("written after the read"))
	})

	It("are still written when only the spec or metadata changed after the reconcile read the KafkaTopic", func(ctx SpecContext) {
		ns := newNamespace()
		key := settledDuplicate(ctx, ns)
		stale := getTopic(key)
		res := reconcileStale(ctx, key, stale, func() {
			kt := getTopic(key)
			Expect(k8sClient.Patch(suiteCtx, kt, client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"example.com/edited":"after the read"}}}`)))).To(Succeed())
		})
		// The patch named the version read and was refused; the status
		// was unchanged since, so it went again over the newer version.
		Expect(res.RequeueAfter).NotTo(Equal(controllers.ConflictRequeue), "the status was not written")
		Expect(getTopic(key).Annotations).To(HaveKeyWithValue("example.com/edited", "after the read"))
	})
})
