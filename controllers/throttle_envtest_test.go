package controllers_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// ownThrottleRates returns a broker's own (DYNAMIC_BROKER_CONFIG)
// replication throttle rates, by name.
func ownThrottleRates(ctx context.Context, g Gomega, adm *kadm.Client, id int32) map[string]string {
	rcs, err := adm.DescribeBrokerConfigs(ctx, id)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, rc := range rcs {
		g.Expect(rc.Err).NotTo(HaveOccurred())
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicBrokerConfig {
				out[c.Key] = c.MaybeValue()
			}
		}
	}
	return out
}

// throttledReplicas returns the topics' throttled-replica lists set on
// them, by topic and name.
func throttledReplicas(ctx context.Context, g Gomega, adm *kadm.Client, topics ...string) map[string]map[string]string {
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]map[string]string{}
	for _, rc := range rcs {
		g.Expect(rc.Err).NotTo(HaveOccurred())
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && (c.Key == "leader.replication.throttled.replicas" || c.Key == "follower.replication.throttled.replicas") {
				if out[rc.Name] == nil {
					out[rc.Name] = map[string]string{}
				}
				out[rc.Name][c.Key] = c.MaybeValue()
			}
		}
	}
	return out
}

// fillRandom writes n incompressible records of size bytes to topic
// (acks=all) and returns the bytes written: what a move copies is then
// what the quota counts.
func fillRandom(ctx context.Context, seeds []string, topic string, n, size int) int {
	GinkgoHelper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(512<<10))
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	for range n {
		value := make([]byte, size)
		_, _ = rand.Read(value)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			defer GinkgoRecover()
			Expect(err).NotTo(HaveOccurred())
		})
	}
	Expect(cl.Flush(ctx)).To(Succeed())
	return n * size
}

var _ = Describe("Replication throttle", func() {
	It("throttles the moves of a scale-up rebalance and removes the throttle when they end", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "thr", map[string]int32{"a": 1, "b": 1, "c": 1})
		startKubelet(kc, lb)

		adm := lb.Admin()
		createTopic(ctx, adm, "events", 6, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})
		createTopic(ctx, adm, "bulk", 6, 3, nil)
		bulk := fillRandom(ctx, lb.Addrs(), "bulk", 160, 128<<10)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "thr")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		w := startWorkload(lb.Addrs(), "events")
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", 100))

		// 2 MiB/s: broker 1 receives about half of zone a's share of the
		// 20 MiB topic, so the quota alone keeps its moves in flight for
		// seconds, whatever the machine's speed.
		const rate = 2 << 20
		By("scale zone a 1 -> 2 with spec.rebalance.throttle: the brokers involved get the rates, the moving partitions the lists")
		start := time.Now()
		updateCluster(ns, "thr", func(kc *strata.KafkaCluster) {
			kc.Spec.Zones[0].Brokers = 2
			kc.Spec.Rebalance.Throttle = ptr.To[int64](rate)
		})
		want := strconv.Itoa(rate)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "thr")
			c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionReplicationThrottled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Message).To(ContainSubstring(want + " bytes/s"))
			// Broker 1 receives every moving replica: both rates, its own.
			g.Expect(ownThrottleRates(ctx, g, adm, 1)).To(Equal(map[string]string{
				"leader.replication.throttled.rate": want, "follower.replication.throttled.rate": want,
			}))
			lists := throttledReplicas(ctx, g, adm, "bulk")
			g.Expect(lists["bulk"]["follower.replication.throttled.replicas"]).To(MatchRegexp(`^\d+:1(,\d+:1)*$`), "broker 1 is the one catching up")
			g.Expect(lists["bulk"]["leader.replication.throttled.replicas"]).NotTo(BeEmpty())
			// A scale-up's moves begin only after a new broker process has
			// started, registered and had its pod turn ready, as the other
			// scale-up specs allow for (3 × timeout): under make
			// test-stress the new broker alone registered 32 s after the
			// spec change, and the first throttled moves had not begun
			// 28 s later, when the one-minute wait ran out.
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())

		By("the moves end: every rate and list is removed, the condition says so")
		Eventually(func(g Gomega) {
			got := getCluster(ns, "thr")
			g.Expect(got.Status.Scaling).To(BeNil(), "%+v", got.Status.Scaling)
			g.Expect(replicasPerBroker(ctx, g, adm, "bulk")[1]).To(BeNumerically(">", 0))
			c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionReplicationThrottled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), c.Message)
			for _, id := range []int32{0, 1, 100, 200} {
				g.Expect(ownThrottleRates(ctx, g, adm, id)).To(BeEmpty(), "broker %d", id)
			}
			g.Expect(throttledReplicas(ctx, g, adm, "bulk", "events")).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "throttled (%d B/s) scale-up 1 -> 2 with rebalance of a %d MB topic took %s\n", rate, bulk>>20, time.Since(start).Round(100*time.Millisecond))

		acked := w.Acked()
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", acked+100), "the producer goes on")
		w.Verify(ctx)
	}, SpecTimeout(10*time.Minute))
})
