package controllers_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	brokermeta "github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/controllers"
)

const (
	timeout  = time.Minute // generous: `make test` runs packages in parallel on small machines
	interval = 50 * time.Millisecond
)

var nsCounter int

// newNamespace gives each spec its own namespace.
func newNamespace() string {
	nsCounter++
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kc-%d-%d", GinkgoParallelProcess(), nsCounter)}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}

// unreachableEndpoint is a loopback port nothing listens on.
const unreachableEndpoint = "http://127.0.0.1:1"

func makeBucket(ns, name, zone string) *strata.FastBucket {
	fb := &strata.FastBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: strata.FastBucketSpec{
			Zone: zone, Bucket: "strata-wal-" + zone, Region: "us-east-1",
			Endpoint: unreachableEndpoint, ForcePathStyle: true,
			// A Secret that does not exist: the probe fails before any
			// network call (ambient credentials would make the SDK look
			// for an instance metadata service off the loopback).
			Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "no-credentials"}},
		},
	}
	Expect(k8sClient.Create(suiteCtx, fb)).To(Succeed())
	return fb
}

func clusterSpec(zones map[string]int32, order ...string) *strata.KafkaCluster {
	kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{Config: map[string]string{"num.partitions": "6"}}}
	for _, z := range order {
		kc.Spec.Zones = append(kc.Spec.Zones, strata.ZoneSpec{
			Name: z, Brokers: zones[z], FastBucketRef: &strata.LocalObjectReference{Name: "wal-" + z},
		})
	}
	return kc
}

func createCluster(ns, name string, kc *strata.KafkaCluster) *strata.KafkaCluster {
	kc.Namespace, kc.Name = ns, name
	Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
	return kc
}

func getSTS(ns, name string) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, sts)
	return sts, err
}

func getCluster(ns, name string) *strata.KafkaCluster {
	kc := &strata.KafkaCluster{}
	Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, kc)).To(Succeed())
	return kc
}

func brokerConfig(ns, cluster, zone string) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: controllers.ZoneConfigMapName(cluster, zone)}, cm); err != nil {
		return "", err
	}
	return cm.Data[controllers.BrokerConfigFile], nil
}

// updateCluster applies mutate to the latest version, retrying on conflict.
func updateCluster(ns, name string, mutate func(*strata.KafkaCluster)) {
	Eventually(func() error {
		kc := getCluster(ns, name)
		mutate(kc)
		return k8sClient.Update(suiteCtx, kc)
	}, timeout, interval).Should(Succeed())
}

func zoneAffinity(sts *appsv1.StatefulSet) []string {
	na := sts.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	for _, term := range na.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelTopologyZone && e.Operator == corev1.NodeSelectorOpIn {
				return e.Values
			}
		}
	}
	return nil
}

var _ = Describe("KafkaCluster controller", func() {
	var ns string
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	counts := map[string]int32{"us-east-1a": 3, "us-east-1b": 2, "us-east-1c": 1}

	BeforeEach(func() {
		ns = newNamespace()
		for _, z := range zones {
			makeBucket(ns, "wal-"+z, z)
		}
	})

	It("lays a 3-zone cluster out as one StatefulSet per zone, each bound to its zone's bucket", func() {
		createCluster(ns, "demo", clusterSpec(counts, zones...))

		for i, z := range zones {
			var sts *appsv1.StatefulSet
			Eventually(func() error {
				var err error
				sts, err = getSTS(ns, "demo-"+z)
				return err
			}, timeout, interval).Should(Succeed())
			Expect(sts.Spec.Replicas).To(HaveValue(Equal(counts[z])))
			Expect(zoneAffinity(sts)).To(Equal([]string{z}), "StatefulSet %s must be pinned to zone %s", sts.Name, z)
			Expect(sts.Spec.Template.Annotations).To(HaveKey(controllers.AnnotationConfigHash))
			Expect(sts.Spec.Template.Spec.TopologySpreadConstraints).NotTo(BeEmpty())
			Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(1))
			Expect(metav1.IsControlledBy(sts, getCluster(ns, "demo"))).To(BeTrue())

			cfg, err := brokerConfig(ns, "demo", z)
			Expect(err).NotTo(HaveOccurred())
			Expect(cfg).To(ContainSubstring("\nbroker.rack=" + z + "\n"))
			Expect(cfg).To(ContainSubstring("\nwal.bucket.name=strata-wal-" + z + "\n"))
			Expect(cfg).To(ContainSubstring("\nwal.bucket.region=us-east-1\n"))
			Expect(cfg).To(ContainSubstring("\nwal.bucket.endpoint=" + unreachableEndpoint + "\n"))
			Expect(cfg).To(ContainSubstring(fmt.Sprintf("\nbroker.id.base=%d\n", i*strata.BrokerIDBlockSize)))
			Expect(cfg).To(ContainSubstring("\nwal.enable=true\n"))
			for _, other := range zones { // the zone→bucket map: every zone's bucket
				Expect(cfg).To(ContainSubstring("\nwal.zone." + other + ".bucket.name=strata-wal-" + other + "\n"))
				Expect(cfg).To(ContainSubstring("\nwal.zone." + other + ".bucket.endpoint=" + unreachableEndpoint + "\n"))
				Expect(cfg).To(ContainSubstring("\nwal.zone." + other + ".bucket.credentials.env=STRATA_WAL\n"))
			}
		}

		By("moving zone c's bucket to another endpoint: every zone's map follows")
		fb := &strata.FastBucket{}
		Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "wal-us-east-1c"}, fb)).To(Succeed())
		fb.Spec.Endpoint = "http://127.0.0.2:1"
		Expect(k8sClient.Update(suiteCtx, fb)).To(Succeed())
		for _, z := range zones {
			Eventually(func(g Gomega) {
				cfg, err := brokerConfig(ns, "demo", z)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cfg).To(ContainSubstring("\nwal.zone.us-east-1c.bucket.endpoint=http://127.0.0.2:1\n"))
			}, timeout, interval).Should(Succeed(), "zone %s", z)
		}

		for _, name := range []string{"demo-brokers", "demo-bootstrap", "demo-etcd"} {
			Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Service{})).To(Succeed(), "Service %s", name)
		}
		etcd, err := getSTS(ns, "demo-etcd")
		Expect(err).NotTo(HaveOccurred())
		Expect(etcd.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		Expect(zoneAffinity(etcd)).To(ConsistOf(zones))
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "demo-brokers"}, pdb)).To(Succeed())
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(0), "no voluntary disruption: node drains go through the operator (kafkacluster_eviction.go)")
		Expect(metav1.IsControlledBy(pdb, getCluster(ns, "demo"))).To(BeTrue(), "the KafkaCluster owns its PodDisruptionBudget")
		// It covers exactly the broker pods: every zone's, not etcd's (whose
		// own budget keeps its quorum).
		Expect(pdb.Spec.Selector).NotTo(BeNil())
		brokerPods, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
		for _, z := range zones {
			sts, err := getSTS(ns, controllers.ZoneStatefulSetName("demo", z))
			Expect(err).NotTo(HaveOccurred())
			Expect(brokerPods.Matches(labels.Set(sts.Spec.Template.Labels))).To(BeTrue(), "zone %s's broker pods %v under selector %s", z, sts.Spec.Template.Labels, brokerPods)
		}
		Expect(brokerPods.Matches(labels.Set(etcd.Spec.Template.Labels))).To(BeFalse(), "etcd pods %v under the brokers' selector %s", etcd.Spec.Template.Labels, brokerPods)

		Eventually(func(g Gomega) {
			kc := getCluster(ns, "demo")
			g.Expect(kc.Finalizers).To(ContainElement(controllers.Finalizer))
			g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
			g.Expect(kc.Status.BrokerIDBlocks).To(Equal([]strata.BrokerIDBlock{
				{Zone: "us-east-1a", Base: 0}, {Zone: "us-east-1b", Base: 100}, {Zone: "us-east-1c", Base: 200},
			}))
			g.Expect(kc.Status.DesiredBrokers).To(BeEquivalentTo(6))
			g.Expect(kc.Status.ZoneCount).To(BeEquivalentTo(3))
			g.Expect(kc.Status.Brokers).To(ContainElements(
				strata.BrokerStatus{ID: 0, Zone: "us-east-1a", Pod: "demo-us-east-1a-0"},
				strata.BrokerStatus{ID: 2, Zone: "us-east-1a", Pod: "demo-us-east-1a-2"},
				strata.BrokerStatus{ID: 101, Zone: "us-east-1b", Pod: "demo-us-east-1b-1"},
				strata.BrokerStatus{ID: 200, Zone: "us-east-1c", Pod: "demo-us-east-1c-0"},
			))
			ready := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse)) // no pods in envtest
			g.Expect(ready.Reason).To(Equal(controllers.ReasonBrokersNotReady))
		}, timeout, interval).Should(Succeed())

		Eventually(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
			reasons := map[string]int{}
			for _, e := range events.Items {
				if e.Regarding.Kind == "KafkaCluster" && e.Regarding.Name == "demo" {
					reasons[e.Reason]++
				}
			}
			g.Expect(reasons).To(HaveKey(controllers.EventBrokerIDBlock))
			g.Expect(reasons).To(HaveKey(controllers.EventCreated))
		}, timeout, interval).Should(Succeed())
	})

	// Claim templates are immutable: a size change is carried out on the
	// claims (storage_envtest_test.go); a class change cannot be.
	It("refuses a storage class change with a condition and an event, keeping the claim templates", func() {
		createCluster(ns, "disk", clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a"))
		Eventually(func() error { _, err := getSTS(ns, "disk-us-east-1a"); return err }, timeout, interval).Should(Succeed())
		updateCluster(ns, "disk", func(kc *strata.KafkaCluster) { kc.Spec.Storage.StorageClassName = ptr.To("faster") })
		const refusal = `StatefulSet disk-us-east-1a volume data: storage class "faster" wanted, "" exists: a volume's class cannot change`
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getCluster(ns, "disk").Status.Conditions, controllers.ConditionStorageChangeNotApplied)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(controllers.ReasonStorageChangeRefused))
			g.Expect(c.Message).To(ContainSubstring(refusal))
			var events eventsv1.EventList
			g.Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range events.Items {
				if e.Reason == controllers.EventStorageNotApplied {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement(ContainSubstring(refusal)))
		}, timeout, interval).Should(Succeed())
		sts, err := getSTS(ns, "disk-us-east-1a")
		Expect(err).NotTo(HaveOccurred())
		Expect(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(BeNil())
		Expect(sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()).To(Equal("100Gi"))
	})

	It("scales one zone without touching the others", func() {
		createCluster(ns, "scale", clusterSpec(counts, zones...))
		before, cmBefore := map[string]string{}, map[string]string{}
		Eventually(func(g Gomega) {
			for _, z := range zones {
				sts, err := getSTS(ns, "scale-"+z)
				g.Expect(err).NotTo(HaveOccurred())
				before[z] = sts.ResourceVersion
				cm := &corev1.ConfigMap{}
				g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: controllers.ZoneConfigMapName("scale", z)}, cm)).To(Succeed())
				cmBefore[z] = cm.ResourceVersion
			}
		}, timeout, interval).Should(Succeed())

		updateCluster(ns, "scale", func(kc *strata.KafkaCluster) { kc.Spec.Zones[1].Brokers = 5 })

		Eventually(func() (int32, error) {
			sts, err := getSTS(ns, "scale-us-east-1b")
			return ptr.Deref(sts.Spec.Replicas, -1), err
		}, timeout, interval).Should(BeEquivalentTo(5))
		// The reconcile that scaled zone b has run; the other zones were
		// left exactly as they were.
		Eventually(func() int64 { return getCluster(ns, "scale").Status.ObservedGeneration }, timeout, interval).Should(Equal(getCluster(ns, "scale").Generation))
		for _, z := range []string{"us-east-1a", "us-east-1c"} {
			sts, err := getSTS(ns, "scale-"+z)
			Expect(err).NotTo(HaveOccurred())
			Expect(sts.ResourceVersion).To(Equal(before[z]), "StatefulSet of zone %s changed", z)
			Expect(sts.Spec.Replicas).To(HaveValue(Equal(counts[z])))
		}
		for _, z := range zones {
			cm := &corev1.ConfigMap{}
			Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: controllers.ZoneConfigMapName("scale", z)}, cm)).To(Succeed())
			Expect(cm.ResourceVersion).To(Equal(cmBefore[z]), "ConfigMap of zone %s changed", z)
		}
		Eventually(func() []strata.BrokerStatus { return getCluster(ns, "scale").Status.Brokers }, timeout, interval).
			Should(ContainElement(strata.BrokerStatus{ID: 104, Zone: "us-east-1b", Pod: "scale-us-east-1b-4"}))
	})

	It("rolls the pods when spec.config changes, through the config hash", func() {
		createCluster(ns, "cfg", clusterSpec(counts, zones...))
		hashes := map[string]string{}
		Eventually(func(g Gomega) {
			for _, z := range zones {
				sts, err := getSTS(ns, "cfg-"+z)
				g.Expect(err).NotTo(HaveOccurred())
				hashes[z] = sts.Spec.Template.Annotations[controllers.AnnotationConfigHash]
				g.Expect(hashes[z]).NotTo(BeEmpty())
			}
		}, timeout, interval).Should(Succeed())

		updateCluster(ns, "cfg", func(kc *strata.KafkaCluster) { kc.Spec.Config["num.partitions"] = "12" })

		for _, z := range zones {
			Eventually(func() (string, error) {
				sts, err := getSTS(ns, "cfg-"+z)
				return sts.Spec.Template.Annotations[controllers.AnnotationConfigHash], err
			}, timeout, interval).ShouldNot(Equal(hashes[z]), "zone %s config hash", z)
			cfg, err := brokerConfig(ns, "cfg", z)
			Expect(err).NotTo(HaveOccurred())
			Expect(cfg).To(ContainSubstring("\nnum.partitions=12\n"))
		}
	})

	It("renders spec.wal.zoneLocalProduce into the broker config only when enabled, and rolls the pods then", func() {
		kc := clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a")
		createCluster(ns, "zl", kc)
		sts := "zl-us-east-1a"
		var hash string
		Eventually(func(g Gomega) {
			s, err := getSTS(ns, sts)
			g.Expect(err).NotTo(HaveOccurred())
			hash = s.Spec.Template.Annotations[controllers.AnnotationConfigHash]
			g.Expect(hash).NotTo(BeEmpty())
		}, timeout, interval).Should(Succeed())
		cfg, err := brokerConfig(ns, "zl", "us-east-1a")
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg).NotTo(ContainSubstring("wal.zonelocal."))

		By("the field with enabled false: nothing rendered, no roll")
		updateCluster(ns, "zl", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Policy: strata.ZoneLocalProduceAuto}
		})
		generation := getCluster(ns, "zl").Generation
		Eventually(func() int64 { return getCluster(ns, "zl").Status.ObservedGeneration }, timeout, interval).Should(BeNumerically(">=", generation))
		s, err := getSTS(ns, sts)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Spec.Template.Annotations[controllers.AnnotationConfigHash]).To(Equal(hash))
		cfg, err = brokerConfig(ns, "zl", "us-east-1a")
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg).NotTo(ContainSubstring("wal.zonelocal."))

		By("enabled: the three keys, the API server's default fallback, a new config hash")
		updateCluster(ns, "zl", func(kc *strata.KafkaCluster) { kc.Spec.WAL.ZoneLocalProduce.Enabled = true })
		Eventually(func() (string, error) {
			s, err := getSTS(ns, sts)
			return s.Spec.Template.Annotations[controllers.AnnotationConfigHash], err
		}, timeout, interval).ShouldNot(Equal(hash))
		cfg, err = brokerConfig(ns, "zl", "us-east-1a")
		Expect(err).NotTo(HaveOccurred())
		for _, kv := range []string{"wal.zonelocal.produce.enable=true", "wal.zonelocal.produce.policy=auto", "wal.zonelocal.produce.inline.ms=10000"} {
			Expect(cfg).To(ContainSubstring("\n"+kv+"\n"), "the broker config lacks "+kv)
		}
	})

	It("keeps broker ID blocks stable when zones are reordered, added and removed", func() {
		createCluster(ns, "ids", clusterSpec(counts, zones...))
		Eventually(func() []strata.BrokerIDBlock { return getCluster(ns, "ids").Status.BrokerIDBlocks }, timeout, interval).Should(HaveLen(3))

		makeBucket(ns, "wal-us-east-1d", "us-east-1d")
		updateCluster(ns, "ids", func(kc *strata.KafkaCluster) {
			// new order: d (new) first, then c, b; a removed
			kc.Spec.Zones = []strata.ZoneSpec{
				{Name: "us-east-1d", Brokers: 1, FastBucketRef: &strata.LocalObjectReference{Name: "wal-us-east-1d"}},
				kc.Spec.Zones[2], kc.Spec.Zones[1],
			}
		})
		// Zone a left the spec but its brokers are not drained yet (see
		// below): its block stays active until its StatefulSet is gone.
		Eventually(func() []strata.BrokerIDBlock { return getCluster(ns, "ids").Status.BrokerIDBlocks }, timeout, interval).Should(Equal([]strata.BrokerIDBlock{
			{Zone: "us-east-1a", Base: 0},
			{Zone: "us-east-1b", Base: 100},
			{Zone: "us-east-1c", Base: 200},
			{Zone: "us-east-1d", Base: 300},
		}))
		Eventually(func() (string, error) { return brokerConfig(ns, "ids", "us-east-1d") }, timeout, interval).Should(ContainSubstring("\nbroker.id.base=300\n"))
		cfg, err := brokerConfig(ns, "ids", "us-east-1b")
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg).To(ContainSubstring("\nbroker.id.base=100\n"))
		// The removed zone's brokers are drained before its pods go; no
		// Kafka stands behind this cluster, so nothing can be confirmed
		// drained and the StatefulSet keeps its pods, saying why. (The
		// drain and deletion: "Scaling" specs.)
		Eventually(func(g Gomega) {
			sc := getCluster(ns, "ids").Status.Scaling
			g.Expect(sc).NotTo(BeNil())
			g.Expect(sc.Phase).To(Equal(controllers.ScalingPhaseDraining))
			g.Expect(sc.Message).To(ContainSubstring("cannot read the Kafka metadata"))
		}, timeout, interval).Should(Succeed())
		sts, err := getSTS(ns, "ids-us-east-1a")
		Expect(err).NotTo(HaveOccurred())
		Expect(sts.Spec.Replicas).To(HaveValue(Equal(counts["us-east-1a"])))
	})

	It("keeps broker IDs when status is lost and when the KafkaCluster is re-created", func() {
		want := []strata.BrokerIDBlock{{Zone: "us-east-1a", Base: 0}, {Zone: "us-east-1b", Base: 100}, {Zone: "us-east-1c", Base: 200}}
		expectBases := func() {
			for _, b := range want {
				Eventually(func() (string, error) { return brokerConfig(ns, "keep", b.Zone) }, timeout, interval).
					Should(ContainSubstring(fmt.Sprintf("\nbroker.id.base=%d\n", b.Base)), "zone %s", b.Zone)
			}
		}
		createCluster(ns, "keep", clusterSpec(counts, zones...))
		Eventually(func() []strata.BrokerIDBlock { return getCluster(ns, "keep").Status.BrokerIDBlocks }, timeout, interval).Should(Equal(want))
		record := &corev1.ConfigMap{}
		Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: controllers.BrokerIDsConfigMapName("keep")}, record)).To(Succeed())
		Expect(controllers.ParseBrokerIDRecord(record)).To(Equal(want))
		Expect(record.OwnerReferences).To(BeEmpty(), "the record must outlive the KafkaCluster, as the volumes do")

		// Status lost (e.g. restored from a backup without status), then
		// zones listed in another order: a cluster that numbered from
		// status would give us-east-1c the IDs 0-99.
		Eventually(func() error {
			kc := getCluster(ns, "keep")
			kc.Status = strata.KafkaClusterStatus{}
			return k8sClient.Status().Update(suiteCtx, kc)
		}, timeout, interval).Should(Succeed())
		updateCluster(ns, "keep", func(kc *strata.KafkaCluster) {
			kc.Spec.Zones = []strata.ZoneSpec{kc.Spec.Zones[2], kc.Spec.Zones[1], kc.Spec.Zones[0]}
		})
		Eventually(func() []strata.BrokerIDBlock { return getCluster(ns, "keep").Status.BrokerIDBlocks }, timeout, interval).Should(Equal(want))
		expectBases()

		// Deleted and created again (deletionPolicy Retain: the volumes
		// stay), zones in yet another order.
		old := getCluster(ns, "keep")
		Expect(k8sClient.Delete(suiteCtx, old)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(old), &strata.KafkaCluster{}))
		}, timeout, interval).Should(BeTrue())
		// envtest has no garbage collector: remove what the old cluster
		// owned, as the collector would. The record has no owner and stays.
		for _, list := range []client.ObjectList{&appsv1.StatefulSetList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{},
			&corev1.SecretList{}, &networkingv1.NetworkPolicyList{}} {
			Expect(k8sClient.List(suiteCtx, list, client.InNamespace(ns))).To(Succeed())
			Expect(meta.EachListItem(list, func(o runtime.Object) error {
				if obj := o.(client.Object); metav1.IsControlledBy(obj, old) {
					return k8sClient.Delete(suiteCtx, obj)
				}
				return nil
			})).To(Succeed())
		}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(record), record)).To(Succeed())
		createCluster(ns, "keep", clusterSpec(counts, "us-east-1b", "us-east-1c", "us-east-1a"))
		Eventually(func() []strata.BrokerIDBlock { return getCluster(ns, "keep").Status.BrokerIDBlocks }, timeout, interval).Should(Equal(want))
		expectBases()
	})

	It("reports a missing FastBucket by name and creates nothing until it exists", func() {
		kc := clusterSpec(map[string]int32{"us-east-1a": 1, "us-east-1z": 1}, "us-east-1a", "us-east-1z")
		createCluster(ns, "missing", kc)

		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getCluster(ns, "missing").Status.Conditions, strata.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(controllers.ReasonFastBucketNotFound))
			g.Expect(c.Message).To(ContainSubstring(`FastBucket "wal-us-east-1z" not found`))
		}, timeout, interval).Should(Succeed())
		Consistently(func() (int, error) {
			var list appsv1.StatefulSetList
			err := k8sClient.List(suiteCtx, &list, client.InNamespace(ns))
			return len(list.Items), err
		}, time.Second, interval).Should(BeZero(), "nothing may be half-created")
		var cms corev1.ConfigMapList
		Expect(k8sClient.List(suiteCtx, &cms, client.InNamespace(ns), client.MatchingLabels{controllers.LabelCluster: "missing"})).To(Succeed())
		Expect(cms.Items).To(BeEmpty())

		// Creating the bucket requeues the cluster through the FastBucket watch.
		makeBucket(ns, "wal-us-east-1z", "us-east-1z")
		Eventually(func() error { _, err := getSTS(ns, "missing-us-east-1z"); return err }, timeout, interval).Should(Succeed())
	})

	// A FastBucket problem stops what the brokers run from changing (the
	// zones are not rendered), not the upkeep of a cluster that runs: it
	// used to return before certificate renewal, the roll, throttle
	// removal and etcd recovery.
	It("keeps up a running cluster whose FastBucket goes missing: etcd, certificates and the roll go on, Stalled names the bucket", func() {
		const zone = "us-east-1a"
		createCluster(ns, "upkeep", clusterSpec(map[string]int32{zone: 1}, zone))
		var etcd *appsv1.StatefulSet
		Eventually(func(g Gomega) {
			_, err := getSTS(ns, "upkeep-"+zone)
			g.Expect(err).NotTo(HaveOccurred())
			etcd, err = getSTS(ns, controllers.EtcdName("upkeep"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: controllers.BrokerCertsSecretName("upkeep")}, &corev1.Secret{})).To(Succeed())
		}, timeout, interval).Should(Succeed())
		config, err := brokerConfig(ns, "upkeep", zone)
		Expect(err).NotTo(HaveOccurred())

		updateCluster(ns, "upkeep", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].FastBucketRef.Name = "no-such-bucket" })
		Eventually(func(g Gomega) {
			kc := getCluster(ns, "upkeep")
			g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
			c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonFastBucketNotFound))
			g.Expect(c.Message).To(ContainSubstring(`zone us-east-1a: FastBucket "no-such-bucket" not found`))
			g.Expect(meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionReady)).To(HaveField("Reason", controllers.ReasonFastBucketNotFound))
		}, timeout, interval).Should(Succeed())

		By("an outdated broker pod is rolled, a lost etcd StatefulSet and a lost certificate come back")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: controllers.BrokerPodName("upkeep", zone, 0),
				Labels:      map[string]string{controllers.LabelCluster: "upkeep", controllers.LabelComponent: controllers.ComponentBroker, controllers.LabelZone: zone},
				Annotations: map[string]string{controllers.AnnotationTemplateHash: "an-older-template"},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "broker", Image: strata.DefaultImage}}},
		}
		Expect(k8sClient.Create(suiteCtx, pod)).To(Succeed())
		Expect(k8sClient.Delete(suiteCtx, etcd)).To(Succeed())
		Expect(k8sClient.Delete(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllers.BrokerCertsSecretName("upkeep")}})).To(Succeed())
		Eventually(func(g Gomega) {
			got, err := getSTS(ns, controllers.EtcdName("upkeep"))
			g.Expect(err).NotTo(HaveOccurred(), "the managed etcd was not recreated")
			g.Expect(got.UID).NotTo(Equal(etcd.UID))
			// envtest runs no StatefulSet controller: play it for the new
			// etcd, whose members the roll waits for (EtcdBlocksRoll).
			for ord := range int(ptr.Deref(got.Spec.Replicas, 0)) {
				g.Expect(playEtcdMember(suiteCtx, ns, got.Name, ord, true)).To(Succeed())
			}
			g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: controllers.BrokerCertsSecretName("upkeep")}, &corev1.Secret{})).
				To(Succeed(), "the broker certificate was not issued again")
			err = k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the outdated broker pod was not restarted: %v", err)
		}, timeout, interval).Should(Succeed())

		By("the brokers' config still names the bucket they run with")
		Expect(brokerConfig(ns, "upkeep", zone)).To(Equal(config))
		Expect(meta.IsStatusConditionTrue(getCluster(ns, "upkeep").Status.Conditions, strata.ConditionStalled)).To(BeTrue())
	})

	It("refuses a FastBucket of another zone", func() {
		kc := clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a")
		kc.Spec.Zones[0].FastBucketRef.Name = "wal-us-east-1b"
		createCluster(ns, "mismatch", kc)
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getCluster(ns, "mismatch").Status.Conditions, strata.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(controllers.ReasonFastBucketZoneMismatch))
			g.Expect(c.Message).To(ContainSubstring(`FastBucket "wal-us-east-1b" is in zone us-east-1b`))
		}, timeout, interval).Should(Succeed())
		_, err := getSTS(ns, "mismatch-us-east-1a")
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	It("does not take over an object of the same name it does not own", func() {
		squatter := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllers.ZoneConfigMapName("clash", "us-east-1a")}, Data: map[string]string{"mine": "yes"}}
		Expect(k8sClient.Create(suiteCtx, squatter)).To(Succeed())
		createCluster(ns, "clash", clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a"))
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getCluster(ns, "clash").Status.Conditions, strata.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonObjectConflict))
			g.Expect(c.Message).To(ContainSubstring("ConfigMap clash-us-east-1a-config exists and is not managed by the operator"))
		}, timeout, interval).Should(Succeed())
		got := &corev1.ConfigMap{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(squatter), got)).To(Succeed())
		Expect(got.Data).To(Equal(map[string]string{"mine": "yes"}))
		Expect(got.OwnerReferences).To(BeEmpty())
	})

	It("renders the slow tier's broker keys from spec.tieredStorage, credentials from its Secret", func() {
		kc := clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a")
		kc.Spec.TieredStorage = &strata.TieredStorageSpec{Bucket: "strata-tier", Region: "eu-west-1", Endpoint: "http://s3.example:9000",
			ForcePathStyle: true, Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "tier-keys"}},
			LocalRetention: &metav1.Duration{Duration: 2 * time.Hour}}
		createCluster(ns, "tiered", kc)
		var config string
		Eventually(func() (string, error) {
			var err error
			config, err = brokerConfig(ns, "tiered", "us-east-1a")
			return config, err
		}, timeout, interval).Should(ContainSubstring("\nremote.log.storage.system.enable=true\n"))
		for _, kv := range []string{"log.remote.storage.enable=true", "tier.bucket.name=strata-tier", "tier.bucket.region=eu-west-1",
			"tier.bucket.endpoint=http://s3.example:9000", "tier.bucket.force.path.style=true", "tier.bucket.credentials.secret=tier-keys",
			"log.local.retention.ms=7200000"} {
			Expect(config).To(ContainSubstring("\n"+kv+"\n"), "the broker config lacks "+kv)
		}
		// The StatefulSet follows its ConfigMap.
		var sts *appsv1.StatefulSet
		Eventually(func() (err error) {
			sts, err = getSTS(ns, controllers.ZoneStatefulSetName("tiered", "us-east-1a"))
			return err
		}, timeout, interval).Should(Succeed())
		var env []string
		for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "tier-keys" {
				env = append(env, e.Name)
			}
		}
		Expect(env).To(ContainElements(controllers.EnvTierAccessKeyID, controllers.EnvTierSecretKey))
	})

	It("uses external etcd endpoints instead of running etcd", func() {
		kc := clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a")
		kc.Spec.Metadata.ExternalEndpoints = []string{"https://etcd.example:2379"}
		createCluster(ns, "ext", kc)
		Eventually(func() (string, error) { return brokerConfig(ns, "ext", "us-east-1a") }, timeout, interval).
			Should(ContainSubstring("\nmetadata.etcd.endpoints=https://etcd.example:2379\n"))
		_, err := getSTS(ns, "ext-etcd")
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	It("reports the etcd health line of external endpoints from a live etcd", func() {
		em, err := brokermeta.StartEmbedded(suiteCtx, GinkgoT().TempDir(), nil,
			func(c *embed.Config) { c.QuotaBackendBytes = 64 << 20 })
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(em.Close)

		kc := clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a")
		kc.Spec.Metadata.ExternalEndpoints = em.Endpoints
		createCluster(ns, "health", kc)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "health")
			h := got.Status.Metadata
			g.Expect(h).NotTo(BeNil())
			g.Expect(h.Endpoints).To(Equal(em.Endpoints))
			g.Expect(h.HealthyMembers).To(BeEquivalentTo(1))
			g.Expect(h.QuotaBytes).To(BeEquivalentTo(64 << 20))
			g.Expect(h.DBSizeBytes).To(BeNumerically(">", 0))
			g.Expect(h.Alarms).To(BeEmpty())
			g.Expect(h.Members).To(HaveLen(1))
			g.Expect(h.Members[0].Healthy).To(BeTrue())
			g.Expect(h.Members[0].MemberID).NotTo(BeEmpty())
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionMetadataHealthy)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(controllers.ReasonEtcdHealthy))
		}, timeout, interval).Should(Succeed())
	})

	It("defragments an etcd member whose backend is mostly free and records an event", func() {
		em, err := brokermeta.StartEmbedded(suiteCtx, GinkgoT().TempDir(), nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(em.Close)
		cli, err := clientv3.New(clientv3.Config{Endpoints: em.Endpoints, DialTimeout: 5 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cli.Close)
		Expect(controllers.FreeEtcdPages(suiteCtx, cli)).To(Succeed())

		kc := clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a")
		kc.Spec.Metadata.ExternalEndpoints = em.Endpoints
		createCluster(ns, "defrag", kc)
		Eventually(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range events.Items {
				if e.Reason == controllers.EventEtcdDefragmented && e.Regarding.Name == "defrag" {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement(ContainSubstring("etcd member " + em.Endpoints[0] + " defragmented")))
			h := getCluster(ns, "defrag").Status.Metadata
			g.Expect(h).NotTo(BeNil())
			g.Expect(h.Members).To(HaveLen(1))
			g.Expect(h.Members[0].LastDefragTime).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
		st, err := cli.Status(suiteCtx, em.Endpoints[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(st.DbSize - st.DbSizeInUse).To(BeNumerically("<", controllers.DefaultDefragPolicy.MinFreeBytes))
	})

	It("reports unreachable external etcd as a condition and still reconciles", func() {
		// A loopback port nobody listens on: refused at once.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		endpoint := "http://" + l.Addr().String()
		Expect(l.Close()).To(Succeed())

		kc := clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a")
		kc.Spec.Metadata.ExternalEndpoints = []string{endpoint}
		createCluster(ns, "noetcd", kc)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "noetcd")
			g.Expect(got.Status.Metadata).NotTo(BeNil())
			g.Expect(got.Status.Metadata.HealthyMembers).To(BeZero())
			g.Expect(got.Status.Metadata.Members).To(HaveLen(1))
			g.Expect(got.Status.Metadata.Members[0].Error).NotTo(BeEmpty())
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionMetadataHealthy)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(controllers.ReasonEtcdUnreachable))
		}, timeout, interval).Should(Succeed())
		Expect(getSTS(ns, "noetcd-us-east-1a")).NotTo(BeNil())
	})

	It("deletes the brokers' claims on deletion when deletionPolicy is Delete, and never the buckets", func() {
		kc := clusterSpec(map[string]int32{"us-east-1a": 1}, "us-east-1a")
		kc.Spec.DeletionPolicy = strata.DeletionPolicyDelete
		createCluster(ns, "gone", kc)
		Eventually(func() []string { return getCluster(ns, "gone").Finalizers }, timeout, interval).Should(ContainElement(controllers.Finalizer))

		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-gone-us-east-1a-0", Labels: map[string]string{controllers.LabelCluster: "gone"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		Expect(k8sClient.Create(suiteCtx, pvc)).To(Succeed())
		Expect(k8sClient.Delete(suiteCtx, getCluster(ns, "gone"))).To(Succeed())

		Eventually(func() bool {
			err := k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "gone"}, &strata.KafkaCluster{})
			return apierrors.IsNotFound(err)
		}, timeout, interval).Should(BeTrue())
		Eventually(func() bool {
			got := &corev1.PersistentVolumeClaim{}
			err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(pvc), got)
			// Either gone, or held only by the pvc-protection finalizer.
			return apierrors.IsNotFound(err) || got.DeletionTimestamp != nil
		}, timeout, interval).Should(BeTrue())
		Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: "wal-us-east-1a"}, &strata.FastBucket{})).To(Succeed())
	})
})

// expectRejected creates or updates obj and expects the API server to
// refuse it with every one of the messages.
func expectRejected(err error, messages ...string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the API server accepted an invalid object")
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	for _, m := range messages {
		Expect(err.Error()).To(ContainSubstring(m))
	}
}

var _ = Describe("CRD validation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	valid := func() *strata.KafkaCluster {
		kc := clusterSpec(map[string]int32{"a": 1, "b": 1}, "a", "b")
		kc.Namespace, kc.Name = ns, "v"
		return kc
	}

	It("accepts the valid baseline and fills in defaults", func() {
		kc := valid()
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		Expect(kc.Spec.WAL.Enabled).To(HaveValue(BeTrue()))
		Expect(kc.Spec.WAL.UploadInterval.Duration).To(Equal(10 * time.Millisecond))
		Expect(kc.Spec.WAL.Retention.Duration).To(Equal(time.Hour))
		Expect(kc.Spec.Storage.Size.String()).To(Equal("100Gi"))
		Expect(kc.Spec.Image).To(Equal(strata.DefaultImage))
		Expect(kc.Spec.DeletionPolicy).To(Equal(strata.DeletionPolicyRetain))
		Expect(kc.Spec.Rebalance.MaxConcurrentMoves).To(BeEquivalentTo(strata.DefaultMaxConcurrentMoves))
	})

	It("accepts a positive replication throttle", func() {
		kc := valid()
		kc.Spec.Rebalance.Throttle = ptr.To[int64](10 << 20)
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		Expect(kc.Spec.Rebalance.Throttle).To(HaveValue(BeEquivalentTo(10 << 20)))
	})

	DescribeTable("rejects invalid KafkaClusters",
		func(mutate func(*strata.KafkaCluster), messages ...string) {
			kc := valid()
			mutate(kc)
			expectRejected(k8sClient.Create(suiteCtx, kc), messages...)
		},
		Entry("duplicate zone names", func(kc *strata.KafkaCluster) { kc.Spec.Zones[1].Name = "a" },
			"zone names must be unique"),
		Entry("a negative replication throttle", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = ptr.To[int64](-1) },
			"spec.rebalance.throttle", "should be greater than or equal to 1"),
		Entry("a zero replication throttle", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.Throttle = ptr.To[int64](0) },
			"spec.rebalance.throttle", "should be greater than or equal to 1"),
		Entry("a stall time under 1s", func(kc *strata.KafkaCluster) {
			kc.Spec.Rebalance.MovesStalledAfter = &metav1.Duration{Duration: 500 * time.Millisecond}
		}, "rebalance.movesStalledAfter must be between 1s and 168h"),
		Entry("a stall time over a week", func(kc *strata.KafkaCluster) {
			kc.Spec.Rebalance.MovesStalledAfter = &metav1.Duration{Duration: 169 * time.Hour}
		}, "rebalance.movesStalledAfter must be between 1s and 168h"),
		Entry("a negative imbalance tolerance", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.ImbalanceTolerancePercent = -5 },
			"spec.rebalance.imbalanceTolerancePercent", "should be greater than or equal to 1"),
		Entry("an imbalance tolerance above 1000%", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.ImbalanceTolerancePercent = 1001 },
			"spec.rebalance.imbalanceTolerancePercent", "should be less than or equal to 1000"),
		Entry("no concurrent moves", func(kc *strata.KafkaCluster) { kc.Spec.Rebalance.MaxConcurrentMoves = -1 },
			"spec.rebalance.maxConcurrentMoves", "should be greater than or equal to 1"),
		Entry("no zones", func(kc *strata.KafkaCluster) { kc.Spec.Zones = []strata.ZoneSpec{} },
			"spec.zones", "should have at least 1 items"),
		Entry("negative brokers", func(kc *strata.KafkaCluster) { kc.Spec.Zones[0].Brokers = -1 },
			"spec.zones[0].brokers", "should be greater than or equal to 0"),
		Entry("WAL without a fast bucket in every zone", func(kc *strata.KafkaCluster) { kc.Spec.Zones[1].FastBucketRef = nil },
			"wal.enabled requires a fastBucketRef in every zone"),
		Entry("upload interval above 10s", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL = strata.WALSpec{Enabled: ptr.To(true), UploadInterval: &metav1.Duration{Duration: 20 * time.Second}, Retention: &metav1.Duration{Duration: time.Hour}}
		}, "wal.uploadInterval must be between 1ms and 10s"),
		Entry("upload interval below 1ms", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL = strata.WALSpec{Enabled: ptr.To(true), UploadInterval: &metav1.Duration{Duration: 100 * time.Microsecond}, Retention: &metav1.Duration{Duration: time.Hour}}
		}, "wal.uploadInterval must be between 1ms and 10s"),
		Entry("retention shorter than the upload interval", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL = strata.WALSpec{Enabled: ptr.To(true), UploadInterval: &metav1.Duration{Duration: 5 * time.Second}, Retention: &metav1.Duration{Duration: time.Second}}
		}, "wal.retention must be at least wal.uploadInterval"),
		Entry("a latency budget over an int32 of milliseconds", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.MaxLatency = &metav1.Duration{Duration: 30 * 24 * time.Hour}
		}, "wal.maxLatency must be at most 2147483647ms"),
		Entry("a cost ceiling of 0 %", func(kc *strata.KafkaCluster) { kc.Spec.WAL.MaxCostPercent = ptr.To[int32](0) },
			"spec.wal.maxCostPercent: Invalid value: 0: spec.wal.maxCostPercent in body should be greater than or equal to 1"),
		Entry("a cost ceiling above 1000 %", func(kc *strata.KafkaCluster) { kc.Spec.WAL.MaxCostPercent = ptr.To[int32](1001) },
			"spec.wal.maxCostPercent: Invalid value: 1001: spec.wal.maxCostPercent in body should be less than or equal to 1000"),
		Entry("zone-local produce without WAL", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.Enabled = ptr.To(false)
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true}
		}, "wal.zoneLocalProduce.enabled needs wal.enabled: zone-local produce forwards records through the zones' fast buckets"),
		Entry("a zone-local inline fallback over an hour", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, InlineFallback: &metav1.Duration{Duration: time.Hour + time.Second}}
		}, "wal.zoneLocalProduce.inlineFallback must be 0s (no inline fallback) or between 1ms and 1h"),
		Entry("a zone-local inline fallback under a millisecond", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, InlineFallback: &metav1.Duration{Duration: 500 * time.Microsecond}}
		}, "wal.zoneLocalProduce.inlineFallback must be 0s (no inline fallback) or between 1ms and 1h"),
		Entry("a zone-local policy other than Bucket or Auto", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, Policy: "Inline"}
		}, "spec.wal.zoneLocalProduce.policy", `supported values: "Bucket", "Auto"`),
		Entry("config enabling zone-local produce", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"wal.zonelocal.produce.enable": "true"}
		}, "spec.config must not set wal.zonelocal.produce.enable, wal.zonelocal.produce.inline.ms or wal.zonelocal.produce.policy: they are spec.wal.zoneLocalProduce (enabled, inlineFallback, policy)"),
		Entry("zone-local produce in both spec.config and spec.wal", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true}
			kc.Spec.Config = map[string]string{"wal.zonelocal.produce.inline.ms": "0"}
		}, "spec.wal.zoneLocalProduce and spec.config's wal.zonelocal.produce.* keys (kept from before the field) cannot be used together"),
		// One key per spec.config rule; "refuses every key the operator
		// renders" below tries them all.
		Entry("config setting a broker ID", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"node.id": "7"} },
			"spec.config must not set broker.id, node.id, broker.id.base or broker.id.source: broker IDs are owned by the operator"),
		Entry("config overriding the rack", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"broker.rack": "x"} },
			"spec.config must not set broker.rack or zone: they are spec.zones[].name"),
		Entry("config pointing at another etcd", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"metadata.etcd.endpoints": "http://elsewhere:2379"}
		}, "spec.config must not set cluster.name, cluster.namespace or metadata.etcd.*: the metadata store is spec.metadata"),
		Entry("config moving the data directory", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"log.dirs": "/tmp"} },
			"spec.config must not set log.dirs, log.dir or data.dir: the data directory is the volume of spec.storage"),
		Entry("config setting listeners", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"advertised.listeners": "PLAINTEXT://x:9092"}
		}, "spec.config must not set listeners, advertised.listeners, listener.*, inter.broker.*, security.inter.broker.protocol, listen or advertised.address: client listeners are spec.listeners and the inter-broker listener is the operator's (mTLS with cluster CA certificates)"),
		Entry("config setting a listener's TLS file", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"listener.name.plaintext.ssl.certificate.location": "/x"}
		}, "spec.config must not set listeners, advertised.listeners, listener.*, inter.broker.*"),
		Entry("config setting the inter-broker protocol", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"security.inter.broker.protocol": "PLAINTEXT"}
		}, "spec.config must not set listeners, advertised.listeners, listener.*, inter.broker.*"),
		Entry("config setting inter-broker SASL", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"inter.broker.sasl.username": "x"}
		}, "spec.config must not set listeners, advertised.listeners, listener.*, inter.broker.*"),
		Entry("config setting ssl.*", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"ssl.client.auth": "required"}
		}, "spec.config must not set ssl.* or sasl.*: listener TLS is spec.listeners[].tls and spec.security (certificates from the operator's cluster CA or spec.security.listenerCertificate); SASL settings come with the KafkaUser resource"),
		Entry("config setting sasl.*", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"sasl.enabled.mechanisms": "PLAIN"}
		}, "spec.config must not set ssl.* or sasl.*"),
		Entry("config setting the WAL retention", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"wal.retention.ms": "7200000"}
		}, "spec.config must not set wal.enable, wal.enabled, wal.upload.interval.ms, wal.object.max.bytes or wal.retention.ms: they are spec.wal.enabled, spec.wal.uploadInterval, spec.wal.maxObjectBytes and spec.wal.retention"),
		Entry("config setting a bucket", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"wal.zone.a.bucket.endpoint": "http://x"}
		}, "spec.config must not set wal.bucket.* or wal.zone.*: the buckets are the zones' FastBuckets (spec.zones[].fastBucketRef)"),
		Entry("config enabling the slow tier", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"remote.log.storage.system.enable": "true"}
		}, "spec.config must not set tier.*, remote.log.*, log.local.retention.ms or log.remote.storage.enable: they belong to spec.tieredStorage"),
		Entry("config setting leader placement", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"leader.placement.policy": "Zone"}
		}, "spec.config must not set leader.placement.*: it is spec.leaderPlacement"),
		Entry("config moving the metrics listener", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"metrics.listen": "0.0.0.0:9000"}
		}, "spec.config must not set metrics.*: the operator serves /metrics and the /readyz readiness probe on port 9644"),
		Entry("config enabling pprof on the metrics port", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"metrics.pprof.enable": "true"}
		}, "spec.config must not set metrics.*"),
		Entry("config pointing the metrics listener at a token file", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"metrics.auth.token.file": "/nowhere"}
		}, "spec.config must not set metrics.*"),
		// Owned keys spelled with a character the brokers' parser
		// trimmed (issue 26): each is refused for its characters and by
		// the rule naming the field that owns the key it spells.
		Entry("node.id with a form feed", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"node.id\f": "4242"} },
			"spec.config keys must be lower case letters, digits, '.', '_' and '-'",
			"spec.config must not set broker.id, node.id, broker.id.base or broker.id.source: broker IDs are owned by the operator"),
		Entry("authorizer.class.name with a form feed", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"authorizer.class.name\f": ""}
		}, "spec.config keys must be lower case letters, digits, '.', '_' and '-'",
			"spec.config must not set authorizer.class.name, super.users or allow.everyone.if.no.acl.found: they are spec.security.authorization"),
		Entry("super.users with a no-break space", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"super.users\u00a0": "User:mallory"}
		}, "spec.config keys must be lower case letters, digits, '.', '_' and '-'",
			"spec.config must not set authorizer.class.name, super.users or allow.everyone.if.no.acl.found: they are spec.security.authorization"),
		Entry("metrics.pprof.enable with a form feed", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"metrics.pprof.enable\f": "true"}
		}, "spec.config keys must be lower case letters, digits, '.', '_' and '-'",
			"spec.config must not set metrics.*"),
		Entry("a key with a vertical tab inside", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"num\v.partitions": "6"} },
			"spec.config keys must be lower case letters, digits, '.', '_' and '-'"),
		Entry("an upper case key", func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"Node.Id": "6"} },
			"spec.config keys must be lower case letters, digits, '.', '_' and '-'"),
		Entry("a WAL retention beyond what the broker parses", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL = strata.WALSpec{Enabled: ptr.To(true), UploadInterval: &metav1.Duration{Duration: 10 * time.Millisecond}, Retention: &metav1.Duration{Duration: 597 * time.Hour}}
		}, "wal.retention must be between 1ms and 2147483647ms (596h31m23.647s): the broker reads wal.retention.ms as a positive int32"),
		Entry("a WAL retention 1ms over the limit", func(kc *strata.KafkaCluster) {
			kc.Spec.WAL = strata.WALSpec{Enabled: ptr.To(true), UploadInterval: &metav1.Duration{Duration: 10 * time.Millisecond}, Retention: &metav1.Duration{Duration: (controllers.MaxBrokerMillis + 1) * time.Millisecond}}
		}, "wal.retention must be between 1ms and 2147483647ms"),
		Entry("a listener named REPLICATION", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "REPLICATION", Port: 9093}}
		}, "spec.listeners: the name REPLICATION and the ports 9091 and 9644 are the operator's (the brokers' mTLS inter-broker listener and their metrics and readiness port)"),
		Entry("a listener on the inter-broker port", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "CLIENT", Port: 9091}}
		}, "spec.listeners: the name REPLICATION and the ports 9091 and 9644 are the operator's"),
		Entry("a listener on the metrics port", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "CLIENT", Port: 9644}}
		}, "spec.listeners: the name REPLICATION and the ports 9091 and 9644 are the operator's"),
		Entry("tls on a SASL_PLAINTEXT listener", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "CLIENT", Port: 9093, Protocol: "SASL_PLAINTEXT", TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequired}}}
		}, "spec.listeners[0]", "listener tls applies to protocol SSL or SASL_SSL only"),
		Entry("an unknown client auth", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "CLIENT", Port: 9093, Protocol: "SSL", TLS: &strata.ListenerTLS{ClientAuth: "always"}}}
		}, "spec.listeners[0].tls.clientAuth", "supported values"),
		Entry("a listener certificate without a TLS listener", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "PLAIN", Port: 9092, Protocol: "PLAINTEXT"}}
			kc.Spec.Security.ListenerCertificate = &strata.SecretReference{Name: "public-tls"}
		}, "security.listenerCertificate needs a listener of protocol SSL or SASL_SSL to serve it"),
		Entry("a CA valid for 6 years", func(kc *strata.KafkaCluster) {
			kc.Spec.Security.ClusterCA.Validity = &metav1.Duration{Duration: 6 * 8760 * time.Hour}
		}, "clusterCA.validity must be between 8760h (1 year) and 43800h (5 years)"),
		Entry("renewal an hour before expiry", func(kc *strata.KafkaCluster) {
			kc.Spec.Security.ClusterCA.RenewBefore = &metav1.Duration{Duration: time.Hour}
		}, "clusterCA.renewBefore must be between 24h and 4380h (half of the shortest CA validity)"),
		Entry("a leader zone with Balanced placement", func(kc *strata.KafkaCluster) {
			kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementBalanced, Zone: "a"}
		}, "leaderPlacement.zone needs leaderPlacement.policy Zone (Balanced spreads leaders over all zones)"),
		Entry("both managed and external etcd", func(kc *strata.KafkaCluster) {
			kc.Spec.Metadata = strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 3}, ExternalEndpoints: []string{"http://e:2379"}}
		}, "set either managed or externalEndpoints, not both"),
		Entry("an even number of etcd members", func(kc *strata.KafkaCluster) {
			kc.Spec.Metadata = strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 4}}
		}, "metadata.managed.replicas must be odd"),
		Entry("Zone leader placement without a zone", func(kc *strata.KafkaCluster) {
			kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone}
		}, "leaderPlacement.policy Zone needs leaderPlacement.zone"),
		Entry("a leader zone that is not a cluster zone", func(kc *strata.KafkaCluster) {
			kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone, Zone: "nowhere"}
		}, "leaderPlacement.zone must name a zone listed in spec.zones"),
		Entry("a zone named etcd", func(kc *strata.KafkaCluster) { kc.Spec.Zones[1].Name = "etcd" },
			"zone name etcd is reserved"),
		Entry("names too long for pod names", func(kc *strata.KafkaCluster) {
			kc.Name = strings.Repeat("c", 40)
			kc.Spec.Zones[0].Name = "zone-with-a-long-name"
		},
			"metadata.name and each zone name together must be at most 50 characters"),
		Entry("a roll stuck timeout under a minute", func(kc *strata.KafkaCluster) {
			kc.Spec.Roll.StuckAfter = &metav1.Duration{Duration: 30 * time.Second}
		}, "roll.stuckAfter must be between 1m and 168h"),
		Entry("a roll stuck timeout over a week", func(kc *strata.KafkaCluster) {
			kc.Spec.Roll.StuckAfter = &metav1.Duration{Duration: 169 * time.Hour}
		}, "roll.stuckAfter must be between 1m and 168h"),
		Entry("duplicate listener ports", func(kc *strata.KafkaCluster) {
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "A", Port: 9092}, {Name: "B", Port: 9092}}
		}, "listener ports must be unique"),
	)

	It("refuses every key the operator renders in spec.config, and accepts user settings", func() {
		// A cluster with every field that renders keys, rendered as the
		// reconciler does; the keys come from the renderer, not a list.
		full := valid()
		full.Spec.TieredStorage = &strata.TieredStorageSpec{Bucket: "strata-tier", Region: "us-east-1"}
		full.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone, Zone: "a"}
		full.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true}
		fb := &strata.FastBucket{Spec: strata.FastBucketSpec{Zone: "a", Bucket: "wal-a", Region: "us-east-1", Endpoint: "http://s3:9000"}}
		fb.Name = "wal-a"
		props := controllers.RenderBrokerConfig(full, controllers.ZoneInput{
			Zone: full.Spec.Zones[0], Bucket: fb, ZoneBuckets: map[string]*strata.FastBucket{"a": fb},
		})
		var keys []string
		for _, l := range strings.Split(props, "\n") {
			if k, _, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") && k != "num.partitions" && !controllers.OverridableDefaultKeys[k] {
				keys = append(keys, k)
			}
		}
		Expect(len(keys)).To(BeNumerically(">=", 30), props)
		keys = append(keys, "broker.id", "node.id", "listen", "advertised.address", "log.dir", "data.dir", "wal.enabled")
		for _, k := range keys {
			kc := valid()
			kc.Spec.Config = map[string]string{k: "x"}
			err := k8sClient.Create(suiteCtx, kc)
			expectRejected(err, "spec.config must not set")
			owner, ok := controllers.ConfigKeyOwner(k)
			Expect(ok).To(BeTrue(), "the reconciler's check does not know %s", k)
			AddReportEntry("refused "+k, owner)
		}
		kc := valid()
		kc.Spec.Config = map[string]string{"num.partitions": "6", "min.insync.replicas": "2", "auto.leader.rebalance.enable": "true", "broker.session.timeout.ms": "6000",
			// A default the operator renders that the user may override.
			"connections.max.reauth.ms": "600000"}
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
	})

	It("accepts a WAL retention of exactly 2147483647ms and one PLAINTEXT listener", func() {
		kc := valid()
		kc.Spec.WAL = strata.WALSpec{Enabled: ptr.To(true), UploadInterval: &metav1.Duration{Duration: 10 * time.Millisecond}, Retention: &metav1.Duration{Duration: controllers.MaxBrokerMillis * time.Millisecond}}
		kc.Spec.Listeners = []strata.ListenerSpec{{Name: "INTERNAL", Port: 9093, Protocol: "PLAINTEXT"}}
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
	})

	It("accepts zone-local produce, fills in its defaults, and takes inline fallbacks of 0s and 1h", func() {
		kc := valid()
		kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true}
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		Expect(kc.Spec.WAL.ZoneLocalProduce.Policy).To(Equal(strata.ZoneLocalProduceBucket))
		Expect(kc.Spec.WAL.ZoneLocalProduce.InlineFallback).To(HaveValue(Equal(metav1.Duration{Duration: 10 * time.Second})))
		for _, d := range []time.Duration{0, time.Millisecond, time.Hour} {
			kc := valid()
			kc.Name = fmt.Sprintf("zl-%d", d.Milliseconds())
			kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Enabled: true, Policy: strata.ZoneLocalProduceAuto, InlineFallback: &metav1.Duration{Duration: d}}
			Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed(), "inlineFallback %s", d)
			Expect(kc.Spec.WAL.ZoneLocalProduce.InlineFallback.Duration).To(Equal(d))
		}
		// Without WAL the block may stay, switched off.
		kc = valid()
		kc.Name = "zl-off"
		kc.Spec.WAL.Enabled = ptr.To(false)
		kc.Spec.WAL.ZoneLocalProduce = &strata.ZoneLocalProduceSpec{Policy: strata.ZoneLocalProduceAuto}
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
	})

	It("accepts a roll stuck timeout of two hours", func() {
		kc := valid()
		kc.Spec.Roll.StuckAfter = &metav1.Duration{Duration: 2 * time.Hour}
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		Expect(kc.Spec.Roll.StuckAfter.Duration).To(Equal(2 * time.Hour))
	})

	It("accepts Zone leader placement in one of spec.zones", func() {
		kc := valid()
		kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone, Zone: kc.Spec.Zones[1].Name}
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
	})

	DescribeTable("rejects invalid FastBuckets",
		func(mutate func(*strata.FastBucket), messages ...string) {
			fb := &strata.FastBucket{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fb"},
				Spec:       strata.FastBucketSpec{Zone: "a", Bucket: "wal-a", Region: "us-east-1"},
			}
			mutate(fb)
			expectRejected(k8sClient.Create(suiteCtx, fb), messages...)
		},
		Entry("an S3Express bucket without the --x-s3 suffix", func(fb *strata.FastBucket) { fb.Spec.Type = strata.BucketTypeS3Express },
			"an S3Express bucket name must end with --x-s3"),
		Entry("Ambient credentials with a Secret", func(fb *strata.FastBucket) {
			fb.Spec.Credentials = strata.S3Credentials{Source: strata.CredentialsAmbient, SecretRef: &strata.S3SecretReference{Name: "s"}}
		}, "credentials.source Ambient must not set credentials.secretRef"),
		Entry("Secret credentials without a Secret", func(fb *strata.FastBucket) {
			fb.Spec.Credentials = strata.S3Credentials{Source: strata.CredentialsFromSecret}
		}, "credentials.source Secret needs credentials.secretRef"),
		Entry("an unknown bucket type", func(fb *strata.FastBucket) { fb.Spec.Type = "GCS" },
			`spec.type: Unsupported value: "GCS"`),
	)

	It("accepts every sample in config/samples (server-side dry run)", func() {
		files, err := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		created := map[string]int{}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
					break
				} else {
					Expect(err).NotTo(HaveOccurred(), f)
				}
				if len(u.Object) == 0 {
					continue
				}
				u.SetNamespace(ns)
				Expect(k8sClient.Create(suiteCtx, u, client.DryRunAll)).To(Succeed(), "%s: %s %s", f, u.GetKind(), u.GetName())
				created[u.GetKind()]++
			}
		}
		Expect(created).To(Equal(map[string]int{"Secret": 1, "FastBucket": 3, "KafkaCluster": 1, "KafkaTopic": 1, "KafkaUser": 2, "KafkaRebalance": 1}))
	})

	It("keeps the managed etcd size fixed after creation", func() {
		kc := valid()
		kc.Spec.Metadata = strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 3}}
		Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
		var err error
		Eventually(func() bool {
			Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
			kc.Spec.Metadata.Managed.Replicas = 5
			err = k8sClient.Update(suiteCtx, kc)
			return apierrors.IsConflict(err)
		}, timeout, interval).Should(BeFalse())
		expectRejected(err, "metadata.managed.replicas cannot change after creation")
	})

	// Every path by which an edit could change the managed etcd's size or
	// swap the metadata store, whatever the cluster was created with:
	// the replicas rule used to sit on managed.replicas, where Kubernetes
	// skips it when the old object has no managed (3 members by default).
	DescribeTable("keeps the metadata store and the managed etcd size as created",
		func(created, edited strata.MetadataSpec, messages ...string) {
			kc := valid()
			kc.Spec.Metadata = created
			Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
			var err error
			Eventually(func() bool {
				Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
				kc.Spec.Metadata = *edited.DeepCopy()
				err = k8sClient.Update(suiteCtx, kc)
				return apierrors.IsConflict(err)
			}, timeout, interval).Should(BeFalse())
			if len(messages) == 0 {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			expectRejected(err, messages...)
		},
		Entry("created without managed (3 members), then managed with 1",
			strata.MetadataSpec{}, strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 1}},
			"metadata.managed.replicas cannot change after creation (a cluster created without metadata.managed has 3 members)"),
		Entry("created without managed, then managed with 5",
			strata.MetadataSpec{}, strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 5}},
			"metadata.managed.replicas cannot change after creation"),
		Entry("created with 3 members, then 5",
			strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 3}}, strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 5}},
			"metadata.managed.replicas cannot change after creation"),
		Entry("created with 1 member, then managed removed (3 members)",
			strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 1}}, strata.MetadataSpec{},
			"metadata.managed.replicas cannot change after creation"),
		Entry("created with 1 member, then managed without replicas (defaulted to 3)",
			strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 1}}, strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Image: strata.DefaultEtcdImage}},
			"metadata.managed.replicas cannot change after creation"),
		Entry("created managed, then external endpoints",
			strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 3}}, strata.MetadataSpec{ExternalEndpoints: []string{"http://e:2379"}},
			"metadata: the choice between a managed etcd and externalEndpoints cannot change after creation"),
		Entry("created without managed, then external endpoints",
			strata.MetadataSpec{}, strata.MetadataSpec{ExternalEndpoints: []string{"http://e:2379"}},
			"metadata: the choice between a managed etcd and externalEndpoints cannot change after creation"),
		Entry("created external, then managed",
			strata.MetadataSpec{ExternalEndpoints: []string{"http://e:2379"}}, strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 3}},
			"metadata: the choice between a managed etcd and externalEndpoints cannot change after creation"),
		Entry("created external, then neither (managed by default)",
			strata.MetadataSpec{ExternalEndpoints: []string{"http://e:2379"}}, strata.MetadataSpec{},
			"metadata: the choice between a managed etcd and externalEndpoints cannot change after creation"),
		// What stays allowed: the same size spelled another way, other
		// managed settings, and other external endpoints.
		Entry("created without managed, then managed with 3: accepted",
			strata.MetadataSpec{}, strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 3}}),
		Entry("created with 3 members, then managed removed: accepted",
			strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 3}}, strata.MetadataSpec{}),
		Entry("created with 1 member, then another etcd image: accepted",
			strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 1}}, strata.MetadataSpec{Managed: &strata.ManagedEtcdSpec{Replicas: 1, Image: "quay.io/coreos/etcd:v3.7.4"}}),
		Entry("created external, then other endpoints: accepted",
			strata.MetadataSpec{ExternalEndpoints: []string{"http://e:2379"}}, strata.MetadataSpec{ExternalEndpoints: []string{"https://f:2379", "https://g:2379"}}),
	)

	It("keeps a FastBucket in its zone", func() {
		fb := &strata.FastBucket{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fb"},
			Spec: strata.FastBucketSpec{
				Zone: "a", Bucket: "wal-a", Region: "us-east-1", Endpoint: unreachableEndpoint,
				Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "no-credentials"}},
			},
		}
		Expect(k8sClient.Create(suiteCtx, fb)).To(Succeed())
		// The controller writes status meanwhile; retry on conflicts only.
		var err error
		Eventually(func() bool {
			Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(fb), fb)).To(Succeed())
			fb.Spec.Zone = "b"
			err = k8sClient.Update(suiteCtx, fb)
			return apierrors.IsConflict(err)
		}, timeout, interval).Should(BeFalse())
		expectRejected(err, "zone is immutable")
	})
})
