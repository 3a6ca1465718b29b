package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/placement"
	"github.com/strata-dev/strata/controllers/plan"
)

// Scaling: the drain before a scale-down or zone removal
// (reconcileScaleDown, plan.NextDrain) and the rebalance after a scale-up
// (reconcileRebalance, plan.RebalanceMoves). Both start capped batches of
// partition reassignments and come back every scalingRequeue until the
// decision says done.

// wantedBrokers are the brokers the spec asks for.
func wantedBrokers(zones []ZoneInput) []plan.Wanted {
	var out []plan.Wanted
	for _, zi := range zones {
		for ord := range zi.Zone.Brokers {
			out = append(out, plan.Wanted{Zone: zi.Zone.Name, Ordinal: ord, ID: zi.IDBase + ord})
		}
	}
	return out
}

// zoneOrdinal maps a broker ID to its zone and ordinal through the ID
// blocks (retired blocks included: a removed zone's brokers drain too).
func zoneOrdinal(blocks []strata.BrokerIDBlock, id int32) (zone string, ord int32, ok bool) {
	for _, b := range blocks {
		if id >= b.Base && id < b.Base+strata.BrokerIDBlockSize {
			return b.Zone, id - b.Base, true
		}
	}
	return "", 0, false
}

// KeepReplicas decides each broker StatefulSet's replicas during a
// scale-down: current replicas per zone StatefulSet (removed zones
// included), the spec's brokers per zone (0 for a removed zone), the
// brokers still to remove that the metadata knows (toRemove, from
// plan.NextDrain's view) and the broker that is drained now (drained, -1:
// none). A zone keeps its pods up to its highest broker still to remove;
// a drained broker's pod may go. Only the highest ordinals go, as a
// StatefulSet removes pods from the top.
func KeepReplicas(current, spec map[string]int32, toRemove []int32, drained int32, blocks []strata.BrokerIDBlock) map[string]int32 {
	keep := map[string]int32{}
	for zone, cur := range current {
		want := spec[zone]
		if cur <= want {
			keep[zone] = cur
			continue
		}
		k := want
		for _, id := range toRemove {
			z, ord, ok := zoneOrdinal(blocks, id)
			if !ok || z != zone || id == drained || ord >= cur {
				continue
			}
			k = max(k, ord+1)
		}
		keep[zone] = k
	}
	return keep
}

// reconcileScaleDown runs before the StatefulSets are written: when a
// zone's StatefulSet has more replicas than the spec (or a removed zone
// still has pods), the brokers beyond the spec are drained first, one at
// a time, highest ID first (plan.NextDrain); a StatefulSet shrinks only
// past brokers that hold no replica and lead nothing. Moves go through
// AlterPartitionAssignments, capped by spec.rebalance.maxConcurrentMoves.
// Impossible (replication factor above the brokers left, a zone that
// topics need) nothing is removed and ScaleDownBlocked says why. The
// StatefulSets' PVC retention (deleteClaimOnScaleDown) acts only when the
// replicas shrink, so only on drained brokers.
func (r *KafkaClusterReconciler) reconcileScaleDown(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	reader := r.liveReader()
	// Live: a cached StatefulSet older than our own last scale-up would
	// hide brokers that still hold replicas.
	var list appsv1.StatefulSetList
	if err := reader.List(ctx, &list, client.InNamespace(kc.Namespace), client.MatchingLabels(brokerSelector(kc))); err != nil {
		return fmt.Errorf("list StatefulSets: %w", err)
	}
	spec := map[string]int32{}
	for _, zi := range s.zones {
		spec[zi.Zone.Name] = zi.Zone.Brokers
	}
	current := map[string]int32{}
	shrinking := false
	for i := range list.Items {
		sts := &list.Items[i]
		if !metav1.IsControlledBy(sts, kc) {
			continue
		}
		zone := sts.Labels[LabelZone]
		current[zone] = ptr.Deref(sts.Spec.Replicas, 0)
		shrinking = shrinking || current[zone] > spec[zone]
	}
	s.keepReplicas = current
	if !shrinking {
		s.keepReplicas = nil
		if sc := kc.Status.Scaling; sc != nil && sc.Phase != ScalingPhaseRebalancing {
			kc.Status.Scaling = nil
			meta.RemoveStatusCondition(&kc.Status.Conditions, ConditionMovesStalled)
		}
		meta.RemoveStatusCondition(&kc.Status.Conditions, ConditionScaleDownBlocked)
		return r.releaseCordons(ctx, s)
	}
	s.requeueAfter = minPositive(s.requeueAfter, scalingRequeue)
	md, err := r.readPlanMetadata(ctx, kc)
	if err != nil {
		// Never shrink without knowing where the replicas are.
		r.setScaling(kc, strata.ScalingStatus{Phase: ScalingPhaseDraining, Message: fmt.Sprintf("scale-down waits: cannot read the Kafka metadata: %v", err)})
		return nil
	}
	md, sizesErr := r.withPartitionSizes(ctx, kc, md)
	maxMoves := int(cmp.Or(kc.Spec.Rebalance.MaxConcurrentMoves, strata.DefaultMaxConcurrentMoves))
	d := plan.NextDrain(wantedBrokers(s.zones), md, maxMoves)
	if d.Impossible != "" {
		was := kc.Status.Scaling != nil && kc.Status.Scaling.Phase == ScalingPhaseBlocked && kc.Status.Scaling.Message == d.Impossible
		if !was {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventScaleDownBlocked, "Drain", "scale-down refused, nothing removed: %s", d.Impossible)
		}
		r.setScaling(kc, strata.ScalingStatus{Phase: ScalingPhaseBlocked, MovesInFlight: int32(d.InFlight), Message: d.Impossible})
		setCondition(kc, ConditionScaleDownBlocked, metav1.ConditionTrue, ReasonDrainImpossible, d.Impossible+"; nothing is removed until the spec changes")
		s.stalled = &invalidSpecError{reason: ReasonDrainImpossible, message: "scale-down refused: " + d.Impossible + "; nothing is removed until the spec changes"}
		// Nothing is removed, so nothing stays cordoned: new topics may
		// still need these brokers.
		if err := r.syncCordons(ctx, kc, md, nil); err != nil {
			log.FromContext(ctx).Error(err, "cordons of a refused scale-down not lifted")
		}
		return nil
	}
	toRemove := brokersToRemove(wantedBrokers(s.zones), md)
	// Fenced before the first move: no new replica lands on a broker
	// being drained, nor on an empty one before its pod goes.
	if err := r.syncCordons(ctx, kc, md, toRemove); err != nil {
		r.setScaling(kc, strata.ScalingStatus{Phase: ScalingPhaseDraining, Message: fmt.Sprintf("scale-down waits: %v", err)})
		return nil
	}
	r.drainWaitsFor(s, d.Unregistered, d.Reason, time.Now())
	drained := int32(-1)
	if d.Empty {
		drained = d.Broker
	}
	s.keepReplicas = KeepReplicas(current, spec, toRemove, drained, kc.Status.BrokerIDBlocks)
	st := strata.ScalingStatus{Phase: ScalingPhaseDraining, MovesInFlight: int32(d.InFlight), Message: withSizesNote(d.Reason, sizesErr)}
	prev := kc.Status.Scaling
	if prev == nil || prev.Phase != ScalingPhaseDraining {
		prev = nil
	}
	ScalingProgress(&st, prev, d.InFlight, d.Planned, d.BytesLeft)
	TickScalingClock(&st, prev, time.Now())
	r.checkMovesStalled(s, &st, time.Now())
	r.surfaceScaling(ctx, kc, md, &st, prev, strata.RebalanceRemoveBrokers, toRemove, len(d.Moves) > 0)
	if d.Broker >= 0 {
		st.Broker = ptr.To(d.Broker)
		st.PartitionsLeft = int32(partitionsOn(md, d.Broker))
	}
	if d.Empty && s.keepReplicas[d.Zone] < current[d.Zone] {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventBrokerDrained, "Drain", "broker %d (zone %s) holds no replica and leads nothing: its pod goes", d.Broker, d.Zone)
	}
	if len(d.Moves) > 0 {
		if err := r.throttleMoves(ctx, s, md, d.Moves); err != nil {
			r.setScaling(kc, st)
			return fmt.Errorf("drain broker %d: %w", d.Broker, err)
		}
		n, err := r.startMoves(ctx, kc, d.Moves)
		st.MovesStarted += int32(n)
		if err != nil {
			r.setScaling(kc, st)
			return fmt.Errorf("drain broker %d: %w", d.Broker, err)
		}
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventDrainMoves, "Drain", "draining broker %d (zone %s): %d reassignments started", d.Broker, d.Zone, n)
	}
	r.setScaling(kc, st)
	return nil
}

// drainWaitsFor names in ScaleDownBlocked (reason BrokersNotRegistered)
// the wanted brokers that are not registered while a drain waits for them
// (down: they are to receive the drained replicas), and removes the
// condition once none is missing. Waiting is Reconciling; waiting longer
// than MovesStalledAfter is Stalled: a broker down that long needs
// someone.
func (r *KafkaClusterReconciler) drainWaitsFor(s *clusterScope, unregistered []int32, reason string, now time.Time) {
	kc := s.cluster
	if len(unregistered) == 0 {
		meta.RemoveStatusCondition(&kc.Status.Conditions, ConditionScaleDownBlocked)
		return
	}
	msg := fmt.Sprintf("the drain waits for brokers %v, which are not registered: %s", unregistered, reason)
	prev := meta.FindStatusCondition(kc.Status.Conditions, ConditionScaleDownBlocked)
	if prev == nil || prev.Reason != ReasonBrokersNotRegistered || prev.Message != msg {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventScaleDownBlocked, "Drain", "%s", msg)
	}
	setCondition(kc, ConditionScaleDownBlocked, metav1.ConditionTrue, ReasonBrokersNotRegistered, msg)
	since := meta.FindStatusCondition(kc.Status.Conditions, ConditionScaleDownBlocked).LastTransitionTime.Time
	if after := MovesStalledAfter(kc); now.Sub(since) > after {
		s.stalled = &invalidSpecError{reason: ReasonBrokersNotRegistered,
			message: fmt.Sprintf("%s, for %s (spec.rebalance.movesStalledAfter %s): is the broker's pod running?", msg, now.Sub(since).Round(time.Second), after)}
	}
}

// releaseCordons, once no StatefulSet is above the spec, lifts the
// operator's cordons of the brokers the metadata no longer knows (their
// pods are gone) or the spec wants again (a cancelled scale-down); a
// broker still registered while its pod terminates stays cordoned.
func (r *KafkaClusterReconciler) releaseCordons(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	if len(kc.Status.CordonedBrokers) == 0 {
		return nil
	}
	s.requeueAfter = minPositive(s.requeueAfter, scalingRequeue)
	md, err := r.readPlanMetadata(ctx, kc)
	if err != nil {
		log.FromContext(ctx).V(1).Info("cordons kept: cannot read the Kafka metadata", "error", err.Error())
		return nil
	}
	if err := r.syncCordons(ctx, kc, md, brokersToRemove(wantedBrokers(s.zones), md)); err != nil {
		log.FromContext(ctx).Error(err, "cordons not lifted; retried")
	}
	return nil
}

// brokersToRemove are the brokers the metadata knows (registered or
// named in a replica list) that the spec does not want: NextDrain's set.
func brokersToRemove(wanted []plan.Wanted, md plan.Metadata) []int32 {
	want := map[int32]bool{}
	for _, w := range wanted {
		want[w.ID] = true
	}
	seen := map[int32]bool{}
	var out []int32
	add := func(id int32) {
		if !want[id] && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, b := range md.Brokers {
		add(b.ID)
	}
	for _, p := range md.Partitions {
		for _, id := range slices.Concat(p.Replicas, p.Adding, p.Removing) {
			add(id)
		}
	}
	slices.Sort(out)
	return out
}

func partitionsOn(md plan.Metadata, id int32) int {
	n := 0
	for _, p := range md.Partitions {
		if slices.Contains(p.Replicas, id) {
			n++
		}
	}
	return n
}

// ScalingProgress fills the progress of a drain or rebalance from the
// decision of this round (reassignments in flight, moves still planned,
// bytes left) and the status of the previous round of the same scaling
// (nil: it starts now). Moves started by this round are for the caller to
// add to MovesStarted.
func ScalingProgress(st, prev *strata.ScalingStatus, inFlight, planned int, bytesLeft int64) {
	var started int32
	var toMove, left int64
	if prev != nil {
		started, toMove, left = prev.MovesStarted, prev.BytesToMove, prev.BytesLeft
	}
	st.MovesStarted = started
	// In-flight reassignments may include others' (a topic's RF change):
	// done is what we started less what is in flight, never below 0.
	st.MovesDone = max(0, started-int32(inFlight))
	st.MovesPlanned = started + int32(planned)
	st.BytesLeft = bytesLeft
	// Bytes left falling is copying done; bytes left rising is work added
	// (data grew, the next broker's drain started), so the total grows by
	// the rise. An estimate: copying and added work in one round net out.
	st.BytesToMove = toMove + max(0, bytesLeft-left)
}

// TickScalingClock times a drain or rebalance round (st, filled by
// ScalingProgress) from the previous round's status (nil: it starts now):
// progress is bytes left falling or a move finishing.
func TickScalingClock(st, prev *strata.ScalingStatus, now time.Time) {
	var clock *strata.MoveClock
	progressed := true
	if prev != nil {
		clock = &prev.MoveClock
		progressed = st.BytesLeft < prev.BytesLeft || st.MovesDone > prev.MovesDone
	}
	st.MoveClock = TickMoveClock(clock, now, st.BytesToMove, st.BytesLeft, progressed)
}

// surfaceScaling shows the operator's own drain (mode remove-brokers:
// the brokers to remove) or scale-up rebalance (add-brokers: the brokers
// that held nothing) as a KafkaRebalance owned by the cluster, created
// when the scaling starts moves (prev nil) and named in
// status.scaling.kafkaRebalance; the KafkaRebalance controller mirrors
// status.scaling into it (it neither plans nor moves anything itself). A
// failure to create it is logged: the scaling goes on without it.
func (r *KafkaClusterReconciler) surfaceScaling(ctx context.Context, kc *strata.KafkaCluster, md plan.Metadata, st, prev *strata.ScalingStatus, mode strata.RebalanceMode, brokers []int32, starting bool) {
	if prev != nil {
		st.KafkaRebalance = prev.KafkaRebalance
		return
	}
	if !starting || (len(brokers) == 0 && mode != strata.RebalanceFull) {
		return
	}
	kind := map[strata.RebalanceMode]string{strata.RebalanceAddBrokers: "scale-up", strata.RebalanceRemoveBrokers: "scale-down", strata.RebalanceFull: "rebalance"}[mode]
	kr := &strata.KafkaRebalance{
		ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: fmt.Sprintf("%s-%s-%d", kc.Name, kind, st.StartTime.Unix()),
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelCluster: kc.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: strata.GroupVersion.String(), Kind: "KafkaCluster",
				Name: kc.Name, UID: kc.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: strata.KafkaRebalanceSpec{ClusterRef: strata.LocalObjectReference{Name: kc.Name}, Mode: mode, Brokers: slices.Sorted(slices.Values(brokers))},
	}
	if err := r.Create(ctx, kr); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			log.FromContext(ctx).Error(err, "KafkaRebalance showing the scaling not created", "kafkaRebalance", kr.Name)
			return
		}
	} else {
		// The proposal as the planner sees the request before its first
		// moves start (afterwards they would be in flight, not planned).
		var proposal *strata.RebalanceProposal
		if pl := plan.RebalancePlan(plan.RebalanceRequest{Mode: string(mode), Brokers: kr.Spec.Brokers}, md); pl.Refused == "" && pl.Wait == "" {
			p := BuildProposal(kc, md, pl, st.StartTime.Time)
			proposal = &p
		}
		// The KafkaRebalance controller adds its finalizer (or mirrors
		// status.scaling) as soon as the object exists: on a conflict,
		// the proposal goes onto the version it wrote.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			latest := &strata.KafkaRebalance{}
			if err := r.liveReader().Get(ctx, client.ObjectKeyFromObject(kr), latest); err != nil {
				return err
			}
			if latest.Status.Proposal == nil {
				latest.Status.Proposal = proposal
			}
			if latest.Status.State == "" {
				latest.Status.State = strata.RebalanceStateRebalancing
				latest.Status.Message = "the KafkaCluster's own moves start"
			}
			return r.Status().Update(ctx, latest)
		})
		if err != nil {
			log.FromContext(ctx).Error(err, "proposal of the KafkaRebalance showing the scaling not written", "kafkaRebalance", kr.Name)
		}
	}
	st.KafkaRebalance = kr.Name
}

// emptyBrokers are the wanted brokers that hold no replica: the ones a
// scale-up rebalance is for.
func emptyBrokers(md plan.Metadata, wanted []plan.Wanted) []int32 {
	var out []int32
	for _, w := range wanted {
		if partitionsOn(md, w.ID) == 0 {
			out = append(out, w.ID)
		}
	}
	return out
}

// MovesStalledAfter is how long kc's own moves may go without progress
// before MovesStalled: spec.rebalance.movesStalledAfter, else
// DefaultMovesStalledAfter.
func MovesStalledAfter(kc *strata.KafkaCluster) time.Duration {
	if d := kc.Spec.Rebalance.MovesStalledAfter; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return DefaultMovesStalledAfter
}

// checkMovesStalled sets MovesStalled from a drain or rebalance round's
// clock (st, ticked): True, and the cluster Stalled, when reassignments
// are in flight and none progressed for MovesStalledAfter; False once
// they progress again.
func (r *KafkaClusterReconciler) checkMovesStalled(s *clusterScope, st *strata.ScalingStatus, now time.Time) {
	kc := s.cluster
	after := MovesStalledAfter(kc)
	d, stalled := MovesStalledFor(st.MoveClock, now, int(st.MovesInFlight), after)
	if !stalled {
		if meta.FindStatusCondition(kc.Status.Conditions, ConditionMovesStalled) != nil {
			setCondition(kc, ConditionMovesStalled, metav1.ConditionFalse, ReasonMovesProgressing,
				fmt.Sprintf("the %s progresses; last progress at %s", strings.ToLower(st.Phase), st.LastProgressTime.UTC().Format(time.RFC3339)))
		}
		return
	}
	msg := fmt.Sprintf("%s: no progress for %s (spec.rebalance.movesStalledAfter %s) with %d reassignments in flight and %d bytes left: is a broker receiving a replica down?",
		st.Phase, d.Round(time.Second), after, st.MovesInFlight, st.BytesLeft)
	if !meta.IsStatusConditionTrue(kc.Status.Conditions, ConditionMovesStalled) {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventMovesStalled, "Scale", "%s", msg)
	}
	setCondition(kc, ConditionMovesStalled, metav1.ConditionTrue, ReasonMovesStalled, msg)
	s.stalled = &invalidSpecError{reason: ReasonMovesStalled, message: msg}
}

// dataMoves counts the moves that copy data, not only reorder a replica
// list.
func dataMoves(moves []placement.Move) int {
	n := 0
	for _, m := range moves {
		if m.CopiesData() {
			n++
		}
	}
	return n
}

// withPartitionSizes adds every replica's size to md (plan.WithSizes)
// from DescribeAllLogDirs, so that moves balance bytes and the status
// tells bytes left. Sizes only improve the decision: when some or all
// brokers do not answer, those sizes stay unknown (a partition's size is
// its largest known replica, so one answering replica is enough), and the
// error is returned for the status message.
func (r *KafkaClusterReconciler) withPartitionSizes(ctx context.Context, kc *strata.KafkaCluster, md plan.Metadata) (plan.Metadata, error) {
	return withPartitionSizes(ctx, r.Admin, kc, md)
}

func withPartitionSizes(ctx context.Context, pool *AdminPool, kc *strata.KafkaCluster, md plan.Metadata) (plan.Metadata, error) {
	adm, err := pool.Admin(kc)
	if err != nil {
		return md, err
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		err = fmt.Errorf("describe log dirs: %w", err)
	}
	return plan.WithSizes(md, dirs), err
}

// withSizesNote appends to a decision's reason that replica sizes are
// (partly) unknown.
func withSizesNote(reason string, sizesErr error) string {
	if sizesErr == nil {
		return reason
	}
	return fmt.Sprintf("%s (replica sizes partly unknown, balancing by count there: %v)", reason, sizesErr)
}

func (r *KafkaClusterReconciler) setScaling(kc *strata.KafkaCluster, st strata.ScalingStatus) {
	kc.Status.Scaling = &st
}

// startMoves starts the reassignments; n is how many the brokers took.
func (r *KafkaClusterReconciler) startMoves(ctx context.Context, kc *strata.KafkaCluster, moves []placement.Move) (n int, err error) {
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return 0, err
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, m := range moves {
		req.Assign(m.Topic, m.Partition, m.To)
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	resps, err := r.Admin.Reassign(ctx, kc, adm, req)
	if err != nil {
		return 0, fmt.Errorf("alter partition assignments: %w", err)
	}
	var failed []string
	for _, resp := range resps.Sorted() {
		if resp.Err != nil {
			failed = append(failed, fmt.Sprintf("%s-%d: %v", resp.Topic, resp.Partition, withMessage(resp.Err, resp.ErrMessage)))
			continue
		}
		n++
	}
	if len(failed) > 0 {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventReassignmentFailed, "Reassign", "%d reassignments refused: %s", len(failed), strings.Join(failed[:min(len(failed), 5)], "; "))
		return n, fmt.Errorf("%d reassignments refused, the first: %s", len(failed), failed[0])
	}
	return n, nil
}

// reconcileRebalance moves replicas onto new brokers after a scale-up, or
// evens them out (plan.RebalanceMoves) once every wanted broker pod is
// ready, no roll or drain is in progress, and a broker's replica count or
// bytes are off its zone's mean by more than
// spec.rebalance.imbalanceTolerancePercent (plan.Imbalance: a new broker
// that holds nothing, or got a topic first), or a rebalance is already
// under way. The check on the probe's metadata (and the brokers' log dir
// sizes when counts are even) keeps a settled cluster from paying for the
// full read every reconcile.
func (r *KafkaClusterReconciler) reconcileRebalance(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	under := kc.Status.Scaling != nil && kc.Status.Scaling.Phase == ScalingPhaseRebalancing
	if kc.Status.Roll != nil || s.keepReplicas != nil || !s.podsReady {
		if under {
			// Paused, not over: the status says why instead of the last
			// round's plan (whose moves are not being started).
			why := "waiting for every broker pod to be ready (" + s.podsMsg + ")"
			switch {
			case kc.Status.Roll != nil:
				why = "waiting for the roll to end"
			case s.keepReplicas != nil:
				why = "waiting for the scale-down's drain to end"
			}
			kc.Status.Scaling.Message = "paused: " + why
			s.requeueAfter = minPositive(s.requeueAfter, scalingRequeue)
		}
		return nil
	}
	if !under {
		if s.metadata == nil {
			return nil
		}
		why := r.imbalance(ctx, kc, *s.metadata, wantedBrokers(s.zones))
		if why == "" {
			return nil
		}
		log.FromContext(ctx).V(1).Info("brokers imbalanced: rebalance", "why", why)
		if why, err := r.rebalanceHeldBy(ctx, kc); err != nil || why != "" {
			if why != "" {
				log.FromContext(ctx).V(1).Info("scale-up rebalance held", "why", why)
			}
			return err
		}
	}
	md, err := r.readPlanMetadata(ctx, kc)
	if err != nil {
		return nil // the Kafka health line reports an unreachable cluster
	}
	md, sizesErr := r.withPartitionSizes(ctx, kc, md)
	maxMoves := int(cmp.Or(kc.Spec.Rebalance.MaxConcurrentMoves, strata.DefaultMaxConcurrentMoves))
	rb := plan.RebalanceMoves(wantedBrokers(s.zones), md, maxMoves)
	st := strata.ScalingStatus{Phase: ScalingPhaseRebalancing, MovesInFlight: int32(rb.InFlight), Message: withSizesNote(rb.Reason, sizesErr)}
	var prev *strata.ScalingStatus
	if under {
		prev = kc.Status.Scaling
	}
	ScalingProgress(&st, prev, rb.InFlight, rb.Planned, rb.BytesLeft)
	TickScalingClock(&st, prev, time.Now())
	r.checkMovesStalled(s, &st, time.Now())
	// New brokers that hold nothing: add-brokers; otherwise an imbalance
	// started it: full.
	mode, brokers := strata.RebalanceAddBrokers, emptyBrokers(md, wantedBrokers(s.zones))
	if len(brokers) == 0 {
		mode = strata.RebalanceFull
	}
	r.surfaceScaling(ctx, kc, md, &st, prev, mode, brokers, len(rb.Moves) > 0)
	if len(rb.Moves) == 0 {
		// Done when balanced, not when the plan waits (rb.Waiting: a
		// rebalance under way goes on once, say, its new broker's
		// registration is back).
		if rb.InFlight == 0 && (!rb.Waiting || !under) {
			if under {
				r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventRebalanceMoves, "Rebalance", "rebalance done: %d replica moves made", st.MovesStarted)
			}
			kc.Status.Scaling = nil
			meta.RemoveStatusCondition(&kc.Status.Conditions, ConditionMovesStalled)
			return nil
		}
		r.setScaling(kc, st)
		s.requeueAfter = minPositive(s.requeueAfter, scalingRequeue)
		return nil
	}
	if err := r.throttleMoves(ctx, s, md, rb.Moves); err != nil {
		r.setScaling(kc, st)
		s.requeueAfter = minPositive(s.requeueAfter, scalingRequeue)
		return fmt.Errorf("rebalance: %w", err)
	}
	n, err := r.startMoves(ctx, kc, rb.Moves)
	// Progress counts replica moves; leader reorderings finish at once.
	st.MovesStarted += int32(min(n, dataMoves(rb.Moves)))
	r.setScaling(kc, st)
	s.requeueAfter = minPositive(s.requeueAfter, scalingRequeue)
	if err != nil {
		return fmt.Errorf("rebalance: %w", err)
	}
	r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventRebalanceMoves, "Rebalance", "%d reassignments started: %s", n, rb.Reason)
	return nil
}

// ImbalanceTolerance is kc's spec.rebalance.imbalanceTolerancePercent,
// else DefaultImbalanceTolerancePercent.
func ImbalanceTolerance(kc *strata.KafkaCluster) int {
	return int(cmp.Or(kc.Spec.Rebalance.ImbalanceTolerancePercent, strata.DefaultImbalanceTolerancePercent))
}

// imbalance says why the wanted brokers need a rebalance ("": they do
// not; plan.Imbalance): replica counts from the health probe's metadata
// (md), then, when the counts are even, bytes from DescribeAllLogDirs (a
// cluster whose brokers do not all answer is judged by counts).
func (r *KafkaClusterReconciler) imbalance(ctx context.Context, kc *strata.KafkaCluster, md kadm.Metadata, wanted []plan.Wanted) string {
	loads := map[int32]plan.Load{}
	md.Topics.EachPartition(func(p kadm.PartitionDetail) {
		for _, id := range p.Replicas {
			l := loads[id]
			l.Replicas++
			loads[id] = l
		}
	})
	tol := ImbalanceTolerance(kc)
	if why := plan.Imbalance(wanted, loads, false, tol); why != "" {
		return why
	}
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return ""
	}
	complete := true
	for _, w := range wanted {
		if _, ok := dirs[w.ID]; !ok {
			complete = false
		}
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			complete = false
			return
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			l := loads[d.Broker]
			l.Bytes += p.Size
			loads[d.Broker] = l
		})
	})
	return plan.Imbalance(wanted, loads, complete, tol)
}

// rebalanceHeldBy says which KafkaRebalance of kc holds the operator's
// own scale-up rebalance: one whose moves run (two planners moving the
// same replicas would undo each other's work), or a remove-brokers one
// that emptied its brokers (they are to be scaled down; moving replicas
// back onto them would undo it). Deleting that KafkaRebalance lets the
// operator rebalance again.
func (r *KafkaClusterReconciler) rebalanceHeldBy(ctx context.Context, kc *strata.KafkaCluster) (string, error) {
	var list strata.KafkaRebalanceList
	if err := r.List(ctx, &list, client.InNamespace(kc.Namespace)); err != nil {
		return "", fmt.Errorf("list KafkaRebalances: %w", err)
	}
	for _, kr := range list.Items {
		if kr.Spec.ClusterRef.Name != kc.Name || metav1.IsControlledBy(&kr, kc) {
			continue // the ones showing the cluster's own moves
		}
		switch {
		case kr.Status.State == strata.RebalanceStateRebalancing:
			return fmt.Sprintf("KafkaRebalance %s is rebalancing", kr.Name), nil
		case kr.Spec.Mode == strata.RebalanceRemoveBrokers && kr.Status.State == strata.RebalanceStateReady:
			return fmt.Sprintf("KafkaRebalance %s emptied brokers %v for their removal", kr.Name, kr.Spec.Brokers), nil
		}
	}
	return "", nil
}
