package subnet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// reconcileDelete lets go of what the subnet made, machines' addresses
// first: the nodes pool (whose own deletion waits for every address of it
// to be released), then the gateway's claim, its pool (which waits for
// the claim), then the child's claim, whose release deletes the child. Each waits for the one before it
// to be gone, so that the child's block is never free while an address in
// it is held.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.subnet, v1alpha1.ClusterSubnetFinalizer) {
		return ctrl.Result{}, nil
	}
	kind, ok := r.Kinds.For(parentRef(s.subnet))
	gateway := s.subnet.Name + GatewaySuffix
	for _, gone := range []func() (bool, error){
		func() (bool, error) {
			gone, err := r.poolGone(ctx, s, kind, ok, nodesPoolName(s.subnet))
			if gone {
				s.subnet.Status.PoolRef = nil
			}
			return gone, err
		},
		func() (bool, error) { return r.claimGone(ctx, s, gateway) },
		func() (bool, error) { return r.poolGone(ctx, s, kind, ok, gateway) },
		func() (bool, error) { return r.claimGone(ctx, s, s.subnet.Name) },
	} {
		if done, err := gone(); err != nil || !done {
			return s.wait(), err
		}
	}
	controllerutil.RemoveFinalizer(s.subnet, v1alpha1.ClusterSubnetFinalizer)
	return ctrl.Result{}, nil
}

// poolGone deletes the subnet's pool named name and says whether it is
// gone; a pool of that name that is not the subnet's is not waited for.
func (r *Reconciler) poolGone(ctx context.Context, s *scope, kind poolkind.Kind, served bool, name string) (bool, error) {
	if !served {
		// A kind this manager does not serve made no pool.
		return true, nil
	}
	s.kind = kind
	pool, err := poolkind.GetPool(ctx, r.APIReader, kind, s.subnet.Namespace, name)
	if err != nil {
		return false, fmt.Errorf("getting %s %s: %w", s.kind.Kind, name, err)
	}
	if pool == nil || !metav1.IsControlledBy(pool, s.subnet) {
		return true, nil
	}
	if pool.GetDeletionTimestamp().IsZero() {
		if err := r.Client.Delete(ctx, pool); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting %s %s: %w", s.kind.Kind, name, err)
		}
		r.event(s, pool, corev1.EventTypeNormal, v1alpha1.SubnetDeletingReason, "Deleting %s %s", s.kind.Kind, name)
	}
	why := "is being deleted"
	if c := meta.FindStatusCondition(pool.GetConditions(), v1alpha1.ReadyCondition); c != nil && c.Reason == v1alpha1.DeletingReason {
		why = c.Message
	}
	s.ready(metav1.ConditionFalse, v1alpha1.SubnetDeletingReason, "%s %s %s", s.kind.Kind, name, why)
	return false, nil
}

// claimGone lets the subnet's claim named name release its record, or
// keep it for the IPAM team as the subnet's reclaim policy says, and says
// whether it is gone.
func (r *Reconciler) claimGone(ctx context.Context, s *scope, name string) (bool, error) {
	claim := &ipamv1.IPAddressClaim{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.subnet.Namespace, Name: name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("getting IPAddressClaim %s: %w", name, err)
	}
	if !metav1.IsControlledBy(claim, s.subnet) {
		return true, nil
	}
	// The policy is written as the keep finalizer goes: the claim's release
	// reads it when it begins, which the finalizer held back until now.
	policy := string(reclaimPolicy(s.subnet))
	if controllerutil.ContainsFinalizer(claim, v1alpha1.KeepAddressFinalizer) || claim.Annotations[v1alpha1.ReclaimPolicyAnnotation] != policy {
		before := claim.DeepCopy()
		controllerutil.RemoveFinalizer(claim, v1alpha1.KeepAddressFinalizer)
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[v1alpha1.ReclaimPolicyAnnotation] = policy
		if err := r.Client.Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("letting IPAddressClaim %s release its record: %w", name, err)
		}
	}
	if claim.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting IPAddressClaim %s: %w", name, err)
		}
	}
	verb := "releasing"
	if policy == string(v1alpha1.ReclaimRetain) {
		verb = "keeping, for the IPAM team,"
	}
	s.ready(metav1.ConditionFalse, v1alpha1.SubnetDeletingReason, "IPAddressClaim %s is %s its record", name, verb)
	return false, nil
}

// reclaimPolicy is the subnet's reclaim policy, Delete unless it says
// Retain (the API server defaults it).
func reclaimPolicy(subnet *v1alpha1.ClusterSubnet) v1alpha1.ReclaimPolicy {
	if subnet.Spec.ReclaimPolicy == v1alpha1.ReclaimRetain {
		return v1alpha1.ReclaimRetain
	}
	return v1alpha1.ReclaimDelete
}
