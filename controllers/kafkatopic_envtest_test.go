package controllers_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// The KafkaTopic specs run against real brokers: one `strata broker`
// process per zone (a, b, c) behind a KafkaCluster, reached by the suite's
// operator through the loopback endpoints. Every spec checks the CR's
// status and what kadm reads back from the brokers.

// newTopic is a KafkaTopic of cluster in ns.
func newTopic(ns, name, cluster string, partitions, rf int32, config map[string]string) *strata.KafkaTopic {
	return &strata.KafkaTopic{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: strata.KafkaTopicSpec{
			ClusterRef: strata.LocalObjectReference{Name: cluster}, Partitions: partitions, ReplicationFactor: rf, Config: config,
		},
	}
}

// topicReady waits until kt is Ready with reason TopicReady for its
// current generation and returns it.
func topicReady(kt *strata.KafkaTopic) *strata.KafkaTopic {
	GinkgoHelper()
	got := &strata.KafkaTopic{}
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kt), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controllers.ReasonTopicReady), c.Message)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	return got
}

// topicCondition waits for kt's Ready condition to have reason and
// returns it.
func topicCondition(kt *strata.KafkaTopic, reason string) *metav1.Condition {
	GinkgoHelper()
	var c *metav1.Condition
	Eventually(func(g Gomega) {
		got := &strata.KafkaTopic{}
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kt), got)).To(Succeed())
		c = meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), c.Message)
	}, timeout, interval).Should(Succeed())
	return c
}

func updateTopic(kt *strata.KafkaTopic, mutate func(*strata.KafkaTopic)) {
	GinkgoHelper()
	Eventually(func() error {
		got := &strata.KafkaTopic{}
		if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kt), got); err != nil {
			return err
		}
		mutate(got)
		return k8sClient.Update(suiteCtx, got)
	}, timeout, interval).Should(Succeed())
}

// topicEvents are the notes of kt's events with reason.
func topicEvents(g Gomega, kt *strata.KafkaTopic, reason string) []string {
	var events eventsv1.EventList
	g.Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(kt.Namespace))).To(Succeed())
	var notes []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "KafkaTopic" && e.Regarding.Name == kt.Name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// dynamicConfigs are the topic's config overrides as the brokers report them.
func dynamicConfigs(g Gomega, adm *kadm.Client, topic string) map[string]string {
	rcs, err := adm.DescribeTopicConfigs(suiteCtx, topic)
	g.Expect(err).NotTo(HaveOccurred())
	rc, err := rcs.On(topic, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out
}

// kafkaTopic is the topic as the brokers report it.
func kafkaTopic(g Gomega, adm *kadm.Client, topic string) kadm.TopicDetail {
	md, err := adm.Metadata(suiteCtx, topic)
	g.Expect(err).NotTo(HaveOccurred())
	td := md.Topics[topic]
	g.Expect(td.Err).NotTo(HaveOccurred())
	return td
}

var _ = Describe("KafkaTopic controller", Ordered, func() {
	var (
		ns     string
		adm    *kadm.Client
		zoneOf map[int32]string
	)
	BeforeAll(func() {
		ns = newNamespace()
		kc := clusterSpec(map[string]int32{"a": 1, "b": 1, "c": 1}, "a", "b", "c")
		kc.Spec.WAL.Enabled = ptr.To(false)
		kc.Namespace, kc.Name = ns, "kafka"
		lb := startLoopbackBrokers(kc)
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		cl, err := kgo.NewClient(kgo.SeedBrokers(lb.Addrs()...))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cl.Close)
		adm = kadm.NewClient(cl)
		zoneOf = map[int32]string{}
		for id, b := range lb.Brokers {
			zoneOf[id] = b.Zone
		}
		Eventually(func(g Gomega) {
			brokers, err := adm.ListBrokers(suiteCtx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(brokers).To(HaveLen(3))
		}, timeout, interval).Should(Succeed())
	})

	// Release the specs' topics, so that they do not keep reconciling
	// against brokers that are gone for the rest of the suite.
	AfterAll(func() {
		var list strata.KafkaTopicList
		Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
		for i := range list.Items {
			kt := &list.Items[i]
			updateTopic(kt, func(kt *strata.KafkaTopic) { kt.Spec.DeletionPolicy = strata.DeletionPolicyRetain })
			Expect(client.IgnoreNotFound(k8sClient.Delete(suiteCtx, kt))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}, timeout, interval).Should(Succeed())
	})

	// zonesOf are the zones of a replica list.
	zonesOf := func(replicas []int32) []string {
		var out []string
		for _, id := range replicas {
			out = append(out, zoneOf[id])
		}
		return out
	}

	It("creates a compacted topic with Kafka's compaction configs", func() {
		cfg := map[string]string{"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1",
			"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "600000", "delete.retention.ms": "60000"}
		kt := newTopic(ns, "changelog", "kafka", 1, 3, cfg)
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		got := topicReady(kt)
		Eventually(func(g Gomega) {
			g.Expect(dynamicConfigs(g, adm, "changelog")).To(Equal(cfg))
		}, timeout, interval).Should(Succeed())
		Expect(got.Status.Configs).To(Equal(cfg))
	})

	It("creates a topic, alters its configs incrementally and adds partitions", func() {
		kt := newTopic(ns, "orders", "kafka", 3, 3, map[string]string{"retention.ms": "3600000", "segment.ms": "600000"})
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		got := topicReady(kt)
		Eventually(func(g Gomega) {
			td := kafkaTopic(g, adm, "orders")
			g.Expect(td.Partitions).To(HaveLen(3))
			for _, p := range td.Partitions {
				g.Expect(zonesOf(p.Replicas)).To(ConsistOf("a", "b", "c"), "partition %d", p.Partition)
			}
			g.Expect(got.Status.TopicID).To(Equal(td.ID.String()))
			g.Expect(dynamicConfigs(g, adm, "orders")).To(Equal(map[string]string{"retention.ms": "3600000", "segment.ms": "600000"}))
		}, timeout, interval).Should(Succeed())
		Expect(got.Status.TopicName).To(Equal("orders"))
		// kstatus: a ready topic is Current.
		res, err := kstatusOf(got, "KafkaTopic")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Status).To(Equal(kstatus.CurrentStatus), res.Message)
		Expect(meta.IsStatusConditionFalse(got.Status.Conditions, strata.ConditionReconciling)).To(BeTrue())
		Expect(meta.IsStatusConditionFalse(got.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		Expect(got.Status.PartitionCount).To(BeEquivalentTo(3))
		Expect(got.Status.ReplicationFactor).To(BeEquivalentTo(3))
		Expect(got.Status.Configs).To(Equal(map[string]string{"retention.ms": "3600000", "segment.ms": "600000"}))
		Expect(got.Status.Partitions).To(HaveLen(3))
		var leaders int32
		for _, n := range got.Status.LeadersPerZone {
			leaders += n
		}
		Expect(leaders).To(BeEquivalentTo(3))
		for _, p := range got.Status.Partitions {
			Expect(p.LeaderZone).To(Equal(zoneOf[p.Leader]))
			Expect(p.Replicas).To(HaveLen(3))
		}

		// Change one config, drop another, add partitions.
		updateTopic(kt, func(kt *strata.KafkaTopic) {
			kt.Spec.Partitions = 6
			kt.Spec.Config = map[string]string{"retention.ms": "7200000", "max.message.bytes": "2097152"}
		})
		got = topicReady(kt)
		Eventually(func(g Gomega) {
			g.Expect(kafkaTopic(g, adm, "orders").Partitions).To(HaveLen(6))
			g.Expect(dynamicConfigs(g, adm, "orders")).To(Equal(map[string]string{"retention.ms": "7200000", "max.message.bytes": "2097152"}))
		}, timeout, interval).Should(Succeed())
		Expect(got.Status.PartitionCount).To(BeEquivalentTo(6))
		Expect(got.Status.Configs).To(Equal(map[string]string{"retention.ms": "7200000", "max.message.bytes": "2097152"}))
		Eventually(func(g Gomega) {
			g.Expect(topicEvents(g, kt, controllers.EventTopicCreated)).NotTo(BeEmpty())
			g.Expect(topicEvents(g, kt, controllers.EventPartitionsAdded)).To(ContainElement(ContainSubstring("added 3 partitions")))
			g.Expect(topicEvents(g, kt, controllers.EventConfigsChanged)).To(ContainElement(ContainSubstring("-segment.ms")))
		}, timeout, interval).Should(Succeed())
		// A topic the operator created is not "adopted" when the brokers'
		// metadata lags behind the creation.
		Expect(topicEvents(Default, kt, controllers.EventTopicAdopted)).To(BeEmpty())
		// Nor does it fail a round because the brokers do not show the new
		// partitions yet (it waits for them instead of "adding" them).
		Expect(topicEvents(Default, kt, controllers.EventTopicNotReady)).To(BeEmpty())
	})

	It("adopts an existing topic: managed configs converge, others are reported and kept", func() {
		_, err := adm.CreateTopic(suiteCtx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("1000"), "flush.ms": kadm.StringPtr("500")}, "legacy_Events")
		Expect(err).NotTo(HaveOccurred())
		kt := newTopic(ns, "legacy-events", "kafka", 2, 1, map[string]string{"retention.ms": "2000"})
		kt.Spec.TopicName = "legacy_Events"
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		got := topicReady(kt)
		Eventually(func(g Gomega) {
			g.Expect(dynamicConfigs(g, adm, "legacy_Events")).To(Equal(map[string]string{"retention.ms": "2000", "flush.ms": "500"}))
		}, timeout, interval).Should(Succeed())
		Expect(got.Status.TopicName).To(Equal("legacy_Events"))
		Expect(got.Status.UnmanagedConfigs).To(Equal(map[string]string{"flush.ms": "500"}))
		Expect(got.Status.Configs).To(Equal(map[string]string{"retention.ms": "2000"}))
		Eventually(func(g Gomega) {
			// Announced once, with the replication factor the topic has, even
			// when the broker asked first had not applied the topic's
			// partitions yet (TestTopicAdoptedWhileMetadataLags forces that).
			g.Expect(topicEvents(g, kt, controllers.EventTopicAdopted)).To(ConsistOf(ContainSubstring("adopted existing topic legacy_Events (2 partitions, replication factor 1)")))
			g.Expect(topicEvents(g, kt, controllers.EventUnmanagedConfigs)).To(ContainElement(ContainSubstring("flush.ms=500")))
		}, timeout, interval).Should(Succeed())
	})

	It("refuses a partition decrease and changes nothing else until it is fixed", func() {
		_, err := adm.CreateTopic(suiteCtx, 4, 1, map[string]*string{"retention.ms": kadm.StringPtr("1000")}, "wide")
		Expect(err).NotTo(HaveOccurred())
		kt := newTopic(ns, "wide", "kafka", 2, 1, map[string]string{"retention.ms": "5000"})
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		c := topicCondition(kt, controllers.ReasonPartitionDecreaseRefused)
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Message).To(ContainSubstring("topic wide has 4 partitions and spec.partitions is 2: Kafka cannot remove partitions"))
		got := &strata.KafkaTopic{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kt), got)).To(Succeed())
		// Only a spec change lifts it: Stalled, which kstatus reads as Failed.
		stalled := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionStalled)
		Expect(stalled).NotTo(BeNil())
		Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		Expect(stalled.Reason).To(Equal(controllers.ReasonPartitionDecreaseRefused))
		Expect(meta.IsStatusConditionFalse(got.Status.Conditions, strata.ConditionReconciling)).To(BeTrue())
		Expect(got.Status.PartitionCount).To(BeEquivalentTo(4))
		Expect(got.Status.Configs).To(BeEmpty())
		Consistently(func(g Gomega) {
			g.Expect(kafkaTopic(g, adm, "wide").Partitions).To(HaveLen(4))
			g.Expect(dynamicConfigs(g, adm, "wide")).To(Equal(map[string]string{"retention.ms": "1000"}))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())

		updateTopic(kt, func(kt *strata.KafkaTopic) { kt.Spec.Partitions = 4 })
		topicReady(kt)
		Eventually(func(g Gomega) {
			g.Expect(dynamicConfigs(g, adm, "wide")).To(Equal(map[string]string{"retention.ms": "5000"}))
		}, timeout, interval).Should(Succeed())
	})

	It("changes the replication factor through a zone-aware reassignment", func() {
		kt := newTopic(ns, "grow-rf", "kafka", 3, 1, nil)
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		topicReady(kt)
		updateTopic(kt, func(kt *strata.KafkaTopic) { kt.Spec.ReplicationFactor = 3 })
		var got *strata.KafkaTopic
		Eventually(func(g Gomega) {
			got = topicReady(kt)
			g.Expect(got.Status.ReplicationFactor).To(BeEquivalentTo(3))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			for _, p := range kafkaTopic(g, adm, "grow-rf").Partitions {
				g.Expect(zonesOf(p.Replicas)).To(ConsistOf("a", "b", "c"), "partition %d", p.Partition)
			}
			lr, err := adm.ListPartitionReassignments(suiteCtx, kadm.TopicsSet{"grow-rf": {0: {}, 1: {}, 2: {}}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lr["grow-rf"]).To(BeEmpty())
		}, timeout, interval).Should(Succeed())
		Expect(got.Status.ReassigningPartitions).To(BeZero())
		for _, p := range got.Status.Partitions {
			Expect(zonesOf(p.Replicas)).To(ConsistOf("a", "b", "c"))
		}
		// The reassignment may be submitted in more than one round (a
		// partition refused with a retriable error is planned again at the
		// next reconcile), and events reach the API server asynchronously
		// with retries: any round's event will do, given a generous wait.
		Eventually(func(g Gomega) {
			g.Expect(topicEvents(g, kt, controllers.EventReassignmentStarted)).To(ContainElement(MatchRegexp(`^moving [1-3] partitions of topic grow-rf to replication factor 3$`)))
			g.Expect(topicEvents(g, kt, controllers.EventReassignmentDone)).NotTo(BeEmpty())
		}, 3*timeout, interval).Should(Succeed())

		// And back down: the preferred leaders stay.
		before := map[int32]int32{}
		for _, p := range got.Status.Partitions {
			before[p.Partition] = p.Replicas[0]
		}
		updateTopic(kt, func(kt *strata.KafkaTopic) { kt.Spec.ReplicationFactor = 2 })
		Eventually(func(g Gomega) {
			got = topicReady(kt)
			g.Expect(got.Status.ReplicationFactor).To(BeEquivalentTo(2))
			for _, p := range kafkaTopic(g, adm, "grow-rf").Partitions {
				g.Expect(p.Replicas).To(HaveLen(2))
				g.Expect(p.Replicas[0]).To(Equal(before[p.Partition]))
				g.Expect(zonesOf(p.Replicas)[0]).NotTo(Equal(zonesOf(p.Replicas)[1]))
			}
		}, timeout, interval).Should(Succeed())
	})

	It("reverts config drift made with other tools at the next resync and says so", func() {
		kt := newTopic(ns, "drift", "kafka", 1, 3, map[string]string{"retention.ms": "1000"})
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		topicReady(kt)
		resps, err := adm.AlterTopicConfigs(suiteCtx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("99")},
			{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("70000")},
		}, "drift")
		Expect(err).NotTo(HaveOccurred())
		for _, r := range resps {
			Expect(r.Err).NotTo(HaveOccurred(), r.ErrMessage)
		}
		// Nothing in Kubernetes changes: only the periodic resync finds it.
		Eventually(func(g Gomega) {
			g.Expect(dynamicConfigs(g, adm, "drift")).To(Equal(map[string]string{"retention.ms": "1000", "segment.ms": "70000"}))
			g.Expect(topicEvents(g, kt, controllers.EventDriftReverted)).To(ContainElement(ContainSubstring("retention.ms=1000 (was 99)")))
			got := &strata.KafkaTopic{}
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kt), got)).To(Succeed())
			g.Expect(got.Status.UnmanagedConfigs).To(Equal(map[string]string{"segment.ms": "70000"}))
		}, timeout, interval).Should(Succeed())
	})

	It("deletes the topic with deletionPolicy Delete and leaves it with Retain", func() {
		del := newTopic(ns, "gone", "kafka", 1, 1, nil)
		keep := newTopic(ns, "kept", "kafka", 1, 1, nil)
		keep.Spec.DeletionPolicy = strata.DeletionPolicyRetain
		Expect(k8sClient.Create(suiteCtx, del)).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, keep)).To(Succeed())
		Expect(topicReady(del).Spec.DeletionPolicy).To(Equal(strata.DeletionPolicyDelete))
		Expect(topicReady(keep).Finalizers).To(ContainElement(controllers.TopicFinalizer))
		Expect(k8sClient.Delete(suiteCtx, del)).To(Succeed())
		Expect(k8sClient.Delete(suiteCtx, keep)).To(Succeed())
		for _, kt := range []*strata.KafkaTopic{del, keep} {
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kt), &strata.KafkaTopic{}))
			}, timeout, interval).Should(BeTrue(), kt.Name)
		}
		Eventually(func(g Gomega) {
			md, err := adm.Metadata(suiteCtx, "gone", "kept")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(md.Topics["gone"].Err).To(MatchError(kerr.UnknownTopicOrPartition))
			g.Expect(md.Topics["kept"].Err).NotTo(HaveOccurred())
			g.Expect(md.Topics["kept"].Partitions).To(HaveLen(1))
		}, timeout, interval).Should(Succeed())
	})

	It("refuses a second KafkaTopic for the same topic, keeps the topic when it is deleted, and hands over when the first goes", func() {
		first := newTopic(ns, "shared-1", "kafka", 2, 1, map[string]string{"retention.ms": "600000"})
		first.Spec.TopicName = "shared"
		Expect(k8sClient.Create(suiteCtx, first)).To(Succeed())
		topicReady(first)
		dup := newTopic(ns, "shared-2", "kafka", 3, 1, map[string]string{"retention.ms": "700000"})
		dup.Spec.TopicName = "shared"
		Expect(k8sClient.Create(suiteCtx, dup)).To(Succeed())
		c := topicCondition(dup, controllers.ReasonTopicConflict)
		Expect(c.Message).To(ContainSubstring("already managed by KafkaTopic shared-1"))
		// The duplicate changed nothing: the first one's spec holds.
		Consistently(func(g Gomega) {
			g.Expect(kafkaTopic(g, adm, "shared").Partitions).To(HaveLen(2))
			g.Expect(dynamicConfigs(g, adm, "shared")).To(HaveKeyWithValue("retention.ms", "600000"))
		}, 3*time.Second, interval).Should(Succeed())
		Expect(topicReady(first).Status.Conditions).NotTo(BeEmpty())

		// Deleting the duplicate (deletionPolicy Delete) leaves the topic.
		Expect(k8sClient.Delete(suiteCtx, dup)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(dup), &strata.KafkaTopic{}))
		}, timeout, interval).Should(BeTrue())
		Consistently(func(g Gomega) {
			g.Expect(kafkaTopic(g, adm, "shared").Partitions).To(HaveLen(2))
		}, 2*time.Second, interval).Should(Succeed())

		// A new duplicate takes over once the first is deleted (Retain, so
		// the topic stays for it to adopt).
		dup = newTopic(ns, "shared-3", "kafka", 3, 1, map[string]string{"retention.ms": "700000"})
		dup.Spec.TopicName = "shared"
		Expect(k8sClient.Create(suiteCtx, dup)).To(Succeed())
		topicCondition(dup, controllers.ReasonTopicConflict)
		updateTopic(first, func(kt *strata.KafkaTopic) { kt.Spec.DeletionPolicy = strata.DeletionPolicyRetain })
		Expect(k8sClient.Delete(suiteCtx, first)).To(Succeed())
		topicReady(dup)
		Eventually(func(g Gomega) {
			g.Expect(kafkaTopic(g, adm, "shared").Partitions).To(HaveLen(3))
			g.Expect(dynamicConfigs(g, adm, "shared")).To(HaveKeyWithValue("retention.ms", "700000"))
		}, timeout, interval).Should(Succeed())
	})

	It("reports an unreachable cluster and a missing one, and creates the topic once the cluster appears", func() {
		// A KafkaCluster whose brokers cannot be reached.
		dark := clusterSpec(map[string]int32{"a": 1}, "a")
		dark.Spec.WAL.Enabled = ptr.To(false)
		createCluster(ns, "dark", dark)
		unreachable := newTopic(ns, "dark-topic", "dark", 1, 1, nil)
		Expect(k8sClient.Create(suiteCtx, unreachable)).To(Succeed())
		Expect(topicCondition(unreachable, controllers.ReasonKafkaUnreachable).Status).To(Equal(metav1.ConditionFalse))

		kt := newTopic(ns, "early", "later", 2, 3, nil)
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		c := topicCondition(kt, controllers.ReasonClusterNotFound)
		Expect(c.Message).To(Equal(fmt.Sprintf("KafkaCluster later not found in namespace %s", ns)))

		later := clusterSpec(map[string]int32{"a": 1, "b": 1, "c": 1}, "a", "b", "c")
		later.Spec.WAL.Enabled = ptr.To(false)
		later.Namespace, later.Name = ns, "later"
		lb := startLoopbackBrokers(later)
		Expect(k8sClient.Create(suiteCtx, later)).To(Succeed())
		topicReady(kt)
		cl, err := kgo.NewClient(kgo.SeedBrokers(lb.Addrs()...))
		Expect(err).NotTo(HaveOccurred())
		defer cl.Close()
		Eventually(func(g Gomega) {
			g.Expect(kafkaTopic(g, kadm.NewClient(cl), "early").Partitions).To(HaveLen(2))
		}, timeout, interval).Should(Succeed())
	})

	It("refuses a leaderZone that is not a zone of the cluster", func() {
		kt := newTopic(ns, "nowhere", "kafka", 1, 3, nil)
		kt.Spec.LeaderZone = "d"
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		c := topicCondition(kt, controllers.ReasonLeaderZoneNotInCluster)
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Message).To(Equal("spec.leaderZone d is not a zone of KafkaCluster kafka (zones: a, b, c)"))
		md, err := adm.Metadata(suiteCtx, "nowhere")
		Expect(err).NotTo(HaveOccurred())
		Expect(md.Topics["nowhere"].Err).To(MatchError(kerr.UnknownTopicOrPartition))
	})

	It("puts every partition's leader in spec.leaderZone", func() {
		kt := newTopic(ns, "zoned", "kafka", 6, 3, nil)
		kt.Spec.LeaderZone = "b"
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		got := topicReady(kt)
		Expect(got.Status.Configs).To(HaveKeyWithValue("leader.placement.zone", "b"))
		Expect(got.Status.LeadersPerZone).To(Equal(map[string]int32{"b": 6}))
		Eventually(func(g Gomega) {
			for _, p := range kafkaTopic(g, adm, "zoned").Partitions {
				g.Expect(zoneOf[p.Leader]).To(Equal("b"), "partition %d", p.Partition)
			}
			g.Expect(dynamicConfigs(g, adm, "zoned")).To(HaveKeyWithValue("leader.placement.zone", "b"))
		}, timeout, interval).Should(Succeed())
	})
})

var _ = Describe("KafkaTopic validation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	valid := func() *strata.KafkaTopic { return newTopic(ns, "orders", "demo", 3, 3, nil) }

	It("accepts the baseline, defaults deletionPolicy to Delete and accepts leaderZone", func() {
		kt := valid()
		kt.Spec.LeaderZone = "a"
		kt.Spec.Config = map[string]string{
			"retention.ms": "-1", "retention.bytes": "1073741824", "cleanup.policy": "delete", "min.insync.replicas": "2",
			"segment.bytes": "1048576", "segment.ms": "3600000", "max.message.bytes": "1048588", "flush.ms": "0",
			"flush.messages": "1", "unclean.leader.election.enable": "false", "message.timestamp.type": "LogAppendTime",
			"compression.type": "producer", "local.retention.ms": "-2", "local.retention.bytes": "-2", "index.interval.bytes": "4096",
		}
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		Expect(kt.Spec.DeletionPolicy).To(Equal(strata.DeletionPolicyDelete))
		long := newTopic(ns, strings.Repeat("n", 63)+"."+strings.Repeat("n", 63)+"."+strings.Repeat("n", 63)+"."+strings.Repeat("n", 61), "demo", 1, 1, nil)
		long.Spec.TopicName = "short"
		Expect(k8sClient.Create(suiteCtx, long)).To(Succeed())
	})

	DescribeTable("rejects invalid KafkaTopics",
		func(mutate func(*strata.KafkaTopic), messages ...string) {
			kt := valid()
			mutate(kt)
			expectRejected(k8sClient.Create(suiteCtx, kt), messages...)
		},
		Entry("no partitions", func(kt *strata.KafkaTopic) { kt.Spec.Partitions = 0 },
			"spec.partitions", "should be greater than or equal to 1"),
		Entry("no replicas", func(kt *strata.KafkaTopic) { kt.Spec.ReplicationFactor = 0 },
			"spec.replicationFactor", "should be greater than or equal to 1"),
		Entry("topic name .", func(kt *strata.KafkaTopic) { kt.Spec.TopicName = "." },
			`topicName must not be "." or ".." (Kafka refuses them)`),
		Entry("topic name ..", func(kt *strata.KafkaTopic) { kt.Spec.TopicName = ".." },
			`topicName must not be "." or ".." (Kafka refuses them)`),
		Entry("a character Kafka refuses", func(kt *strata.KafkaTopic) { kt.Spec.TopicName = "orders/eu" },
			"spec.topicName", "should match"),
		Entry("a topic name over 249 characters", func(kt *strata.KafkaTopic) { kt.Spec.TopicName = strings.Repeat("t", 250) },
			"spec.topicName", "249"),
		Entry("a metadata.name over 249 characters without topicName", func(kt *strata.KafkaTopic) {
			kt.Name = strings.Repeat("n", 63) + "." + strings.Repeat("n", 63) + "." + strings.Repeat("n", 63) + "." + strings.Repeat("n", 61)
		}, "metadata.name is longer than Kafka's 249-character topic name limit: set spec.topicName"),
		Entry("an unknown config", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"retention.hours": "1"} },
			"config keys must be topic configs the broker knows: cleanup.policy, compression.type, retention.ms"),
		Entry("leader.placement.zone in config", func(kt *strata.KafkaTopic) {
			kt.Spec.Config = map[string]string{"leader.placement.zone": "a"}
		}, "config must not set leader.placement.zone: set spec.leaderZone"),
		Entry("cleanup policy", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"cleanup.policy": "compact,compact"} },
			"config cleanup.policy must be delete, compact or compact,delete"),
		Entry("dirty ratio", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"min.cleanable.dirty.ratio": "1.5"} },
			"config min.cleanable.dirty.ratio must be a decimal from 0 to 1"),
		Entry("max compaction lag", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"max.compaction.lag.ms": "0"} },
			"config max.compaction.lag.ms must be an integer >= 1 (milliseconds)"),
		Entry("delete retention", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"delete.retention.ms": "-1"} },
			"config delete.retention.ms must be an integer >= 0 (milliseconds)"),
		Entry("a compression type", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"compression.type": "zstd"} },
			"config compression.type must be producer"),
		Entry("retention.ms below -1", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"retention.ms": "-2"} },
			"config retention.ms must be an integer >= -1 (milliseconds; -1 keeps data forever)"),
		Entry("retention.ms with a unit", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"retention.ms": "7d"} },
			"config retention.ms must be an integer >= -1"),
		Entry("retention.bytes not a number", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"retention.bytes": "1Gi"} },
			"config retention.bytes must be an integer >= -1"),
		Entry("local.retention.ms below -2", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"local.retention.ms": "-3"} },
			"config local.retention.ms must be an integer >= -2"),
		Entry("local.retention.bytes not a number", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"local.retention.bytes": "x"} },
			"config local.retention.bytes must be an integer >= -2"),
		Entry("a tiny segment", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"segment.bytes": "13"} },
			"config segment.bytes must be an integer between 14 and 2147483647"),
		Entry("a segment over int32", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"segment.bytes": "2147483648"} },
			"config segment.bytes must be an integer between 14 and 2147483647"),
		Entry("segment.ms 0", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"segment.ms": "0"} },
			"config segment.ms must be an integer >= 1 (milliseconds)"),
		Entry("max.message.bytes negative", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"max.message.bytes": "-1"} },
			"config max.message.bytes must be an integer between 0 and 2147483647"),
		Entry("min.insync.replicas above the replication factor", func(kt *strata.KafkaTopic) {
			kt.Spec.Config = map[string]string{"min.insync.replicas": "4"}
		}, "config min.insync.replicas must be between 1 and replicationFactor"),
		Entry("min.insync.replicas 0", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"min.insync.replicas": "0"} },
			"config min.insync.replicas must be between 1 and replicationFactor"),
		Entry("min.insync.replicas not a number", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"min.insync.replicas": "two"} },
			"config min.insync.replicas must be an integer"),
		Entry("unclean.leader.election.enable yes", func(kt *strata.KafkaTopic) {
			kt.Spec.Config = map[string]string{"unclean.leader.election.enable": "yes"}
		}, "config unclean.leader.election.enable must be true or false"),
		Entry("an unknown timestamp type", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"message.timestamp.type": "Now"} },
			"config message.timestamp.type must be CreateTime or LogAppendTime"),
		Entry("flush.ms negative", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"flush.ms": "-1"} },
			"config flush.ms must be an integer >= 0 (milliseconds)"),
		Entry("flush.messages 0", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"flush.messages": "0"} },
			"config flush.messages must be an integer >= 1"),
		Entry("index.interval.bytes not a number", func(kt *strata.KafkaTopic) { kt.Spec.Config = map[string]string{"index.interval.bytes": "4k"} },
			"config index.interval.bytes must be an integer between 0 and 2147483647"),
		Entry("an unknown deletion policy", func(kt *strata.KafkaTopic) { kt.Spec.DeletionPolicy = "Orphan" },
			"spec.deletionPolicy", "Unsupported value"),
		Entry("a leader zone that is not a zone name", func(kt *strata.KafkaTopic) { kt.Spec.LeaderZone = "Zone_B" },
			"spec.leaderZone", "should match"),
	)

	// A KafkaTopic created without topicName manages the topic
	// metadata.name; the rule on topicName alone was skipped for it (no
	// old value), so a topicName added later made the CR manage another
	// topic and left the first one in Kafka, unmanaged.
	It("keeps the defaulted topic name: topicName added after creation is refused unless it is metadata.name", func() {
		kt := valid()
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		update := func(name string) error {
			var err error
			Eventually(func() bool {
				got := &strata.KafkaTopic{}
				Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kt), got)).To(Succeed())
				got.Spec.TopicName = name
				err = k8sClient.Update(suiteCtx, got)
				return apierrors.IsConflict(err)
			}, timeout, interval).Should(BeFalse())
			return err
		}
		expectRejected(update("payments"), "topicName is immutable: it is the Kafka topic this KafkaTopic manages, spec.topicName as created or else metadata.name")
		Expect(update(kt.Name)).To(Succeed(), "the same topic, spelled out")
		expectRejected(update("payments"), "topicName is immutable")
		expectRejected(update(""), "topicName is immutable")
	})

	It("lets partitions only grow and keeps clusterRef and topicName", func() {
		kt := valid()
		kt.Spec.TopicName = "orders.v1"
		Expect(k8sClient.Create(suiteCtx, kt)).To(Succeed())
		update := func(mutate func(*strata.KafkaTopic)) error {
			var err error
			Eventually(func() bool {
				got := &strata.KafkaTopic{}
				Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kt), got)).To(Succeed())
				mutate(got)
				err = k8sClient.Update(suiteCtx, got)
				return apierrors.IsConflict(err)
			}, timeout, interval).Should(BeFalse())
			return err
		}
		Expect(update(func(kt *strata.KafkaTopic) { kt.Spec.Partitions = 12 })).To(Succeed())
		expectRejected(update(func(kt *strata.KafkaTopic) { kt.Spec.Partitions = 4 }), "partitions may only grow")
		expectRejected(update(func(kt *strata.KafkaTopic) { kt.Spec.ClusterRef.Name = "other" }), "clusterRef is immutable")
		expectRejected(update(func(kt *strata.KafkaTopic) { kt.Spec.TopicName = "orders.v2" }), "topicName is immutable")
		expectRejected(update(func(kt *strata.KafkaTopic) { kt.Spec.TopicName = "" }), "topicName is immutable")
		expectRejected(update(func(kt *strata.KafkaTopic) {
			kt.Spec.ReplicationFactor = 1
			kt.Spec.Config = map[string]string{"min.insync.replicas": "2"}
		}),
			"config min.insync.replicas must be between 1 and replicationFactor")
	})
})
