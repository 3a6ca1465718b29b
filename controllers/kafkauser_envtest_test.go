package controllers_test

import (
	"context"
	"errors"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/config/argocd"
	"github.com/strata-dev/strata/controllers"
)

// The KafkaUser specs run against one real broker process with a second,
// SASL_PLAINTEXT listener: the operator manages users over the PLAINTEXT
// listener, and franz-go clients log in on the SASL one with what the
// user's Secret holds.

func newUser(ns, name, cluster string, typ strata.KafkaUserAuthenticationType) *strata.KafkaUser {
	return &strata.KafkaUser{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: strata.KafkaUserSpec{
			ClusterRef:     strata.LocalObjectReference{Name: cluster},
			Authentication: strata.KafkaUserAuthentication{Type: typ},
		},
	}
}

// userCondition waits until ku's Ready condition has reason for its
// current generation and returns the KafkaUser.
func userCondition(ku *strata.KafkaUser, reason string) *strata.KafkaUser {
	GinkgoHelper()
	got := &strata.KafkaUser{}
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(got.Generation))
	}, timeout, interval).Should(Succeed())
	return got
}

func userSecret(g Gomega, ku *strata.KafkaUser) *corev1.Secret {
	sec := &corev1.Secret{}
	g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ku.Namespace, Name: ku.Name}, sec)).To(Succeed())
	return sec
}

// scramLogin logs in on addrs as user and makes one request that needs an
// authenticated connection.
func scramLogin(addrs []string, mechanism, user, password string) error {
	auth := scram.Auth{User: user, Pass: password}
	var m sasl.Mechanism = auth.AsSha512Mechanism()
	if mechanism == "SCRAM-SHA-256" {
		m = auth.AsSha256Mechanism()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.SASL(m), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(suiteCtx, 20*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
	return err
}

// scramCredentials is what the brokers hold for user: mechanism → iterations.
func scramCredentials(g Gomega, adm *kadm.Client, user string) map[string]int32 {
	d, err := adm.DescribeUserSCRAMs(suiteCtx, user)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]int32{}
	u, ok := d[user]
	if !ok || errors.Is(u.Err, kerr.ResourceNotFound) {
		return out
	}
	g.Expect(u.Err).NotTo(HaveOccurred())
	for _, c := range u.CredInfos {
		out[c.Mechanism.String()] = c.Iterations
	}
	return out
}

// userTestCluster is what the KafkaUser specs run against: KafkaCluster
// "kafka" with one broker in zone a and no WAL, in a new namespace, with
// loopback brokers behind it, and topics created. With mtls the brokers
// get an SSL listener that takes certificates of the clients CA, and the
// cluster the matching listener (mtlsListener) and its FastBucket, so
// that the operator issues the CAs the brokers wait for; otherwise SASL
// brokers start first (nothing of the operator needed) and the cluster
// comes after. withACLs runs the brokers' authorizer with the operator's
// super users and User:ANONYMOUS (the specs' admin client, replication
// on PLAINTEXT).
func userTestCluster(mtls, withACLs bool, topics ...string) (ns string, lb *loopbackCluster, adm *kadm.Client) {
	GinkgoHelper()
	return userTestClusterWith(nil, mtls, withACLs, topics...)
}

// userTestClusterWith is userTestCluster with further broker options.
func userTestClusterWith(opts []brokertest.Option, mtls, withACLs bool, topics ...string) (ns string, lb *loopbackCluster, adm *kadm.Client) {
	GinkgoHelper()
	ns = newNamespace()
	kc := clusterSpec(map[string]int32{"a": 1}, "a")
	kc.Spec.WAL.Enabled = ptr.To(false)
	kc.Namespace, kc.Name = ns, "kafka"
	if withACLs {
		opts = append(opts, brokertest.WithSetting("authorizer.class.name", "strata.acl"),
			brokertest.WithSetting("super.users", strings.Join(append(controllers.SuperUsers(kc), "User:ANONYMOUS"), ";")))
	}
	if mtls {
		makeBucket(ns, "wal-a", "a")
		kc.Spec.Listeners = []strata.ListenerSpec{mtlsListener}
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		lb = startMTLSLoopbackBrokers(kc, opts...)
	} else {
		lb = startSASLLoopbackBrokers(kc, opts...)
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
	}
	adm = lb.Admin()
	for _, topic := range topics {
		res, err := adm.CreateTopic(suiteCtx, 1, 1, nil, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Err).NotTo(HaveOccurred())
	}
	return ns, lb, adm
}

var _ = Describe("KafkaUser controller", Ordered, func() {
	var (
		ns  string
		lb  *loopbackCluster
		adm *kadm.Client
	)
	BeforeAll(func() { ns, lb, adm = userTestCluster(false, false) })

	It("writes the credentials to a Secret clients log in with, rotates the password from the Secret, and removes the credentials on delete", func() {
		ku := newUser(ns, "alice", "kafka", strata.AuthenticationScramSha512)
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		got := userCondition(ku, controllers.ReasonUserReady)
		Expect(got.Status.Username).To(Equal("alice"))
		Expect(got.Status.SecretName).To(Equal("alice"))
		Expect(got.Status.Mechanism).To(Equal("SCRAM-SHA-512"))
		Expect(got.Finalizers).To(ContainElement(controllers.UserFinalizer))
		res, err := kstatusOf(got, "KafkaUser")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Status).To(Equal(kstatus.CurrentStatus))
		argo, err := argoHealthOf(got)
		Expect(err).NotTo(HaveOccurred())
		Expect(argo.Status).To(Equal(argocd.Healthy), argo.Message)

		var password string
		Eventually(func(g Gomega) {
			sec := userSecret(g, ku)
			g.Expect(metav1.IsControlledBy(sec, got)).To(BeTrue(), "the Secret is owned by the KafkaUser")
			g.Expect(sec.Labels).To(HaveKeyWithValue(controllers.LabelManagedBy, controllers.ManagedBy))
			password = string(sec.Data[controllers.UserSecretPassword])
			g.Expect(password).To(HaveLen(26))
			g.Expect(string(sec.Data[controllers.UserSecretUsername])).To(Equal("alice"))
			g.Expect(string(sec.Data[controllers.UserSecretMechanism])).To(Equal("SCRAM-SHA-512"))
			g.Expect(string(sec.Data[controllers.UserSecretJAAS])).To(Equal(
				`org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="` + password + `";`))
		}, timeout, interval).Should(Succeed())
		Expect(scramCredentials(Default, adm, "alice")).To(Equal(map[string]int32{"SCRAM-SHA-512": controllers.ScramIterations}))
		Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-512", "alice", password)).To(Succeed())
		Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-512", "alice", "wrong")).To(MatchError(kerr.SaslAuthenticationFailed))

		By("rotating the password in the Secret")
		Eventually(func() error {
			sec := &corev1.Secret{}
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), sec); err != nil {
				return err
			}
			sec.Data[controllers.UserSecretPassword] = []byte("alice-rotated-1")
			return k8sClient.Update(suiteCtx, sec)
		}, timeout, interval).Should(Succeed())
		Eventually(func() error {
			return scramLogin(lb.SASLAddrs(), "SCRAM-SHA-512", "alice", "alice-rotated-1")
		}, timeout, interval).Should(Succeed())
		Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-512", "alice", password)).To(MatchError(kerr.SaslAuthenticationFailed))
		Eventually(func(g Gomega) {
			g.Expect(string(userSecret(g, ku).Data[controllers.UserSecretJAAS])).To(ContainSubstring(`password="alice-rotated-1";`))
		}, timeout, interval).Should(Succeed())

		By("deleting the KafkaUser")
		Expect(k8sClient.Delete(suiteCtx, ku)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), &strata.KafkaUser{}))
		}, timeout, interval).Should(BeTrue())
		Expect(scramCredentials(Default, adm, "alice")).To(BeEmpty())
		Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-512", "alice", "alice-rotated-1")).To(MatchError(kerr.SaslAuthenticationFailed))
	})

	It("takes the password from a Secret it names, follows changes there, and keeps one mechanism", func() {
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bob-password"}, Data: map[string][]byte{"pw": []byte("bob-secret-1")}}
		Expect(k8sClient.Create(suiteCtx, src)).To(Succeed())
		ku := newUser(ns, "bob", "kafka", strata.AuthenticationScramSha256)
		ku.Spec.Authentication.Password = &strata.KafkaUserPassword{ValueFrom: strata.KafkaUserPasswordSource{
			SecretKeyRef: strata.SecretKeySelector{Name: "bob-password", Key: "pw"}}}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())

		By("refusing the Secret until it is labelled for KafkaUsers")
		got := userCondition(ku, controllers.ReasonPasswordSecretNotLabelled)
		c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
		Expect(c.Message).To(Equal("password Secret bob-password (spec.authentication.password) is not labelled kafka.strata.dev/secret-access=true: label it to let KafkaUsers of namespace " + ns + " read it"))
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		Expect(scramCredentials(Default, adm, "bob")).To(BeEmpty())
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "bob"}, &corev1.Secret{})).NotTo(Succeed(), "the user's Secret was written from an unlabelled Secret")
		src.Labels = map[string]string{controllers.LabelSecretAccess: "true"}
		Expect(k8sClient.Update(suiteCtx, src)).To(Succeed())
		userCondition(ku, controllers.ReasonUserReady)
		Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-256", "bob", "bob-secret-1")).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(string(userSecret(g, ku).Data[controllers.UserSecretPassword])).To(Equal("bob-secret-1"))
		}, timeout, interval).Should(Succeed())

		By("changing the password in the named Secret (found by the resync)")
		src.Data["pw"] = []byte("bob-secret-2")
		Expect(k8sClient.Update(suiteCtx, src)).To(Succeed())
		Eventually(func() error {
			return scramLogin(lb.SASLAddrs(), "SCRAM-SHA-256", "bob", "bob-secret-2")
		}, timeout, interval).Should(Succeed())

		By("switching to SCRAM-SHA-512")
		Eventually(func() error {
			got := &strata.KafkaUser{}
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), got); err != nil {
				return err
			}
			got.Spec.Authentication.Type = strata.AuthenticationScramSha512
			return k8sClient.Update(suiteCtx, got)
		}, timeout, interval).Should(Succeed())
		got = userCondition(ku, controllers.ReasonUserReady)
		Expect(got.Status.Mechanism).To(Equal("SCRAM-SHA-512"))
		Expect(scramCredentials(Default, adm, "bob")).To(Equal(map[string]int32{"SCRAM-SHA-512": controllers.ScramIterations}))
		Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-512", "bob", "bob-secret-2")).To(Succeed())
		Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-256", "bob", "bob-secret-2")).To(MatchError(kerr.SaslAuthenticationFailed))

		By("re-setting a credential deleted with other tools")
		res, err := adm.AlterUserSCRAMs(suiteCtx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Error()).NotTo(HaveOccurred())
		Eventually(func() error {
			return scramLogin(lb.SASLAddrs(), "SCRAM-SHA-512", "bob", "bob-secret-2")
		}, timeout, interval).Should(Succeed())
	})

	It("reports a missing password Secret and a Secret of its name that it does not own, and takes neither over", func() {
		ku := newUser(ns, "carol", "kafka", strata.AuthenticationScramSha512)
		ku.Spec.Authentication.Password = &strata.KafkaUserPassword{ValueFrom: strata.KafkaUserPasswordSource{
			SecretKeyRef: strata.SecretKeySelector{Name: "carol-password", Key: "password"}}}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		got := userCondition(ku, controllers.ReasonPasswordSecretNotFound)
		c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
		Expect(c.Message).To(Equal("password Secret carol-password (spec.authentication.password) not found in namespace " + ns))
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		Expect(scramCredentials(Default, adm, "carol")).To(BeEmpty())

		// dave exists in Kafka already, made with other tools.
		res, err := adm.AlterUserSCRAMs(suiteCtx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "daves-own"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Error()).NotTo(HaveOccurred())
		mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dave"}, Data: map[string][]byte{"password": []byte("not-yours")}}
		Expect(k8sClient.Create(suiteCtx, mine)).To(Succeed())
		dave := newUser(ns, "dave", "kafka", strata.AuthenticationScramSha512)
		Expect(k8sClient.Create(suiteCtx, dave)).To(Succeed())
		got = userCondition(dave, controllers.ReasonSecretConflict)
		c = meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
		Expect(c.Message).To(Equal("Secret dave exists and is not this KafkaUser's; the operator does not take it over: delete or rename it"))
		ks, err := kstatusOf(got, "KafkaUser")
		Expect(err).NotTo(HaveOccurred())
		Expect(ks.Status).To(Equal(kstatus.FailedStatus))
		argo, err := argoHealthOf(got)
		Expect(err).NotTo(HaveOccurred())
		Expect(argo).To(Equal(argocd.HealthStatus{Status: argocd.Degraded, Message: c.Reason + ": " + c.Message}))
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(mine), mine)).To(Succeed())
		Expect(mine.Data).To(Equal(map[string][]byte{"password": []byte("not-yours")}))
		Expect(mine.OwnerReferences).To(BeEmpty())
		Expect(scramCredentials(Default, adm, "dave")).To(Equal(map[string]int32{"SCRAM-SHA-256": 8192}))

		By("deleting the refused users")
		Expect(k8sClient.Delete(suiteCtx, ku)).To(Succeed())
		Expect(k8sClient.Delete(suiteCtx, dave)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(dave), &strata.KafkaUser{}))
		}, timeout, interval).Should(BeTrue())
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(mine), mine)).To(Succeed())
		Expect(scramCredentials(Default, adm, "dave")).To(Equal(map[string]int32{"SCRAM-SHA-256": 8192}),
			"deleting a KafkaUser that never managed its Kafka user deleted that user's credential")
		Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-256", "dave", "daves-own")).To(Succeed())
	})

	It("sets the credential and reports AclsNotSupported for ACLs brokers without the ACL APIs cannot hold", func() {
		ku := newUser(ns, "erin", "kafka", strata.AuthenticationScramSha512)
		ku.Spec.Authorization = &strata.KafkaUserAuthorization{ACLs: []strata.KafkaUserACL{{
			Resource:   strata.ACLResource{Type: strata.ACLResourceTopic, Name: "orders", PatternType: strata.ACLPatternLiteral},
			Operations: []strata.ACLOperation{"Read", "Describe"},
		}}}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		got := userCondition(ku, controllers.ReasonAclsNotSupported)
		c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReady)
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Message).To(HavePrefix("the brokers of KafkaCluster kafka cannot hold ACLs ("))
		Expect(c.Message).To(HaveSuffix("): the credential of user erin is set, its 2 ACL bindings are not"))
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		Expect(got.Status.ACLCount).To(BeZero())
		Eventually(func(g Gomega) {
			pw := string(userSecret(g, ku).Data[controllers.UserSecretPassword])
			g.Expect(scramLogin(lb.SASLAddrs(), "SCRAM-SHA-512", "erin", pw)).To(Succeed())
		}, timeout, interval).Should(Succeed())

		By("dropping the ACLs from the spec")
		Eventually(func() error {
			got := &strata.KafkaUser{}
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), got); err != nil {
				return err
			}
			got.Spec.Authorization = nil
			return k8sClient.Update(suiteCtx, got)
		}, timeout, interval).Should(Succeed())
		userCondition(ku, controllers.ReasonUserReady)
	})
})

var _ = Describe("KafkaUser validation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	valid := func() *strata.KafkaUser {
		ku := newUser(ns, "v", "demo", strata.AuthenticationScramSha512)
		ku.Spec.Authorization = &strata.KafkaUserAuthorization{ACLs: []strata.KafkaUserACL{
			{Resource: strata.ACLResource{Type: strata.ACLResourceTopic, Name: "orders"}, Operations: []strata.ACLOperation{"Read"}},
		}}
		return ku
	}
	acl := func(ku *strata.KafkaUser) *strata.KafkaUserACL { return &ku.Spec.Authorization.ACLs[0] }

	It("accepts every resource type and defaults host, pattern and rule type", func() {
		ku := valid()
		ku.Spec.Authorization.ACLs = append(ku.Spec.Authorization.ACLs,
			strata.KafkaUserACL{Resource: strata.ACLResource{Type: strata.ACLResourceGroup, Name: "app-", PatternType: strata.ACLPatternPrefixed}, Operations: []strata.ACLOperation{"Read"}},
			strata.KafkaUserACL{Resource: strata.ACLResource{Type: strata.ACLResourceCluster}, Operations: []strata.ACLOperation{"IdempotentWrite", "DescribeConfigs"}, Type: strata.ACLDeny, Host: "10.0.0.1"},
			strata.KafkaUserACL{Resource: strata.ACLResource{Type: strata.ACLResourceTransactionalID, Name: "*"}, Operations: []strata.ACLOperation{"Write"}, Host: "fd00::1"},
		)
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		a := ku.Spec.Authorization.ACLs[0]
		Expect(a.Host).To(Equal("*"))
		Expect(a.Type).To(Equal(strata.ACLAllow))
		Expect(a.Resource.PatternType).To(Equal(strata.ACLPatternLiteral))

		By("refusing a change of clusterRef")
		var err error
		Eventually(func() bool { // the controller adds its finalizer meanwhile
			got := &strata.KafkaUser{}
			Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), got)).To(Succeed())
			got.Spec.ClusterRef.Name = "other"
			err = k8sClient.Update(suiteCtx, got)
			return apierrors.IsConflict(err)
		}, timeout, interval).Should(BeFalse())
		expectRejected(err, "clusterRef is immutable")
	})

	DescribeTable("rejects invalid KafkaUsers",
		func(mutate func(*strata.KafkaUser), messages ...string) {
			ku := valid()
			mutate(ku)
			expectRejected(k8sClient.Create(suiteCtx, ku), messages...)
		},
		Entry("a tls user with a password", func(ku *strata.KafkaUser) {
			ku.Spec.Authentication.Type = strata.AuthenticationTLS
			ku.Spec.Authentication.Password = &strata.KafkaUserPassword{ValueFrom: strata.KafkaUserPasswordSource{
				SecretKeyRef: strata.SecretKeySelector{Name: "pw", Key: "password"}}}
		}, "a tls user has no password: its credential is the client certificate the operator issues from the clients CA"),
		Entry("the brokers' name", func(ku *strata.KafkaUser) { ku.Name = "strata-broker" },
			"KafkaUser names strata-broker, strata-operator and strata-etcd are reserved"),
		Entry("the operator's name", func(ku *strata.KafkaUser) { ku.Name = "strata-operator" },
			"KafkaUser names strata-broker, strata-operator and strata-etcd are reserved"),
		Entry("an unknown authentication type", func(ku *strata.KafkaUser) { ku.Spec.Authentication.Type = "plain" },
			"spec.authentication.type", `supported values: "scram-sha-512", "scram-sha-256", "tls"`),
		Entry("the user's own Secret as password source", func(ku *strata.KafkaUser) {
			ku.Spec.Authentication.Password = &strata.KafkaUserPassword{ValueFrom: strata.KafkaUserPasswordSource{
				SecretKeyRef: strata.SecretKeySelector{Name: "v", Key: "password"}}}
		}, "the password Secret must not be the KafkaUser's own Secret (the operator writes that one): name another Secret"),
		Entry("a named cluster resource", func(ku *strata.KafkaUser) {
			acl(ku).Resource = strata.ACLResource{Type: strata.ACLResourceCluster, Name: "kafka-cluster"}
			acl(ku).Operations = []strata.ACLOperation{"Describe"}
		}, "a cluster resource has no name: it is the whole cluster"),
		Entry("a prefixed cluster resource", func(ku *strata.KafkaUser) {
			acl(ku).Resource = strata.ACLResource{Type: strata.ACLResourceCluster, PatternType: strata.ACLPatternPrefixed}
			acl(ku).Operations = []strata.ACLOperation{"Describe"}
		}, "a cluster resource has no name to match a prefix against: patternType must be literal"),
		Entry("a topic without a name", func(ku *strata.KafkaUser) { acl(ku).Resource.Name = "" },
			`a topic, group or transactionalId resource needs a name ("*" for all)`),
		Entry("a prefixed wildcard", func(ku *strata.KafkaUser) {
			acl(ku).Resource.Name, acl(ku).Resource.PatternType = "*", strata.ACLPatternPrefixed
		}, `a prefixed resource needs a name prefix, not "*" (use patternType literal with name "*" for all)`),
		Entry("Write on a group", func(ku *strata.KafkaUser) {
			acl(ku).Resource = strata.ACLResource{Type: strata.ACLResourceGroup, Name: "g"}
			acl(ku).Operations = []strata.ACLOperation{"Read", "Write"}
		}, "operations on a group must be among All, Read, Describe, Delete"),
		Entry("IdempotentWrite on a topic", func(ku *strata.KafkaUser) { acl(ku).Operations = []strata.ACLOperation{"IdempotentWrite"} },
			"operations on a topic must be among All, Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs"),
		Entry("Read on the cluster", func(ku *strata.KafkaUser) {
			acl(ku).Resource = strata.ACLResource{Type: strata.ACLResourceCluster}
		}, "operations on the cluster must be among All, Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe"),
		Entry("Read on a transactionalId", func(ku *strata.KafkaUser) {
			acl(ku).Resource = strata.ACLResource{Type: strata.ACLResourceTransactionalID, Name: "tx"}
		}, "operations on a transactionalId must be among All, Describe, Write"),
		Entry("no operations", func(ku *strata.KafkaUser) { acl(ku).Operations = nil },
			"spec.authorization.acls[0].operations", "Required value"),
		Entry("an unknown operation", func(ku *strata.KafkaUser) { acl(ku).Operations = []strata.ACLOperation{"Any"} },
			"spec.authorization.acls[0].operations[0]", "Unsupported value"),
		Entry("a host name", func(ku *strata.KafkaUser) { acl(ku).Host = "client.example.com" },
			`host must be "*" or an IP address`),
		Entry("an unknown resource type", func(ku *strata.KafkaUser) { acl(ku).Resource.Type = "user" },
			"spec.authorization.acls[0].resource.type", "Unsupported value"),
	)
})
