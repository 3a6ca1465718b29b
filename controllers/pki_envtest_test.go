package controllers_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"software.sslmate.com/src/go-pkcs12"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/pki"
)

func getSecret(ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, s)
	return s, err
}

// leafOf parses tls.crt of a Secret and checks it against the Secret's own
// ca.crt bundle.
func leafOf(g Gomega, s *corev1.Secret) *x509.Certificate {
	certs, err := pki.ParseCertificates(s.Data[controllers.TLSCertKey])
	g.Expect(err).NotTo(HaveOccurred())
	return certs[0]
}

func verifyLeaf(g Gomega, leaf *x509.Certificate, bundle []byte, host string, usage x509.ExtKeyUsage) {
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(bundle)).To(BeTrue())
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}})
	g.Expect(err).NotTo(HaveOccurred(), "verify %s as %s", leaf.Subject, host)
}

// publicCA reads the Secret clients are given to trust the brokers
// (controllers.ClusterCACertSecretName) and checks it holds no private
// key, is the cluster's, and that its ca.crt and ca.p12 hold exactly want.
func publicCA(g Gomega, ns, cluster string, want []*x509.Certificate) *corev1.Secret {
	s, err := getSecret(ns, controllers.ClusterCACertSecretName(cluster))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(metav1.IsControlledBy(s, getCluster(ns, cluster))).To(BeTrue(), "owned by the KafkaCluster")
	g.Expect(s.Labels).To(HaveKeyWithValue(controllers.LabelCluster, cluster))
	g.Expect(s.Data).NotTo(HaveKey(controllers.TLSKeyKey))
	for k, v := range s.Data {
		g.Expect(string(v)).NotTo(ContainSubstring("PRIVATE KEY"), "key %s of the public CA Secret", k)
	}
	g.Expect(s.Data).To(HaveKey(controllers.CAPasswordKey))
	certs, err := pki.ParseCertificates(s.Data[controllers.CACertKey])
	g.Expect(err).NotTo(HaveOccurred())
	p12, err := pkcs12.DecodeTrustStore(s.Data[controllers.CAP12Key], string(s.Data[controllers.CAPasswordKey]))
	g.Expect(err).NotTo(HaveOccurred())
	for _, got := range [][]*x509.Certificate{certs, p12} {
		g.Expect(slices.EqualFunc(got, want, (*x509.Certificate).Equal)).To(BeTrue(), "%d certificates, want %d", len(got), len(want))
	}
	return s
}

var _ = Describe("Cluster CA and certificates", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		makeBucket(ns, "wal-a", "a")
		makeBucket(ns, "wal-b", "b")
	})

	It("issues the CA and the broker, etcd and operator certificates, renders NetworkPolicies, and re-issues what is due or lacks a name", func() {
		createCluster(ns, "sec", clusterSpec(map[string]int32{"a": 2, "b": 1}, "a", "b"))

		var ca, brokers, etcd, operator *corev1.Secret
		Eventually(func(g Gomega) {
			var err error
			for name, into := range map[string]**corev1.Secret{
				"sec-cluster-ca": &ca, "sec-broker-certs": &brokers, "sec-etcd-certs": &etcd, "sec-operator-cert": &operator,
			} {
				*into, err = getSecret(ns, name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(metav1.IsControlledBy(*into, getCluster(ns, "sec"))).To(BeTrue(), "Secret %s owned by the KafkaCluster", name)
				g.Expect((*into).Type).To(Equal(corev1.SecretTypeTLS))
			}
		}, timeout, interval).Should(Succeed())

		caCert := leafOf(Default, ca)
		Expect(caCert.IsCA).To(BeTrue())
		Expect(caCert.NotAfter.Sub(caCert.NotBefore)).To(BeNumerically("~", pki.DefaultCAValidity, time.Hour))
		bundle := ca.Data[controllers.CACertKey]

		broker := leafOf(Default, brokers)
		Expect(brokers.Data[controllers.CACertKey]).To(Equal(bundle))
		for _, host := range []string{
			"sec-a-0.sec-brokers." + ns + ".svc", "sec-a-1.sec-brokers." + ns + ".svc", "sec-b-0.sec-brokers." + ns + ".svc",
			"sec-bootstrap." + ns + ".svc", "sec-bootstrap." + ns + ".svc.cluster.local",
		} {
			verifyLeaf(Default, broker, bundle, host, x509.ExtKeyUsageServerAuth)
		}
		verifyLeaf(Default, broker, bundle, "", x509.ExtKeyUsageClientAuth) // replica fetches, etcd
		Expect(broker.Subject.String()).To(Equal("CN=strata-broker,O=strata"))

		By("giving clients the CA certificate without its key in the public Secret")
		var public *corev1.Secret
		Eventually(func(g Gomega) { public = publicCA(g, ns, "sec", []*x509.Certificate{caCert}) }, timeout, interval).Should(Succeed())
		Expect(public.Type).To(Equal(corev1.SecretTypeOpaque))
		verifyLeaf(Default, broker, public.Data[controllers.CACertKey], "sec-bootstrap."+ns+".svc", x509.ExtKeyUsageServerAuth)

		verifyLeaf(Default, leafOf(Default, etcd), bundle, "sec-etcd-2.sec-etcd."+ns+".svc", x509.ExtKeyUsageServerAuth)
		op := leafOf(Default, operator)
		Expect(op.Subject.String()).To(Equal("CN=strata-operator,O=strata"))
		verifyLeaf(Default, op, bundle, "", x509.ExtKeyUsageClientAuth)
		Expect(op.ExtKeyUsage).To(Equal([]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}))

		Eventually(func() []string {
			var names []string
			for _, c := range getCluster(ns, "sec").Status.Certificates {
				if !c.NotAfter.IsZero() && c.RenewAt != nil {
					names = append(names, c.Name)
				}
			}
			return names
		}, timeout, interval).Should(ConsistOf("cluster-ca", "clients-ca", "broker", "etcd", "operator"))

		By("mounting the broker certificates and rendering the mTLS inter-broker listener")
		sts, err := getSTS(ns, "sec-a")
		Expect(err).NotTo(HaveOccurred())
		Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "sec-broker-certs")))
		cfg, err := brokerConfig(ns, "sec", "a")
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg).To(ContainSubstring("\ninter.broker.listener.name=REPLICATION\n"))
		Expect(cfg).To(ContainSubstring("\nlistener.name.replication.ssl.client.auth=required\n"))

		By("rendering NetworkPolicies, and removing them when switched off")
		Eventually(func(g Gomega) {
			for _, name := range []string{"sec-brokers", "sec-etcd"} {
				np := &networkingv1.NetworkPolicy{}
				g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, np)).To(Succeed())
				// The operator is admitted from its own namespace only
				// (the suite's operator runs with the default).
				var operatorPeers int
				for _, rule := range np.Spec.Ingress {
					for _, peer := range rule.From {
						if peer.PodSelector == nil || peer.PodSelector.MatchLabels[controllers.LabelComponent] != "operator" {
							continue
						}
						operatorPeers++
						g.Expect(peer.NamespaceSelector).NotTo(BeNil())
						g.Expect(peer.NamespaceSelector.MatchLabels).To(Equal(map[string]string{"kubernetes.io/metadata.name": controllers.DefaultOperatorNamespace}), "NetworkPolicy %s", name)
					}
				}
				g.Expect(operatorPeers).To(Equal(1), "NetworkPolicy %s", name)
			}
		}, timeout, interval).Should(Succeed())
		updateCluster(ns, "sec", func(kc *strata.KafkaCluster) { kc.Spec.Security.NetworkPolicy.Enabled = ptr.To(false) })
		Eventually(func() bool {
			err := k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "sec-brokers"}, &networkingv1.NetworkPolicy{})
			return apierrors.IsNotFound(err)
		}, timeout, interval).Should(BeTrue())

		By("re-issuing a broker certificate that expires in two days")
		caPair, err := pki.ParseKeyPair(ca.Data[controllers.TLSCertKey], ca.Data[controllers.TLSKeyKey])
		Expect(err).NotTo(HaveOccurred())
		short, err := caPair.Issue(pki.LeafOptions{Subject: pkix.Name{CommonName: "strata-broker"}, Hosts: broker.DNSNames, Validity: 48 * time.Hour}, time.Now())
		Expect(err).NotTo(HaveOccurred())
		brokers.Data[controllers.TLSCertKey], brokers.Data[controllers.TLSKeyKey] = short.CertPEM, short.KeyPEM
		Expect(k8sClient.Update(suiteCtx, brokers)).To(Succeed())
		// The Secret change wakes the reconciler (it owns the Secret).
		Eventually(func(g Gomega) {
			s, err := getSecret(ns, "sec-broker-certs")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(time.Until(leafOf(g, s).NotAfter)).To(BeNumerically(">", 300*24*time.Hour))
		}, timeout, interval).Should(Succeed())

		By("re-issuing the broker certificate with the new broker's name on a scale-up")
		updateCluster(ns, "sec", func(kc *strata.KafkaCluster) { kc.Spec.Zones[1].Brokers = 2 })
		Eventually(func(g Gomega) {
			s, err := getSecret(ns, "sec-broker-certs")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(leafOf(g, s).DNSNames).To(ContainElement("sec-b-1.sec-brokers." + ns + ".svc"))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			kc := getCluster(ns, "sec")
			g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
		}, timeout, interval).Should(Succeed())
		// Reconciles with the CA unchanged (these and the resyncs) leave
		// the public Secret as it was: its truststore is not re-encoded.
		now, err := getSecret(ns, controllers.ClusterCACertSecretName("sec"))
		Expect(err).NotTo(HaveOccurred())
		Expect(now.ResourceVersion).To(Equal(public.ResourceVersion), "public CA Secret rewritten without a CA change")

		By("renewing a CA that expires in ten days with its key, keeping the old certificate trusted")
		etcdSTS, err := getSTS(ns, "sec-etcd")
		Expect(err).NotTo(HaveOccurred())
		hashBefore := etcdSTS.Spec.Template.Annotations[controllers.AnnotationTrustBundleHash]
		Expect(hashBefore).NotTo(BeEmpty())
		brokers, err = getSecret(ns, "sec-broker-certs")
		Expect(err).NotTo(HaveOccurred())
		leafBefore := leafOf(Default, brokers)
		expiring, err := pki.RenewCA(caPair, 10*24*time.Hour, time.Now())
		Expect(err).NotTo(HaveOccurred())
		ca, err = getSecret(ns, "sec-cluster-ca")
		Expect(err).NotTo(HaveOccurred())
		ca.Data[controllers.TLSCertKey], ca.Data[controllers.CACertKey] = expiring.CertPEM, expiring.CertPEM
		Expect(k8sClient.Update(suiteCtx, ca)).To(Succeed())
		var renewed []*x509.Certificate
		Eventually(func(g Gomega) {
			s, err := getSecret(ns, "sec-cluster-ca")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(time.Until(leafOf(g, s).NotAfter)).To(BeNumerically(">", 300*24*time.Hour))
			renewed, err = pki.ParseCertificates(s.Data[controllers.CACertKey])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(renewed).To(HaveLen(2), "the trust bundle keeps the expiring CA certificate")
		}, timeout, interval).Should(Succeed())
		Expect(renewed[1].Equal(expiring.Cert)).To(BeTrue())
		Expect(renewed[0].PublicKey).To(Equal(expiring.Cert.PublicKey), "renewed with the same key")
		// Clients get both certificates, under the same truststore password.
		Eventually(func(g Gomega) {
			s := publicCA(g, ns, "sec", renewed)
			g.Expect(s.Data[controllers.CAPasswordKey]).To(Equal(public.Data[controllers.CAPasswordKey]))
			verifyLeaf(g, leafBefore, s.Data[controllers.CACertKey], "sec-a-0.sec-brokers."+ns+".svc", x509.ExtKeyUsageServerAuth)
		}, timeout, interval).Should(Succeed())
		// The broker certificate still chains to the renewed CA (same
		// key): it is not re-issued, only its bundle follows.
		Eventually(func(g Gomega) {
			s, err := getSecret(ns, "sec-broker-certs")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(leafOf(g, s).Equal(leafBefore)).To(BeTrue())
			certs, err := pki.ParseCertificates(s.Data[controllers.CACertKey])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(certs).To(HaveLen(2))
			verifyLeaf(g, leafOf(g, s), s.Data[controllers.CACertKey], "sec-a-0.sec-brokers."+ns+".svc", x509.ExtKeyUsageServerAuth)
		}, timeout, interval).Should(Succeed())
		// etcd reads its CA only at start: its members roll.
		Eventually(func() (string, error) {
			sts, err := getSTS(ns, "sec-etcd")
			return sts.Spec.Template.Annotations[controllers.AnnotationTrustBundleHash], err
		}, timeout, interval).ShouldNot(Equal(hashBefore))
	})

	It("serves a user-supplied listener certificate and stalls while its Secret is missing", func() {
		kc := clusterSpec(map[string]int32{"a": 1}, "a")
		kc.Spec.Listeners = []strata.ListenerSpec{
			{Name: "PLAIN", Port: 9092},
			{Name: "CLIENT", Port: 9093, Protocol: "SSL", TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequested}},
		}
		kc.Spec.Security.ListenerCertificate = &strata.SecretReference{Name: "public-tls"}
		createCluster(ns, "user", kc)

		Eventually(func(g Gomega) {
			c := apimeta.FindStatusCondition(getCluster(ns, "user").Status.Conditions, strata.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(Equal("security.listenerCertificate: Secret public-tls not found"))
		}, timeout, interval).Should(Succeed())

		// A cert-manager style Secret: tls.crt, tls.key, ca.crt.
		issuer, err := pki.NewCA("corporate CA", 0, time.Now())
		Expect(err).NotTo(HaveOccurred())
		served, err := issuer.Issue(pki.LeafOptions{Hosts: []string{"kafka.example.com"}, Server: true}, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(suiteCtx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "public-tls"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": served.CertPEM, "tls.key": served.KeyPEM, "ca.crt": issuer.CertPEM},
		})).To(Succeed())
		// Not watched: the Stalled cluster is retried when its spec
		// changes, so touch it.
		updateCluster(ns, "user", func(kc *strata.KafkaCluster) { kc.Spec.Config["num.partitions"] = "7" })

		Eventually(func(g Gomega) {
			st := getCluster(ns, "user").Status.Certificates
			i := slices.IndexFunc(st, func(c strata.CertificateStatus) bool { return c.Name == "listener" })
			g.Expect(i).To(BeNumerically(">=", 0))
			g.Expect(st[i].Secret).To(Equal("public-tls"))
			g.Expect(st[i].NotAfter.Time.Equal(served.Cert.NotAfter.Truncate(time.Second))).To(BeTrue())
			g.Expect(st[i].RenewAt).To(BeNil(), "renewed by its issuer, not the operator")
		}, timeout, interval).Should(Succeed())
		sts, err := getSTS(ns, "user-a")
		Expect(err).NotTo(HaveOccurred())
		Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "public-tls")))
		cfg, err := brokerConfig(ns, "user", "a")
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg).To(ContainSubstring("\nlistener.name.client.ssl.certificate.location=/etc/strata-tls/listener/tls.crt\n"))
		Expect(cfg).To(ContainSubstring("\nlistener.name.client.ssl.ca.location=/etc/strata-tls/listener/ca.crt\n"))
		Expect(cfg).To(ContainSubstring("\nlistener.name.client.ssl.client.auth=requested\n"))
		Expect(cfg).To(ContainSubstring("\nlistener.security.protocol.map=PLAIN:PLAINTEXT,CLIENT:SSL,REPLICATION:SSL\n"))

		By("giving clients the listener certificate's CA, not the cluster CA")
		Eventually(func(g Gomega) { publicCA(g, ns, "user", []*x509.Certificate{issuer.Cert}) }, timeout, interval).Should(Succeed())
	})
})
