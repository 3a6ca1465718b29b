package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/plan"
)

// Condition reasons of a KafkaCluster. They are API: users and tests match
// on them.
const (
	ReasonFastBucketNotFound     = "FastBucketNotFound"
	ReasonFastBucketZoneMismatch = "FastBucketZoneMismatch"
	ReasonFastBucketUnreachable  = "FastBucketUnreachable"
	// ReasonFastBucketRefused: a zone's FastBucket is one the operator's
	// BucketPolicy refuses (fastbucket_policy.go).
	ReasonFastBucketRefused = "FastBucketRefused"
	ReasonReconcileError    = "ReconcileError"
	ReasonBrokersNotReady   = "BrokersNotReady"
	ReasonRollingOut        = "RollingOut"
	ReasonUpToDate          = "UpToDate"
	ReasonAsExpected        = "AsExpected"
	ReasonInvalidSpec       = "InvalidSpec"
)

// Event reasons of a KafkaCluster.
const (
	EventCreated           = "Created"
	EventUpdated           = "Updated"
	EventZoneScaledDown    = "ZoneScaledToZero"
	EventZoneRemoved       = "ZoneRemoved"
	EventBrokerIDBlock     = "BrokerIDBlockAssigned"
	EventClaimsDeleted     = "ClaimsDeleted"
	EventInvalidBucket     = "InvalidFastBucket"
	EventInvalidSpec       = "InvalidSpec"
	EventReconcileFailed   = "ReconcileFailed"
	EventStorageNotApplied = "StorageChangeNotApplied"
	// EventInsecureDefaultsKept: a cluster from before secure defaults
	// keeps its PLAINTEXT listener or runs without an authorizer.
	EventInsecureDefaultsKept = "InsecureDefaultsKept"
)

// Conditions that say what the operator keeps or does not apply, present
// only while it is so. Their Warning events are sent when the condition
// appears or its message changes, not at every reconcile.
const (
	// ConditionStorageChangeNotApplied: spec.storage or
	// spec.metadata.managed.storageSize asks for a volume change the
	// claims cannot take (reason StorageChangeRefused;
	// kafkacluster_storage.go).
	ConditionStorageChangeNotApplied = "StorageChangeNotApplied"
	// ConditionInsecureDefaultsKept: a cluster created before secure
	// defaults keeps its PLAINTEXT listener or runs without an
	// authorizer (reason CreatedBeforeSecureDefaults).
	ConditionInsecureDefaultsKept     = "InsecureDefaultsKept"
	ReasonCreatedBeforeSecureDefaults = "CreatedBeforeSecureDefaults"
)

// setNoticeCondition sets condition typ True with msg, with a Warning
// event when it was not True with that message before.
func (r *KafkaClusterReconciler) setNoticeCondition(kc *strata.KafkaCluster, typ, reason, event, msg string) {
	if c := meta.FindStatusCondition(kc.Status.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue || c.Message != msg {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, event, "Reconcile", "%s", msg)
	}
	setCondition(kc, typ, metav1.ConditionTrue, reason, msg)
}

// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkaclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkaclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkaclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkarebalances,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkarebalances/status,verbs=get;update
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=fastbuckets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// KafkaClusterReconciler lays a KafkaCluster out zone by zone.
type KafkaClusterReconciler struct {
	client.Client
	// LiveReader reads from the API server, bypassing the cache: the
	// broker ID record is never decided on from a stale copy. Nil uses
	// Client.
	LiveReader client.Reader
	Recorder   recorder.EventRecorder
	// MetadataProber reads the etcd health line; nil uses EtcdProber.
	MetadataProber MetadataProber
	// Admin holds the cluster's Kafka admin client (kafkaadmin.go).
	Admin *AdminPool
	// KafkaProbeInterval is how often a cluster's Kafka health is read
	// (kafkahealth.go); zero means DefaultKafkaProbeInterval.
	KafkaProbeInterval time.Duration
	// LeaderElectionInterval is the least time between two
	// preferred-leader elections in one cluster; zero means
	// LeaderElectionMinInterval.
	LeaderElectionInterval time.Duration
	// RollStuckAfter is how long a rolling restart may wait for its next
	// restart before it is reported Stalled (RollStuck); zero means
	// DefaultRollStuckAfter.
	RollStuckAfter time.Duration
	// Clock decides certificate renewals; nil is the wall clock.
	Clock clock.PassiveClock
	// OperatorNamespace is the namespace of the operator's pods, the
	// only one the NetworkPolicies admit them from ("":
	// DefaultOperatorNamespace).
	OperatorNamespace string

	// BucketPolicy is the FastBucketReconciler's Policy: a zone whose
	// FastBucket it refuses stops the cluster (resolveFastBuckets).
	BucketPolicy BucketPolicy

	kafkaBackoffOnce sync.Once
	kafkaBackoff     *flowcontrol.Backoff
}

// liveReader reads from the API server, bypassing the cache (LiveReader),
// or from Client when none is set.
func (r *KafkaClusterReconciler) liveReader() client.Reader {
	if r.LiveReader != nil {
		return r.LiveReader
	}
	return r.Client
}

// clusterScope is what the reconcile steps share.
type clusterScope struct {
	cluster *strata.KafkaCluster
	// zones of the spec, in spec order, with their ID base and bucket.
	zones []ZoneInput
	// statefulSets written this round, by zone; the etcd one separately.
	statefulSets map[string]*appsv1.StatefulSet
	etcd         *appsv1.StatefulSet
	// podsReady and podsMsg: every broker pod and etcd member is ready,
	// and the "n/m brokers ready" line (aggregateStatus).
	podsReady bool
	podsMsg   string
	// unreachableBuckets describes the zones' FastBuckets whose probe
	// fails (aggregateStatus).
	unreachableBuckets []string
	// lastZoneWAL is each zone's WAL state before this reconcile, kept
	// when the Kafka health step does not scrape.
	lastZoneWAL map[string]*strata.ZoneWALStatus
	// scrapes are this reconcile's brokers' /metrics (scrapeWAL), for
	// TierDegraded; scraped is false when the brokers were not scraped.
	scrapes []brokerWAL
	scraped bool
	// metadata is this reconcile's Kafka Metadata answer, nil when the
	// brokers were not probed or did not answer.
	metadata *kadm.Metadata
	// requeueAfter is when the Kafka health step wants to look again.
	requeueAfter time.Duration
	// keepReplicas, during a scale-down, is the replicas each broker
	// StatefulSet keeps (removed zones included) until its brokers beyond
	// the spec are drained (reconcileScaleDown); nil: the spec's.
	keepReplicas map[string]int32
	// stalled, when set, is why the cluster cannot progress although
	// every step went through (a roll stuck): Stalled True.
	stalled *invalidSpecError
	// throttleSet: the scale executor set the replication throttle for
	// the moves it started this round (throttleMoves).
	throttleSet bool
	// trustBundle is the cluster CA trust bundle (reconcileCertificates).
	trustBundle []byte
	// rendered is the cluster the builders render: cluster with the
	// legacy security defaults its brokers keep (securityDefaults).
	rendered *strata.KafkaCluster
	// storage: the volume changes the StatefulSets' claims are taking or
	// refuse (reconcileClaims, reportStorage).
	storage storageReport
	// bucketProblem, when set, is why a zone's FastBucket cannot be used
	// (missing, in another zone, refused by the bucket policy). The
	// reconcile then writes nothing from the spec that the brokers run
	// (zones, scaling, moves) but keeps up a cluster that already runs:
	// the steps marked upkeep (certificates, managed etcd, the roll
	// under way, throttle removal, health), and reports the problem as
	// Stalled.
	bucketProblem *invalidSpecError
	// statusBase is the cluster as this reconcile read it (moved on by the
	// reconcile's own status writes): the status patch is computed against
	// it and names its resourceVersion (patchStatus).
	statusBase *strata.KafkaCluster
}

// conflictRequeue is how soon a reconcile whose status write was refused
// runs again (the newer version's watch event usually brings it sooner).
const conflictRequeue = time.Second

// patchStatus writes the status changes made to s.cluster since
// s.statusBase (the version this reconcile read, moved on by its own status
// writes). The patch carries that resourceVersion: when the KafkaCluster
// changed since, it is read again, and the status is written over it only
// if its status is still the one this reconcile started from (a user's
// spec or metadata edit meanwhile: the moves this reconcile started must
// still be recorded). A status someone else wrote is not overwritten: a
// merge patch replaces a list whole, and putting back the conditions this
// reconcile read once dropped ReplicationThrottled with its configs still
// on the brokers.
func (r *KafkaClusterReconciler) patchStatus(ctx context.Context, s *clusterScope) error {
	err := r.Status().Patch(ctx, s.cluster, client.MergeFromWithOptions(s.statusBase, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		latest := &strata.KafkaCluster{}
		if gerr := r.liveReader().Get(ctx, client.ObjectKeyFromObject(s.cluster), latest); gerr != nil {
			return errors.Join(err, gerr)
		}
		if !equality.Semantic.DeepEqual(latest.Status, s.statusBase.Status) {
			return err
		}
		s.statusBase.ResourceVersion = latest.ResourceVersion
		err = r.Status().Patch(ctx, s.cluster, client.MergeFromWithOptions(s.statusBase, client.MergeFromWithOptimisticLock{}))
	}
	if err != nil {
		return err
	}
	s.statusBase = s.cluster.DeepCopy()
	return nil
}

// invalidSpecError is a problem only the user can fix (a missing or
// mismatched FastBucket, a spec stored before today's validation). Reconcile reports it in the conditions and stops
// before writing anything; a watch brings the cluster back when it changes.
type invalidSpecError struct {
	reason  string
	message string
}

func (e *invalidSpecError) Error() string { return e.message }

// Reconcile brings one KafkaCluster's objects to the desired state.
func (r *KafkaClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	kc := &strata.KafkaCluster{}
	// Read from the API server, not the cache: status.scaling and
	// status.roll are the operator's memory of the moves and rolls it
	// started, and a reconcile that began from a cache still lagging the
	// previous reconcile's status write would act on the older state (a
	// scale-up's rebalance seen as not started) and write it back.
	if err := r.liveReader().Get(ctx, req.NamespacedName, kc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	logger := log.FromContext(ctx).WithValues("generation", kc.Generation)
	ctx = log.IntoContext(ctx, logger)

	if !kc.DeletionTimestamp.IsZero() {
		forgetClusterMetrics(kc.Namespace, kc.Name)
		return ctrl.Result{}, r.reconcileDelete(ctx, kc)
	}
	if paused, err := r.reconciliationPaused(ctx, kc); paused || err != nil { // kafkacluster_annotations.go
		return ctrl.Result{}, err
	}
	if err := ensureFinalizer(ctx, r.Client, kc, Finalizer); err != nil {
		return ctrl.Result{}, err
	}

	s := &clusterScope{cluster: kc, statusBase: kc.DeepCopy(), statefulSets: map[string]*appsv1.StatefulSet{}}
	defer func() {
		kc.Status.ObservedGeneration = kc.Generation
		err := r.patchStatus(ctx, s)
		switch {
		case err == nil || apierrors.IsNotFound(err):
		case apierrors.IsConflict(err) && reterr == nil:
			// Another writer changed the status since this reconcile read
			// it: reconciled again from that version.
			logger.Info("status not written: another writer changed it since this reconcile read it; reconciling again", "resourceVersion", s.statusBase.ResourceVersion)
			res = ctrl.Result{RequeueAfter: conflictRequeue}
		default:
			reterr = errors.Join(reterr, fmt.Errorf("patch status: %w", err))
		}
	}()

	// upkeep: the step also runs while a FastBucket problem stops the
	// others (s.bucketProblem), for a cluster that already runs.
	steps := []struct {
		name   string
		run    func(context.Context, *clusterScope) error
		upkeep bool
	}{
		{"check spec", r.checkSpec, true},
		{"resolve fast buckets", r.resolveFastBuckets, true},
		{"assign broker ID blocks", r.assignBrokerIDBlocks, true},
		{"security defaults", r.securityDefaults, true},
		{"certificates", r.reconcileCertificates, true},
		{"managed etcd", r.reconcileEtcd, true},
		{"services", r.reconcileServices, false},
		{"network policies", r.reconcileNetworkPolicies, false},
		{"scale-down", r.reconcileScaleDown, false},
		{"zones", r.reconcileZones, false},
		{"existing zones", r.readZones, true},
		{"disruption budget", r.reconcilePDB, false},
		{"removed zones", r.reconcileRemovedZones, false},
		{"status", r.aggregateStatus, true},
		{"node drains", r.reconcileEvictions, true},
		{"rolling restart", r.reconcileRoll, true},
		{"storage", r.reportStorage, false},
		{"metadata health", r.reconcileMetadataHealth, true},
		{"kafka health", r.reconcileKafkaHealth, true},
		{"dynamic configs", r.reconcileDynamicConfig, true},
		{"leader balance", r.balanceLeaders, false},
		{"rebalance", r.reconcileRebalance, false},
		{"replication throttle", r.reconcileThrottle, true},
		{"conditions", r.summarizeConditions, true},
	}
	for _, step := range steps {
		if s.bucketProblem != nil && !step.upkeep {
			continue
		}
		err := step.run(ctx, s)
		if err == nil {
			continue
		}
		var invalid *invalidSpecError
		if errors.As(err, &invalid) {
			logger.Info("cluster spec cannot be realised", "reason", invalid.reason, "problem", invalid.message)
			event := EventInvalidBucket
			if invalid.reason == ReasonInvalidSpec {
				event = EventInvalidSpec
			}
			r.stalledEvent(kc, event, invalid)
			// Stalled, not Degraded: nothing runs degraded, the spec
			// cannot be realised (kstatus Failed).
			MarkStalled(&kc.Status.Conditions, kc.Generation, invalid.reason, invalid.message)
			return ctrl.Result{}, nil
		}
		msg := fmt.Sprintf("%s: %v", step.name, err)
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventReconcileFailed, "Reconcile", "%s", msg)
		var notOurs *errNotOurs
		if errors.As(err, &notOurs) {
			// Only someone removing the object can fix this; it is
			// retried with backoff, as the object is not watched.
			MarkStalled(&kc.Status.Conditions, kc.Generation, ReasonObjectConflict, msg)
		} else {
			setCondition(kc, strata.ConditionReady, metav1.ConditionFalse, ReasonReconcileError, msg)
			MarkReconciling(&kc.Status.Conditions, kc.Generation, ReasonReconcileError, msg)
		}
		return ctrl.Result{}, fmt.Errorf("%s: %w", step.name, err)
	}
	// aggregateStatus and reconcileRoll decided Reconciling (rolls in
	// progress); every step went through, so nothing is stalled unless a
	// step found that progress stopped (a roll stuck) or a FastBucket
	// problem held back everything but the upkeep.
	if bp := s.bucketProblem; bp != nil {
		logger.Info("cluster spec cannot be realised; keeping up the running cluster", "reason", bp.reason, "problem", bp.message)
		r.stalledEvent(kc, EventInvalidBucket, bp)
		MarkStalled(&kc.Status.Conditions, kc.Generation, bp.reason, bp.message)
	} else if st := s.stalled; st != nil {
		setCondition(kc, strata.ConditionStalled, metav1.ConditionTrue, st.reason, st.message)
		setCondition(kc, strata.ConditionReconciling, metav1.ConditionFalse, st.reason, "not progressing: "+st.message)
	} else {
		MarkNotStalled(&kc.Status.Conditions, kc.Generation)
	}
	logger.V(logDebug).Info("reconciled", "zones", len(s.zones), "readyBrokers", kc.Status.ReadyBrokers, "desiredBrokers", kc.Status.DesiredBrokers)
	// Come back to refresh the etcd and Kafka health lines: nothing
	// watched changes when etcd fills up or a broker dies.
	requeue := metadataProbeInterval
	if s.requeueAfter > 0 {
		requeue = min(requeue, s.requeueAfter)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// checkSpec stops a cluster whose spec the CRD's validation refuses today
// but that reached the API server before those rules existed: rendering
// it would hand the brokers settings they ignore or cannot parse.
func (r *KafkaClusterReconciler) checkSpec(_ context.Context, s *clusterScope) error {
	if problems := UnsupportedSpec(s.cluster); len(problems) > 0 {
		return &invalidSpecError{reason: ReasonInvalidSpec, message: strings.Join(problems, "; ")}
	}
	return nil
}

// resolveFastBuckets finds every zone's FastBucket and checks that it sits
// in that zone and that the bucket policy allows it. It runs before any
// write, so a bad reference creates nothing and running brokers are not
// rolled onto it.
//
// A refused bucket is judged here from its spec with the policy the
// FastBucket controller applies, not from that controller's Reachable
// condition: a bucket created or edited a moment ago has no verdict yet,
// and rendering it meanwhile would roll brokers onto a bucket the
// operator refuses to probe or sweep. Refused is Stalled, as a missing
// bucket: the brokers keep the config they run with until the bucket (or
// the operator's flags) changes; dropping the zone's WAL instead would
// half-apply the spec and roll every broker twice.
func (r *KafkaClusterReconciler) resolveFastBuckets(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	var problems []string
	reason := ""
	s.zones = s.zones[:0]
	for _, z := range kc.Spec.Zones {
		zi := ZoneInput{Zone: z}
		if z.FastBucketRef != nil {
			fb := &strata.FastBucket{}
			err := r.Get(ctx, types.NamespacedName{Namespace: kc.Namespace, Name: z.FastBucketRef.Name}, fb)
			switch {
			case apierrors.IsNotFound(err):
				problems = append(problems, fmt.Sprintf("zone %s: FastBucket %q not found in namespace %s", z.Name, z.FastBucketRef.Name, kc.Namespace))
				reason = firstNonEmpty(reason, ReasonFastBucketNotFound)
			case err != nil:
				return fmt.Errorf("get FastBucket %s: %w", z.FastBucketRef.Name, err)
			case fb.Spec.Zone != z.Name:
				problems = append(problems, fmt.Sprintf("zone %s: FastBucket %q is in zone %s; a zone's brokers must use a bucket of their own zone", z.Name, fb.Name, fb.Spec.Zone))
				reason = firstNonEmpty(reason, ReasonFastBucketZoneMismatch)
			default:
				if why, msg := r.BucketPolicy.refusal(fb.Spec); why != "" {
					problems = append(problems, fmt.Sprintf("zone %s: FastBucket %q is refused by the operator (%s): %s", z.Name, fb.Name, why, msg))
					reason = firstNonEmpty(reason, ReasonFastBucketRefused)
				} else {
					zi.Bucket = fb
				}
			}
			// A zone whose bucket is refused stays in s.zones without a
			// bucket, for the upkeep steps only: none of them renders a
			// broker config.
		}
		s.zones = append(s.zones, zi)
	}
	if len(problems) > 0 {
		problem := &invalidSpecError{reason: reason, message: strings.Join(problems, "; ")}
		laidOut, err := r.laidOut(ctx, kc)
		if err != nil {
			return err
		}
		if !laidOut {
			// Nothing runs yet, so nothing needs upkeep: nothing is
			// created until the buckets are fixed.
			return problem
		}
		s.bucketProblem = problem
	}
	buckets := map[string]*strata.FastBucket{}
	for _, zi := range s.zones {
		if zi.Bucket != nil {
			buckets[zi.Zone.Name] = zi.Bucket
		}
	}
	for i := range s.zones {
		s.zones[i].ZoneBuckets = buckets
	}
	return nil
}

// laidOut reports whether the operator has laid the cluster out before:
// its broker ID record or the ID blocks in status exist (they are written
// before anything else). Only such a cluster has anything to keep up
// while its FastBuckets cannot be used.
func (r *KafkaClusterReconciler) laidOut(ctx context.Context, kc *strata.KafkaCluster) (bool, error) {
	if len(kc.Status.BrokerIDBlocks) > 0 {
		return true, nil
	}
	err := r.liveReader().Get(ctx, types.NamespacedName{Namespace: kc.Namespace, Name: BrokerIDsConfigMapName(kc.Name)}, &corev1.ConfigMap{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// readZones, while a FastBucket problem holds back reconcileZones, reads
// the zones' StatefulSets as they are for the upkeep steps (status, the
// roll under way); a zone without one (added with the bad bucket) has
// nothing to keep up and is left out.
func (r *KafkaClusterReconciler) readZones(ctx context.Context, s *clusterScope) error {
	if s.bucketProblem == nil {
		return nil
	}
	kc := s.cluster
	kept := s.zones[:0]
	for _, zi := range s.zones {
		sts := &appsv1.StatefulSet{}
		err := r.Get(ctx, types.NamespacedName{Namespace: kc.Namespace, Name: ZoneStatefulSetName(kc.Name, zi.Zone.Name)}, sts)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("zone %s: %w", zi.Zone.Name, err)
		case !metav1.IsControlledBy(sts, kc):
			continue
		}
		s.statefulSets[zi.Zone.Name] = sts
		kept = append(kept, zi)
	}
	s.zones = kept
	return nil
}

// stalledEvent sends the Warning event of a problem only the user can fix
// when it is new (the Stalled condition does not say it yet), not at
// every reconcile.
func (r *KafkaClusterReconciler) stalledEvent(kc *strata.KafkaCluster, event string, problem *invalidSpecError) {
	if c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionStalled); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == problem.reason && c.Message == problem.message {
		return
	}
	r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, event, "Reconcile", "%s", problem.message)
}

// assignBrokerIDBlocks gives new zones their ID blocks and makes them
// durable before any broker uses an ID from them: first in the broker ID
// record (the ConfigMap <cluster>-broker-ids, which survives status loss
// and a re-created KafkaCluster), then in status. The blocks are those of
// the record merged with status (clusters from before the record have
// them only in status).
func (r *KafkaClusterReconciler) assignBrokerIDBlocks(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	reader := r.liveReader()
	record := &corev1.ConfigMap{}
	key := types.NamespacedName{Namespace: kc.Namespace, Name: BrokerIDsConfigMapName(kc.Name)}
	var recorded []strata.BrokerIDBlock
	err := reader.Get(ctx, key, record)
	found := err == nil
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read broker ID record %s: %w", key.Name, err)
	default:
		if recorded, err = ParseBrokerIDRecord(record); err != nil {
			return fmt.Errorf("broker ID record: %w", err)
		}
	}
	known, err := MergeBrokerIDBlocks(recorded, kc.Status.BrokerIDBlocks)
	if err != nil {
		return fmt.Errorf("broker ID record %s and status disagree: %w", key.Name, err)
	}
	// Zones that left the spec but still have brokers keep their block
	// until the brokers are drained and gone (reconcileRemovedZones).
	var sets appsv1.StatefulSetList
	if err := reader.List(ctx, &sets, client.InNamespace(kc.Namespace), client.MatchingLabels(brokerSelector(kc))); err != nil {
		return fmt.Errorf("list StatefulSets: %w", err)
	}
	var running []string
	for i := range sets.Items {
		if metav1.IsControlledBy(&sets.Items[i], kc) {
			running = append(running, sets.Items[i].Labels[LabelZone])
		}
	}
	blocks, _ := AssignBrokerIDBlocks(known, kc.Spec.Zones, running)

	if !found || !slices.Equal(recorded, blocks) {
		want, err := BuildBrokerIDRecord(kc, blocks)
		if err != nil {
			return err
		}
		if found {
			// Update carries the resourceVersion read above: a concurrent
			// writer makes it fail rather than be overwritten.
			record.Data = want.Data
			for k, v := range want.Labels {
				metav1.SetMetaDataLabel(&record.ObjectMeta, k, v)
			}
			err = r.Update(ctx, record)
		} else {
			err = r.Create(ctx, want)
		}
		if err != nil {
			return fmt.Errorf("record broker ID blocks in ConfigMap %s: %w", key.Name, err)
		}
	}
	if !slices.Equal(kc.Status.BrokerIDBlocks, blocks) {
		kc.Status.BrokerIDBlocks = blocks
		if err := r.patchStatus(ctx, s); err != nil {
			return fmt.Errorf("record broker ID blocks in status: %w", err)
		}
	}
	for _, b := range blocks {
		if !b.Retired && !slices.Contains(known, b) {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventBrokerIDBlock, "AssignBrokerIDs", "zone %s: broker IDs %d-%d", b.Zone, b.Base, b.Base+strata.BrokerIDBlockSize-1)
		}
	}
	for i := range s.zones {
		base, ok := ActiveBlockBase(blocks, s.zones[i].Zone.Name)
		if !ok {
			return fmt.Errorf("zone %s has no broker ID block", s.zones[i].Zone.Name)
		}
		s.zones[i].IDBase = base
	}
	return nil
}

// reconcileEtcd writes the managed etcd, or nothing for external endpoints.
func (r *KafkaClusterReconciler) reconcileEtcd(ctx context.Context, s *clusterScope) error {
	objs := BuildEtcd(s.cluster)
	if objs == nil {
		return nil
	}
	// etcd reads its trusted CA file only at start: a new trust bundle
	// rolls the members (RollingUpdate, one at a time).
	if objs.StatefulSet.Spec.Template.Annotations == nil {
		objs.StatefulSet.Spec.Template.Annotations = map[string]string{}
	}
	objs.StatefulSet.Spec.Template.Annotations[AnnotationTrustBundleHash] = trustBundleHash(s.trustBundle)
	if err := r.applyService(ctx, s.cluster, objs.Service); err != nil {
		return err
	}
	// The backend quota follows the volumes the members have, not the
	// spec's size until they have grown to it.
	m, _ := ManagedEtcd(s.cluster)
	size, err := r.etcdVolumeSize(ctx, s.cluster, m)
	if err != nil {
		return err
	}
	setEtcdQuota(objs.StatefulSet, size)
	sts, rep, err := r.applyStatefulSet(ctx, s.cluster, objs.StatefulSet)
	if err != nil {
		return err
	}
	s.storage.add(rep)
	s.etcd = sts
	return r.applyPDB(ctx, s.cluster, objs.PDB)
}

// securityDefaults decides which pre-secure defaults the cluster keeps
// (LegacySecurityDefaults) from its zones' stored broker configs, and
// says so in a Warning event: a PLAINTEXT listener or brokers without an
// authorizer are the user's to end by setting the fields.
func (r *KafkaClusterReconciler) securityDefaults(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	var configs []string
	for _, zi := range s.zones {
		cm := &corev1.ConfigMap{}
		err := r.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: ZoneConfigMapName(kc.Name, zi.Zone.Name)}, cm)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("zone %s ConfigMap: %w", zi.Zone.Name, err)
		}
		configs = append(configs, cm.Data[BrokerConfigFile])
	}
	d := LegacySecurityDefaults(kc, configs)
	if d.PlaintextListener && kc.Spec.Security.ListenerCertificate != nil {
		return &invalidSpecError{reason: ReasonInvalidSpec, message: "security.listenerCertificate needs a listener of protocol SSL or SASL_SSL to serve it: " +
			"this cluster was created before secure defaults and keeps its PLAINTEXT listener while spec.listeners is empty; write spec.listeners (e.g. SASL_SSL on 9092)"}
	}
	s.rendered = WithSecurityDefaults(kc, d)
	if !d.Any() {
		meta.RemoveStatusCondition(&kc.Status.Conditions, ConditionInsecureDefaultsKept)
		return nil
	}
	var kept []string
	if d.PlaintextListener {
		kept = append(kept, "the PLAINTEXT listener on port 9092 (set spec.listeners, e.g. to SASL_SSL, to change it)")
	}
	if d.NoAuthorizer {
		kept = append(kept, "ACLs open to every principal where none is set (allow.everyone.if.no.acl.found=true; set spec.security.authorization to change it)")
	}
	r.setNoticeCondition(kc, ConditionInsecureDefaultsKept, ReasonCreatedBeforeSecureDefaults, EventInsecureDefaultsKept,
		"this cluster was created before secure defaults and keeps "+strings.Join(kept, " and "))
	return nil
}

// upgradingInterBroker reads what UpgradingInterBroker decides on: the
// zones' stored broker configs and whether every broker pod is current.
func (r *KafkaClusterReconciler) upgradingInterBroker(ctx context.Context, s *clusterScope) (bool, error) {
	kc := s.cluster
	var configs []string
	sets := map[string]*appsv1.StatefulSet{}
	for _, zi := range s.zones {
		cm := &corev1.ConfigMap{}
		err := r.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: ZoneConfigMapName(kc.Name, zi.Zone.Name)}, cm)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return false, fmt.Errorf("zone %s ConfigMap: %w", zi.Zone.Name, err)
		}
		configs = append(configs, cm.Data[BrokerConfigFile])
		sts := &appsv1.StatefulSet{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: ZoneStatefulSetName(kc.Name, zi.Zone.Name)}, sts); err == nil {
			sets[zi.Zone.Name] = sts
		} else if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("zone %s StatefulSet: %w", zi.Zone.Name, err)
		}
	}
	if !UpgradingInterBroker(configs, false) {
		// A new cluster, or one already on REPLICATION: no pod read.
		return false, nil
	}
	// Live, not cached: a stale "every pod current" would switch the
	// listener before the first roll ended.
	pods, err := r.liveBrokerPods(ctx, kc)
	if err != nil {
		return false, err
	}
	current := !slices.ContainsFunc(RollPods(s.zones, sets, pods, kc.Name), func(p plan.Pod) bool { return !p.Current })
	return UpgradingInterBroker(configs, current), nil
}

// reconcileNetworkPolicies applies the cluster's NetworkPolicies, or
// deletes them when spec.security.networkPolicy.enabled is false.
func (r *KafkaClusterReconciler) reconcileNetworkPolicies(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	want := BuildNetworkPolicies(s.rendered, r.OperatorNamespace)
	for _, np := range want {
		got := &networkingv1.NetworkPolicy{}
		if _, err := r.getOwned(ctx, kc, np, got); err != nil {
			return fmt.Errorf("NetworkPolicy %s: %w", np.Name, err)
		}
		if err := r.apply(ctx, kc, "NetworkPolicy", np, &networkingv1ac.NetworkPolicyApplyConfiguration{}, got); err != nil {
			return err
		}
	}
	for _, component := range []string{ComponentBroker, ComponentEtcd} {
		name := NetworkPolicyName(kc.Name, component)
		if slices.ContainsFunc(want, func(np *networkingv1.NetworkPolicy) bool { return np.Name == name }) {
			continue
		}
		np := &networkingv1.NetworkPolicy{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, np); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("NetworkPolicy %s: %w", name, err)
		}
		if !metav1.IsControlledBy(np, kc) {
			continue
		}
		if err := r.Delete(ctx, np); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete NetworkPolicy %s: %w", name, err)
		}
	}
	return nil
}

func (r *KafkaClusterReconciler) reconcileServices(ctx context.Context, s *clusterScope) error {
	for _, svc := range BuildServices(s.rendered) {
		if err := r.applyService(ctx, s.cluster, svc); err != nil {
			return err
		}
	}
	return nil
}

// reconcileZones writes each zone's ConfigMap, then its StatefulSet with
// the ConfigMap's hash in the pod template.
func (r *KafkaClusterReconciler) reconcileZones(ctx context.Context, s *clusterScope) error {
	legacy, err := r.upgradingInterBroker(ctx, s)
	if err != nil {
		return err
	}
	for _, zi := range s.zones {
		zi.LegacyInterBroker = legacy
		cm := BuildZoneConfigMap(s.rendered, zi)
		if err := r.applyConfigMap(ctx, s.cluster, cm); err != nil {
			return fmt.Errorf("zone %s: %w", zi.Zone.Name, err)
		}
		want := BuildZoneStatefulSet(s.rendered, zi, RolloutConfigHash(s.rendered, zi))
		if keep, ok := s.keepReplicas[zi.Zone.Name]; ok && keep > zi.Zone.Brokers {
			// Brokers beyond the spec still hold replicas: they go
			// once drained (reconcileScaleDown).
			want.Spec.Replicas = ptr.To(keep)
		}
		sts, rep, err := r.applyStatefulSet(ctx, s.cluster, want)
		if err != nil {
			return fmt.Errorf("zone %s: %w", zi.Zone.Name, err)
		}
		s.storage.add(rep)
		s.statefulSets[zi.Zone.Name] = sts
	}
	return nil
}

func (r *KafkaClusterReconciler) reconcilePDB(ctx context.Context, s *clusterScope) error {
	return r.applyPDB(ctx, s.cluster, BuildBrokerPDB(s.cluster))
}

// reconcileRemovedZones takes down zones that left the spec: first the
// StatefulSet shrinks as its brokers are drained (reconcileScaleDown
// decides s.keepReplicas, highest ordinal first), down to zero, and only
// once no pod is left are the StatefulSet and its ConfigMap deleted.
func (r *KafkaClusterReconciler) reconcileRemovedZones(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	var list appsv1.StatefulSetList
	if err := r.List(ctx, &list, client.InNamespace(kc.Namespace), client.MatchingLabels(brokerSelector(kc))); err != nil {
		return fmt.Errorf("list StatefulSets: %w", err)
	}
	for i := range list.Items {
		sts := &list.Items[i]
		zone := sts.Labels[LabelZone]
		if _, inSpec := s.statefulSets[zone]; inSpec || !metav1.IsControlledBy(sts, kc) {
			continue
		}
		keep := int32(0)
		if k, ok := s.keepReplicas[zone]; ok {
			keep = k
		}
		if cur := ptr.Deref(sts.Spec.Replicas, 0); cur != 0 {
			if keep >= cur {
				continue // its brokers are being drained
			}
			patch := client.MergeFrom(sts.DeepCopy())
			sts.Spec.Replicas = ptr.To(keep)
			if err := r.Patch(ctx, sts, patch); err != nil {
				return fmt.Errorf("scale removed zone %s to %d: %w", zone, keep, err)
			}
			r.Recorder.Eventf(kc, sts, corev1.EventTypeNormal, EventZoneScaledDown, "ScaleDown", "zone %s left the spec; its drained brokers go: StatefulSet %s scaled to %d", zone, sts.Name, keep)
			continue
		}
		if sts.Status.Replicas != 0 {
			continue // pods still terminating; the StatefulSet's status change requeues us
		}
		if err := r.Delete(ctx, sts); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete StatefulSet of removed zone %s: %w", zone, err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: ZoneConfigMapName(kc.Name, zone)}}
		if err := r.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete ConfigMap of removed zone %s: %w", zone, err)
		}
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventZoneRemoved, "RemoveZone", "zone %s removed: StatefulSet %s deleted", zone, sts.Name)
	}
	return nil
}

// aggregateStatus fills zones, brokers and the Reconciling condition from
// the StatefulSets and broker pods, and notes for summarizeConditions
// whether the pods are ready and which FastBuckets are unreachable.
func (r *KafkaClusterReconciler) aggregateStatus(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(kc.Namespace), client.MatchingLabels(brokerSelector(kc))); err != nil {
		return fmt.Errorf("list broker pods: %w", err)
	}
	podReady := map[string]bool{}
	for _, p := range pods.Items {
		podReady[p.Name] = isPodReady(&p)
	}

	st := &kc.Status
	s.lastZoneWAL = map[string]*strata.ZoneWALStatus{}
	for _, z := range st.Zones {
		s.lastZoneWAL[z.Name] = z.WAL
	}
	st.Zones, st.Brokers = nil, nil
	st.ReadyBrokers, st.DesiredBrokers = 0, 0
	st.ZoneCount = int32(len(kc.Spec.Zones))
	st.MetadataEndpoints = MetadataEndpoints(kc)
	rolling := false
	s.unreachableBuckets = nil
	for _, zi := range s.zones {
		sts := s.statefulSets[zi.Zone.Name]
		zs := strata.ZoneStatus{
			Name:           zi.Zone.Name,
			BrokerIDBase:   zi.IDBase,
			StatefulSet:    sts.Name,
			DesiredBrokers: zi.Zone.Brokers,
			ReadyBrokers:   sts.Status.ReadyReplicas,
		}
		if zi.Bucket != nil {
			zs.FastBucket = zi.Bucket.Name
			if c := meta.FindStatusCondition(zi.Bucket.Status.Conditions, strata.ConditionReachable); c != nil && c.Status == metav1.ConditionFalse {
				s.unreachableBuckets = append(s.unreachableBuckets, fmt.Sprintf("%s (zone %s): %s", zi.Bucket.Name, zi.Zone.Name, c.Reason))
			}
		}
		st.Zones = append(st.Zones, zs)
		st.DesiredBrokers += zs.DesiredBrokers
		for ord := int32(0); ord < zi.Zone.Brokers; ord++ {
			pod := BrokerPodName(kc.Name, zi.Zone.Name, ord)
			b := strata.BrokerStatus{ID: zi.IDBase + ord, Zone: zi.Zone.Name, Pod: pod, Ready: podReady[pod]}
			if b.Ready {
				st.ReadyBrokers++
			}
			st.Brokers = append(st.Brokers, b)
		}
		if !statefulSetSettled(sts) {
			rolling = true
		}
	}

	etcdMsg := ""
	etcdReady := true
	if s.etcd != nil {
		want := ptr.Deref(s.etcd.Spec.Replicas, 0)
		etcdReady = s.etcd.Status.ReadyReplicas == want
		etcdMsg = fmt.Sprintf("; etcd %d/%d ready", s.etcd.Status.ReadyReplicas, want)
		if !statefulSetSettled(s.etcd) {
			rolling = true
		}
	}
	s.podsMsg = fmt.Sprintf("%d/%d brokers ready in %d zones%s", st.ReadyBrokers, st.DesiredBrokers, st.ZoneCount, etcdMsg)
	s.podsReady = st.ReadyBrokers == st.DesiredBrokers && etcdReady
	if rolling {
		setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonRollingOut, "StatefulSets are rolling out: "+s.podsMsg)
	} else {
		setCondition(kc, strata.ConditionReconciling, metav1.ConditionFalse, ReasonUpToDate, "all StatefulSets are up to date")
	}
	return nil
}

// summarizeConditions sets Ready and Degraded once the pods, etcd and
// Kafka have been looked at. Ready means the cluster serves: pods ready,
// Kafka reachable with every wanted broker registered and no partition
// offline, and the metadata store healthy. Degraded means it serves with
// less redundancy or more cost than it should: under-replicated
// partitions, a zone's WAL fallen back to inline, an unreachable bucket,
// slow-tier uploads failing or disk headroom low (TierDegraded).
func (r *KafkaClusterReconciler) summarizeConditions(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	if err := r.reconcilingForMoves(ctx, s); err != nil { // kafkacluster_kstatus.go
		return err
	}
	status, reason, msg := readiness(kc, s.podsMsg, s.podsReady)
	setCondition(kc, strata.ConditionReady, status, reason, msg)

	var reasons, msgs []string
	if h := kc.Status.Kafka; h != nil && h.Reachable && h.UnderReplicatedPartitions > 0 {
		reasons = append(reasons, ReasonPartitionsUnderReplicated)
		msgs = append(msgs, fmt.Sprintf("%d of %d partitions under-replicated", h.UnderReplicatedPartitions, h.Partitions))
	}
	var walZones []string
	for _, z := range kc.Status.Zones {
		if z.WAL != nil && z.WAL.State == strata.WALDegraded {
			walZones = append(walZones, fmt.Sprintf("%s (brokers %v)", z.Name, z.WAL.DegradedBrokers))
		}
	}
	if len(walZones) > 0 {
		reasons = append(reasons, ReasonWALDegraded)
		msgs = append(msgs, "WAL degraded to inline replication in zones "+strings.Join(walZones, ", "))
	}
	if len(s.unreachableBuckets) > 0 {
		reasons = append(reasons, ReasonFastBucketUnreachable)
		msgs = append(msgs, "fast buckets unreachable, brokers fall back to inline replication: "+strings.Join(s.unreachableBuckets, "; "))
	}
	setWALDegradedCondition(kc)                          // kafkacluster_cost.go
	r.setTierDegradedCondition(kc, s.scrapes, s.scraped) // kafkacluster_tier.go
	if c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionTierDegraded); c != nil && c.Status == metav1.ConditionTrue {
		reasons = append(reasons, c.Reason)
		msgs = append(msgs, "slow tier: "+c.Message)
	}
	if len(reasons) > 0 {
		setCondition(kc, strata.ConditionDegraded, metav1.ConditionTrue, reasons[0], strings.Join(msgs, "; "))
	} else {
		setCondition(kc, strata.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "no under-replicated partitions, WAL and slow tier not degraded, fast buckets reachable or not yet probed")
	}
	return nil
}

// statefulSetSettled reports whether a StatefulSet's controller has caught
// up with its spec and all replicas are updated and ready.
func statefulSetSettled(sts *appsv1.StatefulSet) bool {
	want := ptr.Deref(sts.Spec.Replicas, 1)
	return sts.Status.ObservedGeneration >= sts.Generation &&
		sts.Status.UpdatedReplicas == want &&
		sts.Status.ReadyReplicas == want &&
		sts.Status.Replicas == want
}

// reconcileDelete deletes the brokers' claims and the broker ID record
// when deletionPolicy is Delete and releases the finalizer. Owned objects
// go by garbage collection; buckets and their objects are never touched.
func (r *KafkaClusterReconciler) reconcileDelete(ctx context.Context, kc *strata.KafkaCluster) error {
	if !controllerutil.ContainsFinalizer(kc, Finalizer) {
		return nil
	}
	r.forgetKafka(kc)
	if kc.Spec.DeletionPolicy == strata.DeletionPolicyDelete {
		var pvcs corev1.PersistentVolumeClaimList
		if err := r.List(ctx, &pvcs, client.InNamespace(kc.Namespace), client.MatchingLabels{LabelCluster: kc.Name}); err != nil {
			return fmt.Errorf("list claims: %w", err)
		}
		for i := range pvcs.Items {
			if err := r.Delete(ctx, &pvcs.Items[i]); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete claim %s: %w", pvcs.Items[i].Name, err)
			}
		}
		if len(pvcs.Items) > 0 {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventClaimsDeleted, "Delete", "deleted %d PersistentVolumeClaims (deletionPolicy Delete)", len(pvcs.Items))
		}
	}
	if kc.Spec.DeletionPolicy == strata.DeletionPolicyDelete {
		// The volumes are gone, so are the broker IDs they were bound to.
		record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: BrokerIDsConfigMapName(kc.Name)}}
		if err := r.Delete(ctx, record); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete broker ID record: %w", err)
		}
	}
	return releaseFinalizer(ctx, r.Client, kc, Finalizer)
}

// ClusterWorkers is how many KafkaClusters (and KafkaTopics) are
// reconciled at once.
const ClusterWorkers = 4

// SetupWithManager registers the controller: it owns what it writes and
// watches FastBuckets, so fixing a bucket reference or a bucket's
// reachability requeues the clusters that use it.
func (r *KafkaClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&strata.KafkaCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&corev1.Secret{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&strata.FastBucket{}, handler.EnqueueRequestsFromMapFunc(r.clustersUsingBucket)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(manualRollPods)). // kafkacluster_annotations.go
		// A cordoned node (a drain) is acted on at once (kafkacluster_eviction.go).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.clustersOnNode), builder.WithPredicates(nodeCordoned())).
		// A cluster whose brokers or etcd do not answer costs its reconcile
		// the probes' timeouts; with one worker every other cluster's
		// rolls and moves would wait behind it. controller-runtime never
		// reconciles one cluster twice at a time.
		WithOptions(controller.Options{MaxConcurrentReconciles: ClusterWorkers}).
		Named("kafkacluster").
		Complete(r)
}

// deletionPredicate passes updates that set a deletion timestamp, which do
// not change the generation.
func deletionPredicate() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectNew.GetDeletionTimestamp() != nil
		},
	}
}

func (r *KafkaClusterReconciler) clustersUsingBucket(ctx context.Context, obj client.Object) []reconcile.Request {
	var list strata.KafkaClusterList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "list KafkaClusters for FastBucket", "fastBucket", obj.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for _, kc := range list.Items {
		for _, z := range kc.Spec.Zones {
			if z.FastBucketRef != nil && z.FastBucketRef.Name == obj.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&kc)})
				break
			}
		}
	}
	return reqs
}

func setCondition(kc *strata.KafkaCluster, typ string, status metav1.ConditionStatus, reason, msg string) {
	SetCondition(&kc.Status.Conditions, kc.Generation, typ, status, reason, msg)
}

func isPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
