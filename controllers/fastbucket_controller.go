package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Event reasons of a FastBucket.
const (
	EventBucketReachable   = "BucketReachable"
	EventBucketUnreachable = "BucketUnreachable"
)

// ReasonNotProbed: a FastBucket's Ready and Reconciling before its first
// probe.
const ReasonNotProbed = "NotProbed"

const (
	defaultProbeInterval = time.Minute
	// maxFailedProbeInterval caps the wait after a failed probe, so a fixed
	// endpoint or Secret is noticed soon even with a long probeInterval.
	maxFailedProbeInterval = 30 * time.Second
	probeTimeout           = 10 * time.Second
)

// ProbeFunc probes a bucket; ProbeBucket in production.
type ProbeFunc func(ctx context.Context, spec strata.FastBucketSpec, creds *StaticCredentials) (time.Duration, error)

// +kubebuilder:rbac:groups=kafka.strata.dev,resources=fastbuckets,verbs=get;list;watch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=fastbuckets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// FastBucketReconciler probes FastBuckets through the S3 API and reports
// whether they are reachable; it also sweeps their WAL objects older than
// the retention of the clusters using them and keeps a wal/ expiration
// rule in their lifecycle configuration (see fastbucket_wal.go).
type FastBucketReconciler struct {
	client.Client
	// SecretReader reads credential Secrets directly from the API server,
	// so the operator needs neither a cache of every Secret nor list/watch
	// on them.
	SecretReader client.Reader
	Recorder     recorder.EventRecorder
	// Probe defaults to ProbeBucket.
	Probe ProbeFunc
	// LiveReader reads the KafkaClusters whose retention decides what the
	// WAL sweeper deletes, uncached (the manager's API reader); nil uses
	// Client.
	LiveReader client.Reader
	// Clock is the WAL sweeper's clock (object ages, sweep times); nil is
	// the real clock. Tests age objects by moving it.
	Clock clock.PassiveClock
	// Policy says whether ambient credentials and http endpoints may be
	// used (fastbucket_policy.go); a refused bucket is never probed nor
	// swept.
	Policy BucketPolicy
}

// Reconcile probes one FastBucket when a probe is due, then sweeps its
// WAL objects when a sweep is due, and records both. A failed probe or
// sweep is a status, not an error: the controller requeues after the
// interval instead of backing off into a crash loop.
func (r *FastBucketReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	fb := &strata.FastBucket{}
	if err := r.Get(ctx, req.NamespacedName, fb); err != nil {
		if apierrors.IsNotFound(err) {
			forgetBucketMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("bucket", fb.Spec.Bucket, "zone", fb.Spec.Zone))

	before := fb.DeepCopy()
	defer func() {
		setBucketReadiness(fb)
		fb.Status.ObservedGeneration = fb.Generation
		if err := r.Status().Patch(ctx, fb, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			reterr = errors.Join(reterr, fmt.Errorf("patch status: %w", err))
		}
	}()

	if reason, msg := r.Policy.refusal(fb.Spec); reason != "" {
		// Nothing to requeue for: a spec change or an operator restart
		// with other flags reconciles again.
		r.refuseBucket(fb, reason, msg)
		return ctrl.Result{}, nil
	}
	probeAfter := r.reconcileProbe(ctx, fb)
	sweepAfter, err := r.reconcileWAL(ctx, fb)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("WAL sweep: %w", err)
	}
	return ctrl.Result{RequeueAfter: min(probeAfter, sweepAfter)}, nil
}

// setBucketReadiness derives the kstatus conditions from the probe: a
// reachable bucket is Ready; an unreachable one is Stalled with the
// probe's reason (kstatus Failed), since only a change to the bucket, its
// Secret or its endpoint makes it usable. The probe keeps running, and
// the next success clears Stalled.
func setBucketReadiness(fb *strata.FastBucket) {
	c := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReachable)
	switch {
	case c == nil:
		SetCondition(&fb.Status.Conditions, fb.Generation, strata.ConditionReady, metav1.ConditionUnknown, ReasonNotProbed, "the bucket has not been probed yet")
		MarkReconciling(&fb.Status.Conditions, fb.Generation, ReasonNotProbed, "the bucket has not been probed yet")
	case c.Status == metav1.ConditionTrue:
		SetCondition(&fb.Status.Conditions, fb.Generation, strata.ConditionReady, metav1.ConditionTrue, c.Reason, c.Message)
		MarkReconciled(&fb.Status.Conditions, fb.Generation, c.Reason, "probed for this generation")
	default:
		MarkStalled(&fb.Status.Conditions, fb.Generation, c.Reason, c.Message)
	}
}

// probeDue says whether the bucket should be probed now, and otherwise
// how long until it should: on a spec change, when it never was, and
// every probeInterval (at most maxFailedProbeInterval after a failure).
func probeDue(fb *strata.FastBucket, now time.Time) (bool, time.Duration) {
	interval := defaultProbeInterval
	if fb.Spec.ProbeInterval != nil && fb.Spec.ProbeInterval.Duration > 0 {
		interval = fb.Spec.ProbeInterval.Duration
	}
	c := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReachable)
	if c == nil || fb.Status.LastProbeTime == nil || c.ObservedGeneration != fb.Generation {
		return true, interval
	}
	if c.Status != metav1.ConditionTrue {
		interval = min(interval, maxFailedProbeInterval)
	}
	wait := fb.Status.LastProbeTime.Add(interval).Sub(now)
	if wait <= 0 {
		return true, interval
	}
	return false, wait
}

// reconcileProbe probes the bucket if due and returns when to probe next.
func (r *FastBucketReconciler) reconcileProbe(ctx context.Context, fb *strata.FastBucket) time.Duration {
	logger := log.FromContext(ctx)
	due, after := probeDue(fb, time.Now())
	if !due {
		return after
	}
	latency, reason, err := r.probe(ctx, fb)
	now := metav1.Now()
	fb.Status.LastProbeTime = &now
	prev := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReachable)
	wasReachable := prev != nil && prev.Status == metav1.ConditionTrue
	if err != nil {
		logger.V(logDebug).Info("fast bucket probe failed", "reason", reason, "error", err.Error())
		msg := fmt.Sprintf("bucket %s at %s: %v", fb.Spec.Bucket, endpointOf(fb.Spec), err)
		fb.Status.LastProbeLatency = nil
		// One event per new failure reason, not one per probe.
		if prev == nil || prev.Status != metav1.ConditionFalse || prev.Reason != reason {
			r.Recorder.Eventf(fb, nil, corev1.EventTypeWarning, EventBucketUnreachable, "Probe", "%s", msg)
		}
		meta.SetStatusCondition(&fb.Status.Conditions, metav1.Condition{
			Type: strata.ConditionReachable, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: fb.Generation,
		})
		return min(after, maxFailedProbeInterval)
	}
	latency = latency.Round(10 * time.Microsecond)
	fb.Status.LastProbeLatency = &metav1.Duration{Duration: latency}
	meta.SetStatusCondition(&fb.Status.Conditions, metav1.Condition{
		Type: strata.ConditionReachable, Status: metav1.ConditionTrue, Reason: ReasonProbeSucceeded,
		Message:            fmt.Sprintf("HeadBucket, put, get and delete of %s succeeded in %s", ProbeKey, latency),
		ObservedGeneration: fb.Generation,
	})
	if !wasReachable {
		r.Recorder.Eventf(fb, nil, corev1.EventTypeNormal, EventBucketReachable, "Probe", "bucket %s reachable (%s)", fb.Spec.Bucket, latency)
	}
	logger.V(logDebug).Info("fast bucket probe succeeded", "latency", latency)
	return after
}

// probe resolves credentials and runs the probe, returning the condition
// reason of a failure.
func (r *FastBucketReconciler) probe(ctx context.Context, fb *strata.FastBucket) (time.Duration, string, error) {
	creds, reason, err := r.credentials(ctx, fb)
	if err != nil {
		return 0, reason, err
	}
	probe := r.Probe
	if probe == nil {
		probe = ProbeBucket
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	latency, err := probe(ctx, fb.Spec, creds)
	if err != nil {
		var pe *ProbeError
		if errors.As(err, &pe) {
			return 0, pe.Reason, err
		}
		return 0, ReasonProbeFailed, err
	}
	return latency, "", nil
}

// credentials reads the access key pair from the referenced Secret, or
// returns nil for ambient credentials.
func (r *FastBucketReconciler) credentials(ctx context.Context, fb *strata.FastBucket) (*StaticCredentials, string, error) {
	c := fb.Spec.Credentials
	if c.EffectiveSource() != strata.CredentialsFromSecret || c.SecretRef == nil {
		return nil, "", nil
	}
	ref := c.SecretRef
	var secret corev1.Secret
	err := r.SecretReader.Get(ctx, types.NamespacedName{Namespace: fb.Namespace, Name: ref.Name}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, ReasonSecretNotFound, fmt.Errorf("credentials Secret %q not found in namespace %s", ref.Name, fb.Namespace)
	}
	if err != nil {
		return nil, ReasonProbeFailed, fmt.Errorf("read credentials Secret %q: %w", ref.Name, err)
	}
	get := func(key, def string) (string, error) {
		key = orDefault(key, def)
		v, ok := secret.Data[key]
		if !ok || len(v) == 0 {
			return "", fmt.Errorf("credentials Secret %q has no key %q", ref.Name, key)
		}
		return string(v), nil
	}
	id, err := get(ref.AccessKeyIDKey, "accessKeyID")
	if err != nil {
		return nil, ReasonSecretKeyMissing, err
	}
	key, err := get(ref.SecretAccessKeyKey, "secretAccessKey")
	if err != nil {
		return nil, ReasonSecretKeyMissing, err
	}
	creds := &StaticCredentials{AccessKeyID: id, SecretAccessKey: key}
	if ref.SessionTokenKey != "" {
		if creds.SessionToken, err = get(ref.SessionTokenKey, ""); err != nil {
			return nil, ReasonSecretKeyMissing, err
		}
	}
	return creds, "", nil
}

func endpointOf(spec strata.FastBucketSpec) string {
	if spec.Endpoint != "" {
		return spec.Endpoint
	}
	return "the AWS endpoint of region " + spec.Region
}

// SetupWithManager registers the controller. Spec changes of a FastBucket
// and of the KafkaClusters using it trigger a reconcile; the periodic
// requeue does the rest.
func (r *FastBucketReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&strata.FastBucket{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&strata.KafkaCluster{}, handler.EnqueueRequestsFromMapFunc(r.bucketsUsedBy), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A probe may wait up to probeTimeout on a dead endpoint; a few
		// workers keep one bad bucket from delaying the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("fastbucket").
		Complete(r)
}
