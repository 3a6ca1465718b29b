package controllers_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// storageClass creates a StorageClass (cluster-scoped, so named after the
// spec's namespace) that allows volume expansion or not.
func storageClass(ns, name string, expandable bool) string {
	GinkgoHelper()
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: ns + "-" + name},
		Provisioner:          "csi.example.com",
		AllowVolumeExpansion: ptr.To(expandable),
	}
	Expect(k8sClient.Create(suiteCtx, sc)).To(Succeed())
	DeferCleanup(func() { Expect(k8sClient.Delete(suiteCtx, sc)).To(Succeed()) })
	return sc.Name
}

// boundClaim creates the claim the StatefulSet controller would create for
// a pod (envtest runs no such controller), bound with capacity size, as
// the storage driver leaves it.
func boundClaim(ns, name, class, size string) {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	Expect(k8sClient.Create(suiteCtx, pvc)).To(Succeed())
	setClaimCapacity(ns, name, size)
}

// setClaimCapacity is the storage driver reporting a volume's size.
func setClaimCapacity(ns, name, size string) {
	GinkgoHelper()
	Eventually(func() error {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, pvc); err != nil {
			return err
		}
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.AccessModes = pvc.Spec.AccessModes
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
		return k8sClient.Status().Update(suiteCtx, pvc)
	}, timeout, interval).Should(Succeed())
}

func claimRequest(g Gomega, ns, name string) string {
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, pvc)).To(Succeed())
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.String()
}

// etcdQuota is the managed etcd's --quota-backend-bytes argument.
func etcdQuota(g Gomega, ns, cluster string) string {
	sts := &appsv1.StatefulSet{}
	g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: controllers.EtcdName(cluster)}, sts)).To(Succeed())
	for _, a := range sts.Spec.Template.Spec.Containers[0].Command {
		if v, ok := strings.CutPrefix(a, "--quota-backend-bytes="); ok {
			return v
		}
	}
	return ""
}

var _ = Describe("Volume expansion", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		makeBucket(ns, "wal-a", "a")
	})

	// storageCluster is a 1-zone cluster of 2 brokers and 3 etcd members
	// on class, 10Gi volumes each, with the claims their pods would have.
	storageCluster := func(name, class string) {
		GinkgoHelper()
		kc := clusterSpec(map[string]int32{"a": 2}, "a")
		kc.Spec.Storage = strata.StorageSpec{Size: ptr.To(resource.MustParse("10Gi")), StorageClassName: ptr.To(class)}
		kc.Spec.Metadata.Managed = &strata.ManagedEtcdSpec{Replicas: 3, StorageSize: ptr.To(resource.MustParse("10Gi"))}
		createCluster(ns, name, kc)
		Eventually(func(g Gomega) {
			_, err := getSTS(ns, name+"-a")
			g.Expect(err).NotTo(HaveOccurred())
			_, err = getSTS(ns, controllers.EtcdName(name))
			g.Expect(err).NotTo(HaveOccurred())
		}, timeout, interval).Should(Succeed())
		for ord := range 2 {
			boundClaim(ns, fmt.Sprintf("data-%s-a-%d", name, ord), class, "10Gi")
		}
		for ord := range 3 {
			boundClaim(ns, fmt.Sprintf("data-%s-etcd-%d", name, ord), class, "10Gi")
		}
	}
	grow := func(name, size string) {
		updateCluster(ns, name, func(kc *strata.KafkaCluster) {
			kc.Spec.Storage.Size = ptr.To(resource.MustParse(size))
			kc.Spec.Metadata.Managed.StorageSize = ptr.To(resource.MustParse(size))
		})
	}
	// Half the volume, capped at etcd's recommended 8 GiB.
	const quota10Gi, quota20Gi = "5368709120", "8589934592"

	It("grows the brokers' and etcd's claims where the StorageClass allows it, and raises etcd's quota once the volumes have grown", func() {
		class := storageClass(ns, "expandable", true)
		storageCluster("grow", class)
		Eventually(func(g Gomega) { g.Expect(etcdQuota(g, ns, "grow")).To(Equal(quota10Gi)) }, timeout, interval).Should(Succeed())

		// One claim waits for its pod to be scheduled: only a bound claim
		// can be resized.
		Eventually(func() error {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "data-grow-a-1"}, pvc); err != nil {
				return err
			}
			pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
			return k8sClient.Status().Update(suiteCtx, pvc)
		}, timeout, interval).Should(Succeed())

		grow("grow", "20Gi")
		claims := []string{"data-grow-a-0", "data-grow-a-1", "data-grow-etcd-0", "data-grow-etcd-1", "data-grow-etcd-2"}
		Eventually(func(g Gomega) {
			for _, c := range claims {
				want := "20Gi"
				if c == "data-grow-a-1" {
					want = "10Gi"
				}
				g.Expect(claimRequest(g, ns, c)).To(Equal(want), c)
			}
			kc := getCluster(ns, "grow")
			g.Expect(meta.FindStatusCondition(kc.Status.Conditions, controllers.ConditionStorageChangeNotApplied)).To(BeNil())
		}, timeout, interval).Should(Succeed())
		// Left for later, not tried: a resize of an unbound claim is an
		// error that would stop the reconcile.
		Consistently(func(g Gomega) []string { return eventMessages(g, ns, "grow", controllers.EventReconcileFailed) }, "2s", interval).
			ShouldNot(ContainElement(ContainSubstring("data-grow-a-1")))
		By("the claim is bound: it grows too")
		setClaimCapacity(ns, "data-grow-a-1", "10Gi")
		Eventually(func(g Gomega) { g.Expect(claimRequest(g, ns, "data-grow-a-1")).To(Equal("20Gi")) }, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) []string { return eventMessages(g, ns, "grow", controllers.EventVolumeExpansion) }, timeout, interval).
			Should(ContainElement(ContainSubstring("claim data-grow-a-0: 10Gi -> 20Gi")))
		// The volumes have not grown yet: etcd's quota stays what 10Gi holds.
		Consistently(func(g Gomega) { g.Expect(etcdQuota(g, ns, "grow")).To(Equal(quota10Gi)) }, "2s", interval).Should(Succeed())

		By("the storage driver grew the volumes: etcd's quota follows")
		for _, c := range claims {
			setClaimCapacity(ns, c, "20Gi")
		}
		Eventually(func(g Gomega) { g.Expect(etcdQuota(g, ns, "grow")).To(Equal(quota20Gi)) }, timeout, interval).Should(Succeed())

		By("a smaller size is refused, with the claims as they are")
		grow("grow", "15Gi")
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getCluster(ns, "grow").Status.Conditions, controllers.ConditionStorageChangeNotApplied)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(controllers.ReasonStorageChangeRefused))
			g.Expect(c.Message).To(ContainSubstring("claim data-grow-a-0 is 20Gi, 15Gi wanted: a volume cannot shrink"))
		}, timeout, interval).Should(Succeed())
		Expect(claimRequest(Default, ns, "data-grow-a-0")).To(Equal("20Gi"))
	})

	It("refuses to grow claims whose StorageClass does not allow expansion, with a condition, and keeps etcd's quota", func() {
		class := storageClass(ns, "fixed", false)
		storageCluster("fixed", class)
		grow("fixed", "20Gi")
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getCluster(ns, "fixed").Status.Conditions, controllers.ConditionStorageChangeNotApplied)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonStorageChangeRefused))
			g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("claim data-fixed-a-0 is 10Gi, 20Gi wanted: StorageClass %s does not allow volume expansion", class)))
			g.Expect(c.Message).To(ContainSubstring("claim data-fixed-etcd-2 is 10Gi, 20Gi wanted"))
		}, timeout, interval).Should(Succeed())
		Expect(claimRequest(Default, ns, "data-fixed-a-1")).To(Equal("10Gi"))
		Expect(etcdQuota(Default, ns, "fixed")).To(Equal(quota10Gi), "a quota above what the volume holds fills the disk instead of raising NOSPACE")
	})
})
