package controllers_test

import (
	"fmt"
	"os"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// A measurement for the notes, not a test: it runs only when
// STRATA_MEASURE_DRAIN_MB is set (e.g. 1024), and asserts only that
// nothing is lost. It times, on loopback brokers behind the operator,
// the drain of a broker holding that many MB (zone a 2 -> 1, the
// StatefulSet shrinking once the broker is empty) and then a roll of the
// 3 brokers left, each holding the data:
//
//	STRATA_MEASURE_DRAIN_MB=1024 go test ./controllers -run TestControllers -count=1 -v \
//	    -args -ginkgo.focus='measures' -ginkgo.v | grep -E 'measured|filled'
var _ = Describe("Measurement", func() {
	It("measures draining a broker holding N MB and rolling 3 brokers", func(ctx SpecContext) {
		mb, err := strconv.Atoi(os.Getenv("STRATA_MEASURE_DRAIN_MB"))
		if err != nil || mb <= 0 {
			Skip("set STRATA_MEASURE_DRAIN_MB to measure")
		}
		ns := newNamespace()
		kc, lb := rollSpec(ns, "measure", map[string]int32{"a": 2, "b": 1, "c": 1})
		k := startKubelet(kc, lb)
		adm := lb.Admin()
		createTopic(ctx, adm, "events", 3, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})

		// bulk's zone-a replicas all on broker 1, so that it holds mb MB.
		const partitions = 8
		cl, err := kgo.NewClient(kgo.SeedBrokers(lb.Addrs()...))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cl.Close)
		Eventually(func(g Gomega) {
			req := kmsg.NewPtrCreateTopicsRequest()
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = "bulk", -1, -1
			for p := range int32(partitions) {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = p, []int32{1, 100, 200}
				t.ReplicaAssignment = append(t.ReplicaAssignment, a)
			}
			req.Topics = append(req.Topics, t)
			resp, err := req.RequestWith(ctx, cl)
			g.Expect(err).NotTo(HaveOccurred())
			code := resp.Topics[0].ErrorCode
			g.Expect(code == 0 || code == 36).To(BeTrue(), "create bulk: error code %d", code) // 36: exists
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getCluster(ns, "measure")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		start := time.Now()
		const recordSize = 128 << 10
		fillPartitions(ctx, lb.Addrs(), "bulk", partitions, mb*(1<<20)/recordSize/partitions, recordSize)
		var held int64
		Eventually(func(g Gomega) {
			per, _ := bytesPerBroker(ctx, g, adm, "")
			held = per[1]
			g.Expect(per[100]).To(BeNumerically(">=", held))
			g.Expect(per[200]).To(BeNumerically(">=", held))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "filled: broker 1 holds %d MB (RF 3, acks=all) in %s\n", held>>20, time.Since(start).Round(100*time.Millisecond))

		w := startWorkload(lb.Addrs(), "events")
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", 100))

		By("zone a 2 -> 1: broker 1 is drained, then its pod goes")
		start = time.Now()
		updateCluster(ns, "measure", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].Brokers = 1 })
		Eventually(func() bool { return k.Removed(1) }).WithContext(ctx).WithTimeout(30 * time.Minute).WithPolling(100 * time.Millisecond).Should(BeTrue())
		drain := time.Since(start)
		Expect(k.drainedBeforeRemoval()).To(BeEmpty())
		fmt.Fprintf(GinkgoWriter, "measured: drain of broker 1 holding %d MB and removal of its pod took %s (%.0f MB/s)\n",
			held>>20, drain.Round(100*time.Millisecond), float64(held>>20)/drain.Seconds())
		Eventually(func(g Gomega) {
			got := getCluster(ns, "measure")
			g.Expect(got.Status.Scaling).To(BeNil())
			podsCurrent(g, got)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("a config change rolls the 3 brokers left, each holding the data")
		k.mu.Lock()
		k.maxDown = len(k.down)
		k.mu.Unlock()
		start = time.Now()
		updateCluster(ns, "measure", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"log.retention.ms": "3600000"}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "measure")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			for _, id := range []int32{0, 100, 200} {
				g.Expect(k.Restarts(id)).To(Equal(1), "restarts of broker %d", id)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "measured: roll of 3 brokers each holding %d MB took %s\n", held>>20, time.Since(start).Round(100*time.Millisecond))
		Expect(k.MaxDown()).To(Equal(1))
		w.Verify(ctx)
	}, SpecTimeout(60*time.Minute))
})
