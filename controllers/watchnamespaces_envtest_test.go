package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// TestWatchNamespaces runs an operator limited to one namespace
// (--watch-namespaces: its cache and its uncached reader) against its own
// kube-apiserver: the suite's operator watches every namespace. A
// KafkaCluster in the watched namespace is rendered; one elsewhere is
// never touched, not even its status.
func TestWatchNamespaces(t *testing.T) {
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
	c, _, err := newTestManager(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	const watched, other = "kafka-watched", "kafka-other"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 c.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptionsFor([]string{watched}),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(controllers.SetupWithManager(mgr, controllers.WithWatchNamespaces([]string{watched}))).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	cluster := func(ns string) *strata.KafkaCluster {
		return &strata.KafkaCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kafka"},
			Spec: strata.KafkaClusterSpec{
				Zones:    []strata.ZoneSpec{{Name: "a", Brokers: 1}},
				WAL:      strata.WALSpec{Enabled: ptr.To(false)},
				Metadata: strata.MetadataSpec{ExternalEndpoints: []string{"http://127.0.0.1:9"}},
			},
		}
	}
	// The unwatched namespace's cluster first: were it reconciled at all,
	// it would be before (or with) the watched one.
	for _, ns := range []string{other, watched} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		g.Expect(c.Create(ctx, cluster(ns))).To(Succeed())
	}
	const timeout, interval = 2 * time.Minute, 100 * time.Millisecond
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: watched, Name: controllers.ZoneConfigMapName("kafka", "a")}, cm)).To(Succeed())
		kc := &strata.KafkaCluster{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: watched, Name: "kafka"}, kc)).To(Succeed())
		g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
		// Its Secrets (CA, token) were written and read back through the
		// namespace-limited cache.
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: watched, Name: controllers.MetricsTokenSecretName("kafka")}, &corev1.Secret{})).To(Succeed())
	}, timeout, interval).Should(Succeed())

	kc := &strata.KafkaCluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: other, Name: "kafka"}, kc)).To(Succeed())
	g.Expect(kc.Status.ObservedGeneration).To(BeZero(), "the cluster of an unwatched namespace got a status")
	g.Expect(kc.Finalizers).To(BeEmpty(), "the cluster of an unwatched namespace got a finalizer")
	for _, name := range []string{controllers.ZoneConfigMapName("kafka", "a"), controllers.ClusterCASecretName("kafka")} {
		err := c.Get(ctx, client.ObjectKey{Namespace: other, Name: name}, &corev1.ConfigMap{})
		if name == controllers.ClusterCASecretName("kafka") {
			err = c.Get(ctx, client.ObjectKey{Namespace: other, Name: name}, &corev1.Secret{})
		}
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s in the unwatched namespace: %v", name, err)
	}
}
