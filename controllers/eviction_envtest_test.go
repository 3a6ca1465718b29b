package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

var _ = Describe("Node drains", func() {
	It("delete a broker pod on a cordoned node only through the roll's gate: wait, saying why, while its restart would take a partition below min.insync.replicas, then delete it, one broker at a time", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "drain", map[string]int32{"a": 1, "b": 1, "c": 1})
		nodes := map[string]string{}
		for _, z := range []string{"a", "b", "c"} {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + z}}
			Expect(k8sClient.Create(ctx, node)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, node))).To(Succeed()) })
			nodes[z] = node.Name
		}
		k := startKubeletOn(kc, lb, nodes)
		adm := lb.Admin()
		createTopic(ctx, adm, "events", 3, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "drain")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: controllers.BrokerPDBName("drain")}, pdb)).To(Succeed())
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(BeZero(), "an Eviction would bypass the operator's gate")

		By("stray-0 at min.insync.replicas with ISR [100 200]; zone c's node cordoned (the first thing kubectl drain does)")
		strayPartition(ctx, kc, lb)
		k.mu.Lock()
		k.maxDown = len(k.down)
		k.mu.Unlock()
		// A new pod of zone c goes elsewhere, as the scheduler would put
		// it (a volume that follows the pod).
		k.PlaceOn("c", ns+"-c-spare")
		node := &corev1.Node{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: nodes["c"]}, node)).To(Succeed())
		node.Spec.Unschedulable = true
		Expect(k8sClient.Update(ctx, node)).To(Succeed())

		By("broker 200 waits: its restart would take stray-0 below min.insync.replicas; Reconciling and an event say so")
		Eventually(func(g Gomega) {
			got := getCluster(ns, "drain")
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReconciling)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonEvictionBlocked))
			g.Expect(c.Message).To(MatchRegexp(`node drain: 1 broker pods on cordoned nodes \(drain-c-0\) wait: .*broker 200 by 1 partitions \(stray-0 ISR \[(100 200|200 100)\] min\.insync\.replicas 2\)`))
			g.Expect(clusterEvents(g, ns, "drain")[controllers.EventEvictionBlocked]).To(ContainElement(ContainSubstring("stray-0 ISR")))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(k.Restarts(200)).To(BeZero(), "broker 200 deleted while its restart would take stray-0 below min.insync.replicas")
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drain-c-0"}, pod)).To(Succeed())
		Expect(pod.DeletionTimestamp).To(BeNil())
		Expect(pod.Spec.NodeName).To(Equal(nodes["c"]))

		By("stray's min.insync.replicas lowered to 1: the operator deletes drain-c-0; its new pod runs on another node")
		alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: ptr.To("1")}}, "stray")
		Expect(err).NotTo(HaveOccurred())
		Expect(alter[0].Err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(k.Restarts(200)).To(Equal(1))
			pod := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drain-c-0"}, pod)).To(Succeed())
			g.Expect(pod.Spec.NodeName).To(Equal(ns + "-c-spare"))
			g.Expect(isPodReadyTest(pod)).To(BeTrue())
			g.Expect(clusterEvents(g, ns, "drain")[controllers.EventEvictingBroker]).To(ContainElement(ContainSubstring("deleted broker 200 (pod drain-c-0) on cordoned node " + nodes["c"])))
			got := getCluster(ns, "drain")
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReconciling)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).NotTo(Equal(controllers.ReasonEvictionBlocked))
		}).WithContext(ctx).WithTimeout(2 * timeout).Should(Succeed())
		Expect(k.Restarts(0)+k.Restarts(100)).To(BeZero(), "brokers on schedulable nodes restarted")
		Expect(k.MaxDown()).To(Equal(1), "brokers down at the same time")
	}, SpecTimeout(6*time.Minute))
})
