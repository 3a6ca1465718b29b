package controllers

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Volume expansion. A StatefulSet's volumeClaimTemplates cannot change
// after creation, so a larger spec.storage.size (or
// spec.metadata.managed.storageSize) is carried out on the claims
// themselves, as Strimzi does: each existing claim of the StatefulSet
// whose request is smaller is patched to the new size when its
// StorageClass allows expansion (allowVolumeExpansion), and the storage
// driver grows the volume. The claim template keeps the size the
// StatefulSet was created with, so a claim created later (a scale-up) is
// grown the same way at the next reconcile. What cannot be done (a
// smaller size, another StorageClass, a class without expansion, a claim
// without a class) is refused: condition StorageChangeNotApplied names
// each claim and why, and nothing is changed.

// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get

// Reasons and events of volume expansion.
const (
	// ReasonStorageChangeRefused: condition StorageChangeNotApplied's
	// reason; the message names each claim or StatefulSet and why.
	ReasonStorageChangeRefused = "StorageChangeRefused"
	// ReasonExpandingVolumes: Reconciling while claims grow.
	ReasonExpandingVolumes = "ExpandingVolumes"
	// EventVolumeExpansion: a claim was patched to a larger size.
	EventVolumeExpansion = "VolumeExpansionRequested"
)

// storageReport is what reconcileClaims found for one StatefulSet.
type storageReport struct {
	// refused: changes the claims cannot take, one line each.
	refused []string
	// expanding: claims whose capacity is below their request.
	expanding []string
}

func (a *storageReport) add(b storageReport) {
	a.refused = append(a.refused, b.refused...)
	a.expanding = append(a.expanding, b.expanding...)
}

// claimName is the name the StatefulSet controller gives the claim of
// template tmpl for the pod of ordinal ord.
func claimName(tmpl, sts string, ord int32) string { return fmt.Sprintf("%s-%s-%d", tmpl, sts, ord) }

func claimSize(c corev1.PersistentVolumeClaimSpec) resource.Quantity {
	return c.Resources.Requests[corev1.ResourceStorage]
}

// reconcileClaims carries want's claim templates out on got's claims:
// grows them where allowed, and reports what it refuses.
func (r *KafkaClusterReconciler) reconcileClaims(ctx context.Context, kc *strata.KafkaCluster, got, want *appsv1.StatefulSet) (storageReport, error) {
	var rep storageReport
	replicas := max(ptr.Deref(got.Spec.Replicas, 0), ptr.Deref(want.Spec.Replicas, 0))
	for _, w := range want.Spec.VolumeClaimTemplates {
		var have *corev1.PersistentVolumeClaim
		for i := range got.Spec.VolumeClaimTemplates {
			if got.Spec.VolumeClaimTemplates[i].Name == w.Name {
				have = &got.Spec.VolumeClaimTemplates[i]
			}
		}
		if have == nil {
			rep.refused = append(rep.refused, fmt.Sprintf("StatefulSet %s has no volume %s: a StatefulSet's volumes cannot change", got.Name, w.Name))
			continue
		}
		if w.Spec.StorageClassName != nil && ptr.Deref(have.Spec.StorageClassName, "") != *w.Spec.StorageClassName {
			rep.refused = append(rep.refused, fmt.Sprintf("StatefulSet %s volume %s: storage class %q wanted, %q exists: a volume's class cannot change (move the data to a new cluster)",
				got.Name, w.Name, *w.Spec.StorageClassName, ptr.Deref(have.Spec.StorageClassName, "")))
			continue
		}
		ws := claimSize(w.Spec)
		for ord := int32(0); ord < replicas; ord++ {
			name := claimName(w.Name, got.Name, ord)
			pvc := &corev1.PersistentVolumeClaim{}
			err := r.liveReader().Get(ctx, types.NamespacedName{Namespace: got.Namespace, Name: name}, pvc)
			if apierrors.IsNotFound(err) {
				continue // its pod was not created yet: it gets the template's size, grown next time
			}
			if err != nil {
				return rep, fmt.Errorf("claim %s: %w", name, err)
			}
			req := claimSize(pvc.Spec)
			switch req.Cmp(ws) {
			case 1:
				rep.refused = append(rep.refused, fmt.Sprintf("claim %s is %s, %s wanted: a volume cannot shrink", name, req.String(), ws.String()))
				continue
			case 0:
				if c, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok && c.Cmp(ws) < 0 {
					rep.expanding = append(rep.expanding, fmt.Sprintf("claim %s: %s of %s", name, c.String(), ws.String()))
				}
				continue
			}
			if why, err := r.expansionRefusal(ctx, pvc); err != nil {
				return rep, err
			} else if why != "" {
				rep.refused = append(rep.refused, fmt.Sprintf("claim %s is %s, %s wanted: %s", name, req.String(), ws.String(), why))
				continue
			}
			if pvc.Status.Phase != corev1.ClaimBound {
				// Only a bound claim can be resized (one waiting for its
				// pod to be scheduled is not): grown once it is.
				rep.expanding = append(rep.expanding, fmt.Sprintf("claim %s: not bound yet, %s of %s", name, req.String(), ws.String()))
				continue
			}
			patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = ws
			if err := r.Patch(ctx, pvc, patch); err != nil {
				return rep, fmt.Errorf("expand claim %s to %s: %w", name, ws.String(), err)
			}
			r.Recorder.Eventf(kc, pvc, corev1.EventTypeNormal, EventVolumeExpansion, "Expand",
				"claim %s: %s -> %s (StorageClass %s allows expansion)", name, req.String(), ws.String(), ptr.Deref(pvc.Spec.StorageClassName, ""))
			rep.expanding = append(rep.expanding, fmt.Sprintf("claim %s: %s of %s", name, req.String(), ws.String()))
		}
	}
	return rep, nil
}

// expansionRefusal says why pvc cannot be grown, or "" when its
// StorageClass allows it.
func (r *KafkaClusterReconciler) expansionRefusal(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (string, error) {
	class := ptr.Deref(pvc.Spec.StorageClassName, "")
	if class == "" {
		return "it has no StorageClass, so it cannot be expanded", nil
	}
	sc := &storagev1.StorageClass{}
	err := r.liveReader().Get(ctx, types.NamespacedName{Name: class}, sc)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("its StorageClass %s does not exist, so it cannot be expanded", class), nil
	}
	if err != nil {
		return "", fmt.Errorf("StorageClass %s: %w", class, err)
	}
	if !ptr.Deref(sc.AllowVolumeExpansion, false) {
		return fmt.Sprintf("StorageClass %s does not allow volume expansion (allowVolumeExpansion)", class), nil
	}
	return "", nil
}

// reportStorage says which volume changes the claims cannot take, in
// condition StorageChangeNotApplied (absent otherwise), and sets
// Reconciling while claims grow.
func (r *KafkaClusterReconciler) reportStorage(_ context.Context, s *clusterScope) error {
	kc := s.cluster
	if len(s.storage.expanding) > 0 && !meta.IsStatusConditionTrue(kc.Status.Conditions, strata.ConditionReconciling) {
		setCondition(kc, strata.ConditionReconciling, metav1.ConditionTrue, ReasonExpandingVolumes,
			"volumes are growing to the spec's size: "+strings.Join(s.storage.expanding, "; "))
		s.requeueAfter = minPositive(s.requeueAfter, rollRequeue)
	}
	if len(s.storage.refused) == 0 {
		meta.RemoveStatusCondition(&kc.Status.Conditions, ConditionStorageChangeNotApplied)
		return nil
	}
	r.setNoticeCondition(kc, ConditionStorageChangeNotApplied, ReasonStorageChangeRefused, EventStorageNotApplied,
		strings.Join(s.storage.refused, "; "))
	return nil
}

// etcdVolumeSize is the size the managed etcd members' volumes have: the
// smallest capacity (or, before the storage driver reports one, request)
// of their claims, not above the spec's; the spec's when no claim exists
// yet. The backend quota is sized from it, so it follows the volumes and
// is raised only once they have grown: a quota above what the volume
// holds would let etcd fill its disk instead of raising NOSPACE.
func (r *KafkaClusterReconciler) etcdVolumeSize(ctx context.Context, kc *strata.KafkaCluster, m strata.ManagedEtcdSpec) (resource.Quantity, error) {
	size := m.StorageSize.DeepCopy()
	for i := int32(0); i < m.Replicas; i++ {
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.liveReader().Get(ctx, types.NamespacedName{Namespace: kc.Namespace, Name: claimName("data", EtcdName(kc.Name), i)}, pvc)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return size, fmt.Errorf("etcd claim: %w", err)
		}
		have, ok := pvc.Status.Capacity[corev1.ResourceStorage]
		if !ok {
			have = claimSize(pvc.Spec)
		}
		if have.Cmp(size) < 0 {
			size = have
		}
	}
	return size, nil
}

// setEtcdQuota sets the etcd container's --quota-backend-bytes for a
// volume of size.
func setEtcdQuota(sts *appsv1.StatefulSet, size resource.Quantity) {
	for ci := range sts.Spec.Template.Spec.Containers {
		c := &sts.Spec.Template.Spec.Containers[ci]
		for _, args := range [][]string{c.Command, c.Args} {
			for i, a := range args {
				if strings.HasPrefix(a, "--quota-backend-bytes=") {
					args[i] = fmt.Sprintf("--quota-backend-bytes=%d", EtcdQuotaBackendBytes(&size))
				}
			}
		}
	}
}
