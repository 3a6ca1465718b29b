package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// The brokers' HTTP listener (port 9644) serves /metrics, which shows
// topic names, partitions and offsets that ACLs hide from Kafka clients.
// The operator gives every cluster a bearer token: the brokers read it
// from metrics.auth.token.file (the mounted Secret, re-read when the
// kubelet updates it) and answer 401 without it on every path but
// /healthz and /readyz, which the kubelet's probes call. The operator's
// own scrape (WAL state, status.cost, the tier) sends it.

// metricsTokenBytes is the entropy of a generated token.
const metricsTokenBytes = 32

// MetricsTokenSecret is the Secret the brokers' metrics token is read
// from: spec.security.metricsToken, else the operator's
// <cluster>-metrics-token.
func MetricsTokenSecret(kc *strata.KafkaCluster) string {
	if ref := kc.Spec.Security.MetricsToken; ref != nil {
		return ref.Name
	}
	return MetricsTokenSecretName(kc.Name)
}

// ensureMetricsToken generates <cluster>-metrics-token when the spec names
// no Secret of its own and the operator's has no token yet, or checks the
// user's Secret: it must hold a non-blank key "token" (a broker refuses
// to start on an empty token file, and a missing key keeps the pods from
// starting).
func (r *KafkaClusterReconciler) ensureMetricsToken(ctx context.Context, kc *strata.KafkaCluster) error {
	if ref := kc.Spec.Security.MetricsToken; ref != nil {
		_, err := r.readMetricsToken(ctx, kc)
		if err != nil {
			return &invalidSpecError{reason: ReasonInvalidSpec, message: err.Error()}
		}
		return nil
	}
	name := MetricsTokenSecretName(kc.Name)
	got, err := r.ownedSecret(ctx, kc, name)
	if err != nil {
		return err
	}
	if got != nil && strings.TrimSpace(string(got.Data[MetricsTokenKey])) != "" {
		return r.writeSecret(ctx, kc, got, name, corev1.SecretTypeOpaque, map[string][]byte{MetricsTokenKey: got.Data[MetricsTokenKey]})
	}
	tok, err := newMetricsToken()
	if err != nil {
		return err
	}
	return r.writeSecret(ctx, kc, got, name, corev1.SecretTypeOpaque, map[string][]byte{MetricsTokenKey: []byte(tok)})
}

func newMetricsToken() (string, error) {
	b := make([]byte, metricsTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// readMetricsToken is the cluster's metrics token, blanks around it
// trimmed as the broker trims them. The operator's Secret is in the
// cache; a user's is read live (the cache holds only the operator's).
func (r *KafkaClusterReconciler) readMetricsToken(ctx context.Context, kc *strata.KafkaCluster) (string, error) {
	name := MetricsTokenSecret(kc)
	var reader client.Reader = r.Client
	if kc.Spec.Security.MetricsToken != nil {
		reader = r.liveReader()
	}
	var sec corev1.Secret
	err := reader.Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, &sec)
	if apierrors.IsNotFound(err) && kc.Spec.Security.MetricsToken == nil {
		// Written this reconcile: the cache may not hold it yet.
		err = r.liveReader().Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, &sec)
	}
	if err != nil {
		if apierrors.IsNotFound(err) && kc.Spec.Security.MetricsToken != nil {
			return "", fmt.Errorf("security.metricsToken: Secret %s not found", name)
		}
		return "", fmt.Errorf("metrics token Secret %s: %w", name, err)
	}
	tok := strings.TrimSpace(string(sec.Data[MetricsTokenKey]))
	if tok == "" {
		return "", fmt.Errorf("security.metricsToken: Secret %s has no key %q or it is blank", name, MetricsTokenKey)
	}
	return tok, nil
}
