package controllers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Reasons of a FastBucket's Reachable condition when the operator refuses
// to use it at all: the cluster administrator has not allowed what it
// asks for.
const (
	ReasonAmbientCredentialsNotAllowed = "AmbientCredentialsNotAllowed"
	ReasonInsecureEndpointNotAllowed   = "InsecureEndpointNotAllowed"
)

// EventBucketRefused is the event of a FastBucket the operator will not use.
const EventBucketRefused = "BucketRefused"

// BucketPolicy is what the cluster administrator allows FastBuckets
// (flags of `strata operator`). Anyone who may create a FastBucket in a
// namespace names its bucket and endpoint, so by default:
//   - Ambient credentials are refused: the operator would probe and sweep
//     the named bucket with its own cloud identity (IRSA, instance
//     profile), which can reach buckets the namespace must not.
//   - http:// endpoints are refused: the credentials would cross the
//     network in the clear.
type BucketPolicy struct {
	AllowAmbientCredentials bool
	AllowInsecureEndpoints  bool
}

// refusal returns the reason and message for which the policy refuses a
// FastBucket, or "" when it is allowed.
func (p BucketPolicy) refusal(spec strata.FastBucketSpec) (reason, msg string) {
	if !p.AllowAmbientCredentials && spec.Credentials.EffectiveSource() == strata.CredentialsAmbient {
		return ReasonAmbientCredentialsNotAllowed, "ambient credentials (the operator's own cloud identity) are not allowed on this cluster: " +
			"give credentials.secretRef, or have the cluster administrator start the operator with --allow-ambient-credentials"
	}
	if !p.AllowInsecureEndpoints && strings.HasPrefix(strings.ToLower(spec.Endpoint), "http://") {
		return ReasonInsecureEndpointNotAllowed, fmt.Sprintf("endpoint %s is plain http: credentials would be sent in the clear; "+
			"use https, or have the cluster administrator start the operator with --allow-insecure-endpoints", spec.Endpoint)
	}
	return "", ""
}

// refuseBucket records that the operator does not use fb: Reachable is
// False with the policy's reason (so the clusters using the bucket report
// it too), and an event is emitted once per new reason.
func (r *FastBucketReconciler) refuseBucket(fb *strata.FastBucket, reason, msg string) {
	prev := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReachable)
	if prev == nil || prev.Reason != reason || prev.Status != metav1.ConditionFalse {
		r.Recorder.Eventf(fb, nil, corev1.EventTypeWarning, EventBucketRefused, "Policy", "%s", msg)
	}
	fb.Status.LastProbeLatency = nil
	meta.SetStatusCondition(&fb.Status.Conditions, metav1.Condition{
		Type: strata.ConditionReachable, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: fb.Generation,
	})
}
