package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/plan"
)

// Node drains through the roll gate (the model is Strimzi's Drain
// Cleaner, without its admission webhook).
//
// The brokers' PodDisruptionBudget allows no voluntary disruption
// (BuildBrokerPDB: maxUnavailable 0), so `kubectl drain`, the cluster
// autoscaler or a node upgrade cannot evict a broker pod by themselves:
// their Eviction calls are refused (429) and retried. A drain cordons the
// node first; the operator watches Nodes, and a broker pod on a cordoned
// node is deleted by the operator itself, one broker at a time, when the
// same gate as a rolling restart lets it go (NextEviction: no broker pod
// terminating or not ready, the metadata quorum serving, and
// plan.RestartBlockers: every partition it is in sync for keeps
// min.insync.replicas without it). The drain's next retry then finds the
// pod gone and goes on. While the gate says no, Reconciling says what the
// eviction waits for, with an EvictionBlocked event when that changes.

// Condition and event reasons of the eviction path.
const (
	// ReasonEvictionBlocked: a broker pod on a cordoned node waits for the
	// gate (Reconciling True, and an event of that reason).
	ReasonEvictionBlocked = "EvictionBlocked"
	// EventEvictingBroker: the operator deleted a broker pod for a node
	// drain.
	EventEvictingBroker = "EvictingBroker"
	// ReasonEvictingBroker: Reconciling True right after such a deletion.
	ReasonEvictingBroker = EventEvictingBroker
	EventEvictionBlocked = ReasonEvictionBlocked
)

// evictionRequeue: how soon a reconcile looks again while a broker pod
// on a cordoned node waits (the kubelet's readiness and the ISRs are not
// watched).
const evictionRequeue = 2 * time.Second

// Eviction is NextEviction's answer.
type Eviction struct {
	// Pod is the broker pod to delete now, BrokerID its broker and Node
	// its cordoned node; Pod is "" when none may go now.
	Pod      string
	BrokerID int32
	Node     string
	// Waiting lists the pods on cordoned nodes (by name) when none may go
	// now; empty when no broker pod is on a cordoned node.
	Waiting []string
	// Reason says why this pod, or what the pods on cordoned nodes wait
	// for.
	Reason string
	// Unavailable: partitions whose replication factor is not above
	// min.insync.replicas, which refuse acks=all writes while Pod is down
	// whatever the order (as plan.Restart's).
	Unavailable []string
}

// NextEviction decides which broker pod on a cordoned node (cordoned:
// pod name -> node, for the pods bound to an unschedulable node) the
// operator may delete now. The rules are the roll's (plan.NextRestart),
// with "on a cordoned node" in place of "outdated":
//
//  1. Nothing to do when no pod is on a cordoned node, or those that are
//     are terminating already.
//  2. One broker at a time: no pod may go while another broker pod is
//     terminating, missing or not ready. A pod on a cordoned node that is
//     not ready itself may go (it serves nothing).
//  3. The per-partition gate: the pod may go when every partition whose
//     ISR holds its broker keeps min.insync.replicas without it, and one
//     it leads has another in-sync replica (plan.RestartBlockers).
//  4. Among those that pass: not ready first, the controller last, then
//     the lowest broker ID.
func NextEviction(md plan.Metadata, pods []plan.Pod, cordoned map[string]string) Eviction {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b plan.Pod) int { return cmp.Compare(a.BrokerID, b.BrokerID) })
	var candidates []plan.Pod
	for _, p := range pods {
		if _, ok := cordoned[p.Name]; ok && !p.Terminating {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return Eviction{}
	}
	waiting := make([]string, 0, len(candidates))
	for _, c := range candidates {
		waiting = append(waiting, c.Name)
	}
	onCordoned := fmt.Sprintf("%d broker pods on cordoned nodes (%s)", len(candidates), strings.Join(waiting, ", "))
	for _, p := range pods {
		if p.Terminating {
			return Eviction{Waiting: waiting, Reason: fmt.Sprintf("%s wait: pod %s (broker %d) is terminating: one broker at a time", onCordoned, p.Name, p.BrokerID)}
		}
	}
	for _, p := range pods {
		if _, ok := cordoned[p.Name]; !ok && !p.Ready {
			return Eviction{Waiting: waiting, Reason: fmt.Sprintf("%s wait: pod %s (broker %d) is not ready: one broker at a time", onCordoned, p.Name, p.BrokerID)}
		}
	}
	slices.SortStableFunc(candidates, func(a, b plan.Pod) int {
		return cmp.Or(
			cmp.Compare(boolOrder(a.Ready), boolOrder(b.Ready)),
			cmp.Compare(boolOrder(a.BrokerID == md.Controller), boolOrder(b.BrokerID == md.Controller)),
			cmp.Compare(a.BrokerID, b.BrokerID),
		)
	})
	blocked := map[int32][]plan.Blocker{}
	for _, c := range candidates {
		blockers, unavailable := plan.RestartBlockers(c.BrokerID, md)
		if len(blockers) > 0 {
			blocked[c.BrokerID] = blockers
			continue
		}
		reason := fmt.Sprintf("broker %d is on cordoned node %s and every partition it is in sync for keeps min.insync.replicas without it", c.BrokerID, cordoned[c.Name])
		if !c.Ready {
			reason = fmt.Sprintf("broker %d is on cordoned node %s and not ready", c.BrokerID, cordoned[c.Name])
		}
		return Eviction{Pod: c.Name, BrokerID: c.BrokerID, Node: cordoned[c.Name], Reason: reason, Unavailable: unavailable}
	}
	return Eviction{Waiting: waiting, Reason: onCordoned + " wait: " + plan.BlockedReason(candidates, blocked)}
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// EtcdBlocksEviction says why a broker pod on a cordoned node must wait
// for the managed etcd, "" when it need not: a majority of the members
// must exist, be ready and not be terminating. Not every member, as for
// a roll (EtcdBlocksRoll): the node being drained usually takes its etcd
// member along (the etcd PodDisruptionBudget allows one), and that member
// cannot come back before the node does, so waiting for it would hold the
// drain until its timeout; a broker restarted against a quorum
// re-registers.
func EtcdBlocksEviction(replicas int32, pods []corev1.Pod, stsName string) string {
	serving := int32(0)
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && isPodReady(p) && strings.HasPrefix(p.Name, stsName+"-") {
			serving++
		}
	}
	if serving > replicas/2 {
		return ""
	}
	return fmt.Sprintf("the metadata store first: %d of %d etcd members serving, no quorum", serving, replicas)
}

// reconcileEvictions deletes, one at a time and through the roll's gate
// (NextEviction), the broker pods bound to cordoned nodes, so that a node
// drain the brokers' PodDisruptionBudget refuses can go on. Pods are read
// from the API server (a pod deleted a moment ago must not look alive);
// Nodes from the cache (a cordon seen a moment late only waits).
func (r *KafkaClusterReconciler) reconcileEvictions(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	pods, err := r.liveBrokerPods(ctx, kc)
	if err != nil {
		return err
	}
	cordoned := map[string]string{}
	nodes := map[string]bool{}
	for name, p := range pods {
		n := p.Spec.NodeName
		if n == "" {
			continue
		}
		unschedulable, seen := nodes[n]
		if !seen {
			var node corev1.Node
			err := r.Get(ctx, client.ObjectKey{Name: n}, &node)
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("get node %s: %w", n, err)
			}
			unschedulable = err == nil && NodeDraining(&node)
			nodes[n] = unschedulable
		}
		if unschedulable {
			cordoned[name] = n
		}
	}
	if len(cordoned) == 0 {
		return nil
	}
	planPods := RollPods(s.zones, s.statefulSets, pods, kc.Name)
	var e Eviction
	if s.etcd != nil {
		var etcdPods corev1.PodList
		if err := r.liveReader().List(ctx, &etcdPods, client.InNamespace(kc.Namespace), client.MatchingLabels(etcdSelector(kc))); err != nil {
			return fmt.Errorf("list etcd pods: %w", err)
		}
		if why := EtcdBlocksEviction(ptr.Deref(s.etcd.Spec.Replicas, 0), etcdPods.Items, s.etcd.Name); why != "" {
			e = Eviction{Reason: why, Waiting: onCordoned(planPods, cordoned)}
		}
	}
	if e.Reason == "" {
		md, err := r.readPlanMetadata(ctx, kc)
		switch {
		case err == nil:
			e = NextEviction(md, planPods, cordoned)
		case anyOtherReady(planPods, cordoned):
			// Never delete blind while another broker serves: the ISRs
			// the deletion would lower are unknown.
			e = Eviction{Reason: fmt.Sprintf("cannot read the Kafka metadata: %v", err), Waiting: onCordoned(planPods, cordoned)}
		default:
			// No other broker serves: nothing to protect.
			e = NextEviction(plan.Metadata{Controller: plan.NoLeader}, planPods, cordoned)
		}
	}
	if e.Pod == "" {
		if len(e.Waiting) == 0 {
			return nil
		}
		msg := "node drain: " + e.Reason
		if prev := meta.FindStatusCondition(s.statusBase.Status.Conditions, strata.ConditionReconciling); prev == nil || prev.Reason != ReasonEvictionBlocked || prev.Message != msg {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventEvictionBlocked, "Evict", "%s", msg)
		}
		log.FromContext(ctx).V(logDebug).Info("node drain waits", "pods", e.Waiting, "reason", e.Reason)
		setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonEvictionBlocked, msg)
		s.requeueAfter = minPositive(s.requeueAfter, evictionRequeue)
		return nil
	}
	pod := pods[e.Pod]
	if err := r.Delete(ctx, pod, client.Preconditions{UID: ptr.To(pod.UID)}); err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsConflict(err) {
			s.requeueAfter = minPositive(s.requeueAfter, evictionRequeue)
			return nil
		}
		return fmt.Errorf("delete pod %s on cordoned node %s: %w", e.Pod, e.Node, err)
	}
	log.FromContext(ctx).Info("node drain: broker pod deleted", "pod", e.Pod, "broker", e.BrokerID, "node", e.Node, "reason", e.Reason)
	r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventEvictingBroker, "Evict", "node drain: deleted broker %d (pod %s) on cordoned node %s: %s", e.BrokerID, e.Pod, e.Node, e.Reason)
	if len(e.Unavailable) > 0 {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventRestartUnavailable, "Evict",
			"while broker %d is away, %d partitions with replication factor not above min.insync.replicas refuse acks=all writes: %s",
			e.BrokerID, len(e.Unavailable), strings.Join(e.Unavailable[:min(len(e.Unavailable), 5)], ", "))
	}
	setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonEvictingBroker,
		fmt.Sprintf("node drain: deleted broker %d (pod %s) on cordoned node %s, one broker at a time", e.BrokerID, e.Pod, e.Node))
	s.requeueAfter = minPositive(s.requeueAfter, evictionRequeue)
	return nil
}

// onCordoned names the pods of pods bound to a cordoned node.
func onCordoned(pods []plan.Pod, cordoned map[string]string) []string {
	var out []string
	for _, p := range pods {
		if _, ok := cordoned[p.Name]; ok {
			out = append(out, p.Name)
		}
	}
	return out
}

// anyOtherReady says whether a broker pod not on a cordoned node is ready.
func anyOtherReady(pods []plan.Pod, cordoned map[string]string) bool {
	for _, p := range pods {
		if _, ok := cordoned[p.Name]; !ok && p.Ready {
			return true
		}
	}
	return false
}

// drainTaints are the taints node drainers other than kubectl put on a
// node before they evict its pods: the cluster autoscaler's scale-down
// and Karpenter's disruption (v1 and before).
var drainTaints = []string{corev1.TaintNodeUnschedulable, "ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted", "karpenter.sh/disruption"}

// NodeDraining says whether node is being emptied: cordoned
// (spec.unschedulable, what `kubectl drain` does first) or carrying a
// drainer's taint (drainTaints).
func NodeDraining(node *corev1.Node) bool {
	if node.Spec.Unschedulable {
		return true
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(drainTaints, t.Key) && t.Effect != corev1.TaintEffectPreferNoSchedule {
			return true
		}
	}
	return false
}

// nodeCordoned passes the Node updates that start a drain (NodeDraining
// turns true).
func nodeCordoned() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Node)
			cur, okNew := e.ObjectNew.(*corev1.Node)
			return okOld && okNew && !NodeDraining(old) && NodeDraining(cur)
		},
	}
}

// clustersOnNode maps a cordoned Node to the KafkaClusters with a broker
// pod bound to it (from the cache of the operator's pods).
func (r *KafkaClusterReconciler) clustersOnNode(ctx context.Context, obj client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.MatchingLabels{LabelComponent: ComponentBroker}); err != nil {
		log.FromContext(ctx).Error(err, "list broker pods for a cordoned node", "node", obj.GetName())
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for _, p := range pods.Items {
		if p.Spec.NodeName != obj.GetName() || p.Labels[LabelCluster] == "" {
			continue
		}
		req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.Namespace, Name: p.Labels[LabelCluster]}}
		if !seen[req] {
			seen[req] = true
			out = append(out, req)
		}
	}
	return out
}
