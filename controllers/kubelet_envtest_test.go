package controllers_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/controllers"
)

// kubelet plays the StatefulSet controller and the kubelet for the broker
// StatefulSets of one KafkaCluster whose brokers are loopback processes
// (startLoopbackBrokers), so that specs see the operator's pod deletions
// and scale changes act on real brokers:
//
//   - for each zone StatefulSet, a pod per ordinal below its replicas,
//     created from the StatefulSet's *current* template (labels,
//     annotations, spec; bound to a node, so that deleting it is graceful
//     as on a real cluster), Ready in its status once the broker's /readyz
//     answers 200;
//   - a pod with a deletion timestamp (the operator restarting it): its
//     broker is stopped with SIGTERM (controlled shutdown), the pod is
//     removed and re-created from the current template, and the broker
//     started again on its data directory;
//   - ordinals at or above replicas (scale-down): the pod is deleted and
//     its broker stopped for good;
//   - a new ordinal (scale-up): a broker process is started for it, with
//     the zone's broker ID block base + ordinal;
//   - the StatefulSet's status (replicas, ready, updated) as its
//     controller would write it.
//
// It tracks how many of the brokers that should run are down at the same
// time (process stopped or /readyz not 200) and the most ever seen.
type kubelet struct {
	key  types.NamespacedName
	lc   *loopbackCluster
	opts []brokertest.Option

	mu       sync.Mutex
	running  map[int32]bool
	down     map[int32]bool
	maxDown  int
	restarts map[int32]int
	removed  map[int32]bool
	// holdRestarts: a deleted pod is re-created but its broker is not
	// started again (a pod crash-looping on its new template).
	holdRestarts bool
	// holdScaleDown: pods beyond a StatefulSet's replicas keep running
	// (a pod still terminating after the StatefulSet shrank).
	holdScaleDown bool
	// violations: pods removed by a scale-down while the metadata still
	// named their broker in a replica list.
	violations []string
	log        []string
	// nodes: the node a zone's new pods are bound to (PlaceOn), else
	// "envtest-node".
	nodes map[string]string
}

// startKubelet starts the emulator for kc (which must exist by the time
// its StatefulSets do) until the spec ends. opts are given to brokers it
// starts for a scale-up, after the loopback cluster's own settings.
func startKubelet(kc *strata.KafkaCluster, lc *loopbackCluster, opts ...brokertest.Option) *kubelet {
	return startKubeletOn(kc, lc, nil, opts...)
}

// startKubeletOn is startKubelet with each zone's pods bound to the node
// nodes names (zone -> node; "envtest-node" for a zone not named).
func startKubeletOn(kc *strata.KafkaCluster, lc *loopbackCluster, nodes map[string]string, opts ...brokertest.Option) *kubelet {
	k := &kubelet{
		key: types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}, lc: lc, opts: opts,
		running: map[int32]bool{}, down: map[int32]bool{}, restarts: map[int32]int{}, removed: map[int32]bool{},
		nodes: maps.Clone(nodes),
	}
	for id := range lc.brokers() {
		k.running[id] = true
	}
	ctx, cancel := context.WithCancel(suiteCtx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := k.sync(ctx); err != nil && ctx.Err() == nil {
				k.logf("sync: %v", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	DeferCleanup(func() {
		cancel()
		<-done
	})
	return k
}

// PlaceOn binds the pods of zone created from now on to node (as the
// scheduler would pick it; an existing pod stays where it is).
func (k *kubelet) PlaceOn(zone, node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nodes == nil {
		k.nodes = map[string]string{}
	}
	k.nodes[zone] = node
}

func (k *kubelet) nodeOf(zone string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := k.nodes[zone]; n != "" {
		return n
	}
	return "envtest-node"
}

func (k *kubelet) logf(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	line := time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
	k.log = append(k.log, line)
	fmt.Fprintln(GinkgoWriter, "kubelet:", line)
}

// HoldRestarts makes re-created pods' brokers stay down (true) or start
// again (false), as a pod that crash-loops on its new template and one
// that is fixed.
func (k *kubelet) HoldRestarts(hold bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.holdRestarts = hold
}

// HoldScaleDown keeps the pods a StatefulSet shrank past running (true),
// as pods slow to terminate, or removes them (false).
func (k *kubelet) HoldScaleDown(hold bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.holdScaleDown = hold
}

// MaxDown is the most brokers that should run seen down at the same time.
func (k *kubelet) MaxDown() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.maxDown
}

// Restarts is how many times broker id was restarted for a pod deletion.
func (k *kubelet) Restarts(id int32) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restarts[id]
}

// Removed says whether broker id was stopped for a scale-down.
func (k *kubelet) Removed(id int32) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.removed[id]
}

func (k *kubelet) setDown(id int32, down bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if down {
		k.down[id] = true
	} else {
		delete(k.down, id)
	}
	k.maxDown = max(k.maxDown, len(k.down))
}

func (k *kubelet) setRunning(id int32, running bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running[id] = running
}

func (k *kubelet) holding() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.holdRestarts
}

func (k *kubelet) isRunning(id int32) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.running[id]
}

func (k *kubelet) sync(ctx context.Context) error {
	kc := &strata.KafkaCluster{}
	if err := k8sClient.Get(ctx, k.key, kc); err != nil {
		return client.IgnoreNotFound(err)
	}
	sel := client.MatchingLabels{controllers.LabelCluster: kc.Name, controllers.LabelComponent: controllers.ComponentBroker}
	var sets appsv1.StatefulSetList
	if err := k8sClient.List(ctx, &sets, client.InNamespace(kc.Namespace), sel); err != nil {
		return err
	}
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(kc.Namespace), sel); err != nil {
		return err
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	for i := range sets.Items {
		sts := &sets.Items[i]
		zone := sts.Labels[controllers.LabelZone]
		base := int32(-1)
		for _, b := range kc.Status.BrokerIDBlocks {
			if b.Zone == zone {
				base = b.Base // the last block of the zone is its active one
			}
		}
		if base < 0 {
			continue
		}
		replicas := ptr.Deref(sts.Spec.Replicas, 0)
		for name, pod := range byName {
			ord, ok := ordinalOf(sts.Name, name)
			if !ok || ord < replicas {
				continue
			}
			k.mu.Lock()
			hold := k.holdScaleDown
			k.mu.Unlock()
			if hold {
				continue
			}
			if err := k.scaleDownPod(ctx, pod, base+ord); err != nil {
				return err
			}
		}
		for ord := range replicas {
			if err := k.syncPod(ctx, sts, byName[fmt.Sprintf("%s-%d", sts.Name, ord)], zone, ord, base+ord); err != nil {
				return fmt.Errorf("pod %s-%d: %w", sts.Name, ord, err)
			}
		}
		if err := k.syncStatus(ctx, sts); err != nil {
			return err
		}
	}
	return nil
}

func ordinalOf(sts, pod string) (int32, bool) {
	rest, ok := strings.CutPrefix(pod, sts+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	return int32(n), err == nil
}

// syncPod brings one ordinal's pod and broker process to what the
// StatefulSet and the operator's deletions ask for.
func (k *kubelet) syncPod(ctx context.Context, sts *appsv1.StatefulSet, pod *corev1.Pod, zone string, ord, id int32) error {
	switch {
	case pod != nil && pod.DeletionTimestamp != nil:
		// The operator deleted it: the kubelet sends SIGTERM and waits
		// for the broker's controlled shutdown, then the pod is gone.
		k.setDown(id, true)
		if b := k.lc.broker(id); b != nil && k.isRunning(id) {
			k.logf("broker %d: pod %s deleted, stopping (SIGTERM)", id, pod.Name)
			b.Stop()
			k.setRunning(id, false)
		}
		err := k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: ptr.To(pod.UID)})
		return client.IgnoreNotFound(err)
	case pod == nil:
		b := k.lc.broker(id)
		switch {
		case b == nil:
			k.setDown(id, true)
			k.logf("broker %d: new ordinal %d of zone %s, starting a broker", id, ord, zone)
			k.lc.addBroker(k.key, zone, id, k.opts...)
			k.setRunning(id, true)
		case !k.isRunning(id) && k.holding():
			k.setDown(id, true) // the pod exists but its broker does not start
		case !k.isRunning(id):
			k.setDown(id, true)
			k.logf("broker %d: starting again", id)
			b.Start()
			k.setRunning(id, true)
			k.mu.Lock()
			k.restarts[id]++
			k.mu.Unlock()
		}
		return k.createPod(ctx, sts, ord)
	case !k.isRunning(id) && !k.holding():
		// A held pod whose hold was lifted: the kubelet starts it.
		k.logf("broker %d: hold lifted, starting again", id)
		k.lc.broker(id).Start()
		k.setRunning(id, true)
		k.mu.Lock()
		k.restarts[id]++
		k.mu.Unlock()
		return nil
	default:
		ready := k.isRunning(id) && k.lc.readyz(id)
		k.setDown(id, !ready)
		if isPodReadyTest(pod) == ready {
			return nil
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		k.logf("pod %s Ready %s", pod.Name, status)
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
		err := k8sClient.Status().Update(ctx, pod)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // the next sync sees the new pod
		}
		return err
	}
}

// drainedBeforeRemoval lists the scale-down removals of a broker that
// still held replicas.
func (k *kubelet) drainedBeforeRemoval() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.violations)
}

// holdsReplicas reads the metadata as an independent witness: the
// partitions whose replica list names broker id.
func (k *kubelet) holdsReplicas(ctx context.Context, id int32) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.lc.Addrs()...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return nil, err
	}
	var held []string
	md.Topics.EachPartition(func(p kadm.PartitionDetail) {
		if slices.Contains(p.Replicas, id) {
			held = append(held, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
		}
	})
	return held, nil
}

// scaleDownPod removes a pod beyond the StatefulSet's replicas and stops
// its broker for good, noting it when the broker still held replicas.
func (k *kubelet) scaleDownPod(ctx context.Context, pod *corev1.Pod, id int32) error {
	if k.isRunning(id) {
		held, err := k.holdsReplicas(ctx, id)
		if err != nil {
			return fmt.Errorf("metadata before removing broker %d: %w", id, err)
		}
		if len(held) > 0 {
			k.mu.Lock()
			k.violations = append(k.violations, fmt.Sprintf("broker %d removed holding %v", id, held))
			k.mu.Unlock()
		}
	}
	if b := k.lc.broker(id); b != nil && k.isRunning(id) {
		k.logf("broker %d: scaled down, stopping pod %s (SIGTERM)", id, pod.Name)
		b.Stop()
		k.setRunning(id, false)
	}
	k.setDown(id, false) // removed on purpose, not down
	k.mu.Lock()
	k.removed[id] = true
	k.mu.Unlock()
	err := k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))
	return client.IgnoreNotFound(err)
}

// createPod creates ordinal ord's pod from the StatefulSet's template, as
// its controller does (the claim volume included, bound to a node).
func (k *kubelet) createPod(ctx context.Context, sts *appsv1.StatefulSet, ord int32) error {
	t := sts.Spec.Template.DeepCopy()
	name := fmt.Sprintf("%s-%d", sts.Name, ord)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sts.Namespace, Name: name, Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))},
		},
		Spec: t.Spec,
	}
	pod.Labels["statefulset.kubernetes.io/pod-name"] = name
	pod.Spec.NodeName = k.nodeOf(sts.Labels[controllers.LabelZone])
	pod.Spec.Hostname, pod.Spec.Subdomain = name, sts.Spec.ServiceName
	for _, c := range sts.Spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + name},
		}})
	}
	k.logf("pod %s created (template %s)", name, t.Annotations[controllers.AnnotationTemplateHash])
	if err := k8sClient.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// syncStatus writes the StatefulSet's status as its controller would.
func (k *kubelet) syncStatus(ctx context.Context, sts *appsv1.StatefulSet) error {
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(sts.Namespace), client.MatchingLabels(sts.Spec.Selector.MatchLabels)); err != nil {
		return err
	}
	want := sts.Spec.Template.Annotations[controllers.AnnotationTemplateHash]
	st := appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, CurrentRevision: want, UpdateRevision: want}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		st.Replicas++
		if isPodReadyTest(p) {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
		if p.Annotations[controllers.AnnotationTemplateHash] == want {
			st.UpdatedReplicas++
			st.CurrentReplicas++
		}
	}
	if equality.Semantic.DeepEqual(st, sts.Status) {
		return nil
	}
	sts.Status = st
	err := k8sClient.Status().Update(ctx, sts)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func isPodReadyTest(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyz says whether broker id's /readyz answers 200.
func (c *loopbackCluster) readyz(id int32) bool {
	b := c.broker(id)
	if b == nil {
		return false
	}
	hc := http.Client{Timeout: time.Second}
	resp, err := hc.Get("http://" + b.MetricsAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
