package controllers_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// healthSpec is a cluster of one broker in each of zones a, b, c without
// WAL (no buckets needed), on external etcd endpoints filled in by the
// caller.
func healthSpec() *strata.KafkaCluster {
	kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{WAL: strata.WALSpec{Enabled: ptr.To(false)}}}
	for _, z := range []string{"a", "b", "c"} {
		kc.Spec.Zones = append(kc.Spec.Zones, strata.ZoneSpec{Name: z, Brokers: 1})
	}
	return kc
}

// makeBrokerPodsReady creates the Pod of every broker in kc's status,
// with the labels the operator selects broker pods by, and marks it Ready
// in its status. The suite has no StatefulSet controller or kubelet, so
// specs that want Ready=True stand in for them.
func makeBrokerPodsReady(kc *strata.KafkaCluster) {
	GinkgoHelper()
	Expect(kc.Status.Brokers).NotTo(BeEmpty(), "status.brokers is filled by the first reconcile")
	for _, b := range kc.Status.Brokers {
		// The pod runs its StatefulSet's current template, or the
		// operator's rolling restart would delete it.
		sts := &appsv1.StatefulSet{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: kc.Namespace, Name: controllers.ZoneStatefulSetName(kc.Name, b.Zone)}, sts)).To(Succeed())
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: b.Pod, Labels: map[string]string{
				controllers.LabelManagedBy: controllers.ManagedBy, controllers.LabelCluster: kc.Name,
				controllers.LabelComponent: controllers.ComponentBroker, controllers.LabelZone: b.Zone,
			}, Annotations: map[string]string{controllers.AnnotationTemplateHash: sts.Spec.Template.Annotations[controllers.AnnotationTemplateHash]}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "broker", Image: "strata"}}},
		}
		Expect(k8sClient.Create(suiteCtx, pod)).To(Succeed())
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		Expect(k8sClient.Status().Update(suiteCtx, pod)).To(Succeed())
	}
}

func clusterCondition(g Gomega, kc *strata.KafkaCluster, typ string) *metav1.Condition {
	c := meta.FindStatusCondition(kc.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "condition %s", typ)
	return c
}

// leadersPerZone reads the partition leaders of topic with kadm and
// counts them by the zone (rack) of their broker.
func leadersPerZone(ctx context.Context, g Gomega, adm *kadm.Client, topic string) map[string]int {
	md, err := adm.Metadata(ctx, topic)
	g.Expect(err).NotTo(HaveOccurred())
	rack := map[int32]string{}
	for _, b := range md.Brokers {
		rack[b.NodeID] = ptr.Deref(b.Rack, "")
	}
	out := map[string]int{}
	for _, p := range md.Topics[topic].Partitions {
		g.Expect(p.Leader).To(BeNumerically(">=", 0), "partition %d has no leader", p.Partition)
		out[rack[p.Leader]]++
	}
	return out
}

func statusLeaders(h *strata.KafkaHealth) map[string]int {
	out := map[string]int{}
	for _, z := range h.LeadersPerZone {
		out[z.Zone] = int(z.Leaders)
	}
	return out
}

func clusterEvents(g Gomega, ns, name string) map[string][]string {
	var events eventsv1.EventList
	g.Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
	out := map[string][]string{}
	for _, e := range events.Items {
		if e.Regarding.Kind == "KafkaCluster" && e.Regarding.Name == name {
			out[e.Reason] = append(out[e.Reason], e.Note)
		}
	}
	return out
}

var _ = Describe("KafkaCluster health through the Kafka admin API", func() {
	It("reports brokers, controller, partitions and leaders per zone; a killed broker makes it unready and degraded; the operator moves leaders back (Balanced)", func(ctx SpecContext) {
		ns := newNamespace()
		kc := healthSpec()
		kc.Namespace, kc.Name = ns, "health"
		// The brokers do not move leaders back themselves: what does is
		// the operator's preferred-leader election.
		lb := startLoopbackBrokers(kc, brokertest.WithSetting("auto.leader.rebalance.enable", "false"))
		kc.Spec.Metadata.ExternalEndpoints = lb.Etcd
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())

		adm := lb.Admin()
		Eventually(func(g Gomega) {
			_, err := adm.CreateTopic(ctx, 6, 3, nil, "orders")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		// One partition per zone, replication factor 1: it goes offline
		// with its broker.
		Eventually(func(g Gomega) {
			_, err := adm.CreateTopic(ctx, 3, 1, nil, "single")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		var balanced map[string]int
		Eventually(func(g Gomega) {
			balanced = leadersPerZone(ctx, g, adm, "orders")
			g.Expect(balanced).To(Equal(map[string]int{"a": 2, "b": 2, "c": 2}))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("status reports what kadm reads")
		Eventually(func(g Gomega) {
			got := getCluster(ns, "health")
			h := got.Status.Kafka
			g.Expect(h).NotTo(BeNil())
			g.Expect(h.Reachable).To(BeTrue(), "kafka error: %s", h.Error)
			g.Expect(h.RegisteredBrokers).To(BeEquivalentTo(3))
			g.Expect(h.UnregisteredBrokers).To(BeEmpty())
			md, err := adm.Metadata(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h.Controller).To(Equal(md.Controller))
			g.Expect(h.Controller).To(BeElementOf(int32(0), int32(100), int32(200)))
			g.Expect(h.Topics).To(BeEquivalentTo(2))
			g.Expect(h.Partitions).To(BeEquivalentTo(9))
			g.Expect(h.OfflinePartitions).To(BeZero())
			g.Expect(h.UnderReplicatedPartitions).To(BeZero())
			g.Expect(statusLeaders(h)).To(Equal(map[string]int{"a": 3, "b": 3, "c": 3}))
			g.Expect(h.LastProbeTime).NotTo(BeNil())
			for _, b := range got.Status.Brokers {
				g.Expect(b.Registered).To(BeTrue(), "broker %d", b.ID)
			}
			for _, z := range got.Status.Zones {
				g.Expect(z.WAL).To(Equal(&strata.ZoneWALStatus{State: strata.WALDisabled}), "zone %s", z.Name)
			}
			g.Expect(clusterCondition(g, got, strata.ConditionKafkaReachable).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(clusterCondition(g, got, strata.ConditionMetadataHealthy).Status).To(Equal(metav1.ConditionTrue))
			ready := clusterCondition(g, got, strata.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(controllers.ReasonBrokersNotReady)) // no pods yet
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("pods ready and Kafka healthy: Ready")
		makeBrokerPodsReady(getCluster(ns, "health"))
		Eventually(func(g Gomega) {
			got := getCluster(ns, "health")
			ready := clusterCondition(g, got, strata.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
			g.Expect(ready.Reason).To(Equal(controllers.ReasonClusterHealthy))
			g.Expect(clusterCondition(g, got, strata.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("kill broker 100 (zone b): its partition of 'single' goes offline, the others are under-replicated")
		lb.Brokers[100].Kill()
		Eventually(func(g Gomega) {
			got := getCluster(ns, "health")
			h := got.Status.Kafka
			g.Expect(h.Reachable).To(BeTrue(), "kafka error: %s", h.Error)
			g.Expect(h.UnregisteredBrokers).To(Equal([]int32{100}))
			g.Expect(h.OfflinePartitions).To(BeEquivalentTo(1))
			g.Expect(h.UnderReplicatedPartitions).To(BeEquivalentTo(6))
			g.Expect(statusLeaders(h)).NotTo(HaveKey("b"))
			ready := clusterCondition(g, got, strata.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(controllers.ReasonPartitionsOffline))
			g.Expect(ready.Message).To(ContainSubstring("1 of 9 partitions offline"))
			g.Expect(ready.Message).To(ContainSubstring("brokers [100] not registered"))
			degraded := clusterCondition(g, got, strata.ConditionDegraded)
			g.Expect(degraded.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(degraded.Reason).To(Equal(controllers.ReasonPartitionsUnderReplicated))
			g.Expect(degraded.Message).To(ContainSubstring("6 of 9 partitions under-replicated"))
			for _, b := range got.Status.Brokers {
				g.Expect(b.Registered).To(Equal(b.ID != 100), "broker %d", b.ID)
			}
			// What kadm reads agrees: no leader in zone b.
			md, err := adm.Metadata(ctx, "orders")
			g.Expect(err).NotTo(HaveOccurred())
			for _, p := range md.Topics["orders"].Partitions {
				g.Expect(p.Leader).NotTo(BeEquivalentTo(100))
			}
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("restart broker 100: the operator elects the preferred leaders, 2 per zone again")
		lb.Brokers[100].Start()
		Eventually(func(g Gomega) {
			g.Expect(leadersPerZone(ctx, g, adm, "orders")).To(Equal(map[string]int{"a": 2, "b": 2, "c": 2}))
		}).WithContext(ctx).WithTimeout(2 * timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getCluster(ns, "health")
			h := got.Status.Kafka
			g.Expect(h.UnregisteredBrokers).To(BeEmpty())
			g.Expect(h.OfflinePartitions).To(BeZero())
			g.Expect(h.NonPreferredLeaders).To(BeZero())
			g.Expect(statusLeaders(h)).To(Equal(map[string]int{"a": 3, "b": 3, "c": 3}))
			g.Expect(h.LastLeaderElectionTime).NotTo(BeNil())
			g.Expect(clusterCondition(g, got, strata.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(clusterEvents(g, ns, "health")).To(HaveKey(controllers.EventLeadersElected))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	}, SpecTimeout(6*time.Minute))

	It("reports brokers it cannot reach as KafkaReachable=False and Ready=False, and still reconciles", func() {
		ns := newNamespace()
		kc := healthSpec()
		kc.Spec.Metadata.ExternalEndpoints = []string{unreachableEndpoint}
		// No loopback brokers: the operator has no address for them, as
		// when the bootstrap Service does not resolve.
		createCluster(ns, "nokafka", kc)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "nokafka")
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			h := got.Status.Kafka
			g.Expect(h).NotTo(BeNil())
			g.Expect(h.Reachable).To(BeFalse())
			g.Expect(h.Error).To(ContainSubstring("no loopback brokers"))
			g.Expect(h.LastProbeTime).NotTo(BeNil())
			c := clusterCondition(g, got, strata.ConditionKafkaReachable)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(controllers.ReasonKafkaUnreachable))
			g.Expect(c.Message).To(ContainSubstring("no loopback brokers"))
			// The rest of the reconcile ran: the zones are laid out.
			g.Expect(got.Status.Zones).To(HaveLen(3))
			for _, b := range got.Status.Brokers {
				g.Expect(b.Registered).To(BeFalse())
			}
			for _, z := range got.Status.Zones {
				g.Expect(z.WAL).To(Equal(&strata.ZoneWALStatus{State: strata.WALDisabled}))
			}
			g.Expect(clusterEvents(g, ns, "nokafka")[controllers.EventKafkaUnreachable]).To(ConsistOf(ContainSubstring("no loopback brokers")))
		}, timeout, interval).Should(Succeed())

		makeBrokerPodsReady(getCluster(ns, "nokafka"))
		Eventually(func(g Gomega) {
			got := getCluster(ns, "nokafka")
			g.Expect(got.Status.ReadyBrokers).To(BeEquivalentTo(3))
			ready := clusterCondition(g, got, strata.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(controllers.ReasonKafkaUnreachable))
			g.Expect(ready.Message).To(ContainSubstring("no loopback brokers"))
			// The metadata store is unreachable too: the message says so.
			g.Expect(ready.Message).To(ContainSubstring(fmt.Sprintf("metadata %s", controllers.ReasonEtcdUnreachable)))
		}, timeout, interval).Should(Succeed())
	})

	It("reports each zone's WAL state from the brokers' metrics: Healthy, then Degraded while the bucket is down, and the replication cost", func(ctx SpecContext) {
		ns := newNamespace()
		srv := s3server.Start(GinkgoT(), "wal")
		Expect(k8sClient.Create(suiteCtx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wal-keys"},
			StringData: map[string]string{"accessKeyID": srv.AccessKey, "secretAccessKey": srv.SecretKey},
		})).To(Succeed())
		kc := &strata.KafkaCluster{}
		kc.Namespace, kc.Name = ns, "walhealth"
		for _, z := range []string{"a", "b"} {
			Expect(k8sClient.Create(suiteCtx, &strata.FastBucket{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wal-" + z},
				Spec: strata.FastBucketSpec{
					Zone: z, Bucket: "wal", Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true,
					Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "wal-keys"}},
				},
			})).To(Succeed())
			kc.Spec.Zones = append(kc.Spec.Zones, strata.ZoneSpec{Name: z, Brokers: 1, FastBucketRef: &strata.LocalObjectReference{Name: "wal-" + z}})
		}
		// The broker processes read the bucket keys from STRATA_WAL_*.
		GinkgoT().Setenv("STRATA_WAL_ACCESS_KEY_ID", srv.AccessKey)
		GinkgoT().Setenv("STRATA_WAL_SECRET_ACCESS_KEY", srv.SecretKey)
		lb := startLoopbackBrokers(kc,
			brokertest.WithSetting("wal.enable", "true"),
			brokertest.WithSetting("wal.bucket.name", "wal"),
			brokertest.WithSetting("wal.bucket.region", srv.Region),
			brokertest.WithSetting("wal.bucket.endpoint", srv.Endpoint),
			brokertest.WithSetting("wal.bucket.force.path.style", "true"))
		kc.Spec.Metadata.ExternalEndpoints = lb.Etcd
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())

		Eventually(func(g Gomega) {
			got := getCluster(ns, "walhealth")
			g.Expect(got.Status.Zones).To(HaveLen(2))
			for _, z := range got.Status.Zones {
				g.Expect(z.WAL).NotTo(BeNil())
				g.Expect(z.WAL.State).To(Equal(strata.WALHealthy), "zone %s: %s", z.Name, z.WAL.Message)
				g.Expect(z.WAL.DegradedBrokers).To(BeEmpty())
				g.Expect(z.WAL.PolicyInlineBrokers).To(BeEmpty())
				// The brokers do not forward zone-local produce: nothing.
				g.Expect(z.WAL.ZoneLocal).To(BeNil())
				// Its broker's operating point (the test brokers run
				// wal.policy=latency: objects every wal.upload.interval.ms,
				// no bound of auto's).
				g.Expect(z.WAL.OperatingPoints).To(HaveLen(1), "zone %s", z.Name)
				op := z.WAL.OperatingPoints[0]
				g.Expect(op.BrokerID).To(Equal(z.BrokerIDBase))
				g.Expect(op.Path).To(Equal("WAL"))
				g.Expect(op.Bound).To(BeEmpty())
				g.Expect(op.CutInterval).NotTo(BeNil())
				g.Expect(op.CutInterval.Duration).To(BeNumerically(">", 0))
				g.Expect(op.ExpectedAddedP99).NotTo(BeNil())
				g.Expect(op.ExpectedAddedP99.Duration).To(Equal(2 * op.CutInterval.Duration))
			}
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		cl, err := kgo.NewClient(kgo.SeedBrokers(lb.Addrs()...), kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		Expect(err).NotTo(HaveOccurred())
		defer cl.Close()
		Eventually(func(g Gomega) {
			_, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 2, nil, "events")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("status.cost: the brokers' cost counters, summed")
		for range 20 {
			for p := range int32(2) {
				v := make([]byte, 1000)
				_, _ = rand.Read(v) // incompressible: the client compresses batches
				Expect(cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: v}).FirstErr()).To(Succeed())
			}
		}
		// The brokers' counters, read directly: what status.cost must sum.
		brokerSum := func(g Gomega, metric string) float64 {
			total := 0.0
			for _, z := range []struct {
				zone string
				id   int32
			}{{"a", 0}, {"b", 100}} {
				url, err := loopback.HTTP(kc, z.zone, 0, z.id)
				g.Expect(err).NotTo(HaveOccurred())
				resp, err := http.Get(url + "/metrics")
				g.Expect(err).NotTo(HaveOccurred())
				bm, err := controllers.ParseBrokerMetrics(resp.Body)
				resp.Body.Close()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(bm.CostExported).To(BeTrue())
				switch metric {
				case "produced":
					total += bm.Produced
				case "classic":
					total += bm.ClassicBytes
				case "puts":
					total += bm.Puts
				}
			}
			return total
		}
		Eventually(func(g Gomega) {
			got := getCluster(ns, "walhealth")
			c := got.Status.Cost
			g.Expect(c).NotTo(BeNil())
			// 40 records of 1,000 bytes in batches: more than 40,000 bytes.
			g.Expect(c.BytesProduced).To(BeNumerically(">", 40_000))
			g.Expect(float64(c.BytesProduced)).To(Equal(brokerSum(g, "produced")))
			// RF 2 in two zones: one cross-zone copy of every byte.
			g.Expect(c.ClassicCrossZoneBytes).To(Equal(c.BytesProduced))
			g.Expect(float64(c.ClassicCrossZoneBytes)).To(Equal(brokerSum(g, "classic")))
			g.Expect(c.Puts).To(BeNumerically(">", 0))
			g.Expect(float64(c.Puts)).To(BeNumerically("<=", brokerSum(g, "puts")))
			g.Expect(c.Brokers).To(BeEquivalentTo(2))
			g.Expect(c.EstimatedUSDPerMonth.Classic).NotTo(BeEmpty())
			g.Expect(c.SavingPercent).NotTo(BeNil())
			walDeg := clusterCondition(g, got, strata.ConditionWALDegraded)
			g.Expect(walDeg.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(walDeg.Reason).To(Equal(controllers.ReasonWALHealthy))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("the bucket goes away: the leaders' uploads fail and they replicate inline")
		srv.Stop()
		Eventually(func(g Gomega) {
			// Keep data coming: a broker degrades on failed uploads.
			for p := range int32(2) {
				g.Expect(cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("x")}).FirstErr()).To(Succeed())
			}
			got := getCluster(ns, "walhealth")
			for _, z := range got.Status.Zones {
				g.Expect(z.WAL).NotTo(BeNil())
				g.Expect(z.WAL.State).To(Equal(strata.WALDegraded), "zone %s: %s", z.Name, z.WAL.Message)
				g.Expect(z.WAL.DegradedBrokers).To(Equal([]int32{z.BrokerIDBase}))
			}
			degraded := clusterCondition(g, got, strata.ConditionDegraded)
			g.Expect(degraded.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(degraded.Message).To(ContainSubstring("WAL degraded to inline replication in zones a (brokers [0]), b (brokers [100])"))
			// What the operator read is what the broker serves (read in
			// the same round: a broker with nothing left to upload may
			// leave the degraded state again).
			url, err := loopback.HTTP(kc, "b", 0, 100)
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := http.Get(url + "/metrics")
			g.Expect(err).NotTo(HaveOccurred())
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Split(string(body), "\n")).To(ContainElement("strata_wal_degraded 1"))
			walDeg := clusterCondition(g, got, strata.ConditionWALDegraded)
			g.Expect(walDeg.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(walDeg.Reason).To(Equal(controllers.ReasonBucketUploadsFailing))
			g.Expect(walDeg.Message).To(ContainSubstring("zone b: brokers [100]"))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("the bucket is back: uploads succeed again and WALDegraded clears")
		srv.Restart()
		Eventually(func(g Gomega) {
			// Data keeps coming: the breaker's probe upload closes it.
			for p := range int32(2) {
				g.Expect(cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("y")}).FirstErr()).To(Succeed())
			}
			got := getCluster(ns, "walhealth")
			walDeg := clusterCondition(g, got, strata.ConditionWALDegraded)
			g.Expect(walDeg.Status).To(Equal(metav1.ConditionFalse), walDeg.Message)
			g.Expect(walDeg.Reason).To(Equal(controllers.ReasonWALHealthy))
			for _, z := range got.Status.Zones {
				g.Expect(z.WAL.State).To(Equal(strata.WALHealthy), "zone %s", z.Name)
				g.Expect(z.WAL.DegradedBrokers).To(BeEmpty(), "zone %s", z.Name)
			}
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
})
