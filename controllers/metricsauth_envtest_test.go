package controllers_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/controllers"
)

// The brokers' metrics listener needs a bearer token the operator sets
// up: a generated Secret per cluster (or the user's), mounted into the
// broker pods as metrics.auth.token.file, and sent by the operator's own
// scrape.
var _ = Describe("Metrics listener token", func() {
	It("generates a token Secret per cluster, mounts it and points metrics.auth.token.file at it", func() {
		ns := newNamespace()
		makeBucket(ns, "wal-a", "a")
		createCluster(ns, "tok", clusterSpec(map[string]int32{"a": 1}, "a"))
		sec := &corev1.Secret{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: controllers.MetricsTokenSecretName("tok")}, sec)).To(Succeed())
			// 32 random bytes, base64url without padding.
			g.Expect(sec.Data[controllers.MetricsTokenKey]).To(HaveLen(43))
			g.Expect(metav1.IsControlledBy(sec, getCluster(ns, "tok"))).To(BeTrue())
			cfg, err := brokerConfig(ns, "tok", "a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg).To(ContainSubstring("\nmetrics.auth.token.file=" + controllers.MetricsTokenDir + "/" + controllers.MetricsTokenKey + "\n"))
			sts, err := getSTS(ns, controllers.ZoneStatefulSetName("tok", "a"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tokenVolume(sts)).To(Equal(controllers.MetricsTokenSecretName("tok")))
		}, timeout, interval).Should(Succeed())
		first := string(sec.Data[controllers.MetricsTokenKey])

		By("another cluster gets another token")
		createCluster(ns, "tok2", clusterSpec(map[string]int32{"a": 1}, "a"))
		Eventually(func(g Gomega) {
			other := &corev1.Secret{}
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: controllers.MetricsTokenSecretName("tok2")}, other)).To(Succeed())
			g.Expect(other.Data[controllers.MetricsTokenKey]).To(HaveLen(43))
			g.Expect(string(other.Data[controllers.MetricsTokenKey])).NotTo(Equal(first))
		}, timeout, interval).Should(Succeed())

		By("a token deleted from the Secret is generated again")
		sec.Data = map[string][]byte{}
		Expect(k8sClient.Update(suiteCtx, sec)).To(Succeed())
		updateCluster(ns, "tok", func(kc *strata.KafkaCluster) { kc.Spec.Config["num.partitions"] = "7" })
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: controllers.MetricsTokenSecretName("tok")}, sec)).To(Succeed())
			g.Expect(sec.Data[controllers.MetricsTokenKey]).To(HaveLen(43))
		}, timeout, interval).Should(Succeed())

		By("security.metricsToken naming a missing Secret stalls the cluster")
		updateCluster(ns, "tok", func(kc *strata.KafkaCluster) {
			kc.Spec.Security.MetricsToken = &strata.SecretReference{Name: "nope"}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "tok")
			c := clusterCondition(g, got, strata.ConditionStalled)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonInvalidSpec))
			g.Expect(c.Message).To(ContainSubstring("security.metricsToken: Secret nope not found"))
		}, timeout, interval).Should(Succeed())
	})

	It("scrapes brokers that require the token named by security.metricsToken", func(ctx SpecContext) {
		ns := newNamespace()
		Expect(k8sClient.Create(suiteCtx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scrape-token"},
			StringData: map[string]string{controllers.MetricsTokenKey: "s3cr3t-scrape-token\n"},
		})).To(Succeed())
		tokenFile := filepath.Join(GinkgoT().TempDir(), "token")
		Expect(os.WriteFile(tokenFile, []byte("s3cr3t-scrape-token"), 0o600)).To(Succeed())
		kc := healthSpec()
		kc.Spec.Zones = kc.Spec.Zones[:1]
		kc.Namespace, kc.Name = ns, "scraped"
		kc.Spec.Security.MetricsToken = &strata.SecretReference{Name: "scrape-token"}
		lb := startLoopbackBrokers(kc, brokertest.WithSetting("metrics.auth.token.file", tokenFile))
		kc.Spec.Metadata.ExternalEndpoints = lb.Etcd
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())

		// status.cost comes only from a scrape the broker let in.
		Eventually(func(g Gomega) {
			got := getCluster(ns, "scraped")
			g.Expect(got.Status.Kafka).NotTo(BeNil())
			g.Expect(got.Status.Kafka.Reachable).To(BeTrue(), "kafka error: %s", got.Status.Kafka.Error)
			g.Expect(got.Status.Cost).NotTo(BeNil())
			g.Expect(got.Status.Cost.Brokers).To(BeEquivalentTo(1))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		sts, err := getSTS(ns, controllers.ZoneStatefulSetName("scraped", "a"))
		Expect(err).NotTo(HaveOccurred())
		Expect(tokenVolume(sts)).To(Equal("scrape-token"))
		// The operator renders no token Secret of its own then.
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: controllers.MetricsTokenSecretName("scraped")}, &corev1.Secret{})).NotTo(Succeed())
	})
})

// tokenVolume is the Secret the broker pods mount at MetricsTokenDir.
func tokenVolume(sts *appsv1.StatefulSet) string {
	spec := sts.Spec.Template.Spec
	var volume string
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath == controllers.MetricsTokenDir {
			volume = m.Name
		}
	}
	for _, v := range spec.Volumes {
		if v.Name == volume && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}
