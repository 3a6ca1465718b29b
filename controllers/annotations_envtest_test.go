package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/config/argocd"
	"github.com/strata-dev/strata/controllers"
)

var _ = Describe("Annotations", func() {
	It("pauses reconciliation, and rolls one broker or all of them through the roll gate on request", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "ann", map[string]int32{"a": 1, "b": 1, "c": 1})
		k := startKubelet(kc, lb)
		adm := lb.Admin()
		createTopic(ctx, adm, "events", 6, 3, nil)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "ann")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("paused: a scale-up is not applied, ReconciliationPaused says so")
		updateCluster(ns, "ann", func(kc *strata.KafkaCluster) {
			if kc.Annotations == nil {
				kc.Annotations = map[string]string{}
			}
			kc.Annotations[controllers.AnnotationPauseReconciliation] = "true"
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "ann")
			c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionReconciliationPaused)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			argo, err := argoHealthOf(got)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(argo.Status).To(Equal(argocd.Suspended), argo.Message)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		updateCluster(ns, "ann", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].Brokers = 2 })
		gen := getCluster(ns, "ann").Generation
		Consistently(func(g Gomega) {
			sts, err := getSTS(ns, "ann-a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sts.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
			g.Expect(getCluster(ns, "ann").Status.ObservedGeneration).To(BeNumerically("<", gen))
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())

		By("unpaused: the scale-up goes through and the condition goes")
		updateCluster(ns, "ann", func(kc *strata.KafkaCluster) {
			delete(kc.Annotations, controllers.AnnotationPauseReconciliation)
			kc.Spec.Zones[0].Brokers = 1 // back: this spec is about the pause, not the scale-up
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "ann")
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionReconciliationPaused)).To(BeNil())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("a manual rolling update of one broker pod: only broker 100 restarts, once")
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ann-b-0"}, pod)).To(Succeed())
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Annotations[controllers.AnnotationManualRollingUpdate] = "true"
		Expect(k8sClient.Patch(ctx, pod, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k.Restarts(100)).To(Equal(1))
			got := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ann-b-0"}, got)).To(Succeed())
			g.Expect(got.Annotations).NotTo(HaveKey(controllers.AnnotationManualRollingUpdate))
			g.Expect(getCluster(ns, "ann").Status.Roll).To(BeNil())
		}).WithContext(ctx).WithTimeout(2 * timeout).Should(Succeed())
		Expect(k.Restarts(0)).To(BeZero())
		Expect(k.Restarts(200)).To(BeZero())

		By("on the KafkaCluster: every broker restarts once, one at a time, and the annotation is removed")
		updateCluster(ns, "ann", func(kc *strata.KafkaCluster) {
			if kc.Annotations == nil {
				kc.Annotations = map[string]string{}
			}
			kc.Annotations[controllers.AnnotationManualRollingUpdate] = "true"
		})
		Eventually(func(g Gomega) {
			g.Expect(k.Restarts(0)).To(Equal(1))
			g.Expect(k.Restarts(100)).To(Equal(2))
			g.Expect(k.Restarts(200)).To(Equal(1))
			got := getCluster(ns, "ann")
			g.Expect(got.Annotations).NotTo(HaveKey(controllers.AnnotationManualRollingUpdate))
			g.Expect(got.Status.Roll).To(BeNil())
			podsCurrent(g, got)
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		Expect(k.MaxDown()).To(BeNumerically("<=", 1))
	}, SpecTimeout(8*time.Minute))
})
