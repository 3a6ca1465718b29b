package controllers_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// Warning events that say what the operator keeps or does not apply
// are sent when that appears or changes, and a condition holds it
// meanwhile: they used to repeat at every reconcile (every minute, and
// at every pod or StatefulSet change).
var _ = Describe("Warning events only on change", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	// reconcileEvents runs one reconcile of the cluster by a reconciler
	// of its own and returns the events it sent with reason.
	reconcileEvents := func(ctx SpecContext, name, reason string) []string {
		GinkgoHelper()
		rec := events.NewFakeRecorder(1000)
		admin := controllers.NewAdminPool(loopback)
		defer admin.Close()
		r := &controllers.KafkaClusterReconciler{
			Client: k8sClient, LiveReader: k8sClient, Recorder: rec, Admin: admin,
			// The suite's policy: its buckets are on plain http.
			BucketPolicy: controllers.BucketPolicy{AllowAmbientCredentials: true, AllowInsecureEndpoints: true},
		}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		Expect(err).NotTo(HaveOccurred())
		close(rec.Events)
		var out []string
		for e := range rec.Events {
			if strings.Contains(e, " "+reason+" ") {
				out = append(out, e)
			}
		}
		return out
	}
	condition := func(g Gomega, name, typ string) *metav1.Condition {
		return meta.FindStatusCondition(getCluster(ns, name).Status.Conditions, typ)
	}

	It("reports a storage change the claims cannot take in a condition, with one event", func(ctx SpecContext) {
		makeBucket(ns, "wal-a", "a")
		class := storageClass(ns, "fixed", false)
		kc := clusterSpec(map[string]int32{"a": 1}, "a")
		kc.Spec.Storage.StorageClassName = ptr.To(class)
		createCluster(ns, "grow", kc)
		Eventually(func() error { _, err := getSTS(ns, "grow-a"); return err }, timeout, interval).Should(Succeed())
		boundClaim(ns, "data-grow-a-0", class, "100Gi")
		updateCluster(ns, "grow", func(kc *strata.KafkaCluster) { kc.Spec.Storage.Size = ptr.To(resource.MustParse("200Gi")) })
		Eventually(func(g Gomega) {
			c := condition(g, "grow", controllers.ConditionStorageChangeNotApplied)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("claim data-grow-a-0 is 100Gi, 200Gi wanted: StorageClass " + class + " does not allow volume expansion"))
		}, timeout, interval).Should(Succeed())
		for range 2 {
			Expect(reconcileEvents(ctx, "grow", controllers.EventStorageNotApplied)).To(BeEmpty(), "the condition already says it")
		}

		updateCluster(ns, "grow", func(kc *strata.KafkaCluster) { kc.Spec.Storage.Size = ptr.To(resource.MustParse("100Gi")) })
		Eventually(func(g Gomega) {
			g.Expect(condition(g, "grow", controllers.ConditionStorageChangeNotApplied)).To(BeNil())
		}, timeout, interval).Should(Succeed())
	})

	It("says that a cluster from before secure defaults keeps them in a condition, with one event", func(ctx SpecContext) {
		makeBucket(ns, "wal-a", "a")
		kc := clusterSpec(map[string]int32{"a": 1}, "a")
		kc.Spec.Listeners = []strata.ListenerSpec{{Name: "PLAINTEXT", Port: 9092, Protocol: "PLAINTEXT"}}
		kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationNone}
		createCluster(ns, "old", kc)
		Eventually(func(g Gomega) {
			cfg, err := brokerConfig(ns, "old", "a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg).To(ContainSubstring("\nlisteners=PLAINTEXT://0.0.0.0:9092,"))
		}, timeout, interval).Should(Succeed())
		// The spec as an earlier release stored it (neither field).
		updateCluster(ns, "old", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = nil
			kc.Spec.Security.Authorization = nil
		})
		Eventually(func(g Gomega) {
			c := condition(g, "old", controllers.ConditionInsecureDefaultsKept)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonCreatedBeforeSecureDefaults))
			g.Expect(c.Message).To(ContainSubstring("keeps the PLAINTEXT listener on port 9092"))
		}, timeout, interval).Should(Succeed())
		for range 2 {
			Expect(reconcileEvents(ctx, "old", controllers.EventInsecureDefaultsKept)).To(BeEmpty(), "the condition already says it")
		}

		updateCluster(ns, "old", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "SASL_SSL", Port: 9092, Protocol: "SASL_SSL"}}
			kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationACL}
		})
		Eventually(func(g Gomega) {
			g.Expect(condition(g, "old", controllers.ConditionInsecureDefaultsKept)).To(BeNil())
		}, timeout, interval).Should(Succeed())
	})
})
