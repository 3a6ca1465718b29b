package controllers_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/config/argocd"
	"github.com/strata-dev/strata/controllers"
)

func getRebalance(ns, name string) *strata.KafkaRebalance {
	GinkgoHelper()
	kr := &strata.KafkaRebalance{}
	Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: name}, kr)).To(Succeed())
	return kr
}

// annotateRebalance sets the kafka.strata.dev/rebalance annotation.
func annotateRebalance(ns, name, action string) {
	GinkgoHelper()
	Eventually(func() error {
		kr := getRebalance(ns, name)
		if kr.Annotations == nil {
			kr.Annotations = map[string]string{}
		}
		kr.Annotations[strata.RebalanceAnnotation] = action
		return k8sClient.Update(suiteCtx, kr)
	}, timeout, interval).Should(Succeed())
}

// reassignments lists topic's reassignments in flight (every partition
// named: a topic without partitions in the request lists none).
func reassignments(ctx context.Context, g Gomega, adm *kadm.Client, topic string) kadm.ListPartitionReassignmentsResponses {
	md, err := adm.Metadata(ctx, topic)
	g.Expect(err).NotTo(HaveOccurred())
	l, err := adm.ListPartitionReassignments(ctx, md.Topics.TopicsSet())
	g.Expect(err).NotTo(HaveOccurred())
	return l
}

// skewZoneA puts the zone-a replica of every partition of topic on broker
// 0 except partition 0's, which goes to broker 1: zone a is unbalanced,
// yet no broker is empty (which would start the operator's own scale-up
// rebalance whatever its imbalance tolerance).
func skewZoneA(ctx context.Context, adm *kadm.Client, topic string) {
	GinkgoHelper()
	md, err := adm.Metadata(ctx, topic)
	Expect(err).NotTo(HaveOccurred())
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range md.Topics[topic].Partitions {
		to := append([]int32(nil), p.Replicas...)
		for i, id := range to {
			if id == 0 || id == 1 {
				to[i] = 0
				if p.Partition == 0 {
					to[i] = 1
				}
			}
		}
		req.Assign(topic, p.Partition, to)
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	Expect(err).NotTo(HaveOccurred())
	for _, r := range resps.Sorted() {
		Expect(r.Err).NotTo(HaveOccurred())
	}
	Eventually(func(g Gomega) {
		g.Expect(reassignments(ctx, g, adm, topic)).To(BeEmpty())
		g.Expect(replicasPerBroker(ctx, g, adm, topic)[1]).To(Equal(1))
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
}

// unbalancedCluster is a 2/1/1 cluster whose topic bulk (6 partitions,
// RF 3, 3 MiB a partition) sits on broker 0 in zone a but for one
// partition, with an imbalance tolerance (1000%) that keeps the operator's
// own rebalance out of it.
func unbalancedCluster(ctx context.Context, ns, name string) (*strata.KafkaCluster, *loopbackCluster, *kadm.Client) {
	GinkgoHelper()
	kc, lb := rollSpec(ns, name, map[string]int32{"a": 2, "b": 1, "c": 1})
	// The operator's own rebalance would even zone a out by itself
	// (spec.rebalance.imbalanceTolerancePercent): these specs are about
	// a KafkaRebalance's proposal, so it tolerates the skew.
	updateCluster(ns, name, func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.ImbalanceTolerancePercent = 1000 })
	startKubelet(kc, lb)
	adm := lb.Admin()
	createTopic(ctx, adm, "bulk", 6, 3, nil)
	fillRandom(ctx, lb.Addrs(), "bulk", 144, 128<<10)
	skewZoneA(ctx, adm, "bulk")
	Eventually(func(g Gomega) {
		got := getCluster(ns, name)
		podsCurrent(g, got)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		g.Expect(got.Status.Scaling).To(BeNil())
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	return kc, lb, adm
}

func createRebalance(ns, name, cluster string, mutate func(*strata.KafkaRebalance)) *strata.KafkaRebalance {
	GinkgoHelper()
	kr := &strata.KafkaRebalance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: strata.KafkaRebalanceSpec{ClusterRef: strata.LocalObjectReference{Name: cluster}}}
	if mutate != nil {
		mutate(kr)
	}
	Expect(k8sClient.Create(suiteCtx, kr)).To(Succeed())
	return kr
}

var _ = Describe("KafkaRebalance", func() {
	It("refuses brokers missing for add-brokers and remove-brokers, brokers with full, a clusterRef change and a stall time out of range", func() {
		ns := newNamespace()
		create := func(mode strata.RebalanceMode, brokers []int32) error {
			return k8sClient.Create(suiteCtx, &strata.KafkaRebalance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "r-"},
				Spec: strata.KafkaRebalanceSpec{ClusterRef: strata.LocalObjectReference{Name: "c"}, Mode: mode, Brokers: brokers}})
		}
		required := "brokers is required for mode add-brokers and remove-brokers: the IDs of the brokers to add or remove (KafkaCluster status.brokers)"
		expectRejected(create(strata.RebalanceAddBrokers, nil), required)
		expectRejected(create(strata.RebalanceRemoveBrokers, []int32{}), required)
		forbidden := "brokers is not allowed for mode full: a full rebalance balances over every registered broker"
		expectRejected(create(strata.RebalanceFull, []int32{1}), forbidden)
		expectRejected(create("", []int32{1}), forbidden) // mode defaults to full
		expectRejected(create("some", nil), `spec.mode: Unsupported value: "some"`)
		Expect(create(strata.RebalanceAddBrokers, []int32{1})).To(Succeed())
		Expect(create("", nil)).To(Succeed())

		kr := createRebalance(ns, "fixed", "c", nil)
		Expect(kr.Spec.Mode).To(Equal(strata.RebalanceFull), "defaulted")
		update := func(mutate func(*strata.KafkaRebalance)) error {
			var err error
			Eventually(func() bool {
				got := getRebalance(ns, "fixed")
				mutate(got)
				err = k8sClient.Update(suiteCtx, got)
				return apierrors.IsConflict(err)
			}, timeout, interval).Should(BeFalse())
			return err
		}
		expectRejected(update(func(kr *strata.KafkaRebalance) { kr.Spec.ClusterRef.Name = "other" }), "clusterRef is immutable")
		expectRejected(update(func(kr *strata.KafkaRebalance) { kr.Spec.MovesStalledAfter = &metav1.Duration{Duration: 0} }), "movesStalledAfter must be between 1s and 168h")
		Expect(update(func(kr *strata.KafkaRebalance) { kr.Spec.MovesStalledAfter = &metav1.Duration{Duration: time.Minute} })).To(Succeed())
	})

	It("proposes a full rebalance with bytes, cross-zone bytes, time and cost, recomputes it on refresh, and carries it out once approved", func(ctx SpecContext) {
		ns := newNamespace()
		_, _, adm := unbalancedCluster(ctx, ns, "prop")
		updateCluster(ns, "prop", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = ptr.To[int64](64 << 20) })
		createRebalance(ns, "even", "prop", nil)

		By("the proposal: moves onto broker 1 with their bytes, cross-zone bytes, time at the throttle and cost")
		var first strata.RebalanceProposal
		Eventually(func(g Gomega) {
			kr := getRebalance(ns, "even")
			g.Expect(kr.Status.State).To(Equal(strata.RebalanceStateProposalReady), kr.Status.Message)
			p := kr.Status.Proposal
			g.Expect(p).NotTo(BeNil())
			first = *p
			// Argo CD: a proposal waiting for approval is Suspended, not
			// Degraded.
			kr.Kind = "KafkaRebalance" // as Argo CD sees it
			argo, err := argoHealthOf(kr)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(argo.Status).To(Equal(argocd.Suspended), argo.Message)
			g.Expect(argo.Message).To(ContainSubstring("waiting for approval"))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "proposal: %d moves, %d bytes, %d cross-zone (Kafka), %d (Strata), %v at the throttle, $%s / $%s\n",
			first.Moves, first.BytesToMove, first.CrossZoneBytes, first.CrossZoneBytesStrata, first.EstimatedDuration, first.CostUSD.Kafka, first.CostUSD.Strata)
		Expect(first.Moves).To(BeNumerically(">=", 2))
		Expect(first.BytesToMove).To(BeNumerically(">=", 4<<20), "two partitions of about 3 MiB move at least")
		Expect(first.CrossZoneBytes).To(BeNumerically(">", 0), "leaders in zones b and c send across zones")
		Expect(first.CrossZoneBytes).To(BeNumerically("<=", first.BytesToMove))
		Expect(first.CrossZoneBytesStrata).To(Equal(first.CrossZoneBytes), "no slow tier: Strata sends what Kafka sends")
		Expect(first.EstimatedDuration).NotTo(BeNil())
		Expect(first.EstimatedDuration.Duration).To(BeNumerically(">=", time.Second))
		Expect(first.CostUSD.Kafka).NotTo(Equal("0.00"))
		Expect(first.CostUSD.Strata).To(Equal(first.CostUSD.Kafka))
		Expect(first.Sample).NotTo(BeEmpty())
		for _, b := range first.Brokers {
			if b.ID == 1 {
				Expect(b.ReplicasBefore).To(Equal(int32(1)))
				Expect(b.ReplicasAfter).To(Equal(int32(3)))
			}
		}
		kr := getRebalance(ns, "even")
		Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionReconciling)).To(BeFalse())
		Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionStalled)).To(BeFalse())
		Expect(replicasPerBroker(ctx, Default, adm, "bulk")[1]).To(Equal(1), "nothing moves before approval")

		By("a proposal stays as computed until refresh, which recomputes it (here at a new throttle) and goes")
		updateCluster(ns, "prop", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = ptr.To[int64](1 << 20) })
		Eventually(func(g Gomega) {
			// The cluster's change reached the rebalance's controller
			// (it watches clusters) without changing the proposal.
			g.Expect(getCluster(ns, "prop").Status.ObservedGeneration).To(Equal(getCluster(ns, "prop").Generation))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(*getRebalance(ns, "even").Status.Proposal.Throttle).To(Equal(int64(64 << 20)))
		annotateRebalance(ns, "even", strata.RebalanceRefresh)
		Eventually(func(g Gomega) {
			kr := getRebalance(ns, "even")
			g.Expect(kr.Annotations).NotTo(HaveKey(strata.RebalanceAnnotation))
			g.Expect(kr.Status.State).To(Equal(strata.RebalanceStateProposalReady))
			g.Expect(kr.Status.Proposal.Throttle).To(Equal(ptr.To[int64](1 << 20)))
			g.Expect(kr.Status.Proposal.EstimatedDuration.Duration).To(BeNumerically(">=", 3*time.Second), "3 MiB or more at 1 MiB/s")
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		updateCluster(ns, "prop", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = ptr.To[int64](64 << 20) })

		By("approve: the moves run and end Ready, with the clock")
		annotateRebalance(ns, "even", strata.RebalanceApprove)
		Eventually(func(g Gomega) {
			kr := getRebalance(ns, "even")
			g.Expect(kr.Status.State).To(Equal(strata.RebalanceStateReady), kr.Status.Message)
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionReady)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionReconciling)).To(BeFalse())
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		kr = getRebalance(ns, "even")
		p := kr.Status.Progress
		Expect(p).NotTo(BeNil())
		fmt.Fprintf(GinkgoWriter, "progress: %+v\n", *p)
		Expect(p.MovesStarted).To(BeNumerically(">=", 2))
		// Each planned move starts once: a step planned on a broker's
		// metadata from before the last moves started or ended would
		// start them again, or undo them (reassignLedger).
		Expect(p.MovesStarted).To(Equal(kr.Status.Proposal.Moves), "the moves started are the proposal's")
		Expect(p.MovesDone).To(Equal(p.MovesStarted))
		Expect(p.Percent).To(Equal(int32(100)))
		Expect(p.StartTime).NotTo(BeNil())
		Expect(p.CompletionTime).NotTo(BeNil())
		Expect(p.LastProgressTime).NotTo(BeNil())
		Expect(kr.Annotations).NotTo(HaveKey(strata.RebalanceAnnotation))
		Eventually(func(g Gomega) {
			per := replicasPerBroker(ctx, g, adm, "bulk")
			g.Expect(per[0]).To(Equal(3))
			g.Expect(per[1]).To(Equal(3))
			for _, id := range []int32{0, 1, 100, 200} {
				g.Expect(ownThrottleRates(ctx, g, adm, id)).To(BeEmpty(), "broker %d", id)
			}
			g.Expect(throttledReplicas(ctx, g, adm, "bulk")).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	}, SpecTimeout(10*time.Minute))

	It("reports moves that stop copying MovesStalled and Stalled, and stop cancels them and removes the throttle", func(ctx SpecContext) {
		ns := newNamespace()
		_, _, adm := unbalancedCluster(ctx, ns, "stall")
		// 1 byte/s: a new replica gets the quota's first burst (1 MiB),
		// then nothing for days: a reassignment that never ends.
		updateCluster(ns, "stall", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = ptr.To[int64](1) })
		createRebalance(ns, "slow", "stall", func(kr *strata.KafkaRebalance) {
			kr.Spec.MovesStalledAfter = &metav1.Duration{Duration: 5 * time.Second}
			kr.Annotations = map[string]string{strata.RebalanceAnnotation: strata.RebalanceApprove}
		})

		By("approved at creation: the proposal is made and the moves start, throttled")
		Eventually(func(g Gomega) {
			kr := getRebalance(ns, "slow")
			g.Expect(kr.Status.State).To(Equal(strata.RebalanceStateRebalancing), kr.Status.Message)
			g.Expect(kr.Status.Moving).NotTo(BeEmpty())
			g.Expect(kr.Status.Proposal).NotTo(BeNil())
			g.Expect(kr.Annotations).NotTo(HaveKey(strata.RebalanceAnnotation))
			g.Expect(ownThrottleRates(ctx, g, adm, 1)).To(HaveKeyWithValue("follower.replication.throttled.rate", "1"))
			g.Expect(reassignments(ctx, g, adm, "bulk")).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("no progress for movesStalledAfter: MovesStalled, Stalled, not Reconciling")
		Eventually(func(g Gomega) {
			kr := getRebalance(ns, "slow")
			c := meta.FindStatusCondition(kr.Status.Conditions, controllers.ConditionMovesStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionReconciling)).To(BeFalse())
			g.Expect(kr.Status.Progress.LastProgressTime).NotTo(BeNil())
		}).WithContext(ctx).WithTimeout(2 * timeout).Should(Succeed())
		kr := getRebalance(ns, "slow")
		fmt.Fprintf(GinkgoWriter, "stalled: %s\n", meta.FindStatusCondition(kr.Status.Conditions, controllers.ConditionMovesStalled).Message)
		moving := kr.Status.Moving

		By("stop: the reassignments are cancelled, the throttle removed, Stopped")
		annotateRebalance(ns, "slow", strata.RebalanceStop)
		Eventually(func(g Gomega) {
			kr := getRebalance(ns, "slow")
			g.Expect(kr.Status.State).To(Equal(strata.RebalanceStateStopped), kr.Status.Message)
			g.Expect(kr.Status.Moving).To(BeEmpty())
			g.Expect(kr.Annotations).NotTo(HaveKey(strata.RebalanceAnnotation))
			g.Expect(meta.FindStatusCondition(kr.Status.Conditions, controllers.ConditionMovesStalled)).To(BeNil())
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionStalled)).To(BeFalse())
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionReconciling)).To(BeFalse())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(reassignments(ctx, Default, adm, "bulk")).To(BeEmpty(), "reassignments of %v cancelled", moving)
		done := int(getRebalance(ns, "slow").Status.Progress.MovesDone)
		Expect(replicasPerBroker(ctx, Default, adm, "bulk")[1]).To(Equal(1+done), "the cancelled moves left the replicas where they were; %d had finished", done)
		for _, id := range []int32{0, 1, 100, 200} {
			Expect(ownThrottleRates(ctx, Default, adm, id)).To(BeEmpty(), "broker %d", id)
		}
		Expect(throttledReplicas(ctx, Default, adm, "bulk")).To(BeEmpty())
	}, SpecTimeout(10*time.Minute))
})

var _ = Describe("Moves with a clock", func() {
	It("times a scale-up rebalance in status.scaling, reports it MovesStalled and Stalled when its moves stop copying, shows it as a KafkaRebalance, and clears both when they end", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "clock", map[string]int32{"a": 1, "b": 1, "c": 1})
		startKubelet(kc, lb)
		adm := lb.Admin()
		createTopic(ctx, adm, "bulk", 6, 3, nil)
		fillRandom(ctx, lb.Addrs(), "bulk", 144, 128<<10)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "clock")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("scale zone a 1 -> 2 at 1 byte/s: the new replicas get the quota's first burst, then nothing")
		updateCluster(ns, "clock", func(kc *strata.KafkaCluster) {
			kc.Spec.Zones[0].Brokers = 2
			kc.Spec.Rebalance.Throttle = ptr.To[int64](1)
			kc.Spec.Rebalance.MovesStalledAfter = &metav1.Duration{Duration: 5 * time.Second}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "clock")
			sc := got.Status.Scaling
			g.Expect(sc).NotTo(BeNil())
			g.Expect(sc.Phase).To(Equal(controllers.ScalingPhaseRebalancing))
			g.Expect(sc.StartTime).NotTo(BeNil())
			g.Expect(sc.LastProgressTime).NotTo(BeNil())
			c := meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionMovesStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			stalled := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionStalled)
			g.Expect(stalled).NotTo(BeNil())
			g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(stalled.Reason).To(Equal(controllers.ReasonMovesStalled))
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReconciling)).To(BeFalse())
		}).WithContext(ctx).WithTimeout(2 * timeout).Should(Succeed())
		got := getCluster(ns, "clock")
		fmt.Fprintf(GinkgoWriter, "stalled: %s; scaling %+v\n", meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionMovesStalled).Message, *got.Status.Scaling)

		By("the scale-up shows as a KafkaRebalance the cluster owns: add-brokers [1], its proposal, Rebalancing, stalled with it")
		name := got.Status.Scaling.KafkaRebalance
		Expect(name).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			kr := getRebalance(ns, name)
			g.Expect(metav1.IsControlledBy(kr, got)).To(BeTrue(), "%+v", kr.OwnerReferences)
			g.Expect(kr.Spec.Mode).To(Equal(strata.RebalanceAddBrokers))
			g.Expect(kr.Spec.Brokers).To(Equal([]int32{1}))
			g.Expect(kr.Status.Proposal).NotTo(BeNil())
			g.Expect(kr.Status.Proposal.Moves).To(BeNumerically(">=", 2))
			g.Expect(kr.Status.Proposal.BytesToMove).To(BeNumerically(">", 0))
			g.Expect(kr.Status.State).To(Equal(strata.RebalanceStateRebalancing), kr.Status.Message)
			g.Expect(kr.Status.Progress).NotTo(BeNil())
			g.Expect(kr.Status.Progress.StartTime).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, controllers.ConditionMovesStalled)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("the throttle removed: the moves end, MovesStalled goes and Stalled is False")
		updateCluster(ns, "clock", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = nil })
		Eventually(func(g Gomega) {
			got := getCluster(ns, "clock")
			g.Expect(got.Status.Scaling).To(BeNil())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, controllers.ConditionMovesStalled)).To(BeNil())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionStalled)).To(BeFalse())
			g.Expect(replicasPerBroker(ctx, g, adm, "bulk")[1]).To(Equal(3))
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			kr := getRebalance(ns, name)
			g.Expect(kr.Status.State).To(Equal(strata.RebalanceStateReady), kr.Status.Message)
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionReady)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(kr.Status.Conditions, strata.ConditionStalled)).To(BeFalse())
			g.Expect(kr.Status.Progress.Percent).To(Equal(int32(100)))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	}, SpecTimeout(10*time.Minute))
})
