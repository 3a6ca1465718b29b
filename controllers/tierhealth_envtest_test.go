package controllers_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

var _ = Describe("KafkaCluster slow-tier health from the brokers' metrics", func() {
	It("sets TierDegraded while the tier bucket is down (uploads failing, naming zones and brokers) and clears it after recovery, with events", func(ctx SpecContext) {
		ns := newNamespace()
		srv := s3server.Start(GinkgoT(), "strata-tier")
		kc := healthSpec()
		kc.Namespace, kc.Name = ns, "tierhealth"
		kc.Spec.Zones = kc.Spec.Zones[:2] // a and b
		kc.Spec.TieredStorage = &strata.TieredStorageSpec{Bucket: "strata-tier", Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true}
		GinkgoT().Setenv("STRATA_TIER_ACCESS_KEY_ID", srv.AccessKey)
		GinkgoT().Setenv("STRATA_TIER_SECRET_ACCESS_KEY", srv.SecretKey)
		lb := startLoopbackBrokers(kc,
			// The headroom check reads the real volume: the brokers' data
			// must be on one with room, whatever the host's disk holds.
			brokertest.WithDirUnder(roomyVolume()),
			brokertest.WithSetting("remote.log.storage.system.enable", "true"),
			brokertest.WithSetting("remote.log.manager.task.interval.ms", "100"),
			brokertest.WithSetting("tier.bucket.name", "strata-tier"),
			brokertest.WithSetting("tier.bucket.region", srv.Region),
			brokertest.WithSetting("tier.bucket.endpoint", srv.Endpoint),
			brokertest.WithSetting("tier.bucket.force.path.style", "true"))
		kc.Spec.Metadata.ExternalEndpoints = lb.Etcd
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())

		cl, err := kgo.NewClient(kgo.SeedBrokers(lb.Addrs()...), kgo.DefaultProduceTopic("tiered"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		Expect(err).NotTo(HaveOccurred())
		defer cl.Close()
		remote, segBytes := "true", "2048"
		Eventually(func(g Gomega) {
			_, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 2, map[string]*string{"remote.storage.enable": &remote, "segment.bytes": &segBytes}, "tiered")
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		produce := func(g Gomega, n int) {
			for i := range n {
				for p := range int32(2) {
					g.Expect(cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%0300d", i)}).FirstErr()).To(Succeed())
				}
			}
		}

		By("uploads succeed: TierDegraded False, TierHealthy")
		Eventually(func(g Gomega) {
			produce(g, 10)
			got := getCluster(ns, "tierhealth")
			c := clusterCondition(g, got, strata.ConditionTierDegraded)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "%s", c.Message)
			g.Expect(c.Reason).To(Equal(controllers.ReasonTierHealthy))
			g.Expect(c.Message).To(ContainSubstring("2 brokers report the slow tier"))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("the tier bucket goes away: the leaders' uploads fail")
		srv.Stop()
		Eventually(func(g Gomega) {
			produce(g, 5) // produce is not affected; segments keep rolling
			got := getCluster(ns, "tierhealth")
			c := clusterCondition(g, got, strata.ConditionTierDegraded)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s", c.Message)
			g.Expect(c.Reason).To(Equal(controllers.ReasonTierUploadsFailing))
			g.Expect(c.Message).To(ContainSubstring("uploads to the slow tier fail"))
			g.Expect(c.Message).To(MatchRegexp(`zone (a: brokers 0|b: brokers 100) \(1 partitions, [0-9.]+ [KM]?i?B not uploaded\)`))
			degraded := clusterCondition(g, got, strata.ConditionDegraded)
			g.Expect(degraded.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(degraded.Message).To(ContainSubstring("slow tier: uploads to the slow tier fail"))
			g.Expect(clusterEvents(g, ns, "tierhealth")[controllers.EventTierDegraded]).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("the bucket is back: uploads catch up and TierDegraded clears")
		srv.Restart()
		Eventually(func(g Gomega) {
			produce(g, 2)
			got := getCluster(ns, "tierhealth")
			c := clusterCondition(g, got, strata.ConditionTierDegraded)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "%s", c.Message)
			g.Expect(c.Reason).To(Equal(controllers.ReasonTierHealthy))
			notes := clusterEvents(g, ns, "tierhealth")[controllers.EventTierRecovered]
			g.Expect(notes).NotTo(BeEmpty())
			g.Expect(strings.Join(notes, " ")).To(ContainSubstring("uploads succeed"))
		}).WithContext(ctx).WithTimeout(2 * timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
})

// roomyVolume returns a directory on a volume with at least twice
// controllers.TierHeadroomMinFraction free, for brokers whose disk headroom
// a spec expects healthy: the memory-backed /dev/shm when it has room (a
// CI machine's disk may be nearly full), else the temporary directory.
func roomyVolume() string {
	GinkgoHelper()
	var seen []string
	for _, dir := range []string{"/dev/shm", os.TempDir()} {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			seen = append(seen, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		free, size := float64(st.Bavail)*float64(st.Bsize), float64(st.Blocks)*float64(st.Bsize)
		if syscall.Access(dir, 2 /* W_OK */) == nil && free >= 2*controllers.TierHeadroomMinFraction*size {
			return dir
		}
		seen = append(seen, fmt.Sprintf("%s: %.1f GiB free of %.1f GiB", dir, free/(1<<30), size/(1<<30)))
	}
	Fail("no writable volume with " + fmt.Sprint(200*controllers.TierHeadroomMinFraction) + "% free for the brokers' data: " + strings.Join(seen, "; "))
	return ""
}
