package controllers_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/controllers"
)

// describedUserQuotas are the quota values the brokers hold for user
// entity name alone.
func describedUserQuotas(g Gomega, adm *kadm.Client, name string) map[string]float64 {
	res, err := adm.DescribeClientQuotas(suiteCtx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &name}})
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, e := range res {
		for _, v := range e.Values {
			out[v.Key] = v.Value
		}
	}
	return out
}

type quotaThrottles struct{ n atomic.Int64 }

func (h *quotaThrottles) OnBrokerThrottle(_ kgo.BrokerMetadata, _ time.Duration, _ bool) { h.n.Add(1) }

var _ = Describe("KafkaUser quotas", Ordered, func() {
	var (
		ns  string
		lb  *loopbackCluster
		adm *kadm.Client
	)
	// Rates sampled over 3 windows of 1 s (not Kafka's 11): the
	// producer below reaches the quota's steady state within seconds.
	BeforeAll(func() {
		ns, lb, adm = userTestClusterWith([]brokertest.Option{brokertest.WithSetting("quota.window.num", "3")}, false, false, "quota")
	})

	It("sets spec.quotas as the user's client quotas, which hold its producer to the rate, changes and removes them with the spec, and deletes them with the user", func() {
		const rate = 128 << 10
		ku := newUser(ns, "quinn", "kafka", strata.AuthenticationScramSha512)
		ku.Spec.Quotas = &strata.KafkaUserQuotas{ProducerByteRate: ptr.To[int64](rate), ConsumerByteRate: ptr.To[int64](4 * rate)}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		userCondition(ku, controllers.ReasonUserReady)
		Expect(describedUserQuotas(Default, adm, "quinn")).To(Equal(map[string]float64{"producer_byte_rate": rate, "consumer_byte_rate": 4 * rate}))

		By("producing as the user: throttled to the quota")
		var password string
		Eventually(func(g Gomega) {
			password = string(userSecret(g, ku).Data[controllers.UserSecretPassword])
			g.Expect(password).NotTo(BeEmpty())
		}, timeout, interval).Should(Succeed())
		h := &quotaThrottles{}
		cl := userClient(lb.SASLAddrs(), "quinn", password, kgo.DefaultProduceTopic("quota"), kgo.WithHooks(h),
			kgo.ProducerBatchMaxBytes(16<<10), kgo.MaxBufferedRecords(100), kgo.ProducerBatchCompression(kgo.NoCompression()))
		value := []byte(strings.Repeat("q", 1000))
		var acked atomic.Int64
		ctx, cancel := context.WithTimeout(suiteCtx, time.Minute)
		defer cancel()
		// Past the first span (3 windows of 1 s, measured over at least
		// 2): what is sent after it follows the quota.
		start := time.Now()
		var from time.Time
		var fromBytes int64
		for time.Since(start) < 9*time.Second {
			if from.IsZero() && time.Since(start) >= 3*time.Second {
				from, fromBytes = time.Now(), acked.Load()
			}
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
		got := float64(acked.Load()-fromBytes) / time.Since(from).Seconds()
		Expect(cl.Flush(ctx)).To(Succeed())
		AddReportEntry("franz-go as user quinn", fmt.Sprintf("%.0f B/s of record values after the first span (quota %d B/s), %d throttles", got, rate, h.n.Load()))
		Expect(h.n.Load()).To(BeNumerically(">", 0), "no answer carried a throttle time")
		Expect(got).To(BeNumerically("<=", rate*1.1))

		By("producing as the user with kcat (librdkafka): held to the quota too")
		kcat := "/usr/bin/kcat"
		if p := os.Getenv("STRATA_KCAT"); p != "" {
			kcat = p
		}
		const kcatBytes = 1000 * 1000
		kctx, kcancel := context.WithTimeout(suiteCtx, 2*time.Minute)
		defer kcancel()
		cmd := exec.CommandContext(kctx, kcat, "-b", strings.Join(lb.SASLAddrs(), ","), "-P", "-t", "quota",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=quinn", "-X", "sasl.password="+password, "-X", "acks=all", "-X", "batch.size=16384")
		cmd.Stdin = strings.NewReader(strings.Repeat(strings.Repeat("k", 999)+"\n", kcatBytes/1000))
		kstart := time.Now()
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "kcat: %s", out)
		elapsed := time.Since(kstart)
		// The first span allows 2 s of the quota at once; the rest goes at
		// most at the quota (10 % of slack).
		quota := float64(rate)
		least := time.Duration((kcatBytes - 2*quota) / (quota * 1.1) * float64(time.Second))
		AddReportEntry("kcat as user quinn", fmt.Sprintf("%d B in %v (%.0f B/s overall, quota %d B/s, at least %v)", kcatBytes, elapsed, kcatBytes/elapsed.Seconds(), rate, least))
		Expect(elapsed).To(BeNumerically(">=", least), "kcat produced faster than the quota allows")

		By("changing one quota and taking the other out of the spec")
		Eventually(func() error {
			cur := &strata.KafkaUser{}
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), cur); err != nil {
				return err
			}
			cur.Spec.Quotas = &strata.KafkaUserQuotas{ProducerByteRate: ptr.To[int64](2 * rate)}
			return k8sClient.Update(suiteCtx, cur)
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(describedUserQuotas(g, adm, "quinn")).To(Equal(map[string]float64{"producer_byte_rate": 2 * rate}))
		}, timeout, interval).Should(Succeed())

		By("refusing a quota of 0 in the API server")
		bad := newUser(ns, "zero", "kafka", strata.AuthenticationScramSha512)
		bad.Spec.Quotas = &strata.KafkaUserQuotas{ConsumerByteRate: ptr.To[int64](0)}
		err = k8sClient.Create(suiteCtx, bad)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("consumerByteRate"))

		By("deleting the KafkaUser")
		Expect(k8sClient.Delete(suiteCtx, ku)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), &strata.KafkaUser{}))
		}, timeout, interval).Should(BeTrue())
		Expect(describedUserQuotas(Default, adm, "quinn")).To(BeEmpty())
	})

	It("sets requestPercentage and controllerMutationRate as request_percentage and controller_mutation_rate, removes them with the spec, refuses 0, and deletes them with the user", func() {
		ku := newUser(ns, "rita", "kafka", strata.AuthenticationScramSha512)
		ku.Spec.Quotas = &strata.KafkaUserQuotas{RequestPercentage: ptr.To[int32](150), ControllerMutationRate: ptr.To[int32](2)}
		Expect(k8sClient.Create(suiteCtx, ku)).To(Succeed())
		userCondition(ku, controllers.ReasonUserReady)
		Expect(describedUserQuotas(Default, adm, "rita")).To(Equal(map[string]float64{"request_percentage": 150, "controller_mutation_rate": 2}))

		By("changing requestPercentage and taking controllerMutationRate out of the spec")
		Eventually(func() error {
			cur := &strata.KafkaUser{}
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), cur); err != nil {
				return err
			}
			cur.Spec.Quotas = &strata.KafkaUserQuotas{RequestPercentage: ptr.To[int32](40)}
			return k8sClient.Update(suiteCtx, cur)
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(describedUserQuotas(g, adm, "rita")).To(Equal(map[string]float64{"request_percentage": 40}))
		}, timeout, interval).Should(Succeed())

		By("refusing 0 for either in the API server")
		for field, q := range map[string]*strata.KafkaUserQuotas{
			"requestPercentage":      {RequestPercentage: ptr.To[int32](0)},
			"controllerMutationRate": {ControllerMutationRate: ptr.To[int32](0)},
		} {
			bad := newUser(ns, "zero-"+strings.ToLower(field), "kafka", strata.AuthenticationScramSha512)
			bad.Spec.Quotas = q
			err := k8sClient.Create(suiteCtx, bad)
			Expect(err).To(HaveOccurred(), field)
			Expect(err.Error()).To(ContainSubstring(field))
		}

		By("deleting the KafkaUser")
		Expect(k8sClient.Delete(suiteCtx, ku)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ku), &strata.KafkaUser{}))
		}, timeout, interval).Should(BeTrue())
		Expect(describedUserQuotas(Default, adm, "rita")).To(BeEmpty())
	})
})
