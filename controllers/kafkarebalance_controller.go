package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/placement"
	"github.com/strata-dev/strata/controllers/plan"
)

// KafkaRebalance: a proposal of partition moves in a KafkaCluster,
// computed with the planner of the operator's own scale rebalances and
// drains (plan.RebalancePlan), shown in status with its bytes, cross-zone
// bytes, time at the throttle and cost, and carried out once a person
// approves it (annotation kafka.strata.dev/rebalance: approve), with the
// cluster's cap on concurrent moves and its replication throttle. stop
// cancels the reassignments it started; refresh plans again. See
// docs/operator.md "KafkaRebalance".

// Reasons of a KafkaRebalance's conditions. They are API.
const (
	ReasonProposalPending   = "ProposalPending"
	ReasonProposalReady     = "ProposalReady"
	ReasonRebalancing       = "Rebalancing"
	ReasonRebalanceDone     = "RebalanceDone"
	ReasonRebalanceStopped  = "RebalanceStopped"
	ReasonRebalanceRefused  = "RebalanceRefused"
	ReasonClusterMovesFirst = "ClusterMovesFirst"
)

// Event reasons of a KafkaRebalance.
const (
	EventProposalReady     = "ProposalReady"
	EventRebalanceStarted  = "RebalanceStarted"
	EventRebalanceDone     = "RebalanceDone"
	EventRebalanceStopped  = "RebalanceStopped"
	EventRebalanceRefused  = "RebalanceRefused"
	EventAnnotationIgnored = "AnnotationIgnored"
)

const (
	// RebalanceFinalizer holds a KafkaRebalance whose moves run until
	// they are stopped (cancelled, throttle removed): deleting it stops
	// it.
	RebalanceFinalizer = "kafka.strata.dev/rebalance"
	// rebalancePoll is how often running moves are looked at.
	rebalancePoll = 2 * time.Second
	// proposalSample bounds status.proposal.sample.
	proposalSample = 20
	// indexRebalanceCluster indexes KafkaRebalances by
	// spec.clusterRef.name.
	indexRebalanceCluster = "spec.clusterRef.name"
)

// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkarebalances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkarebalances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkarebalances/finalizers,verbs=update
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkaclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// KafkaRebalanceReconciler proposes and carries out a KafkaRebalance's
// moves through the Kafka admin API of its cluster.
type KafkaRebalanceReconciler struct {
	client.Client
	// LiveReader reads KafkaRebalances from the API server: status.moving
	// is the operator's memory of the reassignments it started (the ones
	// stop cancels), and a cache lagging its last write would forget
	// some. Nil uses Client.
	LiveReader client.Reader
	Recorder   recorder.EventRecorder
	// Admin holds the clusters' Kafka admin clients (kafkaadmin.go).
	Admin *AdminPool
	// Clock times the moves (nil: the real clock).
	Clock clock.PassiveClock
}

func (r *KafkaRebalanceReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// rebalanceScope is what one reconcile of a KafkaRebalance shares.
type rebalanceScope struct {
	kr      *strata.KafkaRebalance
	cluster *strata.KafkaCluster
	adm     *kadm.Client
	now     time.Time
	// base is the KafkaRebalance as read (moved on by the reconcile's own
	// status writes): status patches name its resourceVersion.
	base *strata.KafkaRebalance
	// actedOn: the annotation was acted on and is to be removed.
	actedOn bool
	requeue time.Duration
}

// Reconcile moves one KafkaRebalance through its states:
// PendingProposal → ProposalReady → (approve) Rebalancing → Ready, with
// stop (→ Stopped) and refresh (→ a new proposal).
func (r *KafkaRebalanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	kr := &strata.KafkaRebalance{}
	reader := client.Reader(r.Client)
	if r.LiveReader != nil {
		reader = r.LiveReader
	}
	if err := reader.Get(ctx, req.NamespacedName, kr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	logger := log.FromContext(ctx).WithValues("kafkaRebalance", kr.Name, "generation", kr.Generation, "state", kr.Status.State)
	ctx = log.IntoContext(ctx, logger)
	if !kr.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, kr)
	}
	if err := ensureFinalizer(ctx, r.Client, kr, RebalanceFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	s := &rebalanceScope{kr: kr, now: r.now(), base: kr.DeepCopy()}
	defer func() {
		kr.Status.ObservedGeneration = kr.Generation
		err := r.Status().Patch(ctx, kr, client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil || apierrors.IsNotFound(err):
		case apierrors.IsConflict(err) && reterr == nil:
			res = ctrl.Result{RequeueAfter: conflictRequeue}
			return
		default:
			reterr = errors.Join(reterr, fmt.Errorf("patch status: %w", err))
			return
		}
		// The annotation goes once the status recording what it did is
		// written: a person sees the annotation gone and the new state.
		if s.actedOn && err == nil {
			if err := r.removeAnnotation(ctx, kr); err != nil {
				reterr = errors.Join(reterr, err)
			}
		}
	}()

	kc := &strata.KafkaCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: kr.Namespace, Name: kr.Spec.ClusterRef.Name}, kc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		msg := fmt.Sprintf("KafkaCluster %s not found", kr.Spec.ClusterRef.Name)
		if kr.Status.State == "" {
			kr.Status.State = strata.RebalanceStatePending
		}
		r.setState(kr, kr.Status.State, msg)
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, ReasonClusterNotFound, msg)
		MarkReconciling(&kr.Status.Conditions, kr.Generation, ReasonClusterNotFound, msg)
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	s.cluster = kc
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return r.unreachable(kr, err)
	}
	s.adm = adm

	if metav1.IsControlledBy(kr, kc) {
		return r.mirror(s), nil
	}

	action := kr.Annotations[strata.RebalanceAnnotation]
	state := kr.Status.State
	switch {
	case action == strata.RebalanceStop && state == strata.RebalanceStateRebalancing:
		if err := r.stop(ctx, s); err != nil {
			return r.unreachable(kr, err)
		}
		s.actedOn = true
		return ctrl.Result{}, nil
	case action == strata.RebalanceStop && state == strata.RebalanceStateStopped:
		// Stopped, the throttle removal failed: again.
		if err := r.removeThrottle(ctx, s); err != nil {
			return r.unreachable(kr, err)
		}
		s.actedOn = true
		return ctrl.Result{}, nil
	case action == strata.RebalanceRefresh && state == strata.RebalanceStateRebalancing:
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, EventAnnotationIgnored, "Refresh", "refresh ignored while the moves run: stop them first")
		s.actedOn = true
	case action == strata.RebalanceStop, action == strata.RebalanceRefresh:
		// Nothing runs to stop; refresh plans again below.
		if action == strata.RebalanceStop {
			r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, EventAnnotationIgnored, "Stop", "stop: no move runs (state %s)", state)
		} else {
			state = ""
		}
		s.actedOn = true
	case action == strata.RebalanceApprove && (state == strata.RebalanceStateRebalancing || state == strata.RebalanceStateReady):
		s.actedOn = true // already approved
	case action == strata.RebalanceApprove && state == strata.RebalanceStateStopped:
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, EventAnnotationIgnored, "Approve", "approve ignored: the rebalance was stopped; refresh it for a new proposal, then approve")
		s.actedOn = true
	case action != "" && action != strata.RebalanceApprove && action != strata.RebalanceStop && action != strata.RebalanceRefresh:
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, EventAnnotationIgnored, "Annotate", "%s=%q is not approve, stop or refresh", strata.RebalanceAnnotation, action)
		s.actedOn = true
	}
	// A spec edited outside the moves is planned again.
	if state != strata.RebalanceStateRebalancing && kr.Status.ObservedGeneration != kr.Generation {
		state = ""
	}
	switch state {
	case "", strata.RebalanceStatePending, strata.RebalanceStateNotReady:
		if err := r.propose(ctx, s); err != nil {
			return r.unreachable(kr, err)
		}
		if kr.Status.State != strata.RebalanceStateProposalReady {
			return ctrl.Result{RequeueAfter: cmp.Or(s.requeue, 10*time.Second)}, nil
		}
		fallthrough
	case strata.RebalanceStateProposalReady:
		if action != strata.RebalanceApprove {
			return ctrl.Result{}, nil
		}
		s.actedOn = true
		r.approve(s)
		fallthrough
	case strata.RebalanceStateRebalancing:
		if err := r.rebalance(ctx, s); err != nil {
			return r.unreachable(kr, err)
		}
		return ctrl.Result{RequeueAfter: cmp.Or(s.requeue, rebalancePoll)}, nil
	}
	return ctrl.Result{}, nil
}

// unreachable records a failed admin conversation and retries with
// backoff; the state is kept.
func (r *KafkaRebalanceReconciler) unreachable(kr *strata.KafkaRebalance, err error) (ctrl.Result, error) {
	reason := ReasonKafkaUnreachable
	var ke *kerr.Error
	if errors.As(err, &ke) {
		reason = ReasonKafkaError
	}
	msg := err.Error()
	if kr.Status.State == "" {
		kr.Status.State = strata.RebalanceStatePending
	}
	kr.Status.Message = msg
	SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, reason, msg)
	MarkReconciling(&kr.Status.Conditions, kr.Generation, reason, msg)
	return ctrl.Result{}, err
}

func (r *KafkaRebalanceReconciler) setState(kr *strata.KafkaRebalance, state, msg string) {
	kr.Status.State = state
	kr.Status.Message = msg
}

// request is the planner's view of the spec.
func request(kr *strata.KafkaRebalance) plan.RebalanceRequest {
	return plan.RebalanceRequest{Mode: string(cmp.Or(kr.Spec.Mode, strata.RebalanceFull)), Brokers: kr.Spec.Brokers}
}

// readMetadata is the cluster's metadata with replica sizes (a broker
// that does not answer leaves its sizes unknown: the plan balances by
// count there, and the error goes to the message).
func (r *KafkaRebalanceReconciler) readMetadata(ctx context.Context, s *rebalanceScope) (plan.Metadata, error, error) {
	md, err := readPlanMetadata(ctx, r.Admin, s.cluster)
	if err != nil {
		return md, nil, err
	}
	md, sizesErr := withPartitionSizes(ctx, r.Admin, s.cluster, md)
	return md, sizesErr, nil
}

// propose computes the proposal: ProposalReady, or NotReady (Stalled)
// when the request cannot be planned, or PendingProposal while a broker
// it needs is not registered.
func (r *KafkaRebalanceReconciler) propose(ctx context.Context, s *rebalanceScope) error {
	kr, kc := s.kr, s.cluster
	md, sizesErr, err := r.readMetadata(ctx, s)
	if err != nil {
		return err
	}
	pl := plan.RebalancePlan(request(kr), md)
	kr.Status.Progress, kr.Status.Moving = nil, nil
	meta.RemoveStatusCondition(&kr.Status.Conditions, ConditionMovesStalled)
	switch {
	case pl.Refused != "":
		if kr.Status.State != strata.RebalanceStateNotReady || kr.Status.Message != pl.Refused {
			r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, EventRebalanceRefused, "Propose", "%s", pl.Refused)
		}
		kr.Status.Proposal = nil
		r.setState(kr, strata.RebalanceStateNotReady, pl.Refused)
		MarkStalled(&kr.Status.Conditions, kr.Generation, ReasonRebalanceRefused, pl.Refused+"; change the spec")
		return nil
	case pl.Wait != "":
		kr.Status.Proposal = nil
		r.setState(kr, strata.RebalanceStatePending, pl.Wait)
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, ReasonProposalPending, pl.Wait)
		MarkReconciling(&kr.Status.Conditions, kr.Generation, ReasonProposalPending, pl.Wait)
		return nil
	}
	p := BuildProposal(kc, md, pl, s.now)
	kr.Status.Proposal = &p
	msg := fmt.Sprintf("%d replica moves, %d bytes (%d across zones with Kafka's replication, %d with Strata's), %s; approve with: kubectl annotate kafkarebalance %s %s=approve",
		p.Moves, p.BytesToMove, p.CrossZoneBytes, p.CrossZoneBytesStrata, costLine(p), kr.Name, strata.RebalanceAnnotation)
	if pl.Waiting > 0 {
		msg += fmt.Sprintf("; %d partitions with a reassignment in flight are planned once it ends", pl.Waiting)
	}
	if sizesErr != nil {
		msg += fmt.Sprintf(" (replica sizes partly unknown: %v)", sizesErr)
	}
	r.setState(kr, strata.RebalanceStateProposalReady, msg)
	SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, ReasonProposalReady, "waiting for approval: "+msg)
	MarkReconciled(&kr.Status.Conditions, kr.Generation, ReasonProposalReady, "the proposal is ready; it waits for approval")
	r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, EventProposalReady, "Propose", "%s", msg)
	return nil
}

func costLine(p strata.RebalanceProposal) string {
	s := fmt.Sprintf("cross-zone cost $%s (Kafka: $%s)", p.CostUSD.Strata, p.CostUSD.Kafka)
	if p.EstimatedDuration != nil {
		s += fmt.Sprintf(", about %s at the throttle of %d B/s", p.EstimatedDuration.Duration, ptr.Deref(p.Throttle, 0))
	}
	return s
}

// BuildProposal turns a plan into status.proposal: the moves and bytes,
// cross-zone bytes with Kafka's replication and with Strata's (a tiered
// partition's new replica hydrates from the slow tier), the time at the
// cluster's throttle and the cross-zone cost at its price table.
func BuildProposal(kc *strata.KafkaCluster, md plan.Metadata, pl plan.RequestPlan, now time.Time) strata.RebalanceProposal {
	tiered := kc.Spec.TieredStorage != nil
	p := strata.RebalanceProposal{ComputedAt: metav1.NewTime(now), Throttle: kc.Spec.Rebalance.Throttle}
	zone := map[int32]string{}
	for _, b := range md.Brokers {
		zone[b.ID] = b.Rack
	}
	// Before: the replica lists the partitions end with.
	size := map[string]int64{}
	replicas := map[string][]int32{}
	for _, part := range md.Partitions {
		size[part.String()] = part.Size()
		replicas[part.String()] = part.Target()
	}
	load := func() (map[int32]int32, map[int32]int64) {
		n, b := map[int32]int32{}, map[int32]int64{}
		for _, b0 := range md.Brokers {
			n[b0.ID] += 0
		}
		for key, rs := range replicas {
			for _, id := range rs {
				n[id]++
				b[id] += size[key]
			}
		}
		return n, b
	}
	nBefore, bBefore := load()
	in, out := map[int32]int64{}, map[int32]int64{}
	for _, m := range pl.Moves {
		key := fmt.Sprintf("%s-%d", m.Topic, m.Partition)
		replicas[key] = m.To
		if !m.CopiesData() {
			p.LeaderChanges++
			continue
		}
		c := md.CostOf(m, tiered)
		p.Moves++
		p.BytesToMove += c.Bytes
		p.CrossZoneBytes += c.CrossZone
		p.CrossZoneBytesStrata += c.CrossZoneStrata
		for _, id := range c.To {
			in[id] += c.Bytes / int64(len(c.To))
		}
		out[c.From] += c.Bytes
		if len(p.Sample) < proposalSample {
			p.Sample = append(p.Sample, strata.ProposedMove{Partition: key, From: m.From, To: m.To, Bytes: c.Bytes, CrossZoneBytes: c.CrossZone})
		}
	}
	nAfter, bAfter := load()
	for _, id := range slices.Sorted(maps.Keys(nAfter)) {
		p.Brokers = append(p.Brokers, strata.RebalanceBroker{ID: id, Zone: zone[id],
			ReplicasBefore: nBefore[id], ReplicasAfter: nAfter[id], BytesBefore: bBefore[id], BytesAfter: bAfter[id]})
	}
	if rate := ptr.Deref(kc.Spec.Rebalance.Throttle, 0); rate > 0 {
		var most int64
		for _, v := range in {
			most = max(most, v)
		}
		for id, v := range out {
			if id >= 0 {
				most = max(most, v)
			}
		}
		d := time.Duration(math.Ceil(float64(most)/float64(rate))) * time.Second
		p.EstimatedDuration = &metav1.Duration{Duration: d}
	}
	prices := clusterPrices(kc)
	p.CostUSD = strata.RebalanceCost{Kafka: formatMoveUSD(prices.CrossZone(p.CrossZoneBytes)), Strata: formatMoveUSD(prices.CrossZone(p.CrossZoneBytesStrata))}
	p.Reason = fmt.Sprintf("%d replica moves and %d leader reorderings over %d brokers", p.Moves, p.LeaderChanges, len(md.Brokers))
	if pl.Waiting > 0 {
		p.Reason += fmt.Sprintf("; %d partitions wait for a reassignment in flight", pl.Waiting)
	}
	if tiered {
		p.Reason += "; tiered partitions hydrate from the slow tier (no cross-zone bytes)"
	}
	return p
}

// formatMoveUSD prints dollars with cents, and below a cent with up to
// six decimals (a few MB across zones cost a fraction of a cent), never
// in exponent form.
func formatMoveUSD(v float64) string {
	if v == 0 || math.Abs(v) >= 0.01 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	s := strings.TrimRight(strconv.FormatFloat(v, 'f', 6, 64), "0")
	if strings.HasSuffix(s, ".") {
		s += "0"
	}
	return s
}

// clusterPrices is the price table of kc: the defaults with
// spec.cost.prices over them (values the CRD accepted; one that does not
// parse keeps the default).
func clusterPrices(kc *strata.KafkaCluster) cost.Prices {
	p := cost.Default()
	kv := map[string]string{}
	renderCostConfig(kc, kv)
	for k, v := range kv {
		_, _ = p.SetKey(k, v)
	}
	return p
}

// approve starts the approved proposal's moves: Rebalancing.
func (r *KafkaRebalanceReconciler) approve(s *rebalanceScope) {
	kr := s.kr
	kr.Status.Progress = &strata.RebalanceProgress{}
	kr.Status.Moving = nil
	r.setState(kr, strata.RebalanceStateRebalancing, "approved: the moves start")
	r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, EventRebalanceStarted, "Approve", "approved: %d replica moves, %d bytes", kr.Status.Proposal.Moves, kr.Status.Proposal.BytesToMove)
}

// rebalance is one round of the approved moves: note the ones that
// ended, time the progress, start the next ones within the cluster's cap
// (throttled first), and end Ready when the plan has nothing left.
func (r *KafkaRebalanceReconciler) rebalance(ctx context.Context, s *rebalanceScope) error {
	kr, kc := s.kr, s.cluster
	if sc := kc.Status.Scaling; sc != nil && sc.Phase != ScalingPhaseBlocked && len(kr.Status.Moving) == 0 {
		// The operator's own drain or rebalance goes first: two planners
		// moving the same replicas would undo each other's work.
		msg := fmt.Sprintf("waiting: the KafkaCluster's own moves run first (status.scaling phase %s)", sc.Phase)
		kr.Status.Message = msg
		MarkReconciling(&kr.Status.Conditions, kr.Generation, ReasonClusterMovesFirst, msg)
		return nil
	}
	md, sizesErr, err := r.readMetadata(ctx, s)
	if err != nil {
		return err
	}
	maxMoves := int(cmp.Or(kc.Spec.Rebalance.MaxConcurrentMoves, strata.DefaultMaxConcurrentMoves))
	step, pl := plan.RebalanceStep(request(kr), md, maxMoves)

	reassigning := map[string]plan.Partition{}
	for _, p := range md.Partitions {
		if p.Reassigning() {
			reassigning[p.String()] = p
		}
	}
	prog := kr.Status.Progress
	if prog == nil {
		prog = &strata.RebalanceProgress{}
		kr.Status.Progress = prog
	}
	var still []string
	var ownLeft int64
	for _, name := range kr.Status.Moving {
		if p, ok := reassigning[name]; ok {
			still = append(still, name)
			ownLeft += p.BytesLeft()
		}
	}
	finished := len(kr.Status.Moving) - len(still)
	kr.Status.Moving = still
	prog.MovesDone += int32(finished)

	left := ownLeft
	if pl.Refused == "" && pl.Wait == "" {
		left += step.PlannedBytes
	}
	first := prog.StartTime == nil
	if first {
		prog.BytesToMove = left
	} else {
		prog.BytesToMove += max(0, left-prog.BytesLeft)
	}
	progressed := first || finished > 0 || left < prog.BytesLeft
	prog.MoveClock = TickMoveClock(&prog.MoveClock, s.now, prog.BytesToMove, left, progressed)
	prog.BytesLeft = left

	rate := ptr.Deref(kc.Spec.Rebalance.Throttle, 0)
	started := 0
	switch {
	case pl.Refused != "" || pl.Wait != "":
		kr.Status.Message = "the plan cannot go on: " + pl.Refused + pl.Wait
	case len(step.Moves) > 0:
		if rate > 0 {
			if _, err := convergeThrottle(ctx, s.adm, DesiredThrottle(rate, md, step.Moves), md); err != nil {
				return fmt.Errorf("throttle the moves: %w", err)
			}
		}
		// The moves are recorded before they start: a status write lost
		// afterwards (a conflict with a person's annotation) would leave
		// reassignments that stop does not know of.
		was := kr.Status.Moving
		for _, m := range step.Moves {
			if m.CopiesData() {
				kr.Status.Moving = append(kr.Status.Moving, fmt.Sprintf("%s-%d", m.Topic, m.Partition))
			}
		}
		if err := r.writeStatus(ctx, s); err != nil {
			return fmt.Errorf("record the moves before starting them: %w", err)
		}
		prog = kr.Status.Progress // the write decoded the status anew
		names, err := r.startMoves(ctx, s, step.Moves)
		started = len(names)
		log.FromContext(ctx).Info("reassignments started", "moves", moveList(step.Moves), "accepted", len(names))
		kr.Status.Moving = was
		for _, m := range step.Moves {
			name := fmt.Sprintf("%s-%d", m.Topic, m.Partition)
			if m.CopiesData() && slices.Contains(names, name) {
				kr.Status.Moving = append(kr.Status.Moving, name)
				prog.MovesStarted++
			}
		}
		if err != nil {
			return err
		}
		kr.Status.Message = withSizesNote(step.Reason, sizesErr)
		r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, EventRebalanceMoves, "Rebalance", "%d reassignments started: %s", started, step.Reason)
	case len(kr.Status.Moving) == 0 && pl.Waiting == 0:
		return r.finish(ctx, s)
	default:
		kr.Status.Message = withSizesNote(step.Reason, sizesErr)
	}
	prog.MovesInFlight = int32(len(kr.Status.Moving))
	prog.Percent = percent(prog.BytesMoved, prog.BytesToMove, prog.MovesDone, prog.MovesStarted)

	// Stalled: what the plan waits for (its own moves, or others' on the
	// partitions it plans) made no progress for the stall time.
	after := DefaultMovesStalledAfter
	if d := kr.Spec.MovesStalledAfter; d != nil && d.Duration > 0 {
		after = d.Duration
	}
	waiting := len(kr.Status.Moving) + pl.Waiting
	if pl.Refused != "" || pl.Wait != "" {
		waiting = max(waiting, 1)
	}
	if d, stalled := MovesStalledFor(prog.MoveClock, s.now, waiting, after); stalled && started == 0 {
		msg := fmt.Sprintf("no progress for %s (spec.movesStalledAfter %s): %d moves in flight, %d bytes left; %s",
			d.Round(time.Second), after, len(kr.Status.Moving), prog.BytesLeft, kr.Status.Message)
		if !meta.IsStatusConditionTrue(kr.Status.Conditions, ConditionMovesStalled) {
			r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, EventMovesStalled, "Rebalance", "%s", msg)
		}
		SetCondition(&kr.Status.Conditions, kr.Generation, ConditionMovesStalled, metav1.ConditionTrue, ReasonMovesStalled, msg+" (is a broker receiving a replica down? stop the rebalance with the stop annotation)")
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionStalled, metav1.ConditionTrue, ReasonMovesStalled, msg)
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReconciling, metav1.ConditionFalse, ReasonMovesStalled, "not progressing: "+msg)
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, ReasonMovesStalled, msg)
		return nil
	}
	SetCondition(&kr.Status.Conditions, kr.Generation, ConditionMovesStalled, metav1.ConditionFalse, ReasonMovesProgressing,
		fmt.Sprintf("last progress at %s", prog.LastProgressTime.UTC().Format(time.RFC3339)))
	SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, ReasonRebalancing, kr.Status.Message)
	MarkReconciling(&kr.Status.Conditions, kr.Generation, ReasonRebalancing, kr.Status.Message)
	return nil
}

// moveList is moves as "topic-partition [from]->[to]" for a log line.
func moveList(moves []placement.Move) []string {
	out := make([]string, 0, len(moves))
	for _, m := range moves {
		out = append(out, fmt.Sprintf("%s-%d %v->%v", m.Topic, m.Partition, m.From, m.To))
	}
	return out
}

// writeStatus writes the status now (optimistic lock on the version the
// reconcile read or last wrote), for a record that must be in place
// before an action.
func (r *KafkaRebalanceReconciler) writeStatus(ctx context.Context, s *rebalanceScope) error {
	s.kr.Status.ObservedGeneration = s.kr.Generation
	if err := r.Status().Patch(ctx, s.kr, client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	s.base = s.kr.DeepCopy()
	return nil
}

// percent is the bytes moved over the bytes to move, or the moves done
// over the moves started when no size is known.
func percent(moved, toMove int64, done, started int32) int32 {
	switch {
	case toMove > 0:
		return int32(min(100, moved*100/toMove))
	case started > 0:
		return min(100, done*100/started)
	}
	return 0
}

// finish ends the moves: throttle off (what others' moves in flight
// still need is kept), Ready.
func (r *KafkaRebalanceReconciler) finish(ctx context.Context, s *rebalanceScope) error {
	kr := s.kr
	if err := r.removeThrottle(ctx, s); err != nil {
		return err
	}
	prog := kr.Status.Progress
	t := metav1.NewTime(s.now)
	prog.CompletionTime = &t
	prog.EstimatedCompletionTime = nil
	prog.MovesInFlight = 0
	prog.Percent = 100
	msg := fmt.Sprintf("done: %d replica moves, %d bytes copied", prog.MovesStarted, prog.BytesMoved)
	r.setState(kr, strata.RebalanceStateReady, msg)
	meta.RemoveStatusCondition(&kr.Status.Conditions, ConditionMovesStalled)
	SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionTrue, ReasonRebalanceDone, msg)
	MarkReconciled(&kr.Status.Conditions, kr.Generation, ReasonRebalanceDone, msg)
	r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, EventRebalanceDone, "Rebalance", "%s", msg)
	return nil
}

// startMoves starts the reassignments; names are the partitions the
// brokers took.
func (r *KafkaRebalanceReconciler) startMoves(ctx context.Context, s *rebalanceScope, moves []placement.Move) ([]string, error) {
	var req kadm.AlterPartitionAssignmentsReq
	for _, m := range moves {
		req.Assign(m.Topic, m.Partition, m.To)
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	resps, err := r.Admin.Reassign(ctx, s.cluster, s.adm, req)
	if err != nil {
		return nil, fmt.Errorf("alter partition assignments: %w", err)
	}
	var names, failed []string
	for _, resp := range resps.Sorted() {
		if resp.Err != nil {
			failed = append(failed, fmt.Sprintf("%s-%d: %v", resp.Topic, resp.Partition, withMessage(resp.Err, resp.ErrMessage)))
			continue
		}
		names = append(names, fmt.Sprintf("%s-%d", resp.Topic, resp.Partition))
	}
	if len(failed) > 0 {
		r.Recorder.Eventf(s.kr, nil, corev1.EventTypeWarning, EventReassignmentFailed, "Reassign", "%d reassignments refused: %s", len(failed), strings.Join(failed[:min(len(failed), 5)], "; "))
		return names, fmt.Errorf("%d reassignments refused, the first: %s", len(failed), failed[0])
	}
	return names, nil
}

// stop cancels the reassignments this rebalance started that are still
// in flight (Kafka puts their replica lists back) and records Stopped,
// then removes the throttle no move needs any more. The status says
// Stopped once the cancellation is done, before the throttle is
// removed: a failure there is retried (the stop annotation stays until
// it is done) without cancelling or counting again.
func (r *KafkaRebalanceReconciler) stop(ctx context.Context, s *rebalanceScope) error {
	kr := s.kr
	moving := kr.Status.Moving
	cancelled, err := cancelReassignments(ctx, r.Admin, s.cluster, s.adm, moving)
	if err != nil {
		return err
	}
	kr.Status.Moving = nil
	done := int32(0)
	if p := kr.Status.Progress; p != nil {
		p.MovesInFlight = 0
		p.EstimatedCompletionTime = nil
		p.MovesDone = max(p.MovesDone, p.MovesStarted-int32(cancelled))
		done = p.MovesDone
	}
	msg := fmt.Sprintf("stopped: %d reassignments in flight cancelled (their replicas stay where they were), %d moves had finished; refresh for a new proposal", cancelled, done)
	r.setState(kr, strata.RebalanceStateStopped, msg)
	meta.RemoveStatusCondition(&kr.Status.Conditions, ConditionMovesStalled)
	SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, ReasonRebalanceStopped, msg)
	MarkReconciled(&kr.Status.Conditions, kr.Generation, ReasonRebalanceStopped, msg)
	r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, EventRebalanceStopped, "Stop", "%s", msg)
	return r.removeThrottle(ctx, s, moving...)
}

// removeThrottle converges the brokers' throttle to what the
// reassignments still in flight (others') need: none once they end. The
// partitions named (just cancelled: the brokers may still list them for
// a moment) count as not moving.
func (r *KafkaRebalanceReconciler) removeThrottle(ctx context.Context, s *rebalanceScope, cancelled ...string) error {
	rate := ptr.Deref(s.cluster.Spec.Rebalance.Throttle, 0)
	if rate <= 0 && !meta.IsStatusConditionTrue(s.cluster.Status.Conditions, ConditionReplicationThrottled) {
		return nil
	}
	md, err := readPlanMetadata(ctx, r.Admin, s.cluster)
	if err != nil {
		return err
	}
	md.Partitions = slices.Clone(md.Partitions)
	for i, p := range md.Partitions {
		if slices.Contains(cancelled, p.String()) {
			// Cancelled: back to the replicas it had.
			md.Partitions[i].Replicas = slices.DeleteFunc(slices.Clone(p.Replicas), func(id int32) bool { return slices.Contains(p.Adding, id) })
			md.Partitions[i].Adding, md.Partitions[i].Removing = nil, nil
		}
	}
	if _, err := convergeThrottle(ctx, s.adm, DesiredThrottle(rate, md, nil), md); err != nil {
		return fmt.Errorf("remove the replication throttle: %w", err)
	}
	return nil
}

// cancelReassignments cancels the reassignments of the partitions named
// (topic-partition); one that already ended is not an error.
func cancelReassignments(ctx context.Context, pool *AdminPool, kc *strata.KafkaCluster, adm *kadm.Client, names []string) (int, error) {
	if len(names) == 0 {
		return 0, nil
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, name := range names {
		i := strings.LastIndexByte(name, '-')
		p, err := strconv.ParseInt(name[i+1:], 10, 32)
		if i < 0 || err != nil {
			continue
		}
		req.CancelAssign(name[:i], int32(p))
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	resps, err := pool.Reassign(ctx, kc, adm, req)
	if err != nil {
		return 0, fmt.Errorf("cancel partition reassignments: %w", err)
	}
	n := 0
	for _, resp := range resps.Sorted() {
		switch {
		case resp.Err == nil:
			n++
		case errors.Is(resp.Err, kerr.NoReassignmentInProgress):
		default:
			return n, fmt.Errorf("cancel the reassignment of %s-%d: %w", resp.Topic, resp.Partition, withMessage(resp.Err, resp.ErrMessage))
		}
	}
	return n, nil
}

// mirror keeps a KafkaRebalance the cluster created for its own drain or
// scale-up rebalance (surfaceScaling, which writes the proposal) in step
// with status.scaling: Rebalancing with the scaling's progress and clock (MovesStalled and
// Stalled from the cluster's MovesStalled), Ready once the scaling named
// it no more. It is approved by the spec change that started it:
// approve and stop are not for it (change the KafkaCluster's spec).
func (r *KafkaRebalanceReconciler) mirror(s *rebalanceScope) ctrl.Result {
	kr, kc := s.kr, s.cluster
	if action := kr.Annotations[strata.RebalanceAnnotation]; action != "" {
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, EventAnnotationIgnored, "Annotate",
			"%s=%s ignored: this KafkaRebalance shows the KafkaCluster's own moves, which follow its spec (change spec.zones to stop them)", strata.RebalanceAnnotation, action)
		s.actedOn = true
	}
	sc := kc.Status.Scaling
	if sc == nil || sc.KafkaRebalance != kr.Name {
		// Until status.scaling named it once (the cluster writes its
		// status after creating it), it has not started, unless that
		// never happens (the cluster's status write was lost).
		if kr.Status.Progress == nil && s.now.Sub(kr.CreationTimestamp.Time) < time.Minute {
			return ctrl.Result{RequeueAfter: rebalancePoll}
		}
		if kr.Status.State != strata.RebalanceStateReady {
			prog := kr.Status.Progress
			if prog == nil {
				prog = &strata.RebalanceProgress{}
				kr.Status.Progress = prog
			}
			t := metav1.NewTime(s.now)
			prog.CompletionTime, prog.EstimatedCompletionTime = &t, nil
			prog.MovesInFlight, prog.Percent = 0, 100
			msg := fmt.Sprintf("the KafkaCluster's own %s ended: %d replica moves", map[strata.RebalanceMode]string{strata.RebalanceAddBrokers: "scale-up rebalance", strata.RebalanceRemoveBrokers: "drain", strata.RebalanceFull: "rebalance"}[kr.Spec.Mode], prog.MovesStarted)
			r.setState(kr, strata.RebalanceStateReady, msg)
			meta.RemoveStatusCondition(&kr.Status.Conditions, ConditionMovesStalled)
			SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionTrue, ReasonRebalanceDone, msg)
			MarkReconciled(&kr.Status.Conditions, kr.Generation, ReasonRebalanceDone, msg)
		}
		return ctrl.Result{}
	}
	kr.Status.Progress = &strata.RebalanceProgress{MoveClock: *sc.MoveClock.DeepCopy(), MovesStarted: sc.MovesStarted, MovesDone: sc.MovesDone,
		MovesInFlight: sc.MovesInFlight, BytesToMove: sc.BytesToMove, BytesLeft: sc.BytesLeft,
		Percent: percent(sc.BytesMoved, sc.BytesToMove, sc.MovesDone, sc.MovesStarted)}
	msg := fmt.Sprintf("the KafkaCluster's own moves (status.scaling phase %s): %s", sc.Phase, sc.Message)
	r.setState(kr, strata.RebalanceStateRebalancing, msg)
	if c := meta.FindStatusCondition(kc.Status.Conditions, ConditionMovesStalled); c != nil && c.Status == metav1.ConditionTrue {
		SetCondition(&kr.Status.Conditions, kr.Generation, ConditionMovesStalled, metav1.ConditionTrue, ReasonMovesStalled, c.Message)
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionStalled, metav1.ConditionTrue, ReasonMovesStalled, c.Message)
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReconciling, metav1.ConditionFalse, ReasonMovesStalled, "not progressing: "+c.Message)
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, ReasonMovesStalled, c.Message)
	} else {
		if meta.FindStatusCondition(kr.Status.Conditions, ConditionMovesStalled) != nil {
			SetCondition(&kr.Status.Conditions, kr.Generation, ConditionMovesStalled, metav1.ConditionFalse, ReasonMovesProgressing, "the moves progress")
		}
		SetCondition(&kr.Status.Conditions, kr.Generation, strata.ConditionReady, metav1.ConditionFalse, ReasonRebalancing, msg)
		MarkReconciling(&kr.Status.Conditions, kr.Generation, ReasonRebalancing, msg)
	}
	return ctrl.Result{RequeueAfter: rebalancePoll}
}

// reconcileDelete stops a KafkaRebalance whose moves run before it goes
// (a rebalance deleted mid-way would otherwise leave its throttle on the
// brokers); without its cluster there is nothing to stop.
func (r *KafkaRebalanceReconciler) reconcileDelete(ctx context.Context, kr *strata.KafkaRebalance) error {
	if !slices.Contains(kr.Finalizers, RebalanceFinalizer) {
		return nil
	}
	// One that shows the cluster's own moves stops nothing: they follow
	// the cluster's spec.
	mirrored := slices.ContainsFunc(kr.OwnerReferences, func(o metav1.OwnerReference) bool { return ptr.Deref(o.Controller, false) && o.Kind == "KafkaCluster" })
	if kr.Status.State == strata.RebalanceStateRebalancing && !mirrored {
		kc := &strata.KafkaCluster{}
		err := r.Get(ctx, client.ObjectKey{Namespace: kr.Namespace, Name: kr.Spec.ClusterRef.Name}, kc)
		switch {
		case err == nil && kc.DeletionTimestamp.IsZero():
			adm, err := r.Admin.Admin(kc)
			if err != nil {
				return err
			}
			if err := r.stop(ctx, &rebalanceScope{kr: kr, cluster: kc, adm: adm, now: r.now()}); err != nil {
				return fmt.Errorf("stop the moves before deletion: %w", err)
			}
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
	}
	return releaseFinalizer(ctx, r.Client, kr, RebalanceFinalizer)
}

// removeAnnotation removes the acted-on annotation.
func (r *KafkaRebalanceReconciler) removeAnnotation(ctx context.Context, kr *strata.KafkaRebalance) error {
	if _, ok := kr.Annotations[strata.RebalanceAnnotation]; !ok {
		return nil
	}
	patch := client.MergeFrom(kr.DeepCopy())
	delete(kr.Annotations, strata.RebalanceAnnotation)
	if err := r.Patch(ctx, kr, patch); err != nil {
		return fmt.Errorf("remove annotation %s: %w", strata.RebalanceAnnotation, err)
	}
	return nil
}

// SetupWithManager registers the reconciler: KafkaRebalances (spec and
// annotation changes) and their clusters' spec changes.
func (r *KafkaRebalanceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &strata.KafkaRebalance{}, indexRebalanceCluster, func(o client.Object) []string {
		return []string{o.(*strata.KafkaRebalance).Spec.ClusterRef.Name}
	}); err != nil {
		return fmt.Errorf("index KafkaRebalances by cluster: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&strata.KafkaRebalance{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		Watches(&strata.KafkaCluster{}, handler.EnqueueRequestsFromMapFunc(r.rebalancesOfCluster),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: ClusterWorkers}).
		Named("kafkarebalance").
		Complete(r)
}

func (r *KafkaRebalanceReconciler) rebalancesOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	var list strata.KafkaRebalanceList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexRebalanceCluster: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list KafkaRebalances of KafkaCluster", "kafkaCluster", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
