package controllers_test

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"software.sslmate.com/src/go-pkcs12"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/pki"
)

// Secure by default, the upgrade path of clusters from before it, and
// KafkaUsers of type tls against loopback brokers with an mTLS listener.

var _ = Describe("Secure defaults", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		makeBucket(ns, "wal-a", "a")
	})

	It("gives a new cluster a SASL_SSL listener and ACLs with the operator and brokers as super users", func() {
		createCluster(ns, "sec", clusterSpec(map[string]int32{"a": 1}, "a"))
		Eventually(func(g Gomega) {
			cfg, err := brokerConfig(ns, "sec", "a")
			g.Expect(err).NotTo(HaveOccurred())
			for _, line := range []string{
				"listeners=SASL_SSL://0.0.0.0:9092,REPLICATION://0.0.0.0:9091",
				"listener.security.protocol.map=SASL_SSL:SASL_SSL,REPLICATION:SSL",
				"authorizer.class.name=strata.acl",
				"super.users=User:CN=strata-operator,O=strata;User:CN=strata-broker,O=strata",
				"allow.everyone.if.no.acl.found=false",
				// SASL sessions end within an hour (KIP-368).
				"connections.max.reauth.ms=3600000",
			} {
				g.Expect(cfg).To(ContainSubstring("\n" + line + "\n"))
			}
		}, timeout, interval).Should(Succeed())
		svc := &corev1.Service{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: controllers.BootstrapServiceName("sec")}, svc)).To(Succeed())
		Expect(svc.Spec.Ports).To(ContainElement(HaveField("Name", "sasl-ssl")))

		By("the super users are exactly the principals of the certificates the operator issues")
		for secret, principal := range map[string]string{
			"sec-operator-cert": "User:CN=strata-operator,O=strata",
			"sec-broker-certs":  "User:CN=strata-broker,O=strata",
		} {
			var leaf *x509.Certificate
			Eventually(func(g Gomega) {
				s, err := getSecret(ns, secret)
				g.Expect(err).NotTo(HaveOccurred())
				leaf = leafOf(g, s)
			}, timeout, interval).Should(Succeed())
			Expect("User:" + leaf.Subject.String()).To(Equal(principal))
			Expect(controllers.SuperUsers(getCluster(ns, "sec"))).To(ContainElement(principal))
		}
	})

	It("keeps a cluster from before secure defaults on PLAINTEXT, with an authorizer open where no ACL is set, until the fields are set", func() {
		// What an earlier operator rendered for empty listeners, with
		// the fields set explicitly; then the spec as it was stored by
		// that release (neither field), as after an operator upgrade.
		kc := clusterSpec(map[string]int32{"a": 1}, "a")
		kc.Spec.Listeners = []strata.ListenerSpec{{Name: "PLAINTEXT", Port: 9092, Protocol: "PLAINTEXT"}}
		kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationNone}
		createCluster(ns, "old", kc)
		Eventually(func(g Gomega) {
			cfg, err := brokerConfig(ns, "old", "a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg).To(ContainSubstring("\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"))
		}, timeout, interval).Should(Succeed())
		updateCluster(ns, "old", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = nil
			kc.Spec.Security.Authorization = nil
			kc.Spec.Config["num.partitions"] = "7" // to see the new render
		})
		Eventually(func(g Gomega) {
			cfg, err := brokerConfig(ns, "old", "a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg).To(ContainSubstring("\nnum.partitions=7\n"))
			g.Expect(cfg).To(ContainSubstring("\nlisteners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"))
			// An authorizer on every cluster (issue #26), open where no
			// ACL is set: its clients keep every right they had.
			g.Expect(cfg).To(ContainSubstring("\nauthorizer.class.name=strata.acl\n"))
			g.Expect(cfg).To(ContainSubstring("\nallow.everyone.if.no.acl.found=true\n"))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(eventMessages(g, ns, "old", controllers.EventInsecureDefaultsKept)).To(ContainElement(ContainSubstring(
				"keeps the PLAINTEXT listener on port 9092 (set spec.listeners, e.g. to SASL_SSL, to change it) and ACLs open to every principal where none is set")))
		}, timeout, interval).Should(Succeed())

		By("a listener certificate cannot be served by the kept PLAINTEXT listener: stalled, not ignored")
		updateCluster(ns, "old", func(kc *strata.KafkaCluster) {
			kc.Spec.Security.ListenerCertificate = &strata.SecretReference{Name: "public-tls"}
		})
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getCluster(ns, "old").Status.Conditions, strata.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonInvalidSpec))
			g.Expect(c.Message).To(ContainSubstring("keeps its PLAINTEXT listener while spec.listeners is empty"))
		}, timeout, interval).Should(Succeed())
		updateCluster(ns, "old", func(kc *strata.KafkaCluster) { kc.Spec.Security.ListenerCertificate = nil })

		By("setting the fields ends it")
		updateCluster(ns, "old", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "SASL_SSL", Port: 9092, Protocol: "SASL_SSL"}}
			kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationACL}
		})
		Eventually(func(g Gomega) {
			cfg, err := brokerConfig(ns, "old", "a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg).To(ContainSubstring("\nlisteners=SASL_SSL://0.0.0.0:9092,REPLICATION://0.0.0.0:9091\n"))
			g.Expect(cfg).To(ContainSubstring("\nauthorizer.class.name=strata.acl\n"))
			g.Expect(cfg).To(ContainSubstring("\nallow.everyone.if.no.acl.found=false\n"))
		}, timeout, interval).Should(Succeed())
	})

	DescribeTable("rejects authorization settings it cannot honour",
		func(mutate func(*strata.KafkaCluster), messages ...string) {
			kc := clusterSpec(map[string]int32{"a": 1}, "a")
			kc.Namespace, kc.Name = ns, "v"
			mutate(kc)
			expectRejected(k8sClient.Create(suiteCtx, kc), messages...)
		},
		Entry("an authorizer in spec.config", func(kc *strata.KafkaCluster) { kc.Spec.Config["authorizer.class.name"] = "strata.acl" },
			"spec.config must not set authorizer.class.name, super.users or allow.everyone.if.no.acl.found: they are spec.security.authorization"),
		Entry("super users in spec.config", func(kc *strata.KafkaCluster) { kc.Spec.Config["super.users"] = "User:ANONYMOUS" },
			"spec.config must not set authorizer.class.name, super.users or allow.everyone.if.no.acl.found"),
		Entry("super users without an authorizer", func(kc *strata.KafkaCluster) {
			kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationNone, SuperUsers: []string{"User:admin"}}
		}, "security.authorization.superUsers needs type acl"),
		Entry("allow everyone if no ACL found without an authorizer", func(kc *strata.KafkaCluster) {
			kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationNone, AllowEveryoneIfNoACLFound: true}
		}, "security.authorization.allowEveryoneIfNoACLFound needs type acl"),
		Entry("an unknown authorization type", func(kc *strata.KafkaCluster) {
			kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: "simple"}
		}, "spec.security.authorization.type", `supported values: "acl", "none"`),
		Entry("a super user that is not a User principal", func(kc *strata.KafkaCluster) {
			kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationACL, SuperUsers: []string{"admin"}}
		}, "spec.security.authorization.superUsers[0]"),
	)
})

// eventMessages are the notes of the events of reason on KafkaCluster
// name.
func eventMessages(g Gomega, ns, name, reason string) []string {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "KafkaCluster" && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// mtlsListener is the listener a cluster needs for tls KafkaUsers to be
// Ready (the loopback brokers' MTLS listener stands for it).
var mtlsListener = strata.ListenerSpec{Name: "MTLS", Port: 9093, Protocol: "SSL", TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequired}}

var _ = Describe("KafkaUser TLS users", Ordered, func() {
	var (
		ns        string
		lb        *loopbackCluster
		adm       *kadm.Client
		clusterCA *x509.CertPool
	)
	BeforeAll(func() {
		ns, lb, adm = userTestCluster(true, true, "tls-orders", "tls-other")
		// As a client: trust from the public Secret, which has no CA key.
		clusterCA = x509.NewCertPool()
		Eventually(func(g Gomega) {
			ca, err := getSecret(ns, controllers.ClusterCACertSecretName("kafka"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ca.Data).NotTo(HaveKey(controllers.TLSKeyKey))
			g.Expect(clusterCA.AppendCertsFromPEM(ca.Data[controllers.CACertKey])).To(BeTrue())
		}, timeout, interval).Should(Succeed())
	})

	// mtlsClient connects to the MTLS listener with a certificate.
	mtlsClient := func(certPEM, keyPEM []byte) *kgo.Client {
		GinkgoHelper()
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		Expect(err).NotTo(HaveOccurred())
		cl, err := kgo.NewClient(kgo.SeedBrokers(lb.MTLSAddrs()...), kgo.RetryTimeout(5*time.Second),
			kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: clusterCA, Certificates: []tls.Certificate{cert}}),
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cl.Close)
		return cl
	}

	It("issues a client certificate of the clients CA that authenticates as User:CN=<name> and is authorized by its ACLs", func() {
		ku := newUser(ns, "carol", "kafka", strata.AuthenticationTLS)
		ku.Spec.Authorization = &strata.KafkaUserAuthorization{ACLs: []strata.KafkaUserACL{
			{Resource: strata.ACLResource{Type: strata.ACLResourceTopic, Name: "tls-orders"}, Operations: []strata.ACLOperation{"Write", "Describe"}},
		}}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		got := userCondition(ku, controllers.ReasonUserReady)
		Expect(got.Status.Principal).To(Equal("User:CN=carol"))
		Expect(got.Status.Mechanism).To(Equal(controllers.MechanismTLS))
		Expect(got.Status.SecretName).To(Equal("carol"))
		Expect(userACLs(Default, adm, "User:CN=carol")).To(ConsistOf(
			"ALLOW WRITE on LITERAL TOPIC \"tls-orders\" from *", "ALLOW DESCRIBE on LITERAL TOPIC \"tls-orders\" from *"))
		Expect(scramCredentials(Default, adm, "carol")).To(BeEmpty(), "a tls user has no SCRAM credential")

		sec := userSecret(Default, ku)
		Expect(metav1.IsControlledBy(sec, got)).To(BeTrue())
		clientsCA, err := getSecret(ns, controllers.ClientsCASecretName("kafka"))
		Expect(err).NotTo(HaveOccurred())
		Expect(sec.Data[controllers.UserSecretCACert]).To(Equal(clientsCA.Data[controllers.CACertKey]))
		leaf, err := pki.ParseKeyPair(sec.Data[controllers.UserSecretCert], sec.Data[controllers.UserSecretKey])
		Expect(err).NotTo(HaveOccurred())
		Expect(leaf.Cert.Subject.String()).To(Equal("CN=carol"))
		verifyLeaf(Default, leaf.Cert, clientsCA.Data[controllers.CACertKey], "", x509.ExtKeyUsageClientAuth)

		By("user.p12 holds the same key and certificate for Java clients, opened with user.password")
		p12Key, p12Cert, p12CA, err := pkcs12.DecodeChain(sec.Data[controllers.UserSecretP12], string(sec.Data[controllers.UserSecretP12Password]))
		Expect(err).NotTo(HaveOccurred())
		Expect(p12Cert.Equal(leaf.Cert)).To(BeTrue(), "user.p12's certificate is not user.crt")
		Expect(p12Key.(crypto.Signer).Public()).To(Equal(leaf.Key.Public()), "user.p12's key is not user.key")
		Expect(p12CA).To(HaveLen(1))
		Expect(pki.ParseCertificates(clientsCA.Data[controllers.CACertKey])).To(ContainElement(p12CA[0]))

		By("producing where its ACLs allow, refused elsewhere")
		cl := mtlsClient(sec.Data[controllers.UserSecretCert], sec.Data[controllers.UserSecretKey])
		Expect(produceOne(cl, "tls-orders")).To(Succeed())
		Expect(produceOne(cl, "tls-other")).To(MatchError(kerr.TopicAuthorizationFailed))

		By("a certificate of the cluster CA is not a client certificate there")
		op, err := getSecret(ns, controllers.OperatorCertSecretName("kafka"))
		Expect(err).NotTo(HaveOccurred())
		Expect(produceOne(mtlsClient(op.Data[controllers.TLSCertKey], op.Data[controllers.TLSKeyKey]), "tls-orders")).NotTo(Succeed())

		By("deleting the Secret re-issues the certificate")
		Expect(k8sClient.Delete(suiteCtx, sec)).To(Succeed())
		Eventually(func(g Gomega) {
			again := userSecret(g, ku)
			kp, err := pki.ParseKeyPair(again.Data[controllers.UserSecretCert], again.Data[controllers.UserSecretKey])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kp.Cert.SerialNumber.Cmp(leaf.Cert.SerialNumber)).NotTo(BeZero())
		}, timeout, interval).Should(Succeed())

		By("deleting the KafkaUser removes its ACLs")
		Expect(k8sClient.Delete(suiteCtx, ku)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), &strata.KafkaUser{}))
		}, timeout, interval).Should(BeTrue())
		Expect(userACLs(Default, adm, "User:CN=carol")).To(BeEmpty())
	})

	It("is not Ready while no listener of its cluster accepts client certificates, and Ready once one does", func() {
		By("a cluster with only the default SASL_SSL listener")
		updateCluster(ns, "kafka", func(kc *strata.KafkaCluster) { kc.Spec.Listeners = nil })
		DeferCleanup(updateCluster, ns, "kafka", func(kc *strata.KafkaCluster) { kc.Spec.Listeners = []strata.ListenerSpec{mtlsListener} })
		ku := newUser(ns, "erin", "kafka", strata.AuthenticationTLS)
		ku.Spec.Authorization = &strata.KafkaUserAuthorization{ACLs: []strata.KafkaUserACL{
			{Resource: strata.ACLResource{Type: strata.ACLResourceTopic, Name: "tls-orders"}, Operations: []strata.ACLOperation{"Read"}},
		}}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		got := userCondition(ku, controllers.ReasonNoClientCertificateListener)
		c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Message).To(And(ContainSubstring("protocol SSL"), ContainSubstring("tls.clientAuth required")))
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		By("its certificate and ACLs are in place meanwhile")
		Expect(userSecret(Default, ku).Data).To(HaveKey(controllers.UserSecretCert))
		Expect(userACLs(Default, adm, "User:CN=erin")).To(HaveLen(1))

		By("an SASL_SSL listener asking for certificates is not enough: its principal is the SASL user's")
		updateCluster(ns, "kafka", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "SASL_SSL", Port: 9092, Protocol: "SASL_SSL", TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequired}}}
		})
		Consistently(func(g Gomega) string {
			got := &strata.KafkaUser{}
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), got)).To(Succeed())
			return meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady).Reason
		}, 3*time.Second, interval).Should(Equal(controllers.ReasonNoClientCertificateListener))

		By("adding an SSL listener with tls.clientAuth")
		updateCluster(ns, "kafka", func(kc *strata.KafkaCluster) { kc.Spec.Listeners = append(kc.Spec.Listeners, mtlsListener) })
		userCondition(ku, controllers.ReasonUserReady)
	})

	It("moves a SCRAM user to tls: the SCRAM credential and the ACLs of User:<name> go", func() {
		ku := newUser(ns, "dave", "kafka", strata.AuthenticationScramSha512)
		ku.Spec.Authorization = &strata.KafkaUserAuthorization{ACLs: []strata.KafkaUserACL{
			{Resource: strata.ACLResource{Type: strata.ACLResourceTopic, Name: "tls-orders"}, Operations: []strata.ACLOperation{"Read"}},
		}}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		userCondition(ku, controllers.ReasonUserReady)
		Expect(userACLs(Default, adm, "User:dave")).To(HaveLen(1))
		Expect(scramCredentials(Default, adm, "dave")).To(HaveLen(1))
		Eventually(func() error {
			got := &strata.KafkaUser{}
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), got); err != nil {
				return err
			}
			got.Spec.Authentication.Type = strata.AuthenticationTLS
			return k8sClient.Update(suiteCtx, got)
		}, timeout, interval).Should(Succeed())
		got := userCondition(ku, controllers.ReasonUserReady)
		Expect(got.Status.Principal).To(Equal("User:CN=dave"))
		Expect(userACLs(Default, adm, "User:dave")).To(BeEmpty())
		Expect(userACLs(Default, adm, "User:CN=dave")).To(HaveLen(1))
		Expect(scramCredentials(Default, adm, "dave")).To(BeEmpty())
		sec := userSecret(Default, ku)
		Expect(sec.Data).To(HaveKey(controllers.UserSecretCert))
		Expect(sec.Data).NotTo(HaveKey(controllers.UserSecretPassword))
	})
})
