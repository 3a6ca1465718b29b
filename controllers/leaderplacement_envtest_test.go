package controllers_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/controllers"
)

var _ = Describe("leader placement", func() {
	It("renders policy Zone so that brokers lead every partition from that zone", func(ctx SpecContext) {
		kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{
			Zones:           []strata.ZoneSpec{{Name: "a", Brokers: 1}, {Name: "b", Brokers: 1}, {Name: "c", Brokers: 1}},
			LeaderPlacement: strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone, Zone: "b"},
		}}
		kc.Namespace, kc.Name = "default", "zone-leaders"
		// The brokers get the leader.placement.* keys exactly as the
		// operator renders them into broker.properties.
		fb := &strata.FastBucket{Spec: strata.FastBucketSpec{Zone: "a", Bucket: "wal-a", Region: "us-east-1", Endpoint: "http://s3:9000"}}
		props := controllers.RenderBrokerConfig(kc, controllers.ZoneInput{Zone: kc.Spec.Zones[0], Bucket: fb, ZoneBuckets: map[string]*strata.FastBucket{"a": fb}})
		var opts []brokertest.Option
		for _, l := range strings.Split(props, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "leader.placement.") {
				opts = append(opts, brokertest.WithSetting(k, v))
			}
		}
		Expect(opts).To(HaveLen(2), props)
		c := startLoopbackBrokers(kc, opts...)

		adm := c.Admin()
		Eventually(func(g Gomega) {
			brokers, err := adm.ListBrokers(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(brokers).To(HaveLen(3))
		}).WithContext(ctx).Should(Succeed())
		_, err := adm.CreateTopic(ctx, 6, 3, nil, "orders")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			md, err := adm.Metadata(ctx, "orders")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(md.Topics["orders"].Partitions).To(HaveLen(6))
			for p, pd := range md.Topics["orders"].Partitions {
				g.Expect(pd.Leader).To(Equal(int32(100)), "partition %d: leader %d, want broker 100 of zone b", p, pd.Leader)
			}
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(3*time.Minute))
})
