package controllers_test

import (
	"net"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/config/argocd"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// closedPortEndpoint returns a loopback URL on which nothing listens.
func closedPortEndpoint() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	return "http://" + addr
}

var _ = Describe("FastBucket controller", Ordered, func() {
	var (
		srv *s3server.Server
		ns  string
	)
	BeforeAll(func() {
		srv = s3server.Start(GinkgoT(), "strata-wal-a")
	})
	BeforeEach(func() {
		ns = newNamespace()
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wal-keys"},
			StringData: map[string]string{"accessKeyID": srv.AccessKey, "secretAccessKey": srv.SecretKey},
		}
		Expect(k8sClient.Create(suiteCtx, secret)).To(Succeed())
		wrong := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wrong-keys"},
			StringData: map[string]string{"accessKeyID": srv.AccessKey, "secretAccessKey": "not-the-secret"},
		}
		Expect(k8sClient.Create(suiteCtx, wrong)).To(Succeed())
		partial := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "partial-keys"},
			StringData: map[string]string{"accessKeyID": srv.AccessKey},
		}
		Expect(k8sClient.Create(suiteCtx, partial)).To(Succeed())
	})

	bucket := func(name, endpoint, bucketName, secret string) *strata.FastBucket {
		fb := &strata.FastBucket{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: strata.FastBucketSpec{
				Zone: "zone-a", Bucket: bucketName, Region: srv.Region, Endpoint: endpoint, ForcePathStyle: true,
				Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: secret}},
			},
		}
		Expect(k8sClient.Create(suiteCtx, fb)).To(Succeed())
		return fb
	}

	reachable := func(name string) func(Gomega) *metav1.Condition {
		return func(g Gomega) *metav1.Condition {
			fb := &strata.FastBucket{}
			g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, fb)).To(Succeed())
			c := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReachable)
			g.Expect(c).NotTo(BeNil())
			return c
		}
	}

	It("reports a bucket on a real S3 server as reachable, with latency", func() {
		bucket("good", srv.Endpoint, "strata-wal-a", "wal-keys")
		Eventually(reachable("good"), timeout, interval).Should(HaveField("Status", metav1.ConditionTrue))
		fb := &strata.FastBucket{}
		Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "good"}, fb)).To(Succeed())
		c := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReachable)
		Expect(c.Reason).To(Equal(controllers.ReasonProbeSucceeded))
		Expect(fb.Status.LastProbeLatency).NotTo(BeNil())
		Expect(fb.Status.LastProbeLatency.Duration).To(BeNumerically(">", 0))
		AddReportEntry("probe latency against Versity Gateway (HeadBucket+Put+Get+Delete)", fb.Status.LastProbeLatency.Duration.String())
		Expect(fb.Status.LastProbeTime).NotTo(BeNil())
		Expect(fb.Status.ObservedGeneration).To(Equal(fb.Generation))
		Expect(meta.IsStatusConditionTrue(fb.Status.Conditions, strata.ConditionReady)).To(BeTrue())
		res, err := kstatusOf(fb, "FastBucket")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Status).To(Equal(kstatus.CurrentStatus), res.Message)
		argo, err := argoHealthOf(fb)
		Expect(err).NotTo(HaveOccurred())
		Expect(argo.Status).To(Equal(argocd.Healthy), argo.Message)

		// The probe object is cleaned up.
		_, err = srv.Client().HeadObject(suiteCtx, headObject("strata-wal-a", controllers.ProbeKey))
		Expect(err).To(HaveOccurred(), "probe object left behind")
	})

	DescribeTable("reports an unreachable bucket with a reason",
		func(endpoint func() string, bucketName, secret, reason, message string) {
			name := "bad"
			bucket(name, endpoint(), bucketName, secret)
			Eventually(func(g Gomega) {
				c := reachable(name)(g)
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(reason))
				g.Expect(c.Message).To(ContainSubstring(message))
			}, timeout, interval).Should(Succeed())
		},
		Entry("closed port", closedPortEndpoint, "strata-wal-a", "wal-keys", controllers.ReasonEndpointUnreachable, "connection refused"),
		Entry("wrong secret key", func() string { return srv.Endpoint }, "strata-wal-a", "wrong-keys", controllers.ReasonAccessDenied, "credentials were rejected"),
		Entry("missing Secret", func() string { return srv.Endpoint }, "strata-wal-a", "no-such-secret", controllers.ReasonSecretNotFound, `Secret "no-such-secret" not found`),
		Entry("Secret without the secret key", func() string { return srv.Endpoint }, "strata-wal-a", "partial-keys", controllers.ReasonSecretKeyMissing, `has no key "secretAccessKey"`),
		Entry("bucket that does not exist", func() string { return srv.Endpoint }, "no-such-bucket", "wal-keys", controllers.ReasonBucketNotFound, "does not exist"),
	)

	It("marks the cluster Degraded while its bucket is unreachable", func() {
		bucket("wal-zone-a", closedPortEndpoint(), "strata-wal-a", "wal-keys")
		kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{Zones: []strata.ZoneSpec{{
			Name: "zone-a", Brokers: 1, FastBucketRef: &strata.LocalObjectReference{Name: "wal-zone-a"},
		}}}}
		createCluster(ns, "deg", kc)
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getCluster(ns, "deg").Status.Conditions, strata.ConditionDegraded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonFastBucketUnreachable))
			g.Expect(c.Message).To(ContainSubstring("wal-zone-a (zone zone-a): EndpointUnreachable"))
		}, timeout, interval).Should(Succeed())
	})
})

func headObject(bucket, key string) *s3.HeadObjectInput {
	return &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
}
