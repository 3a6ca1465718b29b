package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// workload is a continuous idempotent acks=all producer and a consumer
// checking the sequence while the scenario runs: record values
// are 0, 1, 2, ...; it keeps which ones were acknowledged, the errors its
// promises got, and every NOT_ENOUGH_REPLICAS the brokers answered, even
// one the client retried away (franz-go retries it, so only its debug log
// shows it).
type workload struct {
	topic  string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	acked     map[int64]bool
	errs      []string
	notEnough []string

	// The consumer reads the topic from the start while the scenario
	// runs: seen records, the last sequence per partition, and any
	// duplicate or out-of-order record it met.
	consumer     *kgo.Client
	consumerDone chan struct{}
	seen         map[int64]bool
	last         map[int32]int64
	violations   []string
}

type notEnoughLogger struct{ w *workload }

func (l notEnoughLogger) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l notEnoughLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	line := msg + " " + fmt.Sprint(keyvals...)
	if level <= kgo.LogLevelWarn {
		fmt.Fprintf(GinkgoWriter, "producer %s: %s\n", level, line)
	}
	if strings.Contains(line, "NOT_ENOUGH_REPLICAS") {
		l.w.mu.Lock()
		l.w.notEnough = append(l.w.notEnough, line)
		l.w.mu.Unlock()
	}
}

func startWorkload(seeds []string, topic string) *workload {
	GinkgoHelper()
	w := &workload{topic: topic, acked: map[int64]bool{}, done: make(chan struct{})}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(64), kgo.ProducerLinger(0),
		kgo.WithLogger(notEnoughLogger{w}))
	Expect(err).NotTo(HaveOccurred())
	w.cl = cl
	ctx, cancel := context.WithCancel(suiteCtx)
	w.cancel = cancel
	go func() {
		defer close(w.done)
		for seq := int64(0); ctx.Err() == nil; seq++ {
			rec := &kgo.Record{Value: []byte(strconv.FormatInt(seq, 10))}
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				w.mu.Lock()
				defer w.mu.Unlock()
				if err != nil {
					if ctx.Err() == nil {
						w.errs = append(w.errs, fmt.Sprintf("record %s: %v", r.Value, err))
					}
					return
				}
				w.acked[seq] = true
			})
		}
	}()
	w.startConsumer(seeds)
	DeferCleanup(func() { w.Stop(); cl.Close(); w.stopConsumer() })
	return w
}

// startConsumer reads the topic from the start for the whole scenario,
// checking each partition's sequence as records arrive (a duplicate or a
// record out of order is a violation), so that a roll or a drain that
// serves wrong data is seen while it happens, not only at the end.
func (w *workload) startConsumer(seeds []string) {
	GinkgoHelper()
	w.seen, w.last, w.consumerDone = map[int64]bool{}, map[int32]int64{}, make(chan struct{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(w.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	Expect(err).NotTo(HaveOccurred())
	w.consumer = cl
	go func() {
		defer close(w.consumerDone)
		for {
			fs := cl.PollFetches(suiteCtx)
			if fs.IsClientClosed() || suiteCtx.Err() != nil {
				return
			}
			w.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				seq, err := strconv.ParseInt(string(r.Value), 10, 64)
				switch {
				case err != nil:
					w.violations = append(w.violations, fmt.Sprintf("partition %d offset %d: value %q", r.Partition, r.Offset, r.Value))
					return
				case w.seen[seq]:
					w.violations = append(w.violations, fmt.Sprintf("record %d twice (partition %d offset %d)", seq, r.Partition, r.Offset))
				}
				if prev, ok := w.last[r.Partition]; ok && seq <= prev {
					w.violations = append(w.violations, fmt.Sprintf("partition %d out of order at offset %d: %d after %d", r.Partition, r.Offset, seq, prev))
				}
				w.last[r.Partition] = seq
				w.seen[seq] = true
			})
			w.mu.Unlock()
		}
	}()
}

func (w *workload) stopConsumer() {
	w.consumer.Close()
	<-w.consumerDone
}

// Acked is how many records were acknowledged so far.
func (w *workload) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// Stop stops producing and waits for the records in flight.
func (w *workload) Stop() {
	select {
	case <-w.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(suiteCtx, time.Minute)
	defer cancel()
	_ = w.cl.Flush(ctx)
	w.cancel()
	<-w.done
}

// Verify stops the producer and waits until the consumer that ran
// throughout has seen every acknowledged record; each partition held its
// records in the order they were produced, each once.
func (w *workload) Verify(ctx context.Context) {
	GinkgoHelper()
	w.Stop()
	w.mu.Lock()
	acked := len(w.acked)
	errs, notEnough := slices.Clone(w.errs), slices.Clone(w.notEnough)
	w.mu.Unlock()
	Expect(errs).To(BeEmpty(), "produce errors")
	Expect(notEnough).To(BeEmpty(), "NOT_ENOUGH_REPLICAS answers seen by the producer")
	Expect(acked).To(BeNumerically(">", 0))

	// The consumer that ran throughout must have seen every acknowledged
	// record, each once and in order.
	Eventually(func(g Gomega) {
		w.mu.Lock()
		defer w.mu.Unlock()
		g.Expect(w.violations).To(BeEmpty(), "the consumer's sequence checks")
		missing := 0
		for seq := range w.acked {
			if !w.seen[seq] {
				missing++
			}
		}
		g.Expect(missing).To(BeZero(), "of %d acknowledged records not consumed", acked)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	fmt.Fprintf(GinkgoWriter, "workload: %d records acknowledged, all consumed once and in order while the scenario ran\n", acked)
}

// rollSpec is a cluster of one broker in each of zones a, b, c without
// WAL, on the loopback brokers' etcd.
func rollSpec(ns, name string, brokers map[string]int32) (*strata.KafkaCluster, *loopbackCluster) {
	GinkgoHelper()
	kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{WAL: strata.WALSpec{Enabled: ptr.To(false)}, Config: map[string]string{}}}
	for _, z := range []string{"a", "b", "c"} {
		kc.Spec.Zones = append(kc.Spec.Zones, strata.ZoneSpec{Name: z, Brokers: brokers[z]})
	}
	kc.Namespace, kc.Name = ns, name
	lb := startLoopbackBrokers(kc)
	kc.Spec.Metadata.ExternalEndpoints = lb.Etcd
	Expect(k8sClient.Create(suiteCtx, kc)).To(Succeed())
	return kc, lb
}

// createTopic creates a topic (retrying until the brokers take it).
func createTopic(ctx context.Context, adm *kadm.Client, name string, partitions int32, rf int16, configs map[string]*string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		resp, err := adm.CreateTopic(ctx, partitions, rf, configs, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Err).NotTo(HaveOccurred())
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
}

// podsCurrent says whether every broker pod of kc runs its StatefulSet's
// current template.
func podsCurrent(g Gomega, kc *strata.KafkaCluster) {
	for _, z := range kc.Spec.Zones {
		sts, err := getSTS(kc.Namespace, controllers.ZoneStatefulSetName(kc.Name, z.Name))
		g.Expect(err).NotTo(HaveOccurred())
		want := sts.Spec.Template.Annotations[controllers.AnnotationTemplateHash]
		for ord := range z.Brokers {
			pod := &corev1.Pod{}
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: kc.Namespace, Name: controllers.BrokerPodName(kc.Name, z.Name, ord)}, pod)).To(Succeed())
			g.Expect(pod.Annotations[controllers.AnnotationTemplateHash]).To(Equal(want), "pod %s", pod.Name)
			g.Expect(isPodReadyTest(pod)).To(BeTrue(), "pod %s ready", pod.Name)
		}
	}
}

var _ = Describe("Rolling restarts", func() {
	It("roll every broker one at a time on a config change, with no acknowledged record lost", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "roll", map[string]int32{"a": 1, "b": 1, "c": 1})
		k := startKubelet(kc, lb)

		adm := lb.Admin()
		createTopic(ctx, adm, "events", 3, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})

		By("the emulated StatefulSets bring every pod up: Ready, nothing to roll")
		Eventually(func(g Gomega) {
			got := getCluster(ns, "roll")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(k.MaxDown()).To(BeNumerically("<=", 3)) // the cold start

		w := startWorkload(lb.Addrs(), "events")
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", 100))
		k.mu.Lock()
		k.maxDown = len(k.down) // count from here: the roll only
		k.mu.Unlock()

		By("a config change: the operator restarts the three brokers one at a time")
		start := time.Now()
		updateCluster(ns, "roll", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"log.retention.ms": "3600000"}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "roll")
			g.Expect(got.Status.Roll).NotTo(BeNil())
			g.Expect(got.Status.Roll.Pending).NotTo(BeEmpty())
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionReconciling)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(BeEquivalentTo("True"))
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getCluster(ns, "roll")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			for _, id := range []int32{0, 100, 200} {
				g.Expect(k.Restarts(id)).To(Equal(1), "restarts of broker %d", id)
			}
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "roll of 3 brokers took %s\n", time.Since(start).Round(100*time.Millisecond))
		Expect(k.MaxDown()).To(Equal(1), "brokers down at the same time during the roll")
		acked := w.Acked()
		Eventually(w.Acked).WithContext(ctx).WithTimeout(timeout).Should(BeNumerically(">", acked+100), "the producer goes on after the roll")
		w.Verify(ctx)
	}, SpecTimeout(8*time.Minute))

	It("stop at a broker that does not come back, report it stuck, and go on once it is back", func(ctx SpecContext) {
		ns := newNamespace()
		kc, lb := rollSpec(ns, "stuck", map[string]int32{"a": 1, "b": 1, "c": 1})
		k := startKubelet(kc, lb)
		cl, err := kgo.NewClient(kgo.SeedBrokers(lb.Addrs()...))
		Expect(err).NotTo(HaveOccurred())
		defer cl.Close()
		createTopic(ctx, kadm.NewClient(cl), "events", 3, 3, map[string]*string{"min.insync.replicas": ptr.To("2")})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stuck")
			podsCurrent(g, got)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, strata.ConditionReady)).To(BeTrue(), "%+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		k.mu.Lock()
		k.maxDown = len(k.down)
		k.mu.Unlock()

		By("a config change whose first restarted broker never comes back: the roll stops there and says so")
		k.HoldRestarts(true)
		updateCluster(ns, "stuck", func(kc *strata.KafkaCluster) {
			kc.Spec.Config = map[string]string{"log.retention.ms": "3600000"}
		})
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stuck")
			c := meta.FindStatusCondition(got.Status.Conditions, strata.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Reason).To(Equal(controllers.ReasonRollStuck))
			g.Expect(c.Message).To(ContainSubstring("rolling restart stuck"))
			g.Expect(c.Message).To(ContainSubstring("is not ready: waiting for it before the next restart"))
			g.Expect(got.Status.Roll).NotTo(BeNil())
			g.Expect(got.Status.Roll.BlockedSince).NotTo(BeNil())
			g.Expect(got.Status.Roll.Pending).To(HaveLen(2))
			// Per broker while the roll runs: its pod's image, and whether
			// it still waits for its restart.
			outdated := 0
			for _, b := range got.Status.Brokers {
				g.Expect(b.Image).To(Equal(strata.DefaultImage), "broker %d", b.ID)
				if b.Outdated {
					outdated++
				}
			}
			g.Expect(outdated).To(Equal(2))
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, strata.ConditionReconciling)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
		Expect(k.MaxDown()).To(Equal(1), "no other broker restarted while the first is down")

		By("the broker comes back: the roll goes on and finishes, Stalled clears")
		k.HoldRestarts(false)
		Eventually(func(g Gomega) {
			got := getCluster(ns, "stuck")
			podsCurrent(g, got)
			g.Expect(got.Status.Roll).To(BeNil())
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, strata.ConditionStalled)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(3 * timeout).Should(Succeed())
		Expect(k.MaxDown()).To(Equal(1))
	}, SpecTimeout(6*time.Minute))
})
