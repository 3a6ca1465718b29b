package controllers_test

import (
	"maps"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// clusterDynamicConfigs reads the cluster-wide dynamic broker configs.
func clusterDynamicConfigs(g Gomega, adm *kadm.Client) map[string]string {
	rcs, err := adm.DescribeBrokerConfigs(suiteCtx)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, rc := range rcs {
		g.Expect(rc.Err).NotTo(HaveOccurred())
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				out[c.Key] = c.MaybeValue()
			}
		}
	}
	return out
}

// templateHashes are the pod template hashes of kc's StatefulSets.
func templateHashes(g Gomega, kc *strata.KafkaCluster) map[string]string {
	out := map[string]string{}
	for _, z := range kc.Spec.Zones {
		sts, err := getSTS(kc.Namespace, controllers.ZoneStatefulSetName(kc.Name, z.Name))
		g.Expect(err).NotTo(HaveOccurred())
		out[z.Name] = sts.Spec.Template.Annotations[controllers.AnnotationTemplateHash]
	}
	return out
}

var _ = Describe("Dynamic spec.config keys", func() {
	It("applies the broker defaults of topic configs cluster-wide without a restart, deletes them when they leave the spec, reports a refused value, and rolls for static keys only", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "dyn", map[string]int32{"a": 1, "b": 1, "c": 1})
		k := startKubelet(kc, lb)
		updateCluster(ns, "dyn", func(kc *strata.KafkaCluster) {
			if kc.Spec.Config == nil {
				kc.Spec.Config = map[string]string{}
			}
			kc.Spec.Config["log.retention.ms"] = "3600000"
		})
		adm := lb.Admin()
		Eventually(func(g Gomega) {
			got := getCluster(ns, "dyn")
			podsCurrent(g, got)
			g.Expect(got.Status.DynamicConfig).NotTo(BeNil())
			g.Expect(got.Status.DynamicConfig.Applied).To(Equal([]string{"log.retention.ms"}))
			g.Expect(clusterDynamicConfigs(g, adm)).To(HaveKeyWithValue("log.retention.ms", "3600000"))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		var hashes map[string]string
		Eventually(func(g Gomega) { hashes = templateHashes(g, getCluster(ns, "dyn")) }).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		restarts := func() int {
			n := 0
			for id := range lb.brokers() {
				n += k.Restarts(id)
			}
			return n
		}
		before := restarts()

		By("changing and adding dynamic keys: applied, no broker restarted, the templates unchanged")
		updateCluster(ns, "dyn", func(kc *strata.KafkaCluster) {
			kc.Spec.Config["log.retention.ms"] = "7200000"
			kc.Spec.Config["message.max.bytes"] = "2000000"
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "dyn")
			g.Expect(got.Status.DynamicConfig.Applied).To(Equal([]string{"log.retention.ms", "message.max.bytes"}))
			cfg := clusterDynamicConfigs(g, adm)
			g.Expect(cfg).To(HaveKeyWithValue("log.retention.ms", "7200000"))
			g.Expect(cfg).To(HaveKeyWithValue("message.max.bytes", "2000000"))
			g.Expect(clusterEvents(g, ns, "dyn")[controllers.EventDynamicConfigApplied]).To(ContainElement(ContainSubstring("message.max.bytes=2000000")))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(templateHashes(Default, getCluster(ns, "dyn"))).To(Equal(hashes), "a dynamic key changed the pod templates (a roll)")
		Expect(restarts()).To(Equal(before), "a dynamic key restarted a broker")

		By("removing a dynamic key: deleted cluster-wide, the brokers back to their default")
		updateCluster(ns, "dyn", func(kc *strata.KafkaCluster) { delete(kc.Spec.Config, "message.max.bytes") })
		Eventually(func(g Gomega) {
			got := getCluster(ns, "dyn")
			g.Expect(got.Status.DynamicConfig.Applied).To(Equal([]string{"log.retention.ms"}))
			g.Expect(clusterDynamicConfigs(g, adm)).NotTo(HaveKey("message.max.bytes"))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())

		By("a value the brokers refuse: pending, with the brokers' reason and a Warning event; the other keys stay")
		updateCluster(ns, "dyn", func(kc *strata.KafkaCluster) { kc.Spec.Config["log.cleanup.policy"] = "shred" })
		Eventually(func(g Gomega) {
			got := getCluster(ns, "dyn")
			g.Expect(got.Status.DynamicConfig.Pending).To(Equal([]string{"log.cleanup.policy"}))
			g.Expect(got.Status.DynamicConfig.Message).To(ContainSubstring("log.cleanup.policy=shred"))
			g.Expect(got.Status.DynamicConfig.Message).To(ContainSubstring("not a list of compact and delete"))
			g.Expect(clusterEvents(g, ns, "dyn")[controllers.EventDynamicConfigRefused]).NotTo(BeEmpty())
			g.Expect(clusterDynamicConfigs(g, adm)).To(HaveKeyWithValue("log.retention.ms", "7200000"))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		updateCluster(ns, "dyn", func(kc *strata.KafkaCluster) { delete(kc.Spec.Config, "log.cleanup.policy") })

		By("a static key still rolls")
		updateCluster(ns, "dyn", func(kc *strata.KafkaCluster) { kc.Spec.Config["num.partitions"] = "5" })
		Eventually(func(g Gomega) {
			now := templateHashes(g, getCluster(ns, "dyn"))
			g.Expect(slices.Collect(maps.Values(now))).NotTo(ContainElements(slices.Collect(maps.Values(hashes))))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getCluster(ns, "dyn")
			podsCurrent(g, got)
			g.Expect(got.Status.DynamicConfig.Pending).To(BeEmpty())
			g.Expect(strings.TrimSpace(got.Status.DynamicConfig.Message)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	})
})
