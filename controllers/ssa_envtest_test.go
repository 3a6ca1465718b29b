package controllers_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/config/argocd"
	"github.com/strata-dev/strata/controllers"
)

// kstatusOf computes what Flux, Argo CD's kstatus-based checks and
// `kubectl wait` see for obj.
func kstatusOf(obj client.Object, kind string) (*kstatus.Result, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(strata.GroupVersion.WithKind(kind))
	return kstatus.Compute(u)
}

// argoHealthOf runs config/argocd/health.lua on obj, as Argo CD would.
func argoHealthOf(obj client.Object) (argocd.HealthStatus, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return argocd.HealthStatus{}, err
	}
	return argocd.Health(m)
}

// clusterKstatus reads a KafkaCluster and computes its kstatus; it also
// expects Argo CD's health check to agree (Current: Healthy, InProgress:
// Progressing, Failed: Degraded).
func clusterKstatus(g Gomega, ns, name string) (*kstatus.Result, *strata.KafkaCluster) {
	kc := &strata.KafkaCluster{}
	g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, kc)).To(Succeed())
	res, err := kstatusOf(kc, "KafkaCluster")
	g.Expect(err).NotTo(HaveOccurred())
	argo, err := argoHealthOf(kc)
	g.Expect(err).NotTo(HaveOccurred())
	want := map[kstatus.Status]string{
		kstatus.CurrentStatus: argocd.Healthy, kstatus.InProgressStatus: argocd.Progressing, kstatus.FailedStatus: argocd.Degraded,
	}[res.Status]
	if res.Status == kstatus.CurrentStatus && !meta.IsStatusConditionTrue(kc.Status.Conditions, strata.ConditionReady) {
		want = argocd.Degraded // settled, but not ready
	}
	g.Expect(argo.Status).To(Equal(want), "Argo CD health %+v for kstatus %s", argo, res.Status)
	return res, kc
}

// settleStatefulSet plays the StatefulSet controller envtest lacks: all
// replicas of the current generation updated and ready.
func settleStatefulSet(ns, name string) {
	GinkgoHelper()
	Eventually(func() error {
		sts, err := getSTS(ns, name)
		if err != nil {
			return err
		}
		n := ptr.Deref(sts.Spec.Replicas, 1)
		sts.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: sts.Generation,
			Replicas:           n, ReadyReplicas: n, AvailableReplicas: n, CurrentReplicas: n, UpdatedReplicas: n,
			CurrentRevision: "rev", UpdateRevision: "rev",
		}
		return k8sClient.Status().Update(suiteCtx, sts)
	}, timeout, interval).Should(Succeed())
}

// readyBrokerPod creates a broker pod as the StatefulSet controller would
// and marks it ready as the kubelet would.
func readyBrokerPod(ns, cluster, zone string, ordinal int32) {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllers.BrokerPodName(cluster, zone, ordinal), Labels: map[string]string{
			controllers.LabelCluster: cluster, controllers.LabelComponent: controllers.ComponentBroker,
			controllers.LabelZone: zone, controllers.LabelManagedBy: controllers.ManagedBy,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "broker", Image: strata.DefaultImage}}},
	}
	Expect(k8sClient.Create(suiteCtx, pod)).To(Succeed())
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	Expect(k8sClient.Status().Update(suiteCtx, pod)).To(Succeed())
}

func brokerContainer(sts *appsv1.StatefulSet) *corev1.Container {
	for i := range sts.Spec.Template.Spec.Containers {
		if c := &sts.Spec.Template.Spec.Containers[i]; c.Name == "broker" {
			return c
		}
	}
	return nil
}

func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// stalledCondition is a FastBucket's Stalled condition.
func stalledCondition(fb *strata.FastBucket) metav1.Condition {
	if c := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionStalled); c != nil {
		return *c
	}
	return metav1.Condition{}
}

var _ = Describe("Server-side apply and kstatus", func() {
	var ns string
	const zone = "us-east-1a"

	BeforeEach(func() {
		ns = newNamespace()
		makeBucket(ns, "wal-"+zone, zone)
	})

	It("reverts a hand edit of an owned StatefulSet's pod template and ConfigMap", func() {
		createCluster(ns, "drift", clusterSpec(map[string]int32{zone: 1}, zone))
		sts := &appsv1.StatefulSet{}
		Eventually(func() (err error) { sts, err = getSTS(ns, "drift-"+zone); return err }, timeout, interval).Should(Succeed())
		image := brokerContainer(sts).Image
		Expect(image).To(Equal(strata.DefaultImage))
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: controllers.ZoneConfigMapName("drift", zone)}, cm)).To(Succeed())
		config := cm.Data[controllers.BrokerConfigFile]

		By("editing the image and the broker configuration by hand (kubectl edit)")
		Eventually(func() error {
			sts, err := getSTS(ns, "drift-"+zone)
			if err != nil {
				return err
			}
			brokerContainer(sts).Image = "example.com/not-strata:hand-edit"
			return k8sClient.Update(suiteCtx, sts, client.FieldOwner("kubectl-edit"))
		}, timeout, interval).Should(Succeed())
		Eventually(func() error {
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(cm), cm); err != nil {
				return err
			}
			cm.Data[controllers.BrokerConfigFile] = "num.partitions=1\n"
			// Without its label the ConfigMap drops out of the operator's
			// cache: the edit reaches it as a delete.
			delete(cm.Labels, controllers.LabelManagedBy)
			return k8sClient.Update(suiteCtx, cm, client.FieldOwner("kubectl-edit"))
		}, timeout, interval).Should(Succeed())

		By("the operator's next apply, triggered by the edit itself, puts its values back")
		Eventually(func(g Gomega) {
			sts, err := getSTS(ns, "drift-"+zone)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(brokerContainer(sts).Image).To(Equal(image))
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
			g.Expect(cm.Data[controllers.BrokerConfigFile]).To(Equal(config))
			g.Expect(cm.Labels).To(HaveKeyWithValue(controllers.LabelManagedBy, controllers.ManagedBy))
		}, timeout, interval).Should(Succeed())
		Expect(sts.Annotations).NotTo(HaveKey("kafka.strata.dev/spec-hash"), "no hash annotation stands in for the comparison any more")
	})

	It("takes over what an operator before server-side apply wrote, so fields it no longer sets go away", func() {
		// The zone's bucket does not exist yet: the cluster waits, and the
		// StatefulSet is written meanwhile as the earlier operator did, by
		// an update under the binary's name.
		const late = "us-east-1b"
		createCluster(ns, "legacy", clusterSpec(map[string]int32{late: 1}, late))
		Eventually(func(g Gomega) {
			g.Expect(meta.IsStatusConditionTrue(getCluster(ns, "legacy").Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		kc := getCluster(ns, "legacy")
		old := controllers.BuildZoneStatefulSet(kc, controllers.ZoneInput{Zone: kc.Spec.Zones[0]}, "old-config-hash")
		old.Annotations = map[string]string{"kafka.strata.dev/spec-hash": "0123abcd"}
		c := brokerContainer(old)
		c.Env = append(c.Env, corev1.EnvVar{Name: "SETTING_OF_AN_OLDER_RELEASE", Value: "1"})
		Expect(k8sClient.Create(suiteCtx, old, client.FieldOwner("strata"))).To(Succeed())

		makeBucket(ns, "wal-"+late, late)
		Eventually(func(g Gomega) {
			sts, err := getSTS(ns, old.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sts.Annotations).NotTo(HaveKey("kafka.strata.dev/spec-hash"))
			_, ok := envValue(brokerContainer(sts), "SETTING_OF_AN_OLDER_RELEASE")
			g.Expect(ok).To(BeFalse(), "an env var the operator no longer sets is still there")
			_, ok = envValue(brokerContainer(sts), controllers.EnvWALAccessKeyID)
			g.Expect(ok).To(BeTrue(), "the applied template has the bucket's credentials")
			for _, mf := range sts.ManagedFields {
				g.Expect(mf.Manager).NotTo(Equal("strata"), "the earlier operator's field manager still owns fields")
			}
		}, timeout, interval).Should(Succeed())
	})

	It("leaves fields other field managers own alone across reconciles that rewrite the template", func() {
		createCluster(ns, "shared", clusterSpec(map[string]int32{zone: 1}, zone))
		stsName := "shared-" + zone
		Eventually(func() error { _, err := getSTS(ns, stsName); return err }, timeout, interval).Should(Succeed())

		By("a mutating webhook adding an env var with server-side apply, kubectl an annotation, another tool a Service label")
		webhook := appsv1ac.StatefulSet(stsName, ns).WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(
			corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(
				corev1ac.Container().WithName("broker").WithEnv(corev1ac.EnvVar().WithName("INJECTED_BY_WEBHOOK").WithValue("sidecar-1")),
			))))
		Expect(k8sClient.Apply(suiteCtx, webhook, client.FieldOwner("webhook"))).To(Succeed())
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stsName}}
		Expect(k8sClient.Patch(suiteCtx, sts, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"example.com/owner-team":"streaming"}}}`)), client.FieldOwner("kubectl-annotate"))).To(Succeed())
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllers.BootstrapServiceName("shared")}}
		Expect(k8sClient.Patch(suiteCtx, svc, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"example.com/exposed":"true"}}}`)), client.FieldOwner("mesh-injector"))).To(Succeed())

		expectForeignFields := func(g Gomega) *appsv1.StatefulSet {
			sts, err := getSTS(ns, stsName)
			g.Expect(err).NotTo(HaveOccurred())
			v, ok := envValue(brokerContainer(sts), "INJECTED_BY_WEBHOOK")
			g.Expect(ok).To(BeTrue(), "the webhook's env var is gone")
			g.Expect(v).To(Equal("sidecar-1"))
			_, ok = envValue(brokerContainer(sts), controllers.EnvPodName)
			g.Expect(ok).To(BeTrue(), "the operator's env vars must stay too")
			g.Expect(sts.Annotations).To(HaveKeyWithValue("example.com/owner-team", "streaming"))
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
			g.Expect(svc.Labels).To(HaveKeyWithValue("example.com/exposed", "true"))
			g.Expect(svc.Labels).To(HaveKeyWithValue(controllers.LabelManagedBy, controllers.ManagedBy))
			return sts
		}

		for i, partitions := range []string{"12", "18", "24"} {
			By(fmt.Sprintf("reconcile %d: spec.config changes, so the operator rewrites the pod template", i+1))
			before := expectForeignFields(Default).Spec.Template.Annotations[controllers.AnnotationConfigHash]
			updateCluster(ns, "shared", func(kc *strata.KafkaCluster) { kc.Spec.Config["num.partitions"] = partitions })
			Eventually(func(g Gomega) {
				sts := expectForeignFields(g)
				g.Expect(sts.Spec.Template.Annotations[controllers.AnnotationConfigHash]).NotTo(Equal(before))
				kc := getCluster(ns, "shared")
				g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
			}, timeout, interval).Should(Succeed())
		}

		sts, err := getSTS(ns, stsName)
		Expect(err).NotTo(HaveOccurred())
		managers := map[string]metav1.ManagedFieldsOperationType{}
		for _, mf := range sts.ManagedFields {
			if mf.Subresource == "" {
				managers[mf.Manager] = mf.Operation
			}
		}
		Expect(managers).To(HaveKeyWithValue(controllers.FieldManager, metav1.ManagedFieldsOperationApply))
		Expect(managers).To(HaveKeyWithValue("webhook", metav1.ManagedFieldsOperationApply))
	})

	It("reads as kstatus Current when healthy, InProgress during a roll and Failed for a spec it cannot realise", func() {
		// Ready means Kafka serves: the cluster needs brokers that answer
		// and a metadata etcd that is healthy, so loopback brokers and
		// their etcd stand behind it.
		kc := clusterSpec(map[string]int32{zone: 2}, zone)
		kc.Namespace, kc.Name = ns, "ks"
		lb := startLoopbackBrokers(kc)
		kc.Spec.Metadata.ExternalEndpoints = lb.Etcd
		createCluster(ns, "ks", kc)
		stsNames := []string{"ks-" + zone}
		for _, name := range stsNames {
			Eventually(func() error { _, err := getSTS(ns, name); return err }, timeout, interval).Should(Succeed())
		}

		By("pods not there yet: InProgress")
		Eventually(func(g Gomega) {
			res, kc := clusterKstatus(g, ns, "ks")
			g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
			g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
		}, timeout, interval).Should(Succeed())

		By("every StatefulSet rolled out and every broker ready: Current")
		// The StatefulSet controller and kubelet, emulated: pods from the
		// current template, Ready from the brokers' /readyz, StatefulSet
		// status; the operator's roll deletes pods, the emulator restarts
		// their brokers.
		startKubelet(kc, lb)
		Eventually(func(g Gomega) {
			res, kc := clusterKstatus(g, ns, "ks")
			g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), res.Message)
			g.Expect(meta.IsStatusConditionTrue(kc.Status.Conditions, strata.ConditionReady)).To(BeTrue())
			for _, typ := range []string{strata.ConditionReady, strata.ConditionReconciling, strata.ConditionStalled} {
				c := meta.FindStatusCondition(kc.Status.Conditions, typ)
				g.Expect(c).NotTo(BeNil(), typ)
				g.Expect(c.ObservedGeneration).To(Equal(kc.Generation), typ)
			}
		}, timeout, interval).Should(Succeed())

		By("a config change rolls the brokers one at a time: InProgress until every pod runs the new template")
		updateCluster(ns, "ks", func(kc *strata.KafkaCluster) { kc.Spec.Config["num.partitions"] = "12" })
		Eventually(func(g Gomega) {
			res, kc := clusterKstatus(g, ns, "ks")
			// The generation is observed: InProgress comes from Reconciling.
			g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
			g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
			c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionReconciling)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(BeElementOf(controllers.ReasonRollingOut, controllers.ReasonRollBlocked))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			res, kc := clusterKstatus(g, ns, "ks")
			g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), res.Message)
			g.Expect(kc.Status.Roll).To(BeNil())
		}, timeout, interval).Should(Succeed())

		By("a reference to a FastBucket that does not exist: Stalled, so Failed")
		updateCluster(ns, "ks", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].FastBucketRef.Name = "no-such-bucket" })
		Eventually(func(g Gomega) {
			res, kc := clusterKstatus(g, ns, "ks")
			g.Expect(res.Status).To(Equal(kstatus.FailedStatus), res.Message)
			g.Expect(res.Message).To(ContainSubstring(`FastBucket "no-such-bucket" not found`))
			c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionStalled)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonFastBucketNotFound))
			g.Expect(c.ObservedGeneration).To(Equal(kc.Generation))
			g.Expect(meta.IsStatusConditionFalse(kc.Status.Conditions, strata.ConditionReconciling)).To(BeTrue())
			// Degraded is kept for degradation of running brokers.
			g.Expect(meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionDegraded)).NotTo(HaveField("Reason", controllers.ReasonFastBucketNotFound))
		}, timeout, interval).Should(Succeed())

		By("fixing the reference clears Stalled")
		updateCluster(ns, "ks", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].FastBucketRef.Name = "wal-" + zone })
		Eventually(func(g Gomega) {
			res, kc := clusterKstatus(g, ns, "ks")
			g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), res.Message)
			g.Expect(meta.IsStatusConditionFalse(kc.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		}, timeout, interval).Should(Succeed())
	})

	It("reads a FastBucket it cannot reach as Failed, with the probe's reason", func() {
		Eventually(func(g Gomega) {
			fb := &strata.FastBucket{}
			g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "wal-" + zone}, fb)).To(Succeed())
			res, err := kstatusOf(fb, "FastBucket")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(kstatus.FailedStatus), res.Message)
			argo, err := argoHealthOf(fb)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(argo).To(Equal(argocd.HealthStatus{Status: argocd.Degraded, Message: stalledCondition(fb).Reason + ": " + stalledCondition(fb).Message}))
			c := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(controllers.ReasonSecretNotFound))
			g.Expect(meta.IsStatusConditionFalse(fb.Status.Conditions, strata.ConditionReady)).To(BeTrue())
		}, timeout, interval).Should(Succeed())
	})

	It("does not take over an unmanaged object of a name it wants, even when it is not in the cache", func() {
		squatter := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllers.BootstrapServiceName("taken")},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}
		Expect(k8sClient.Create(suiteCtx, squatter)).To(Succeed())
		createCluster(ns, "taken", clusterSpec(map[string]int32{zone: 1}, zone))
		Eventually(func(g Gomega) {
			res, kc := clusterKstatus(g, ns, "taken")
			g.Expect(res.Status).To(Equal(kstatus.FailedStatus), res.Message)
			c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionStalled)
			g.Expect(c.Reason).To(Equal(controllers.ReasonObjectConflict))
			g.Expect(c.Message).To(ContainSubstring("Service taken-bootstrap exists and is not managed by the operator"))
		}, timeout, interval).Should(Succeed())
		got := &corev1.Service{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(squatter), got)).To(Succeed())
		Expect(got.OwnerReferences).To(BeEmpty())
		Expect(got.Spec.Ports).To(HaveLen(1))
		Expect(got.Spec.Ports[0].Port).To(BeEquivalentTo(80))
		for _, mf := range got.ManagedFields {
			Expect(mf.Manager).NotTo(Equal(controllers.FieldManager))
		}

		By("removing it lets the operator create its own")
		Expect(k8sClient.Delete(suiteCtx, squatter)).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(squatter), got)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(metav1.IsControlledBy(got, getCluster(ns, "taken"))).To(BeTrue())
		}, timeout, interval).Should(Succeed())
	})
})
