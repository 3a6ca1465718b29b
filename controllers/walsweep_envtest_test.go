package controllers_test

import (
	"bytes"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// The WAL sweeper against a real Versity Gateway. Versity gives every
// object the modification time of its PUT and cannot be backdated, so the
// specs put "old" objects first, wait until the server's clock has moved
// on, put "new" ones, and then move the sweeper's clock (sweepClock) to
// exactly the oldest-allowed age of the old ones.
var _ = Describe("WAL sweeper", Ordered, func() {
	var (
		srv *s3server.Server
		ns  string
	)
	BeforeAll(func() {
		srv = s3server.Start(GinkgoT(), "sweep-a", "sweep-b", "sweep-c")
	})
	BeforeEach(func() {
		ns = newNamespace()
		for name, secret := range map[string]string{"wal-keys": srv.SecretKey, "wrong-keys": "not-the-secret"} {
			Expect(k8sClient.Create(suiteCtx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				StringData: map[string]string{"accessKeyID": srv.AccessKey, "secretAccessKey": secret},
			})).To(Succeed())
		}
	})

	// walObject encodes a real WAL object for key (one chunk, header
	// fields from the key).
	walObject := func(key string) []byte {
		k, err := wal.ParseKey(key)
		Expect(err).NotTo(HaveOccurred())
		b, _, err := wal.Encode(wal.Header{
			Cluster: k.Cluster, Zone: k.Zone, BrokerID: k.BrokerID, Incarnation: k.Incarnation, Sequence: k.Sequence,
			CreatedAt: time.Now().Truncate(time.Millisecond),
		}, []wal.ChunkInput{{Topic: "orders", Partition: 0, LeaderEpoch: 1, BaseOffset: 0, LastOffset: 0, Batches: [][]byte{bytes.Repeat([]byte{7}, 61)}}})
		Expect(err).NotTo(HaveOccurred())
		return b
	}
	put := func(bucket, key string, data []byte) {
		_, err := srv.Client().PutObject(suiteCtx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
		Expect(err).NotTo(HaveOccurred())
	}
	mtime := func(bucket, key string) time.Time {
		out, err := srv.Client().HeadObject(suiteCtx, headObject(bucket, key))
		Expect(err).NotTo(HaveOccurred(), "object %s", key)
		return *out.LastModified
	}
	exists := func(bucket, key string) bool {
		_, err := srv.Client().HeadObject(suiteCtx, headObject(bucket, key))
		return err == nil
	}
	// waitServerClockPast polls until an object put now gets a
	// modification time after t.
	waitServerClockPast := func(bucket string, t time.Time) {
		Eventually(func() time.Time {
			put(bucket, "clock-marker", []byte("x"))
			return mtime(bucket, "clock-marker")
		}, timeout, 100*time.Millisecond).Should(BeTemporally(">", t))
	}
	fastBucket := func(name, bucket, secret string) {
		Expect(k8sClient.Create(suiteCtx, &strata.FastBucket{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: strata.FastBucketSpec{
				Zone: "zone-a", Bucket: bucket, Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true,
				Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: secret}},
			},
		})).To(Succeed())
	}
	cluster := func(name, bucketRef string, retention time.Duration, config map[string]string) {
		createCluster(ns, name, &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{
			Zones:  []strata.ZoneSpec{{Name: "zone-a", Brokers: 1, FastBucketRef: &strata.LocalObjectReference{Name: bucketRef}}},
			WAL:    strata.WALSpec{Retention: &metav1.Duration{Duration: retention}},
			Config: config,
		}})
	}
	getBucket := func(g Gomega, name string) *strata.FastBucket {
		fb := &strata.FastBucket{}
		g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, fb)).To(Succeed())
		return fb
	}
	condition := func(g Gomega, fb *strata.FastBucket, typ string) *metav1.Condition {
		c := meta.FindStatusCondition(fb.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "condition %s", typ)
		return c
	}

	It("deletes only the WAL objects of clusters using the bucket that are older than their retention", func() {
		const bucket = "sweep-a"
		retention := 5 * time.Second
		sweepClock.SetTime(time.Now().Add(-time.Hour)) // before every object of this spec
		// Brokers name their cluster <namespace>/<name> in WAL keys
		// (controllers.WALClusterName; TestSweeperDeletesObjectsOfOperatorConfiguredBroker
		// checks that against a real broker).
		demo := ns + "/demo"
		oldDemo := []string{wal.ObjectKey(demo, "zone-a", 101, 1, 1), wal.ObjectKey(demo, "zone-a", 101, 1, 2), wal.ObjectKey(demo, "zone-a", 102, 9, 7)}
		oldKept := []string{
			wal.ObjectKey(ns+"/stranger", "zone-a", 101, 1, 1),   // a cluster that does not use the bucket
			wal.ObjectKey("elsewhere/demo", "zone-a", 101, 1, 1), // a cluster of the same name in another namespace
			wal.ObjectKey("demo", "zone-a", 101, 1, 1),           // a broker named without its namespace
			wal.ObjectKey(demo, "zone-b", 201, 1, 1),             // the demo cluster's other zone
		}
		nonWAL := []string{"wal/" + demo + "/zone-a/README", "wal/" + demo + "/zone-a/101/1/1", "other/" + wal.ObjectKey(demo, "zone-a", 101, 1, 3)}
		// The objects that must stay go first: they are at least as old
		// as the ones that must go.
		for _, k := range nonWAL {
			put(bucket, k, []byte("not a WAL object"))
		}
		for _, k := range append(append([]string{}, oldKept...), oldDemo...) {
			put(bucket, k, walObject(k))
		}
		var oldest time.Time // the newest of the old ones: the boundary
		for _, k := range oldDemo {
			if m := mtime(bucket, k); m.After(oldest) {
				oldest = m
			}
		}
		waitServerClockPast(bucket, oldest)
		newDemo := []string{wal.ObjectKey(demo, "zone-a", 101, 1, 3), wal.ObjectKey(demo, "zone-a", 102, 9, 8)}
		var newBytes int64
		for _, k := range newDemo {
			b := walObject(k)
			newBytes += int64(len(b))
			put(bucket, k, b)
			Expect(mtime(bucket, k)).To(BeTemporally(">", oldest))
		}

		fastBucket("wal-a", bucket, "wal-keys")
		cluster("demo", "wal-a", retention, nil)

		// The sweeper's clock is still at the suite's start, before every
		// object: the first sweeps count them and delete nothing.
		Eventually(func(g Gomega) {
			fb := getBucket(g, "wal-a")
			g.Expect(fb.Status.WAL).NotTo(BeNil())
			g.Expect(fb.Status.WAL.Clusters).To(HaveLen(1))
			g.Expect(fb.Status.WAL.Objects).To(BeEquivalentTo(len(oldDemo) + len(oldKept) + 2 + len(newDemo))) // 2 non-WAL keys under wal/
			g.Expect(condition(g, fb, strata.ConditionWALSwept).Reason).To(Equal(controllers.ReasonSwept))
		}, timeout, interval).Should(Succeed())
		Expect(getBucket(Default, "wal-a").Status.WAL.SweptObjects).To(BeZero())
		for _, k := range oldDemo {
			Expect(exists(bucket, k)).To(BeTrue(), "%s deleted before its time", k)
		}

		// Now the newest old object is exactly `retention` old (deleted:
		// the cap is inclusive), the new ones are younger.
		sweepClock.SetTime(oldest.Add(retention))
		var fb *strata.FastBucket
		Eventually(func(g Gomega) {
			fb = getBucket(g, "wal-a")
			g.Expect(fb.Status.WAL.SweptObjects).To(BeEquivalentTo(len(oldDemo)))
		}, timeout, interval).Should(Succeed())
		for _, k := range oldDemo {
			Expect(exists(bucket, k)).To(BeFalse(), "%s should have been swept", k)
		}
		for _, k := range append(append(append([]string{}, newDemo...), oldKept...), nonWAL...) {
			Expect(exists(bucket, k)).To(BeTrue(), "%s must not be deleted", k)
		}
		st := fb.Status.WAL
		Expect(st.SweptBytes).To(BeNumerically(">", 0))
		Expect(st.Objects).To(BeEquivalentTo(len(oldKept) + 2 + len(newDemo)))
		Expect(st.LastSweepTime).NotTo(BeNil())
		Expect(st.Clusters).To(ConsistOf(
			And(HaveField("Name", demo), HaveField("Objects", BeEquivalentTo(len(newDemo))), HaveField("Bytes", newBytes),
				HaveField("Retention", Equal(&metav1.Duration{Duration: retention}))),
		))
		c := condition(Default, fb, strata.ConditionWALSwept)
		Expect(c.Status).To(Equal(metav1.ConditionTrue))
		Expect(c.Message).To(ContainSubstring(demo + " (5s)"))
		AddReportEntry("WAL sweep status", st)

		// The same figures on the operator's metrics endpoint.
		metric := func(name string) float64 {
			mfs, err := ctrlmetrics.Registry.Gather()
			Expect(err).NotTo(HaveOccurred())
			for _, mf := range mfs {
				if mf.GetName() != name {
					continue
				}
				for _, m := range mf.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["namespace"] == ns && labels["fastbucket"] == "wal-a" {
						return m.GetCounter().GetValue() + m.GetGauge().GetValue()
					}
				}
			}
			return -1
		}
		Expect(metric("strata_operator_wal_swept_objects_total")).To(BeEquivalentTo(len(oldDemo)))
		Expect(metric("strata_operator_wal_swept_bytes_total")).To(BeEquivalentTo(st.SweptBytes))
	})

	It("records LifecycleRuleApplied=False NotSupported on Versity Gateway and keeps sweeping", func() {
		fastBucket("wal-b", "sweep-b", "wal-keys")
		cluster("steady", "wal-b", time.Hour, nil)
		Eventually(func(g Gomega) {
			fb := getBucket(g, "wal-b")
			c := condition(g, fb, strata.ConditionLifecycleRuleApplied)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(controllers.ReasonNotSupported))
			g.Expect(c.Message).To(ContainSubstring("NotImplemented"))
			g.Expect(condition(g, fb, strata.ConditionWALSwept).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(g, fb, strata.ConditionReachable).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(fb.Status.WAL.LifecycleExpirationDays).To(BeZero())
		}, timeout, interval).Should(Succeed())

		// spec.lifecycleRule: false leaves the lifecycle configuration alone.
		Eventually(func(g Gomega) {
			fb := getBucket(g, "wal-b")
			fb.Spec.LifecycleRule = aws.Bool(false)
			g.Expect(k8sClient.Update(suiteCtx, fb)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) string {
			return condition(g, getBucket(g, "wal-b"), strata.ConditionLifecycleRuleApplied).Reason
		}, timeout, interval).Should(Equal(controllers.ReasonRuleDisabled))
	})

	It("deletes nothing while the bucket is unreachable and says why", func() {
		const bucket = "sweep-c"
		old := wal.ObjectKey(ns+"/gone", "zone-a", 101, 1, 1)
		put(bucket, old, walObject(old))
		sweepClock.SetTime(time.Now().Add(24 * time.Hour))

		// Rejected credentials: the probe fails, no sweep is attempted.
		fastBucket("wal-c", bucket, "wrong-keys")
		cluster("gone", "wal-c", time.Second, nil)
		Eventually(func(g Gomega) {
			c := condition(g, getBucket(g, "wal-c"), strata.ConditionWALSwept)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(controllers.ReasonBucketUnreachable))
			g.Expect(c.Message).To(ContainSubstring("AccessDenied"))
			g.Expect(c.Message).To(ContainSubstring("nothing was deleted"))
		}, timeout, interval).Should(Succeed())
		Expect(exists(bucket, old)).To(BeTrue())
		Expect(getBucket(Default, "wal-c").Status.WAL).To(BeNil())

		// The server goes away after a good probe: the sweep's listing
		// fails and says so.
		fastBucket("wal-d", bucket, "wal-keys")
		cluster("other", "wal-d", 2*time.Second, nil) // "gone" does not use wal-d: its object stays
		Eventually(func(g Gomega) {
			fb := getBucket(g, "wal-d")
			g.Expect(condition(g, fb, strata.ConditionWALSwept).Reason).To(Equal(controllers.ReasonSwept))
			g.Expect(fb.Status.WAL.Objects).To(BeEquivalentTo(1))
			// Swept with the cluster: the reconcile its creation caused
			// (which may probe once more) is over.
			g.Expect(fb.Status.WAL.Clusters).To(ConsistOf(HaveField("Name", ns+"/other")))
		}, timeout, interval).Should(Succeed())
		srv.Stop()
		sweepClock.SetTime(time.Now().Add(48 * time.Hour)) // a sweep is due
		// Whichever notices first: the sweep's listing fails
		// (EndpointUnreachable), or a probe — a reconcile may read the
		// bucket from a cache that has not seen the last probe yet and
		// probe again — and the sweep is skipped (BucketUnreachable).
		Eventually(func(g Gomega) {
			c := condition(g, getBucket(g, "wal-d"), strata.ConditionWALSwept)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(BeElementOf(controllers.ReasonEndpointUnreachable, controllers.ReasonBucketUnreachable))
			g.Expect(c.Message).To(ContainSubstring("nothing was deleted"))
			AddReportEntry("WALSwept after the server stopped", c.Reason)
		}, timeout, interval).Should(Succeed())
		srv.Restart()
		Expect(exists(bucket, old)).To(BeTrue())
		Expect(getBucket(Default, "wal-d").Status.WAL.SweptObjects).To(BeZero())
	})
})
