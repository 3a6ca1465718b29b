package controllers_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// createAssigned creates topic with a manual replica assignment (one
// replica list per partition), as kafka-topics --replica-assignment does.
func createAssigned(ctx context.Context, addrs []string, topic string, assignment [][]int32) {
	GinkgoHelper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	Expect(err).NotTo(HaveOccurred())
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, -1, -1
	for p, replicas := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 10000
	Eventually(func(g Gomega) {
		resp, err := req.RequestWith(ctx, cl)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kerr.ErrorForCode(resp.Topics[0].ErrorCode)).NotTo(HaveOccurred())
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
}

var _ = Describe("Rebalance by imbalance", func() {
	It("rebalances a zone whose new broker got a small topic first while the rest sits on the other broker", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "skew", map[string]int32{"a": 2, "b": 1, "c": 1}) // brokers 0, 1 | 100 | 200
		startKubelet(kc, lb)
		adm := lb.Admin()
		Expect(getCluster(ns, "skew").Spec.Rebalance.ImbalanceTolerancePercent).To(BeEquivalentTo(10), "the default")

		By("a topic on broker 1 first, then twelve partitions all on broker 0 in zone a: broker 1 is not empty")
		createAssigned(ctx, lb.Addrs(), "first", [][]int32{{1, 100, 200}})
		big := make([][]int32, 12)
		for p := range big {
			big[p] = []int32{0, 100, 200}
		}
		createAssigned(ctx, lb.Addrs(), "big", big)

		By("the operator rebalances zone a: broker 1 ends with about half of it, through a KafkaRebalance the cluster owns")
		Eventually(func(g Gomega) {
			per := replicasPerBroker(ctx, g, adm, "big")
			g.Expect(per[1]).To(BeNumerically(">=", 5), "replicas of big per broker: %v", per)
			g.Expect(per[0]).To(BeNumerically("<=", 7), "replicas of big per broker: %v", per)
			g.Expect(per[100]).To(Equal(12))
			g.Expect(per[200]).To(Equal(12))
			got := getCluster(ns, "skew")
			g.Expect(got.Status.Scaling).To(BeNil(), "%+v", got.Status.Scaling)
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		var list strata.KafkaRebalanceList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		kr := list.Items[0]
		Expect(metav1.IsControlledBy(&kr, getCluster(ns, "skew"))).To(BeTrue())
		Expect(kr.Spec.Mode).To(Equal(strata.RebalanceFull))
		Eventually(func(g Gomega) {
			got := &strata.KafkaRebalance{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&kr), got)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("balanced within the tolerance: no other rebalance starts")
		Consistently(func(g Gomega) {
			g.Expect(getCluster(ns, "skew").Status.Scaling).To(BeNil())
			var again strata.KafkaRebalanceList
			g.Expect(k8sClient.List(ctx, &again, client.InNamespace(ns))).To(Succeed())
			g.Expect(again.Items).To(HaveLen(1))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
	}, SpecTimeout(6*time.Minute))
})
