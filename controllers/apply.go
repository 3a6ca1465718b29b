package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// FieldManager is the field manager of every server-side apply the
// operator makes. The API server records which fields it owns under this
// name; fields owned by other managers (an HPA, a mutating webhook, a
// label added with kubectl) are left alone, and a hand edit of a field it
// owns is reverted on the next apply.
const FieldManager = "strata-operator"

// The objects a KafkaCluster owns are written with server-side apply: the
// apply configuration holds exactly the fields the desired-state builders
// set, and ForceOwnership takes back any of them another manager changed.
// Applying an unchanged configuration writes nothing (the resourceVersion
// stays), so an apply on every reconcile is as cheap as a comparison.

// applyStatefulSet applies want and returns the StatefulSet with what
// became of a storage change (reconcileClaims; the caller reports it:
// reportStorage).
func (r *KafkaClusterReconciler) applyStatefulSet(ctx context.Context, kc *strata.KafkaCluster, want *appsv1.StatefulSet) (*appsv1.StatefulSet, storageReport, error) {
	got := &appsv1.StatefulSet{}
	var rep storageReport
	exists, err := r.getOwned(ctx, kc, want, got)
	if err != nil {
		return nil, rep, fmt.Errorf("StatefulSet %s: %w", want.Name, err)
	}
	if exists {
		// Claim templates are immutable after creation: a storage change
		// is carried out on the claims, and the templates that exist are
		// applied, so it is not refused by the API server on every
		// reconcile.
		if d := claimTemplateDrift(got.Spec.VolumeClaimTemplates, want.Spec.VolumeClaimTemplates); d != "" {
			if rep, err = r.reconcileClaims(ctx, kc, got, want); err != nil {
				return nil, rep, fmt.Errorf("StatefulSet %s: %w", got.Name, err)
			}
		}
		want = want.DeepCopy()
		want.Spec.VolumeClaimTemplates = got.Spec.VolumeClaimTemplates
	}
	if err := r.apply(ctx, kc, "StatefulSet", want, &appsv1ac.StatefulSetApplyConfiguration{}, got); err != nil {
		return nil, rep, err
	}
	return got, rep, nil
}

func (r *KafkaClusterReconciler) applyConfigMap(ctx context.Context, kc *strata.KafkaCluster, want *corev1.ConfigMap) error {
	got := &corev1.ConfigMap{}
	if _, err := r.getOwned(ctx, kc, want, got); err != nil {
		return fmt.Errorf("ConfigMap %s: %w", want.Name, err)
	}
	return r.apply(ctx, kc, "ConfigMap", want, &corev1ac.ConfigMapApplyConfiguration{}, got)
}

// applyService leaves spec.clusterIP(s) to the API server, which
// allocates them: the builders set clusterIP only for headless Services.
func (r *KafkaClusterReconciler) applyService(ctx context.Context, kc *strata.KafkaCluster, want *corev1.Service) error {
	got := &corev1.Service{}
	if _, err := r.getOwned(ctx, kc, want, got); err != nil {
		return fmt.Errorf("Service %s: %w", want.Name, err)
	}
	return r.apply(ctx, kc, "Service", want, &corev1ac.ServiceApplyConfiguration{}, got)
}

func (r *KafkaClusterReconciler) applyPDB(ctx context.Context, kc *strata.KafkaCluster, want *policyv1.PodDisruptionBudget) error {
	got := &policyv1.PodDisruptionBudget{}
	if _, err := r.getOwned(ctx, kc, want, got); err != nil {
		return fmt.Errorf("PodDisruptionBudget %s: %w", want.Name, err)
	}
	return r.apply(ctx, kc, "PodDisruptionBudget", want, &policyv1ac.PodDisruptionBudgetApplyConfiguration{}, got)
}

// errNotOurs says an object of the name the operator wants belongs to
// someone else. The operator reports it and never takes the object over.
type errNotOurs struct{ kind, name, owner string }

func (e *errNotOurs) Error() string {
	return fmt.Sprintf("%s %s exists and %s; the operator does not take it over: delete or rename it", e.kind, e.name, e.owner)
}

// getOwned reads the existing object of want's name into got and says
// whether there is one. An object controlled by someone else, or one
// without a controller that the operator did not label as its own, is an
// error: applying would take it over. The cache holds only objects
// labelled as the operator's (CacheOptions), so a miss is checked against
// the API server before the apply creates the object.
func (r *KafkaClusterReconciler) getOwned(ctx context.Context, kc *strata.KafkaCluster, want, got client.Object) (bool, error) {
	key := client.ObjectKeyFromObject(want)
	err := r.Get(ctx, key, got)
	if apierrors.IsNotFound(err) {
		reader := r.liveReader()
		err = reader.Get(ctx, key, got)
	}
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read: %w", err)
	}
	kind := want.GetObjectKind().GroupVersionKind().Kind
	if owner := metav1.GetControllerOf(got); owner != nil {
		if owner.UID != kc.UID {
			return true, &errNotOurs{kind: kind, name: got.GetName(), owner: fmt.Sprintf("is controlled by %s %s, not by this KafkaCluster", owner.Kind, owner.Name)}
		}
		return true, nil
	}
	if got.GetLabels()[LabelManagedBy] != ManagedBy {
		return true, &errNotOurs{kind: kind, name: got.GetName(), owner: "is not managed by the operator"}
	}
	// Labelled as the operator's but without a controller: left behind by
	// an orphaning delete of an earlier KafkaCluster of this name. The
	// apply adds the owner reference and adopts it.
	return true, nil
}

// apply server-side applies want under FieldManager, forcing ownership of
// its fields, and leaves the object as stored in got (which holds the
// object read before, if any). It records a Created or Updated event when
// the resourceVersion moved.
func (r *KafkaClusterReconciler) apply(ctx context.Context, kc *strata.KafkaCluster, kind string, want client.Object, ac runtime.ApplyConfiguration, got client.Object) error {
	before := got.GetResourceVersion()
	if before != "" {
		if err := r.upgradeLegacyOwnership(ctx, got); err != nil {
			return fmt.Errorf("%s %s: take over fields of the operator's earlier updates: %w", kind, want.GetName(), err)
		}
	}
	if err := toApplyConfiguration(want, ac); err != nil {
		return fmt.Errorf("%s %s: %w", kind, want.GetName(), err)
	}
	if err := r.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, want.GetName(), err)
	}
	// The apply answered with the stored object; decode it afresh (a
	// decode into the old object would keep map keys the answer lacks).
	reflect.ValueOf(got).Elem().SetZero()
	if err := convertJSON(ac, got); err != nil {
		return fmt.Errorf("%s %s: read apply result: %w", kind, want.GetName(), err)
	}
	switch after := got.GetResourceVersion(); {
	case before == "":
		r.Recorder.Eventf(kc, got, corev1.EventTypeNormal, EventCreated, "Create", "created %s %s", kind, got.GetName())
	case after != before:
		r.Recorder.Eventf(kc, got, corev1.EventTypeNormal, EventUpdated, "Update", "updated %s %s", kind, got.GetName())
	}
	return nil
}

// legacyFieldManagers are the names the operator's writes were recorded
// under before it used server-side apply: the API server's default, the
// binary's name.
var legacyFieldManagers = sets.New("strata")

// upgradeLegacyOwnership moves the fields an earlier operator wrote with
// update requests to FieldManager. Without it those fields would stay
// owned by the old manager, and a field the operator stops setting (the
// old spec-hash annotation, a removed env var or pod annotation) would
// never be removed. The patch carries the resourceVersion read, so a
// stale read fails and is retried rather than overwriting newer fields.
func (r *KafkaClusterReconciler) upgradeLegacyOwnership(ctx context.Context, got client.Object) error {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(got, legacyFieldManagers, FieldManager)
	if err != nil || patch == nil {
		return err
	}
	return r.Patch(ctx, got, client.RawPatch(types.JSONPatchType, patch))
}

// toApplyConfiguration fills ac, a typed apply configuration, with the
// fields the builders set on want. The typed object's JSON leaves out
// unset optional fields; what it cannot leave out is dropped here: the
// status (never the operator's to apply) and the zero creationTimestamp.
func toApplyConfiguration(want client.Object, ac runtime.ApplyConfiguration) error {
	if want.GetObjectKind().GroupVersionKind().Kind == "" {
		return fmt.Errorf("desired object has no kind") // an apply needs apiVersion and kind
	}
	var m map[string]any
	if err := convertJSON(want, &m); err != nil {
		return err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return convertJSON(m, ac)
}

func convertJSON(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

// claimTemplateDrift describes how the desired volume claim templates
// differ from the existing ones in size or storage class, or "" if not.
func claimTemplateDrift(got, want []corev1.PersistentVolumeClaim) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d claim templates wanted, %d exist", len(want), len(got))
	}
	for i := range want {
		g, w := got[i].Spec, want[i].Spec
		gs, ws := g.Resources.Requests[corev1.ResourceStorage], w.Resources.Requests[corev1.ResourceStorage]
		if gs.Cmp(ws) != 0 {
			return fmt.Sprintf("volume %s size %s wanted, %s exists", want[i].Name, ws.String(), gs.String())
		}
		if w.StorageClassName != nil && ptr.Deref(g.StorageClassName, "") != *w.StorageClassName {
			return fmt.Sprintf("volume %s storage class %q wanted, %q exists", want[i].Name, *w.StorageClassName, ptr.Deref(g.StorageClassName, ""))
		}
	}
	return ""
}
