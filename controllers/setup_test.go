package controllers

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestNamespacedReader: with --watch-namespaces the operator's uncached
// reader (Secrets a spec names) reads the watched namespaces only, and
// cluster-scoped objects; without, every namespace.
func TestNamespacedReader(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "pw"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cloud-keys"}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}},
	).Build()
	r := NamespacedReader(c, []string{"kafka", "kafka-2"})
	if err := r.Get(ctx, client.ObjectKey{Namespace: "kafka", Name: "pw"}, &corev1.Secret{}); err != nil {
		t.Errorf("watched namespace: %v", err)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "cloud-keys"}, &corev1.Secret{}); !errors.Is(err, ErrNamespaceNotWatched) {
		t.Errorf("Secret of another namespace: %v, want ErrNamespaceNotWatched", err)
	}
	if err := r.Get(ctx, client.ObjectKey{Name: "fast"}, &storagev1.StorageClass{}); err != nil {
		t.Errorf("cluster-scoped StorageClass: %v", err)
	}
	var list corev1.SecretList
	if err := r.List(ctx, &list, client.InNamespace("kafka")); err != nil || len(list.Items) != 1 {
		t.Errorf("list in a watched namespace: %d items, %v", len(list.Items), err)
	}
	if err := r.List(ctx, &list, client.InNamespace("kube-system")); !errors.Is(err, ErrNamespaceNotWatched) {
		t.Errorf("list in another namespace: %v", err)
	}
	if err := r.List(ctx, &list); !errors.Is(err, ErrNamespaceNotWatched) {
		t.Errorf("list across namespaces: %v", err)
	}
	if all := NamespacedReader(c, nil); all.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "cloud-keys"}, &corev1.Secret{}) != nil {
		t.Error("no namespaces given: reads refused")
	}
}

// TestCacheOptionsFor: the cache is limited to the watched namespaces,
// and keeps CacheOptions' label selectors.
func TestCacheOptionsFor(t *testing.T) {
	if got := CacheOptionsFor(nil).DefaultNamespaces; got != nil {
		t.Errorf("all namespaces: DefaultNamespaces %v", got)
	}
	opts := CacheOptionsFor([]string{"a", "b"})
	if len(opts.DefaultNamespaces) != 2 || opts.DefaultNamespaces["a"].LabelSelector != nil {
		t.Errorf("DefaultNamespaces %v", opts.DefaultNamespaces)
	}
	if _, ok := opts.DefaultNamespaces["b"]; !ok {
		t.Errorf("namespace b not cached: %v", opts.DefaultNamespaces)
	}
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*corev1.Secret); ok && by.Label == nil {
			t.Error("Secrets cached without the managed-by selector")
		}
	}
}
