package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// TestRefusedFastBucketIsNotRendered runs the operator with the bucket
// policy it ships with (no --allow-* flags) against its own kube-apiserver:
// the Ginkgo suite's operator allows plain-http buckets, because its S3
// server is Versity on http, so a refusal cannot be seen there.
//
// A KafkaCluster whose zone references a FastBucket the policy refuses is
// Stalled with reason FastBucketRefused and the bucket's refusal, and no
// broker config is written for it; a running cluster whose bucket becomes
// refused is Stalled and its brokers' config keeps the bucket they run
// with; fixing the bucket lets the cluster go on.
func TestRefusedFastBucketIsNotRendered(t *testing.T) {
	g := NewWithT(t)
	isolateAWSEnv(t)
	env, err := newTestEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	c, mgr, err := newTestManager(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(controllers.SetupWithManager(mgr)).To(Succeed()) // the default BucketPolicy
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	const ns = "refused"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wal-keys"},
		StringData: map[string]string{"accessKeyID": "id", "secretAccessKey": "secret"},
	})).To(Succeed())
	bucket := func(name, endpoint string) {
		g.Expect(c.Create(ctx, &strata.FastBucket{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: strata.FastBucketSpec{
				Zone: "zone-a", Bucket: "strata-wal-a", Region: "us-east-1", Endpoint: endpoint, ForcePathStyle: true,
				Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "wal-keys"}},
			},
		})).To(Succeed())
	}
	cluster := func(name, bucket string) {
		g.Expect(c.Create(ctx, &strata.KafkaCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: strata.KafkaClusterSpec{Zones: []strata.ZoneSpec{{
				Name: "zone-a", Brokers: 1, FastBucketRef: &strata.LocalObjectReference{Name: bucket},
			}}},
		})).To(Succeed())
	}
	getCluster := func(g Gomega, name string) *strata.KafkaCluster {
		kc := &strata.KafkaCluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kc)).To(Succeed())
		return kc
	}
	// brokerConfig is zone-a's broker config of a cluster, "" when none
	// was written.
	brokerConfig := func(g Gomega, name string) string {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: controllers.ZoneConfigMapName(name, "zone-a")}, cm)
		if apierrors.IsNotFound(err) {
			return ""
		}
		g.Expect(err).NotTo(HaveOccurred())
		return cm.Data[controllers.BrokerConfigFile]
	}
	stalledByRefusal := func(kc *strata.KafkaCluster) *metav1.Condition {
		s := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionStalled)
		if s == nil || s.Status != metav1.ConditionTrue || s.Reason != controllers.ReasonFastBucketRefused {
			return nil
		}
		return s
	}
	const timeout, interval = 2 * time.Minute, 100 * time.Millisecond

	// A new cluster on a refused bucket: once its generation is reconciled
	// (the broker config would have been written before the status), no
	// config exists and it is Stalled with the bucket's refusal.
	bucket("wal-insecure", "http://127.0.0.1:1")
	cluster("fresh", "wal-insecure")
	g.Eventually(func(g Gomega) {
		kc := getCluster(g, "fresh")
		g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
	}, timeout, interval).Should(Succeed())
	g.Expect(brokerConfig(g, "fresh")).To(BeEmpty(), "a broker config was rendered for the refused FastBucket")
	s := stalledByRefusal(getCluster(g, "fresh"))
	g.Expect(s).NotTo(BeNil(), "conditions: %+v", getCluster(g, "fresh").Status.Conditions)
	g.Expect(s.Message).To(And(ContainSubstring(`FastBucket "wal-insecure"`), ContainSubstring(controllers.ReasonInsecureEndpointNotAllowed),
		ContainSubstring("--allow-insecure-endpoints")))

	// A running cluster on an allowed bucket (https: the probe fails, the
	// bucket is still used) whose bucket is then edited to plain http.
	const good, bad = "https://127.0.0.1:1", "http://127.0.0.1:2"
	bucket("wal-a", good)
	cluster("running", "wal-a")
	g.Eventually(func(g Gomega) string { return brokerConfig(g, "running") }, timeout, interval).
		Should(ContainSubstring("wal.bucket.endpoint=" + good))
	g.Eventually(func() error {
		fb := &strata.FastBucket{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wal-a"}, fb); err != nil {
			return err
		}
		fb.Spec.Endpoint = bad
		return c.Update(ctx, fb)
	}, timeout, interval).Should(Succeed())
	// Whichever comes first: the refusal, or the brokers' config naming
	// the refused endpoint.
	g.Eventually(func(g Gomega) bool {
		return stalledByRefusal(getCluster(g, "running")) != nil || strings.Contains(brokerConfig(g, "running"), bad)
	}, timeout, interval).Should(BeTrue())
	g.Expect(brokerConfig(g, "running")).To(And(ContainSubstring("wal.bucket.endpoint="+good), Not(ContainSubstring(bad))),
		"the running brokers' config was changed to the refused FastBucket")
	g.Expect(stalledByRefusal(getCluster(g, "running"))).NotTo(BeNil())

	// Back to https: the cluster is no longer stalled.
	g.Eventually(func() error {
		fb := &strata.FastBucket{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wal-a"}, fb); err != nil {
			return err
		}
		fb.Spec.Endpoint = "https://127.0.0.1:3"
		return c.Update(ctx, fb)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionFalse(getCluster(g, "running").Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		g.Expect(brokerConfig(g, "running")).To(ContainSubstring("wal.bucket.endpoint=https://127.0.0.1:3"))
	}, timeout, interval).Should(Succeed())
}
