package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// TestBucketPolicy: by default a FastBucket with ambient credentials (set
// or implied by a missing secretRef) or an http:// endpoint is refused
// with a reason naming the operator flag that allows it; the flags allow
// them.
func TestBucketPolicy(t *testing.T) {
	secret := strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "keys"}}
	tests := []struct {
		name   string
		policy BucketPolicy
		spec   strata.FastBucketSpec
		reason string
	}{
		{"secret over https", BucketPolicy{}, strata.FastBucketSpec{Endpoint: "https://s3.example", Credentials: secret}, ""},
		{"secret, AWS endpoint", BucketPolicy{}, strata.FastBucketSpec{Credentials: secret}, ""},
		{"ambient implied", BucketPolicy{}, strata.FastBucketSpec{}, ReasonAmbientCredentialsNotAllowed},
		{"ambient explicit", BucketPolicy{}, strata.FastBucketSpec{Credentials: strata.S3Credentials{Source: strata.CredentialsAmbient}}, ReasonAmbientCredentialsNotAllowed},
		{"ambient allowed", BucketPolicy{AllowAmbientCredentials: true}, strata.FastBucketSpec{}, ""},
		{"http", BucketPolicy{}, strata.FastBucketSpec{Endpoint: "http://10.0.0.1:9000", Credentials: secret}, ReasonInsecureEndpointNotAllowed},
		{"HTTP upper case", BucketPolicy{}, strata.FastBucketSpec{Endpoint: "HTTP://10.0.0.1:9000", Credentials: secret}, ReasonInsecureEndpointNotAllowed},
		{"http allowed", BucketPolicy{AllowInsecureEndpoints: true}, strata.FastBucketSpec{Endpoint: "http://10.0.0.1:9000", Credentials: secret}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, msg := tt.policy.refusal(tt.spec)
			if reason != tt.reason {
				t.Fatalf("reason %q (%s), want %q", reason, msg, tt.reason)
			}
			flag := map[string]string{ReasonAmbientCredentialsNotAllowed: "--allow-ambient-credentials", ReasonInsecureEndpointNotAllowed: "--allow-insecure-endpoints"}[reason]
			if reason != "" && !strings.Contains(msg, flag) {
				t.Errorf("message %q does not name %s", msg, flag)
			}
		})
	}
}

// TestRefusedBucketCondition: a refused FastBucket's Reachable is False
// with the policy's reason, and readiness follows (Stalled).
func TestRefusedBucketCondition(t *testing.T) {
	fb := &strata.FastBucket{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 3}}
	r := &FastBucketReconciler{Recorder: events.NewFakeRecorder(10)}
	reason, msg := BucketPolicy{}.refusal(fb.Spec)
	r.refuseBucket(fb, reason, msg)
	setBucketReadiness(fb)
	c := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReachable)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonAmbientCredentialsNotAllowed || c.ObservedGeneration != 3 {
		t.Fatalf("Reachable %+v", c)
	}
	if ready := meta.FindStatusCondition(fb.Status.Conditions, strata.ConditionReady); ready == nil || ready.Status == metav1.ConditionTrue {
		t.Fatalf("Ready %+v", ready)
	}
}
