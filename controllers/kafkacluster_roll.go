package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/plan"
)

// The execution of the plan package's decisions: rolling restarts
// (reconcileRoll), drains before a scale-down or zone removal
// (reconcileScaleDown) and the rebalance after a scale-up
// (reconcileRebalance). Each step gathers the inputs (broker pods read
// from the API server, not the cache; Kafka metadata through the admin
// client), calls one decision function and carries out its answer: at
// most one pod deleted, or a capped batch of partition reassignments. It
// never decides on its own, and never acts when the inputs cannot be read.

// Condition and event reasons of rolls and scaling. They are API: users
// and tests match on them.
const (
	// ReasonRollStuck: the roll has not been able to restart the next
	// broker for longer than RollStuckAfter (Stalled True).
	ReasonRollStuck = "RollStuck"
	// ReasonRollBlocked: the roll waits (Reconciling True), e.g. for the
	// broker restarted last to be back in every ISR.
	ReasonRollBlocked = "RollBlocked"
	// ConditionScaleDownBlocked is True while a scale-down or zone removal
	// cannot go on: reason DrainImpossible (the spec must change; the
	// cluster is Stalled) or BrokersNotRegistered (a broker that stays is
	// down: the drain waits for it, Reconciling, and Stalled once that
	// lasts longer than spec.rebalance.movesStalledAfter).
	ConditionScaleDownBlocked = "ScaleDownBlocked"
	ReasonDrainImpossible     = "DrainImpossible"

	EventRestartingBroker   = "RestartingBroker"
	EventRestartUnavailable = "RestartMakesPartitionsUnavailable"
	EventRollStuck          = "RollStuck"
	EventRollDone           = "RollCompleted"
	EventDrainMoves         = "DrainingBroker"
	EventBrokerDrained      = "BrokerDrained"
	EventScaleDownBlocked   = "ScaleDownBlocked"
	EventRebalanceMoves     = "RebalancingBrokers"
	EventReassignmentFailed = "ReassignmentFailed"
)

// status.scaling phases.
const (
	ScalingPhaseDraining    = "Draining"
	ScalingPhaseRebalancing = "Rebalancing"
	ScalingPhaseBlocked     = "Blocked"
)

const (
	// rollRequeue and scalingRequeue: how soon a reconcile looks again
	// while a roll or scaling is under way (pods are not watched).
	rollRequeue    = 2 * time.Second
	scalingRequeue = 2 * time.Second
)

// DefaultRollStuckAfter is how long a roll may wait for its next restart
// (the broker restarted last not ready, partitions the next restart would
// take below min.insync.replicas) before it is reported Stalled with reason RollStuck.
const DefaultRollStuckAfter = 10 * time.Minute

// RollStuckAfter is how long kc's roll may go without progress before
// it is RollStuck: spec.roll.stuckAfter, else the operator's setting
// (operatorDefault, when not zero), else DefaultRollStuckAfter.
func RollStuckAfter(kc *strata.KafkaCluster, operatorDefault time.Duration) time.Duration {
	if d := kc.Spec.Roll.StuckAfter; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return cmp.Or(operatorDefault, DefaultRollStuckAfter)
}

func (r *KafkaClusterReconciler) rollStuckAfter(kc *strata.KafkaCluster) time.Duration {
	return RollStuckAfter(kc, r.RollStuckAfter)
}

// readPlanMetadata reads what the decisions need through the admin
// client: Metadata, the reassignments in flight and every topic's
// min.insync.replicas, converted by plan.FromKadm.
func (r *KafkaClusterReconciler) readPlanMetadata(ctx context.Context, kc *strata.KafkaCluster) (plan.Metadata, error) {
	return readPlanMetadata(ctx, r.Admin, kc)
}

// readPlanMetadata reads the decisions' view of kc's Kafka metadata
// through pool (plan.FromKadm): a view that shows every reassignment the
// operator started (reassignLedger), read again while the broker that
// answered lags.
func readPlanMetadata(ctx context.Context, pool *AdminPool, kc *strata.KafkaCluster) (plan.Metadata, error) {
	if pool == nil {
		return plan.Metadata{}, errors.New("no Kafka admin client configured")
	}
	adm, err := pool.Admin(kc)
	if err != nil {
		return plan.Metadata{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	key := types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}
	for try := 0; ; try++ {
		md, err := readPlanMetadataOnce(ctx, adm)
		if err != nil {
			return md, err
		}
		why := pool.ledger.lagging(key, md, time.Now())
		if why == "" {
			return md, nil
		}
		if try == metadataLagRetries {
			return plan.Metadata{}, fmt.Errorf("no plan on this metadata, read %d times: %s", try+1, why)
		}
		select {
		case <-ctx.Done():
			return plan.Metadata{}, fmt.Errorf("waiting for metadata that shows the reassignments started: %w (%s)", ctx.Err(), why)
		case <-time.After(metadataLagWait):
		}
	}
}

// readPlanMetadataOnce reads one view: a broker's metadata, the
// controller's reassignments and the topics' configs.
func readPlanMetadataOnce(ctx context.Context, adm *kadm.Client) (plan.Metadata, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return plan.Metadata{}, fmt.Errorf("metadata: %w", err)
	}
	var reassignments kadm.ListPartitionReassignmentsResponses
	if set := md.Topics.TopicsSet(); len(set) > 0 {
		if reassignments, err = adm.ListPartitionReassignments(ctx, set); err != nil {
			return plan.Metadata{}, fmt.Errorf("list partition reassignments: %w", err)
		}
	}
	configs, err := adm.DescribeTopicConfigs(ctx, md.Topics.Names()...)
	if err != nil {
		return plan.Metadata{}, fmt.Errorf("describe topic configs: %w", err)
	}
	return plan.FromKadm(md, reassignments, configs)
}

// liveBrokerPods lists the cluster's broker pods from the API server: a
// pod deleted a moment ago must not look alive from a stale cache, or a
// second broker would go down with it.
func (r *KafkaClusterReconciler) liveBrokerPods(ctx context.Context, kc *strata.KafkaCluster) (map[string]*corev1.Pod, error) {
	reader := r.liveReader()
	var pods corev1.PodList
	if err := reader.List(ctx, &pods, client.InNamespace(kc.Namespace), client.MatchingLabels(brokerSelector(kc))); err != nil {
		return nil, fmt.Errorf("list broker pods: %w", err)
	}
	out := map[string]*corev1.Pod{}
	for i := range pods.Items {
		out[pods.Items[i].Name] = &pods.Items[i]
	}
	return out, nil
}

// RollPods builds plan.NextRestart's pod states: one per ordinal below
// each zone StatefulSet's replicas. A pod that does not exist (yet) is
// not ready and current: its StatefulSet creates it from the current
// template. A pod is current when its AnnotationTemplateHash equals its
// StatefulSet's template's and it does not ask for a manual rolling
// update (AnnotationManualRollingUpdate).
func RollPods(zones []ZoneInput, sets map[string]*appsv1.StatefulSet, pods map[string]*corev1.Pod, cluster string) []plan.Pod {
	var out []plan.Pod
	for _, zi := range zones {
		sts := sets[zi.Zone.Name]
		if sts == nil {
			continue
		}
		want := sts.Spec.Template.Annotations[AnnotationTemplateHash]
		for ord := range ptr.Deref(sts.Spec.Replicas, 0) {
			p := plan.Pod{Name: BrokerPodName(cluster, zi.Zone.Name, ord), BrokerID: zi.IDBase + ord, Current: true}
			if pod := pods[p.Name]; pod != nil {
				p.Ready = isPodReady(pod)
				p.Terminating = pod.DeletionTimestamp != nil
				p.Current = pod.Annotations[AnnotationTemplateHash] == want && pod.Annotations[AnnotationManualRollingUpdate] != "true"
			}
			out = append(out, p)
		}
	}
	return out
}

// etcdMemberSettle is how long an etcd member must have been ready
// before a broker restart goes on: a member that just came back answers
// its readiness probe before it has caught up with the others, and may
// turn unready again (e2e: a broker restarted while the member deleted
// mid-roll was ready for under two seconds).
const etcdMemberSettle = 5 * time.Second

// readyFor is how long pod has been Ready as of now (by its Ready
// condition's last transition; a condition without one counts as ready
// long enough).
func readyFor(pod *corev1.Pod, now time.Time) time.Duration {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return now.Sub(c.LastTransitionTime.Time)
		}
	}
	return etcdMemberSettle
}

// EtcdBlocksRoll says why a broker restart must wait for the managed
// etcd, "" when it need not, and how many members it waits for. Every
// member below the StatefulSet's replicas must exist, be ready, not be
// terminating, and run the StatefulSet's update revision: a broker
// restarted while a member is down or etcd's own (RollingUpdate) roll is
// under way re-registers on a store one more failure away from losing
// quorum, and a store without quorum cannot take it back at all. So the
// metadata quorum is checked first, and the brokers' roll waits for
// etcd's.
func EtcdBlocksRoll(sts *appsv1.StatefulSet, pods []corev1.Pod) (waiting int32, why string) {
	if sts.Status.ObservedGeneration < sts.Generation {
		// A template just changed: its update revision is not known yet.
		return 1, fmt.Sprintf("the metadata store first: etcd StatefulSet %s generation %d not yet observed: waiting before the next broker restart", sts.Name, sts.Generation)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	var first string
	for ord := range ptr.Deref(sts.Spec.Replicas, 0) {
		name := fmt.Sprintf("%s-%d", sts.Name, ord)
		pod := byName[name]
		w := ""
		switch {
		case pod == nil:
			w = "does not exist"
		case pod.DeletionTimestamp != nil:
			w = "is terminating"
		case !isPodReady(pod):
			w = "is not ready"
		case readyFor(pod, time.Now()) < etcdMemberSettle:
			w = fmt.Sprintf("is ready for less than %s (a member just back may still be catching up)", etcdMemberSettle)
		case sts.Status.UpdateRevision != "" && pod.Labels[appsv1.StatefulSetRevisionLabel] != sts.Status.UpdateRevision:
			w = "is not yet on the StatefulSet's update revision (etcd's own roll is under way)"
		}
		if w == "" {
			continue
		}
		waiting++
		if first == "" {
			first = fmt.Sprintf("etcd member %s %s", name, w)
		}
	}
	if waiting == 0 {
		return 0, ""
	}
	return waiting, fmt.Sprintf("the metadata store first: %d of %d etcd members not serving (%s): waiting before the next broker restart",
		waiting, ptr.Deref(sts.Spec.Replicas, 0), first)
}

// NextRollStatus is the roll status after one decision at now, with
// backlog what the next restart waits for (plan.RollBacklog; negative
// when unknown). A restart is progress and clears the blocked state; a
// refusal keeps the earliest BlockedSince, and is progress when the
// backlog went down since the last look. stuck says the roll has gone
// longer than stuckAfter without progress.
func NextRollStatus(prev *strata.RollStatus, pending []int32, d plan.Restart, backlog int32, now time.Time, stuckAfter time.Duration) (st strata.RollStatus, stuck bool) {
	st = strata.RollStatus{Pending: pending, Message: d.Reason}
	if prev != nil {
		st.Restarting = prev.Restarting
		st.BlockedSince = prev.BlockedSince
		st.LastProgressTime = prev.LastProgressTime
		st.WaitingFor = prev.WaitingFor
	}
	t := metav1.NewTime(now)
	if d.Pod != "" {
		st.Restarting = ptr.To(d.BrokerID)
		st.BlockedSince, st.WaitingFor = nil, nil
		st.LastProgressTime = &t
		return st, false
	}
	st.BlockedReason = d.Reason
	if st.BlockedSince == nil {
		st.BlockedSince = &t
	}
	if st.LastProgressTime == nil {
		// A roll that just stopped restarting, or a status written before
		// lastProgressTime existed: the wait started then.
		st.LastProgressTime = st.BlockedSince
	}
	if backlog >= 0 {
		if st.WaitingFor != nil && backlog < *st.WaitingFor {
			st.LastProgressTime = &t
		}
		st.WaitingFor = ptr.To(backlog)
	}
	return st, now.Sub(st.LastProgressTime.Time) > stuckAfter
}

// rollStuck reports whether a roll status was already stuck at now.
func rollStuck(st *strata.RollStatus, now time.Time, stuckAfter time.Duration) bool {
	if st == nil || st.BlockedSince == nil {
		return false
	}
	since := st.BlockedSince
	if st.LastProgressTime != nil {
		since = st.LastProgressTime
	}
	return now.Sub(since.Time) > stuckAfter
}

// reconcileRoll restarts outdated broker pods one at a time across the
// whole cluster: the StatefulSets use OnDelete, and this step deletes the
// one pod plan.NextRestart names, then waits (requeueing every
// rollRequeue) until that pod is ready; the next broker goes when its
// restart keeps every partition it is in sync for at or above
// min.insync.replicas (plan.RestartBlockers), so a restarted broker still
// catching up holds exactly the brokers that share its partitions, and an
// unrelated under-replicated partition holds none. Blocked, it says why
// (which partitions block which broker) in status.roll and the
// Reconciling condition; blocked longer than RollStuckAfter it reports
// Stalled (RollStuck) and keeps waiting rather than restarting anything
// else.
func (r *KafkaClusterReconciler) reconcileRoll(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	pods, err := r.liveBrokerPods(ctx, kc)
	if err != nil {
		return err
	}
	if err := r.manualRollingUpdate(ctx, kc, pods); err != nil { // kafkacluster_annotations.go
		return err
	}
	planPods := RollPods(s.zones, s.statefulSets, pods, kc.Name)
	var pending []int32
	anyReady := false
	for _, p := range planPods {
		if !p.Current {
			pending = append(pending, p.BrokerID)
		}
		anyReady = anyReady || p.Ready
	}
	if len(pending) == 0 {
		if kc.Status.Roll != nil {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventRollDone, "Roll", "every broker pod runs the current template")
			kc.Status.Roll = nil
		}
		return nil
	}
	// Per broker: the image its pod runs and whether it waits for a
	// restart, so an upgrade's progress shows.
	for i := range kc.Status.Brokers {
		b := &kc.Status.Brokers[i]
		if pod := pods[b.Pod]; pod != nil && len(pod.Spec.Containers) > 0 {
			b.Image = pod.Spec.Containers[0].Image
		}
		b.Outdated = slices.Contains(pending, b.ID)
	}
	// etcdBlocks reads the etcd pods live and says why a restart must
	// wait for the metadata store ("": it need not).
	etcdBlocks := func() (int32, string, error) {
		if s.etcd == nil {
			return 0, "", nil
		}
		var etcdPods corev1.PodList
		if err := r.liveReader().List(ctx, &etcdPods, client.InNamespace(kc.Namespace), client.MatchingLabels(etcdSelector(kc))); err != nil {
			return 0, "", fmt.Errorf("list etcd pods: %w", err)
		}
		waiting, why := EtcdBlocksRoll(s.etcd, etcdPods.Items)
		return waiting, why, nil
	}
	if waiting, why, err := etcdBlocks(); err != nil || why != "" {
		if err != nil {
			return err
		}
		return r.rollBlocked(ctx, s, pending, plan.Restart{Reason: why}, waiting)
	}
	md, err := r.readPlanMetadata(ctx, kc)
	if err != nil {
		if anyReady {
			// Never restart blind while some broker serves: its
			// partitions' ISRs are unknown.
			return r.rollBlocked(ctx, s, pending, plan.Restart{Reason: fmt.Sprintf("cannot read the Kafka metadata: %v", err)}, -1)
		}
		// No broker serves (e.g. a bad config on all of them, being
		// rolled back): nothing to protect, and NextRestart picks the
		// outdated, not-ready pods one at a time.
		md = plan.Metadata{Controller: plan.NoLeader}
	}
	d := plan.NextRestart(md, planPods)
	if d.Pod == "" {
		return r.rollBlocked(ctx, s, pending, d, plan.RollBacklog(md, planPods))
	}
	// Again right before the restart: an etcd member that went down
	// while the Kafka metadata was read (e2e: deleted during that read)
	// holds the restart too.
	if waiting, why, err := etcdBlocks(); err != nil || why != "" {
		if err != nil {
			return err
		}
		return r.rollBlocked(ctx, s, pending, plan.Restart{Reason: why}, waiting)
	}
	pod := pods[d.Pod]
	if pod != nil {
		// The UID precondition: never delete a pod the StatefulSet
		// created after this decision was made.
		if err := r.Delete(ctx, pod, client.Preconditions{UID: ptr.To(pod.UID)}); err != nil && !apierrors.IsNotFound(err) {
			if apierrors.IsConflict(err) {
				s.requeueAfter = minPositive(s.requeueAfter, rollRequeue)
				return nil
			}
			return fmt.Errorf("delete pod %s for its restart: %w", d.Pod, err)
		}
	}
	log.FromContext(ctx).Info("rolling restart", "pod", d.Pod, "broker", d.BrokerID, "reason", d.Reason, "pending", len(pending))
	r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventRestartingBroker, "Roll", "restarting broker %d (pod %s): %s", d.BrokerID, d.Pod, d.Reason)
	if len(d.Unavailable) > 0 {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventRestartUnavailable, "Roll",
			"while broker %d restarts, %d partitions with replication factor not above min.insync.replicas refuse acks=all writes: %s",
			d.BrokerID, len(d.Unavailable), strings.Join(d.Unavailable[:min(len(d.Unavailable), 5)], ", "))
	}
	st, _ := NextRollStatus(kc.Status.Roll, pending, d, -1, time.Now(), r.rollStuckAfter(kc))
	kc.Status.Roll = &st
	setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonRollingOut,
		fmt.Sprintf("rolling restart, one broker at a time: %d of %d brokers outdated; %s", len(pending), len(planPods), d.Reason))
	s.requeueAfter = minPositive(s.requeueAfter, rollRequeue)
	return nil
}

// rollBlocked records a roll that may not restart anything now; backlog
// is what it waits for (plan.RollBacklog), negative when unknown.
func (r *KafkaClusterReconciler) rollBlocked(ctx context.Context, s *clusterScope, pending []int32, d plan.Restart, backlog int32) error {
	kc := s.cluster
	now := time.Now()
	stuckAfter := r.rollStuckAfter(kc)
	wasStuck := rollStuck(kc.Status.Roll, now, stuckAfter)
	st, stuck := NextRollStatus(kc.Status.Roll, pending, d, backlog, now, stuckAfter)
	kc.Status.Roll = &st
	s.requeueAfter = minPositive(s.requeueAfter, rollRequeue)
	log.FromContext(ctx).V(logDebug).Info("rolling restart waits", "reason", d.Reason, "pending", len(pending), "waitingFor", backlog)
	if stuck {
		msg := fmt.Sprintf("rolling restart stuck: no progress for %s (stuck after %s) with %d brokers outdated: %s",
			now.Sub(st.LastProgressTime.Time).Round(time.Second), stuckAfter, len(pending), d.Reason)
		if !wasStuck {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventRollStuck, "Roll", "%s", msg)
		}
		s.stalled = &invalidSpecError{reason: ReasonRollStuck, message: msg}
		return nil
	}
	setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonRollBlocked,
		fmt.Sprintf("rolling restart, one broker at a time: %d brokers outdated; waiting: %s", len(pending), d.Reason))
	return nil
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 {
		return b
	}
	return min(a, b)
}
