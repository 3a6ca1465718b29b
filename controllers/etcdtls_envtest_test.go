package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// An external etcd that requires TLS client certificates: the operator
// mounts spec.metadata.externalTLS into the broker pods, points
// metadata.etcd.ssl.* at it, and probes the etcd with it.
var _ = Describe("External etcd over TLS", func() {
	It("probes an external etcd that requires client certificates with the Secret metadata.externalTLS names", func() {
		ns := newNamespace()
		etcd := controllers.StartTLSEtcd(GinkgoTB())
		kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{
			WAL:      strata.WALSpec{Enabled: ptr.To(false)},
			Zones:    []strata.ZoneSpec{{Name: "a", Brokers: 1}},
			Metadata: strata.MetadataSpec{ExternalEndpoints: etcd.Endpoints, ExternalTLS: &strata.SecretReference{Name: "etcd-client"}},
		}}
		createCluster(ns, "ext", kc)

		By("a missing Secret stalls the cluster")
		Eventually(func(g Gomega) {
			c := clusterCondition(g, getCluster(ns, "ext"), strata.ConditionStalled)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonInvalidSpec))
			g.Expect(c.Message).To(ContainSubstring("metadata.externalTLS: Secret etcd-client not found"))
		}, timeout, interval).Should(Succeed())

		By("with the Secret, the etcd is probed healthy and the brokers get its files")
		Expect(k8sClient.Create(suiteCtx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-client"},
			Type:       corev1.SecretTypeTLS,
			Data:       etcd.Secret,
		})).To(Succeed())
		// The cluster is not resynced on a Secret it does not own: a spec
		// change wakes it, as a user's edit would.
		updateCluster(ns, "ext", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"num.partitions": "3"} })
		Eventually(func(g Gomega) {
			got := getCluster(ns, "ext")
			c := clusterCondition(g, got, strata.ConditionMetadataHealthy)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(got.Status.Metadata).NotTo(BeNil())
			g.Expect(got.Status.Metadata.HealthyMembers).To(BeEquivalentTo(1))
			cfg, err := brokerConfig(ns, "ext", "a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg).To(ContainSubstring("\nmetadata.etcd.ssl.certificate.location=" + controllers.EtcdTLSDir + "/tls.crt\n"))
			sts, err := getSTS(ns, controllers.ZoneStatefulSetName("ext", "a"))
			g.Expect(err).NotTo(HaveOccurred())
			var secret string
			for _, v := range sts.Spec.Template.Spec.Volumes {
				if v.Name == "etcd-tls" && v.Secret != nil {
					secret = v.Secret.SecretName
				}
			}
			g.Expect(secret).To(Equal("etcd-client"))
		}, timeout, interval).Should(Succeed())
	})

	It("refuses metadata.externalTLS without https endpoints", func() {
		kc := &strata.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(), Name: "plain"}, Spec: strata.KafkaClusterSpec{
			Zones:    []strata.ZoneSpec{{Name: "a", Brokers: 1}},
			Metadata: strata.MetadataSpec{ExternalEndpoints: []string{"https://etcd-0:2379", "http://etcd-1:2379"}, ExternalTLS: &strata.SecretReference{Name: "etcd-client"}},
		}}
		expectRejected(k8sClient.Create(suiteCtx, kc), "metadata.externalTLS needs externalEndpoints, every one https://")
	})
})
