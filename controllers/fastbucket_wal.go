package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Event reasons of the WAL sweeper.
const (
	EventWALSwept            = "WALObjectsSwept"
	EventWALSweepFailed      = "WALSweepFailed"
	EventLifecycleRuleSet    = "LifecycleRuleApplied"
	EventLifecycleRuleFailed = "LifecycleRuleFailed"
)

// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkaclusters,verbs=get;list;watch

// reconcileWAL sweeps the bucket's WAL objects when a sweep is due and
// keeps its lifecycle rule, and returns when to come back. An error is
// returned only for failures of the Kubernetes API; bucket failures are
// conditions.
func (r *FastBucketReconciler) reconcileWAL(ctx context.Context, fb *strata.FastBucket) (time.Duration, error) {
	logger := log.FromContext(ctx)
	clk := r.clock()

	// The deletes depend on the clusters' retention: read them from the
	// API server, not from a possibly stale cache.
	var kcs strata.KafkaClusterList
	if err := r.liveReader().List(ctx, &kcs, client.InNamespace(fb.Namespace)); err != nil {
		return 0, fmt.Errorf("list KafkaClusters: %w", err)
	}
	clusters := ClustersUsingBucket(fb, kcs.Items)
	interval := SweepInterval(clusters)

	now := clk.Now()
	// Due every interval, and at once when the bucket's spec or the
	// clusters using it changed.
	if st := fb.Status.WAL; st != nil && st.LastSweepTime != nil && fb.Status.ObservedGeneration == fb.Generation {
		if wait := st.LastSweepTime.Add(interval).Sub(now); wait > 0 && sameClusters(st.Clusters, clusters) {
			return wait, nil
		}
	}

	if c := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReachable); c == nil || c.Status != metav1.ConditionTrue {
		reason := "not probed yet"
		if c != nil {
			reason = c.Reason
		}
		r.setWALCondition(fb, strata.ConditionWALSwept, metav1.ConditionFalse, ReasonBucketUnreachable,
			fmt.Sprintf("not swept: the bucket is not reachable (%s); nothing was deleted", reason))
		return interval, nil
	}

	creds, reason, err := r.credentials(ctx, fb)
	if err != nil {
		r.setWALCondition(fb, strata.ConditionWALSwept, metav1.ConditionFalse, reason, fmt.Sprintf("not swept: %v", err))
		return interval, nil
	}
	store, err := openBucket(ctx, fb.Spec, creds)
	if err != nil {
		r.setWALCondition(fb, strata.ConditionWALSwept, metav1.ConditionFalse, ReasonSweepFailed, fmt.Sprintf("not swept: %v", err))
		return interval, nil
	}
	defer store.Close()

	sctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	res, err := sweepWAL(sctx, store, fb.Spec.Zone, clusters, now)
	if err != nil {
		reason := sweepReason(err)
		msg := fmt.Sprintf("listing %s in bucket %s failed, nothing was deleted: %v", "wal/", fb.Spec.Bucket, err)
		if prev := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionWALSwept); prev == nil || prev.Reason != reason {
			r.Recorder.Eventf(fb, nil, corev1.EventTypeWarning, EventWALSweepFailed, "Sweep", "%s", msg)
		}
		r.setWALCondition(fb, strata.ConditionWALSwept, metav1.ConditionFalse, reason, msg)
		walSweeps.WithLabelValues(fb.Namespace, fb.Name, "error").Inc()
		return interval, nil
	}
	walSweptObjects.WithLabelValues(fb.Namespace, fb.Name).Add(float64(res.deleted))
	walSweptBytes.WithLabelValues(fb.Namespace, fb.Name).Add(float64(res.deletedBytes))
	walObjects.WithLabelValues(fb.Namespace, fb.Name).Set(float64(res.plan.Objects))
	walBytes.WithLabelValues(fb.Namespace, fb.Name).Set(float64(res.plan.Bytes))
	result := "ok"
	if res.err != nil {
		result = "error"
	}
	walSweeps.WithLabelValues(fb.Namespace, fb.Name, result).Inc()

	st := fb.Status.WAL
	if st == nil {
		st = &strata.FastBucketWALStatus{}
		fb.Status.WAL = st
	}
	swept := metav1.NewTime(now)
	st.LastSweepTime = &swept
	st.Objects, st.Bytes = res.plan.Objects, res.plan.Bytes
	st.SweptObjects += res.deleted
	st.SweptBytes += res.deletedBytes
	st.Clusters = res.plan.Clusters
	logger.V(logDebug).Info("swept WAL objects", "deleted", res.deleted, "deletedBytes", res.deletedBytes, "objects", st.Objects, "bytes", st.Bytes)
	if res.deleted > 0 {
		r.Recorder.Eventf(fb, nil, corev1.EventTypeNormal, EventWALSwept, "Sweep", "deleted %d WAL objects (%d bytes) older than their cluster's wal.retention", res.deleted, res.deletedBytes)
	}
	desc := "no cluster uses the bucket, nothing is deleted"
	if len(clusters) > 0 {
		desc = "clusters: " + describeClusters(clusters)
	}
	if res.err != nil {
		r.setWALCondition(fb, strata.ConditionWALSwept, metav1.ConditionFalse, ReasonDeleteFailed,
			fmt.Sprintf("deleted %d objects; objects that could not be deleted, or dated from their header, were kept and are retried next sweep (%s): %v", res.deleted, desc, res.err))
	} else {
		r.setWALCondition(fb, strata.ConditionWALSwept, metav1.ConditionTrue, ReasonSwept,
			fmt.Sprintf("deleted %d objects, %d objects (%d bytes) under wal/ remain; %s", res.deleted, st.Objects, st.Bytes, desc))
	}

	r.reconcileLifecycle(ctx, fb, store.Client(), clusters)
	return interval, nil
}

// reconcileLifecycle keeps the bucket's wal/ expiration rule.
func (r *FastBucketReconciler) reconcileLifecycle(ctx context.Context, fb *strata.FastBucket, s3c s3LifecycleClient, clusters []ClusterRetention) {
	if !fb.Spec.LifecycleRuleEnabled() {
		r.setWALCondition(fb, strata.ConditionLifecycleRuleApplied, metav1.ConditionFalse, ReasonRuleDisabled,
			"spec.lifecycleRule is false: the operator leaves the bucket's lifecycle configuration alone")
		return
	}
	days, ok := LifecycleDays(clusters)
	if !ok {
		reason, msg := ReasonNoClusters, "no KafkaCluster uses the bucket; the lifecycle configuration is left as it is"
		if len(clusters) > 0 {
			reason, msg = ReasonRetentionUnknown, "the wal.retention of a cluster using the bucket is unknown ("+describeClusters(clusters)+"); the lifecycle configuration is left as it is"
		}
		r.setWALCondition(fb, strata.ConditionLifecycleRuleApplied, metav1.ConditionFalse, reason, msg)
		return
	}
	lctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	changed, err := applyLifecycleRule(lctx, s3c, fb.Spec.Bucket, days)
	prev := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionLifecycleRuleApplied)
	switch {
	case errors.Is(err, errLifecycleNotSupported):
		r.setWALCondition(fb, strata.ConditionLifecycleRuleApplied, metav1.ConditionFalse, ReasonNotSupported,
			fmt.Sprintf("the store does not implement bucket lifecycle rules, so WAL objects nobody deletes are only removed by the operator's sweeps: %v", err))
	case err != nil:
		msg := fmt.Sprintf("could not set the %d-day expiration rule %s on wal/: %v", days, LifecycleRuleID, err)
		if prev == nil || prev.Reason != ReasonLifecycleFailed {
			r.Recorder.Eventf(fb, nil, corev1.EventTypeWarning, EventLifecycleRuleFailed, "Lifecycle", "%s", msg)
		}
		r.setWALCondition(fb, strata.ConditionLifecycleRuleApplied, metav1.ConditionFalse, ReasonLifecycleFailed, msg)
	default:
		fb.Status.WAL.LifecycleExpirationDays = days
		reason := ReasonRuleUpToDate
		if changed {
			reason = ReasonRuleApplied
			r.Recorder.Eventf(fb, nil, corev1.EventTypeNormal, EventLifecycleRuleSet, "Lifecycle", "objects under wal/ expire after %d days (rule %s)", days, LifecycleRuleID)
		}
		r.setWALCondition(fb, strata.ConditionLifecycleRuleApplied, metav1.ConditionTrue, reason,
			fmt.Sprintf("rule %s expires objects under wal/ after %d days", LifecycleRuleID, days))
	}
}

func (r *FastBucketReconciler) setWALCondition(fb *strata.FastBucket, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&fb.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: fb.Generation,
	})
}

// sameClusters reports whether the clusters and retentions recorded at
// the last sweep are the ones using the bucket now; a change sweeps at
// once.
func sameClusters(recorded []strata.FastBucketWALCluster, now []ClusterRetention) bool {
	if len(recorded) != len(now) {
		return false
	}
	for i, c := range now {
		rc := recorded[i]
		if rc.Name != c.Name || (rc.Retention != nil) != c.Known || (c.Known && rc.Retention.Duration != c.Retention) {
			return false
		}
	}
	return true
}

func (r *FastBucketReconciler) clock() clock.PassiveClock {
	if r.Clock != nil {
		return r.Clock
	}
	return clock.RealClock{}
}

func (r *FastBucketReconciler) liveReader() client.Reader {
	if r.LiveReader != nil {
		return r.LiveReader
	}
	return r.Client
}

// bucketsUsedBy maps a KafkaCluster to the FastBuckets its zones
// reference, so that a new cluster or a retention change is swept with
// its new retention.
func (r *FastBucketReconciler) bucketsUsedBy(_ context.Context, obj client.Object) []reconcile.Request {
	kc, ok := obj.(*strata.KafkaCluster)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var reqs []reconcile.Request
	for _, z := range kc.Spec.Zones {
		if z.FastBucketRef != nil && !seen[z.FastBucketRef.Name] {
			seen[z.FastBucketRef.Name] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: kc.Namespace, Name: z.FastBucketRef.Name}})
		}
	}
	return reqs
}
