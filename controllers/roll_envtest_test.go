package controllers_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/verify"
)

// workload is the `strata verify` workload (internal/verify) run while a
// scenario runs: an idempotent acks=all producer, as fast as the brokers
// acknowledge, and a consumer checking each partition's sequence live. It
// counts every NOT_ENOUGH_REPLICAS the brokers answered, even one the
// client retried away.
type workload struct{ *verify.Workload }

func startWorkload(seeds []string, topic string) *workload {
	GinkgoHelper()
	return startWorkloadAt(seeds, topic, 0)
}

// startWorkloadAt is startWorkload at rate records per second (0: as fast
// as the brokers acknowledge), for scenarios whose checks depend on how
// much the workload's topic holds, which would otherwise depend on the
// machine's speed.
func startWorkloadAt(seeds []string, topic string, rate int) *workload {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(suiteCtx, timeout)
	defer cancel()
	// Partitions 0: the spec created the topic.
	w, err := verify.Start(ctx, verify.Options{Seeds: seeds, Topic: topic, Rate: rate, MaxBuffered: 64, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Close)
	return &workload{w}
}

// Verify stops the producer and waits until the consumer that ran
// throughout has seen every acknowledged record; each partition held its
// records in the order they were produced, each once.
func (w *workload) Verify(ctx context.Context) {
	GinkgoHelper()
	st := w.Drain(ctx, 3*time.Minute)
	Expect(st.Failed).To(BeZero(), "records whose produce failed; last error: %s", st.LastError)
	Expect(st.NotEnoughReplicas).To(BeZero(), "NOT_ENOUGH_REPLICAS answers seen by the producer")
	Expect(st.Acked).To(BeNumerically(">", 0))
	Expect(st.Duplicated).To(BeZero(), "records read twice: %v", st.DuplicatedExamples)
	Expect(st.OutOfOrder).To(BeZero(), "records read out of order: %v", st.OutOfOrderExamples)
	Expect(st.Lost).To(BeZero(), "of %d acknowledged records not consumed: %v", st.Acked, st.LostExamples)
	fmt.Fprintf(GinkgoWriter, "workload: %d records acknowledged, all consumed once and in order while the scenario ran; errors answered %v, longest time without an acknowledgement %.2fs\n",
		st.Acked, st.ProduceErrors, st.MaxGapSeconds)
}

// rollSpec is a cluster of one broker in each of zones a, b, c without
// WAL, on the loopback brokers' etcd.
func rollSpec(ns, name string, brokers map[string]int32) (*strata.KafkaCluster, *loopbackCluster) {
	GinkgoHelper()
	kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{WAL: strata.WALSpec{Enabled: ptr.To(false)}, Config: map[string]string{}}}
	for _, z := range []string{"a", "b", "c"} {
		kc.Spec.Zones = append(kc.Spec.Zones, strata.ZoneSpec{Name: z, Brokers: brokers[z]})
	}
	kc.Namespace, kc.Name = ns, name
	lb := startLoopbackBrokers(kc)
	kc.Spec.Metadata.ExternalEndpoints = lb.Etcd
	Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
	return kc, lb
}

// createTopic creates a topic (retrying until the brokers take it).
func createTopic(ctx context.Context, adm *kadm.Client, name string, partitions int32, rf int16, configs map[string]*string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		resp, err := adm.CreateTopic(ctx, partitions, rf, configs, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Err).NotTo(HaveOccurred())
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
}

// podsCurrent says whether every broker pod of kc runs its StatefulSet's
// current template.
func podsCurrent(g Gomega, kc *strata.KafkaCluster) {
	for _, z := range kc.Spec.Zones {
		sts, err := getSTS(kc.Namespace, controllers.ZoneStatefulSetName(kc.Name, z.Name))
		g.Expect(err).NotTo(HaveOccurred())
		want := sts.Spec.Template.Annotations[controllers.AnnotationTemplateHash]
		for ord := range z.Brokers {
			pod := &corev1.Pod{}
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: kc.Namespace, Name: controllers.BrokerPodName(kc.Name, z.Name, ord)}, pod)).To(Succeed())
			g.Expect(pod.Annotations[controllers.AnnotationTemplateHash]).To(Equal(want), "pod %s", pod.Name)
			g.Expect(isPodReadyTest(pod)).To(BeTrue(), "pod %s ready", pod.Name)
		}
	}
}

var _ = Describe("Rolling restarts", func() {
	It("roll every broker one at a time on a config change, with no acknowledged record lost", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "roll", map[string]int32{"a": 1, "b": 1, "c": 1})
		k := startKubelet(kc, lb)

		adm := lb.Admin()
		createTopic(ctx, adm, "events", 3, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})

		By("the emulated StatefulSets bring every pod up: Ready, nothing to roll")
		Eventually(func(g Gomega) {
			got := getCluster(ns, "roll")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(k.MaxDown()).To(BeNumerically("<=", 3)) // the cold start

		w := startWorkload(lb.Addrs(), "events")
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", 100))
		k.mu.Lock()
		k.maxDown = len(k.down) // count from here: the roll only
		k.mu.Unlock()

		By("a config change: the operator restarts the three brokers one at a time")
		start := time.Now()
		updateCluster(ns, "roll", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"log.retention.ms": "3600000"}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "roll")
			g.Expect(got.Status.Roll).NotTo(BeNil())
			g.Expect(got.Status.Roll.Pending).NotTo(BeEmpty())
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReconciling)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(BeEquivalentTo("True"))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getCluster(ns, "roll")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			for _, id := range []int32{0, 100, 200} {
				g.Expect(k.Restarts(id)).To(Equal(1), "restarts of broker %d", id)
			}
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "roll of 3 brokers took %s\n", time.Since(start).Round(100*time.Millisecond))
		Expect(k.MaxDown()).To(Equal(1), "brokers down at the same time during the roll")
		acked := w.Acked()
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", acked+100), "the producer goes on after the roll")
		w.Verify(ctx)
	}, SpecTimeout(8*time.Minute))

	It("stop at a broker that does not come back, report it stuck, and go on once it is back", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "stuck", map[string]int32{"a": 1, "b": 1, "c": 1})
		k := startKubelet(kc, lb)
		cl, err := kgo.NewClient(kgo.SeedBrokers(lb.Addrs()...))
		Expect(err).NotTo(HaveOccurred())
		defer cl.Close()
		createTopic(ctx, kadm.NewClient(cl), "events", 3, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stuck")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		k.mu.Lock()
		k.maxDown = len(k.down)
		k.mu.Unlock()

		By("a config change whose first restarted broker never comes back: the roll stops there and says so")
		k.HoldRestarts(true)
		updateCluster(ns, "stuck", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"log.retention.ms": "3600000"}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stuck")
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Reason).To(Equal(controllers.ReasonRollStuck))
			g.Expect(c.Message).To(ContainSubstring("rolling restart stuck"))
			g.Expect(c.Message).To(ContainSubstring("is not ready: waiting for it before the next restart"))
			g.Expect(got.Status.Roll).NotTo(BeNil())
			g.Expect(got.Status.Roll.BlockedSince).NotTo(BeNil())
			g.Expect(got.Status.Roll.LastProgressTime).NotTo(BeNil())
			g.Expect(got.Status.Roll.WaitingFor).NotTo(BeNil(), "the backlog the roll waits for")
			g.Expect(got.Status.Roll.Pending).To(HaveLen(2))
			// Per broker while the roll runs: its pod's image, and whether
			// it still waits for its restart.
			outdated := 0
			for _, b := range got.Status.Brokers {
				g.Expect(b.Image).To(Equal(strata.DefaultImage), "broker %d", b.ID)
				if b.Outdated {
					outdated++
				}
			}
			g.Expect(outdated).To(Equal(2))
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, strata.ConditionReconciling)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(k.MaxDown()).To(Equal(1), "no other broker restarted while the first is down")

		By("the broker comes back: the roll goes on and finishes, Stalled clears")
		k.HoldRestarts(false)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stuck")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		Expect(k.MaxDown()).To(Equal(1))
	}, SpecTimeout(6*time.Minute))

	It("hold only the brokers an under-replicated partition would lose min.insync.replicas by, say which, and roll past it once it would not", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "stray", map[string]int32{"a": 1, "b": 1, "c": 1})
		k := startKubelet(kc, lb)
		adm := lb.Admin()
		// Every wanted broker holds replicas: no scale-up rebalance moves
		// the stray partition's replica while the spec runs.
		createTopic(ctx, adm, "events", 3, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stray")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("a broker outside the cluster's pods holds a replica of a stray topic (min.insync.replicas 2), then stops for good: stray-0 is under-replicated, at min.insync.replicas")
		strayPartition(ctx, kc, lb)
		k.mu.Lock()
		k.maxDown = len(k.down)
		k.mu.Unlock()

		By("a config change: broker 0, which does not host stray-0, restarts; 100 and 200 would take stray-0 below min.insync.replicas, and status says so")
		updateCluster(ns, "stray", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"log.retention.ms": "3600000"}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stray")
			g.Expect(k.Restarts(0)).To(Equal(1))
			g.Expect(got.Status.Roll).NotTo(BeNil())
			g.Expect(got.Status.Roll.Pending).To(ConsistOf(int32(100), int32(200)))
			for _, id := range []string{"100", "200"} {
				g.Expect(got.Status.Roll.BlockedReason).To(MatchRegexp(`broker %s by 1 partitions \(stray-0 ISR \[(100 200|200 100)\] min\.insync\.replicas 2\)`, id))
			}
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReconciling)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(controllers.ReasonRollBlocked))
			g.Expect(c.Message).To(ContainSubstring("stray-0 ISR"))
		}).WithContext(ctx).WithTimeout(2 * timeout).Should(Succeed())
		Expect(k.Restarts(100)+k.Restarts(200)).To(BeZero(), "a broker restarted that would take stray-0 below min.insync.replicas")

		By("stray's min.insync.replicas lowered to 1: the roll goes on, one broker at a time, and finishes with stray-0 still under-replicated")
		alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: ptr.To("1")}}, "stray")
		Expect(err).NotTo(HaveOccurred())
		Expect(alter[0].Err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stray")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			for _, id := range []int32{0, 100, 200} {
				g.Expect(k.Restarts(id)).To(Equal(1), "restarts of broker %d", id)
			}
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		Expect(k.MaxDown()).To(Equal(1), "brokers down at the same time during the roll")
		md, err := adm.Metadata(ctx, "stray")
		Expect(err).NotTo(HaveOccurred())
		Expect(md.Topics["stray"].Partitions[0].ISR).NotTo(ContainElement(int32(strayID)), "still under-replicated after the roll")
	}, SpecTimeout(6*time.Minute))

	It("check the managed etcd first: no broker restarts while an etcd member is not ready", func(ctx SpecContext) {
		ns := newNamespace()
		// The managed etcd (the default): its StatefulSet gets no pods in
		// envtest, so the spec plays their controller; the loopback
		// brokers themselves run on their own etcd.
		kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{WAL: strata.WALSpec{Enabled: ptr.To(false)}, Config: map[string]string{}}}
		for _, z := range []string{"a", "b", "c"} {
			kc.Spec.Zones = append(kc.Spec.Zones, strata.ZoneSpec{Name: z, Brokers: 1})
		}
		kc.Namespace, kc.Name = ns, "quorum"
		lb := startLoopbackBrokers(kc)
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		k := startKubelet(kc, lb)
		createTopic(ctx, lb.Admin(), "events", 3, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})
		Eventually(func(g Gomega) { podsCurrent(g, getCluster(ns, "quorum")) }).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		etcdMember := func(ord int, ready bool) {
			GinkgoHelper()
			Expect(playEtcdMember(ctx, ns, controllers.EtcdName("quorum"), ord, ready)).To(Succeed())
		}
		etcdMember(0, true)
		etcdMember(1, true)
		etcdMember(2, false)
		k.mu.Lock()
		k.maxDown = len(k.down)
		k.mu.Unlock()

		By("a config change while etcd member 2 is not ready: the roll waits and says why")
		updateCluster(ns, "quorum", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"log.retention.ms": "3600000"}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "quorum")
			g.Expect(got.Status.Roll).NotTo(BeNil())
			g.Expect(got.Status.Roll.Pending).To(HaveLen(3))
			g.Expect(got.Status.Roll.BlockedReason).To(ContainSubstring("the metadata store first: 1 of 3 etcd members not serving (etcd member quorum-etcd-2 is not ready)"))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		for _, id := range []int32{0, 100, 200} {
			Expect(k.Restarts(id)).To(BeZero(), "broker %d restarted while an etcd member was not ready", id)
		}

		By("the member is ready again: the roll goes on and finishes, one broker at a time")
		etcdMember(2, true)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "quorum")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			for _, id := range []int32{0, 100, 200} {
				g.Expect(k.Restarts(id)).To(Equal(1), "restarts of broker %d", id)
			}
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		Expect(k.MaxDown()).To(Equal(1))
	}, SpecTimeout(6*time.Minute))
})

// strayID is the broker strayPartition starts and stops.
const strayID = 300

// strayPartition makes stray-0 (min.insync.replicas 2) under-replicated
// at min.insync.replicas with ISR [100 200]: a broker outside the
// cluster's pods (ID 300, zone c) holds a replica of it, then stops for
// good. Brokers 100 and 200 cannot restart without taking it below
// min.insync.replicas; broker 0 does not host it.
func strayPartition(ctx context.Context, kc *strata.KafkaCluster, lb *loopbackCluster) {
	GinkgoHelper()
	adm := lb.Admin()
	stray := lb.addBroker(client.ObjectKeyFromObject(kc), "c", strayID)
	cl, err := kgo.NewClient(kgo.SeedBrokers(lb.Addrs()...))
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	Eventually(func(g Gomega) {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "stray", -1, -1
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = 0, []int32{100, 200, strayID}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = "min.insync.replicas", ptr.To("2")
		rt.Configs = append(rt.Configs, c)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kerr.ErrorForCode(resp.Topics[0].ErrorCode)).To(Or(Succeed(), MatchError(kerr.TopicAlreadyExists)))
		md, err := adm.Metadata(ctx, "stray")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(md.Topics["stray"].Partitions[0].ISR).To(ConsistOf(int32(100), int32(200), int32(strayID)))
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	stray.Stop()
	lb.mu.Lock()
	delete(lb.Brokers, strayID) // no pod, no address the operator should dial
	lb.mu.Unlock()
	Eventually(func(g Gomega) {
		md, err := adm.Metadata(ctx, "stray")
		g.Expect(err).NotTo(HaveOccurred())
		p := md.Topics["stray"].Partitions[0]
		g.Expect(p.Replicas).To(ContainElement(int32(strayID)))
		g.Expect(p.ISR).To(ConsistOf(int32(100), int32(200)))
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
}

// playEtcdMember plays the StatefulSet controller for one member of a
// managed etcd in envtest (which runs none): the StatefulSet's generation
// observed, member ord's pod created from its template if missing, and
// its Ready condition set. The roll checks the managed etcd before any
// broker restart (EtcdBlocksRoll).
func playEtcdMember(ctx context.Context, ns, stsName string, ord int, ready bool) error {
	sts, err := getSTS(ns, stsName)
	if err != nil {
		return err
	}
	if sts.Status.ObservedGeneration != sts.Generation {
		sts.Status.ObservedGeneration = sts.Generation
		if err := k8sClient.Status().Update(ctx, sts); err != nil {
			return err
		}
	}
	name := fmt.Sprintf("%s-%d", sts.Name, ord)
	pod := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); apierrors.IsNotFound(err) {
		t := sts.Spec.Template.DeepCopy()
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: t.Labels}, Spec: t.Spec}
		pod.Spec.NodeName = "envtest-node"
		for _, c := range sts.Spec.VolumeClaimTemplates {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + name},
			}})
		}
		if err := k8sClient.Create(ctx, pod); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	// Like the kubelet, the condition's transition time moves only when
	// its status changes: a member played ready again and again is ready
	// since the first time (the roll asks for members ready a while).
	since := metav1.Now()
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == st && !c.LastTransitionTime.IsZero() {
			since = c.LastTransitionTime
		}
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: since}}
	return k8sClient.Status().Update(ctx, pod)
}
