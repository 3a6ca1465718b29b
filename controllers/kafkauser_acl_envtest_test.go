package controllers_test

import (
	"context"
	"errors"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// userACLs are the ACL bindings the brokers hold for principal, as
// "PERMISSION OPERATION PATTERN TYPE name host" strings.
func userACLs(g Gomega, adm *kadm.Client, principal string) []string {
	b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations().
		Allow(principal).AllowHosts().Deny(principal).DenyHosts()
	res, err := adm.DescribeACLs(suiteCtx, b)
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, r := range res {
		g.Expect(r.Err).NotTo(HaveOccurred())
		for _, d := range r.Described {
			out = append(out, controllers.ACLBinding{Resource: d.Type, Name: d.Name, Pattern: d.Pattern, Operation: d.Operation, Host: d.Host, Permission: d.Permission}.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// userClient is a franz-go client logged in as user with SCRAM-SHA-512.
func userClient(addrs []string, user, password string, opts ...kgo.Opt) *kgo.Client {
	GinkgoHelper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cl.Close)
	return cl
}

func produceOne(cl *kgo.Client, topic string) error {
	ctx, cancel := context.WithTimeout(suiteCtx, 20*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

var _ = Describe("KafkaUser ACLs", Ordered, func() {
	var (
		ns  string
		lb  *loopbackCluster
		adm *kadm.Client
	)
	BeforeAll(func() { ns, lb, adm = userTestCluster(false, true, "orders", "other") })

	It("creates the spec's ACLs, which the brokers enforce, removes ACLs added with other tools, and deletes them with the user", func() {
		ku := newUser(ns, "frank", "kafka", strata.AuthenticationScramSha512)
		ku.Spec.Authorization = &strata.KafkaUserAuthorization{ACLs: []strata.KafkaUserACL{
			{Resource: strata.ACLResource{Type: strata.ACLResourceTopic, Name: "orders"}, Operations: []strata.ACLOperation{"Read", "Write", "Describe"}},
			{Resource: strata.ACLResource{Type: strata.ACLResourceGroup, Name: "frank-", PatternType: strata.ACLPatternPrefixed}, Operations: []strata.ACLOperation{"Read"}},
		}}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		got := userCondition(ku, controllers.ReasonUserReady)
		Expect(got.Status.ACLCount).To(Equal(int32(4)))
		want := []string{
			`ALLOW DESCRIBE on LITERAL TOPIC "orders" from *`,
			`ALLOW READ on LITERAL TOPIC "orders" from *`,
			`ALLOW READ on PREFIXED GROUP "frank-" from *`,
			`ALLOW WRITE on LITERAL TOPIC "orders" from *`,
		}
		Expect(userACLs(Default, adm, "User:frank")).To(Equal(want))

		var password string
		Eventually(func(g Gomega) {
			password = string(userSecret(g, ku).Data[controllers.UserSecretPassword])
			g.Expect(password).NotTo(BeEmpty())
		}, timeout, interval).Should(Succeed())
		cl := userClient(lb.SASLAddrs(), "frank", password)
		Expect(produceOne(cl, "orders")).To(Succeed())
		Expect(produceOne(cl, "other")).To(MatchError(kerr.TopicAuthorizationFailed))
		consumer := userClient(lb.SASLAddrs(), "frank", password, kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("frank-app"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		Eventually(func(g Gomega) {
			ctx, cancel := context.WithTimeout(suiteCtx, 5*time.Second)
			defer cancel()
			fs := consumer.PollFetches(ctx)
			for _, e := range fs.Errors() {
				g.Expect(errors.Is(e.Err, context.DeadlineExceeded)).To(BeTrue(), "%v", e.Err)
			}
			g.Expect(fs.NumRecords()).To(BeNumerically(">", 0))
		}, timeout, interval).Should(Succeed())

		By("removing an ACL of the principal added with other tools (resync)")
		res, err := adm.CreateACLs(suiteCtx, kadm.NewACLs().Topics("other").Operations(kadm.OpWrite).Allow("User:frank").ResourcePatternType(kadm.ACLPatternLiteral))
		Expect(err).NotTo(HaveOccurred())
		Expect(res[0].Err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(userACLs(g, adm, "User:frank")).To(Equal(want))
		}, timeout, interval).Should(Succeed())

		By("taking Write away in the spec")
		Eventually(func() error {
			got := &strata.KafkaUser{}
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), got); err != nil {
				return err
			}
			got.Spec.Authorization.ACLs[0].Operations = []strata.ACLOperation{"Read", "Describe"}
			return k8sClient.Update(suiteCtx, got)
		}, timeout, interval).Should(Succeed())
		got = userCondition(ku, controllers.ReasonUserReady)
		Expect(got.Status.ACLCount).To(Equal(int32(3)))
		Expect(userACLs(Default, adm, "User:frank")).To(Equal(slices.Delete(slices.Clone(want), 3, 4)))
		Eventually(func() error { return produceOne(cl, "orders") }, timeout, interval).Should(MatchError(kerr.TopicAuthorizationFailed))

		By("deleting the KafkaUser")
		Expect(k8sClient.Delete(suiteCtx, ku)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), &strata.KafkaUser{}))
		}, timeout, interval).Should(BeTrue())
		Expect(userACLs(Default, adm, "User:frank")).To(BeEmpty())
		Expect(scramCredentials(Default, adm, "frank")).To(BeEmpty())
	})
})
