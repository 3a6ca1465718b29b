package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// replicasPerBroker counts the replicas of topic on each broker.
func replicasPerBroker(ctx context.Context, g Gomega, adm *kadm.Client, topic string) map[int32]int {
	md, err := adm.Metadata(ctx, topic)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(md.Topics[topic].Err).NotTo(HaveOccurred())
	out := map[int32]int{}
	for _, p := range md.Topics[topic].Partitions {
		for _, id := range p.Replicas {
			out[id]++
		}
	}
	return out
}

// fillTopic writes n records of size bytes to topic (acks=all) and
// returns the bytes written.
func fillTopic(ctx context.Context, seeds []string, topic string, n, size int) int {
	GinkgoHelper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(4<<20))
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	value := make([]byte, size)
	for i := range n {
		value[0] = byte(i)
		cl.Produce(ctx, &kgo.Record{Value: slices.Clone(value)}, func(_ *kgo.Record, err error) {
			defer GinkgoRecover()
			Expect(err).NotTo(HaveOccurred())
		})
	}
	Expect(cl.Flush(ctx)).To(Succeed())
	return n * size
}

var _ = Describe("Scaling", func() {
	It("moves replicas onto a new broker, drains it before its pod goes, and refuses an impossible scale-down", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "scale", map[string]int32{"a": 1, "b": 1, "c": 1})
		k := startKubelet(kc, lb)

		adm := lb.Admin()
		createTopic(ctx, adm, "events", 6, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})
		createTopic(ctx, adm, "bulk", 6, 3, nil)
		bulk := fillTopic(ctx, lb.Addrs(), "bulk", 160, 128<<10)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "scale")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		w := startWorkload(lb.Addrs(), "events")
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", 100))

		By("scale zone a 1 -> 2: broker 1 starts and gets a fair share of zone a's replicas")
		start := time.Now()
		updateCluster(ns, "scale", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].Brokers = 2 })
		// Fair share: zone a's 12 replicas (one per partition of the two
		// topics) split evenly over its two brokers, one replica per zone
		// kept.
		Eventually(func(g Gomega) {
			total := map[int32]int{}
			for _, topic := range []string{"events", "bulk"} {
				per := replicasPerBroker(ctx, g, adm, topic)
				g.Expect(per[100]).To(Equal(6), topic)
				g.Expect(per[200]).To(Equal(6), topic)
				g.Expect(per[1]).To(BeNumerically(">", 0), "broker 1 holds part of %s", topic)
				for id, n := range per {
					total[id] += n
				}
			}
			g.Expect(total).To(Equal(map[int32]int{0: 6, 1: 6, 100: 12, 200: 12}))
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		// The counts are fair before the rebalance ends: it goes on to
		// balance bytes (two more moves of the bulk topic's data). Under
		// make test-stress those copied at 30 KB/s and were still
		// progressing, with an estimated completion 37 s past a 1 ×
		// timeout wait, so this wait gets the scale-up allowance too.
		Eventually(func(g Gomega) {
			got := getCluster(ns, "scale")
			g.Expect(got.Status.Scaling).To(BeNil(), "%+v", got.Status.Scaling)
			g.Expect(got.Status.Kafka.UnderReplicatedPartitions).To(BeZero())
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "scale-up 1 -> 2 with rebalance took %s\n", time.Since(start).Round(100*time.Millisecond))

		var bulkOn1 int
		Eventually(func(g Gomega) { bulkOn1 = replicasPerBroker(ctx, g, adm, "bulk")[1] }).WithContext(ctx).Should(Succeed())

		By("scale zone a 2 -> 1: broker 1 is drained before its pod goes")
		start = time.Now()
		updateCluster(ns, "scale", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].Brokers = 1 })
		Eventually(func(g Gomega) {
			g.Expect(k.Removed(1)).To(BeTrue(), "broker 1's pod removed")
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		drained := time.Since(start)
		// The moment its pod went, it held nothing: the kubelet read the
		// metadata before removing it.
		Expect(k.drainedBeforeRemoval()).To(BeEmpty(), "pods removed while their broker still held replicas")
		for _, topic := range []string{"events", "bulk"} {
			Eventually(func(g Gomega) {
				g.Expect(replicasPerBroker(ctx, g, adm, topic)).To(Equal(map[int32]int{0: 6, 100: 6, 200: 6}), topic)
			}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		}
		fmt.Fprintf(GinkgoWriter, "drain of broker 1 (it held about %d MB of the %d MB topic bulk) and removal took %s\n", bulk*bulkOn1/6>>20, bulk>>20, drained.Round(100*time.Millisecond))
		Eventually(func(g Gomega) {
			got := getCluster(ns, "scale")
			g.Expect(got.Status.Scaling).To(BeNil(), "%+v", got.Status.Scaling)
			sts, err := getSTS(ns, "scale-a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sts.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("removing zone c while the topics have replication factor 3: refused, nothing removed")
		updateCluster(ns, "scale", func(kc *strata.KafkaCluster) { kc.Spec.Zones = kc.Spec.Zones[:2] })
		Eventually(func(g Gomega) {
			got := getCluster(ns, "scale")
			c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionScaleDownBlocked)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonDrainImpossible))
			g.Expect(c.Message).To(ContainSubstring("has replication factor 3 but only 2 brokers would remain"))
			g.Expect(got.Status.Scaling).NotTo(BeNil())
			g.Expect(got.Status.Scaling.Phase).To(Equal(controllers.ScalingPhaseBlocked))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			sts, err := getSTS(ns, "scale-c")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sts.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
			pod := &corev1.Pod{}
			err = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scale-c-0"}, pod)
			g.Expect(apierrors.IsNotFound(err)).To(BeFalse())
			g.Expect(k.Removed(200)).To(BeFalse())
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())

		By("zone c back in the spec: the refusal is lifted, and zone c keeps its broker (same ID, same data)")
		updateCluster(ns, "scale", func(kc *strata.KafkaCluster) {
			kc.Spec.Zones = append(kc.Spec.Zones, strata.ZoneSpec{Name: "c", Brokers: 1})
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "scale")
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionScaleDownBlocked)).To(BeNil())
			g.Expect(got.Status.Scaling).To(BeNil())
			g.Expect(got.Status.BrokerIDBlocks).To(ContainElement(strata.BrokerIDBlock{Zone: "c", Base: 200}))
			g.Expect(got.Status.Roll).To(BeNil())
			podsCurrent(g, got)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(k.Restarts(200)).To(BeZero(), "broker 200 restarted: zone c's pods were renumbered")
		Expect(lb.broker(300)).To(BeNil(), "zone c got a new ID block while its broker 200 still ran")

		acked := w.Acked()
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", acked+100), "the producer goes on")
		w.Verify(ctx)
	}, SpecTimeout(10*time.Minute))

	It("drains a removed zone before its StatefulSet goes to zero and is deleted", func(ctx SpecContext) {
		ns := newNamespace()
		kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{WAL: strata.WALSpec{Enabled: ptr.To(false)}}}
		for _, z := range []string{"a", "b", "c", "d"} {
			kc.Spec.Zones = append(kc.Spec.Zones, strata.ZoneSpec{Name: z, Brokers: 1})
		}
		kc.Namespace, kc.Name = ns, "zones"
		lb := startLoopbackBrokers(kc)
		kc.Spec.Metadata.ExternalEndpoints = lb.Etcd
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		k := startKubelet(kc, lb)

		adm := lb.Admin()
		createTopic(ctx, adm, "events", 8, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "zones")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
			g.Expect(replicasPerBroker(ctx, g, adm, "events")[300]).To(BeNumerically(">", 0), "zone d holds replicas")
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		w := startWorkload(lb.Addrs(), "events")
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", 100))

		By("zone d leaves the spec: its broker is drained, then its StatefulSet goes to zero and is deleted")
		updateCluster(ns, "zones", func(kc *strata.KafkaCluster) { kc.Spec.Zones = kc.Spec.Zones[:3] })
		Eventually(func(g Gomega) {
			_, err := getSTS(ns, "zones-d")
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "StatefulSet of zone d still there")
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		Expect(k.Removed(300)).To(BeTrue())
		Expect(k.drainedBeforeRemoval()).To(BeEmpty(), "pods removed while their broker still held replicas")
		Eventually(func(g Gomega) {
			per := replicasPerBroker(ctx, g, adm, "events")
			g.Expect(per).NotTo(HaveKey(int32(300)))
			// Still one replica per zone: 8 partitions x 3 replicas over
			// the three zones left.
			g.Expect(per).To(Equal(map[int32]int{0: 8, 100: 8, 200: 8}))
			got := getCluster(ns, "zones")
			g.Expect(got.Status.BrokerIDBlocks).To(ContainElement(strata.BrokerIDBlock{Zone: "d", Base: 300, Retired: true}))
			g.Expect(got.Status.Scaling).To(BeNil())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		acked := w.Acked()
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", acked+100), "the producer goes on")
		w.Verify(ctx)
	}, SpecTimeout(8*time.Minute))
})
