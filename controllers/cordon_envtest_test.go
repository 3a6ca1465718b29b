package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// placedOn says which brokers hold a replica of topic, read right after
// its creation (before any drain could move them).
func placedOn(ctx context.Context, g Gomega, adm *kadm.Client, topic string) map[int32]int {
	return replicasPerBroker(ctx, g, adm, topic)
}

// cordonKeys lists the metadata keys of per-broker dynamic configs that
// set cordoned.log.dirs, read from etcd as an independent witness.
func cordonKeys(ctx context.Context, g Gomega, endpoints []string) []string {
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	resp, err := cl.Get(ctx, "/strata/", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), "/meta/broker-configs/") && strings.Contains(string(kv.Value), "cordoned.log.dirs") {
			out = append(out, string(kv.Key[strings.LastIndex(string(kv.Key), "/")+1:]))
		}
	}
	return out
}

// drainState is what a failed drain step needs to be understood: the
// StatefulSets' replicas, the status' scaling and conditions, and the
// cluster's events.
func drainState(ns, name string, kc *strata.KafkaCluster) func() string {
	return func() string {
		var b strings.Builder
		for _, zone := range []string{"a", "b", "c"} {
			if sts, err := getSTS(ns, name+"-"+zone); err == nil {
				fmt.Fprintf(&b, "StatefulSet %s: replicas %d\n", sts.Name, ptr.Deref(sts.Spec.Replicas, -1))
			}
		}
		fmt.Fprintf(&b, "status.scaling: %+v\nstatus.cordonedBrokers: %v\n", kc.Status.Scaling, kc.Status.CordonedBrokers)
		for _, c := range kc.Status.Conditions {
			fmt.Fprintf(&b, "condition %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
		var evs corev1.EventList
		if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err == nil {
			for _, e := range evs.Items {
				fmt.Fprintf(&b, "event %s %s %s: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.Reason, e.InvolvedObject.Name, e.Message)
			}
		}
		return b.String()
	}
}

var _ = Describe("Drain fencing", func() {
	It("cordons the brokers a scale-down removes until they are gone, names a dead broker that blocks the drain, and reads Reconciling meanwhile", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "fence", map[string]int32{"a": 2, "b": 1, "c": 1}) // brokers 0, 1 | 100 | 200
		k := startKubelet(kc, lb)
		adm := lb.Admin()
		createTopic(ctx, adm, "events", 6, 3, nil)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "fence")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
			g.Expect(placedOn(ctx, g, adm, "events")[1]).To(BeNumerically(">", 0), "broker 1 holds replicas to drain")
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("broker 200 (zone c, which stays) goes down and stays down")
		k.HoldRestarts(true)
		Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fence-c-0"}})).To(Succeed())
		Eventually(func(g Gomega) {
			got := getCluster(ns, "fence")
			g.Expect(got.Status.Kafka).NotTo(BeNil())
			g.Expect(got.Status.Kafka.RegisteredBrokers).To(BeEquivalentTo(3))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("zone a 2 -> 1: broker 1 is cordoned, the drain waits for broker 200 and says so")
		updateCluster(ns, "fence", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].Brokers = 1 })
		Eventually(func(g Gomega) {
			got := getCluster(ns, "fence")
			g.Expect(got.Status.CordonedBrokers).To(Equal([]int32{1}))
			c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionScaleDownBlocked)
			g.Expect(c).NotTo(BeNil(), "%+v", got.Status.Conditions)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonBrokersNotRegistered))
			g.Expect(c.Message).To(ContainSubstring("brokers [200]"))
			// kstatus: InProgress (the drain waits), not Current, not Stalled.
			rec := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReconciling)
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.Status).To(Equal(metav1.ConditionTrue), "%+v", rec)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionStalled)).To(BeFalse())
			res, err := kstatusOf(got, "KafkaCluster")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(cordonKeys(ctx, Default, lb.Etcd)).To(Equal([]string{"1"}))

		By("a topic created during the drain gets no replica on broker 1")
		createTopic(ctx, adm, "late", 8, 2, nil)
		Eventually(func(g Gomega) {
			per := placedOn(ctx, g, adm, "late")
			g.Expect(per[1]).To(BeZero(), "replicas of late per broker: %v", per)
			g.Expect(per[0] + per[100]).To(Equal(16))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("broker 200 back, moves held by a 1 byte/s throttle: the drain runs with every pod ready and reads Reconciling (Draining)")
		fillRandom(ctx, lb.Addrs(), "events", 144, 128<<10)
		updateCluster(ns, "fence", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = ptr.To[int64](1) })
		// Broker 200 comes back only once a reconcile has seen the
		// throttle: one that began before the edit (long on a loaded
		// machine) reads the metadata in its course and would start the
		// drain's moves unthrottled once broker 200 registers; they copy
		// the partitions in a moment, the drain ends, and no move is in
		// flight to see (make test-stress, ledger). Reconciles of a
		// cluster do not overlap, so every one after the one that
		// observed this generation reads the throttle.
		Eventually(func(g Gomega) {
			got := getCluster(ns, "fence")
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		k.HoldScaleDown(true)
		k.HoldRestarts(false)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "fence")
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionScaleDownBlocked)).To(BeNil())
			g.Expect(got.Status.Scaling).NotTo(BeNil(), drainState(ns, "fence", got))
			g.Expect(got.Status.Scaling.MovesInFlight).To(BeNumerically(">", 0), drainState(ns, "fence", got))
			g.Expect(got.Status.ReadyBrokers).To(Equal(got.Status.DesiredBrokers))
			rec := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReconciling)
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.Status).To(Equal(metav1.ConditionTrue), "%+v", rec)
			g.Expect(rec.Reason).To(Equal(controllers.ReasonDraining))
			res, err := kstatusOf(got, "KafkaCluster")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("throttle lifted: broker 1 is drained; its pod lingers after the StatefulSet shrank, still cordoned")
		updateCluster(ns, "fence", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = nil })
		Eventually(func(g Gomega) {
			sts, err := getSTS(ns, "fence-a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sts.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
			got := getCluster(ns, "fence")
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionScaleDownBlocked)).To(BeNil())
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		Expect(k.Removed(1)).To(BeFalse(), "broker 1 still runs")
		Expect(getCluster(ns, "fence").Status.CordonedBrokers).To(Equal([]int32{1}))
		createTopic(ctx, adm, "window", 8, 3, nil)
		Eventually(func(g Gomega) {
			per := placedOn(ctx, g, adm, "window")
			g.Expect(per[1]).To(BeZero(), "replicas of window per broker: %v", per)
			g.Expect(per[0] + per[100] + per[200]).To(Equal(24))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("its pod gone, the cordon is lifted")
		k.HoldScaleDown(false)
		Eventually(func(g Gomega) {
			g.Expect(k.Removed(1)).To(BeTrue())
			got := getCluster(ns, "fence")
			g.Expect(got.Status.CordonedBrokers).To(BeEmpty())
			g.Expect(cordonKeys(ctx, g, lb.Etcd)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(k.drainedBeforeRemoval()).To(BeEmpty())

		By("zone c 1 -> 0 is refused (replication factor 3): Stalled, and nothing is cordoned")
		updateCluster(ns, "fence", func(kc *strata.KafkaCluster) { kc.Spec.Zones[2].Brokers = 0 })
		Eventually(func(g Gomega) {
			got := getCluster(ns, "fence")
			c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionScaleDownBlocked)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(controllers.ReasonDrainImpossible))
			// A person must act: Stalled.
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionStalled)).To(BeTrue(), "%+v", got.Status.Conditions)
			res, err := kstatusOf(got, "KafkaCluster")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(kstatus.FailedStatus), res.Message)
			g.Expect(got.Status.CordonedBrokers).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(cordonKeys(ctx, Default, lb.Etcd)).To(BeEmpty())
		updateCluster(ns, "fence", func(kc *strata.KafkaCluster) { kc.Spec.Zones[2].Brokers = 1 })
		Eventually(func(g Gomega) {
			got := getCluster(ns, "fence")
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionStalled)).To(BeFalse())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionScaleDownBlocked)).To(BeNil())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	}, SpecTimeout(8*time.Minute))
})
