package claim

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/backendcache"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/index"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// clusterToClaims maps a Cluster to the claims that belong to it.
func (r *ClaimReconciler) clusterToClaims(ctx context.Context, o client.Object) []reconcile.Request {
	claims := &ipamv1.IPAddressClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{index.ClusterNameField: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing claims of Cluster", "Cluster", o.GetName())
		return nil
	}
	return r.woken(claimRequests(claims.Items, func(*ipamv1.IPAddressClaim) bool { return true }))
}

// poolToClaims maps a pool to its claims that still wait for an address.
func (r *ClaimReconciler) poolToClaims(kind poolkind.Kind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		ref := ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind.Kind, Name: o.GetName()}
		return r.waitingClaims(ctx, ref, o.GetNamespace())
	}
}

// addressToWaitingClaims wakes the claims waiting for an address from the
// pool of a deleted IPAddress: its release may have freed the space they
// need, or the address one of them was refused (AddressHeldInCluster).
// Claims being deleted wait for nothing another claim's release gives.
func (r *ClaimReconciler) addressToWaitingClaims(ctx context.Context, o client.Object) []reconcile.Request {
	ref := o.(*ipamv1.IPAddress).Spec.PoolRef
	kind, ours := r.Kinds.For(ref)
	if !ours {
		return nil
	}
	namespace := ""
	if kind.Namespaced {
		namespace = o.GetNamespace()
	}
	claims := &ipamv1.IPAddressClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(namespace), client.MatchingFields{index.WaitingPoolRefField: index.PoolRefKey(ref)}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the waiting claims of pool", "pool", ref.Name)
		return nil
	}
	return r.woken(claimRequests(claims.Items, func(*ipamv1.IPAddressClaim) bool { return true }))
}

func (r *ClaimReconciler) waitingClaims(ctx context.Context, ref ipamv1.IPPoolReference, namespace string) []reconcile.Request {
	claims := &ipamv1.IPAddressClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(namespace), client.MatchingFields{index.PoolRefField: index.PoolRefKey(ref)}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing claims of pool", "pool", ref.Name)
		return nil
	}
	// Every claim that is not Ready waits for something, bound or not: one
	// that lost its IPAddress keeps status.addressRef.
	return r.woken(claimRequests(claims.Items, func(c *ipamv1.IPAddressClaim) bool {
		return !conditions.IsTrue(c, ipamv1.IPAddressClaimReadyCondition) || !c.DeletionTimestamp.IsZero()
	}))
}

// woken ends the holds of claims an event wakes (see holds): what they
// wait for may have changed, so they ask again at once.
func (r *ClaimReconciler) woken(requests []reconcile.Request) []reconcile.Request {
	for _, req := range requests {
		r.holds.release(req.NamespacedName)
	}
	return requests
}

func claimRequests(claims []ipamv1.IPAddressClaim, keep func(*ipamv1.IPAddressClaim) bool) []reconcile.Request {
	var requests []reconcile.Request
	for i := range claims {
		if keep(&claims[i]) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims[i])})
		}
	}
	return requests
}

// clusterPausedChanged passes Cluster creations (a claim may wait for its
// Cluster) and changes of the paused state, by spec or annotation, so that
// claims record that they are paused and resume when unpaused.
func clusterPausedChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldCluster, newCluster := e.ObjectOld.(*clusterv1.Cluster), e.ObjectNew.(*clusterv1.Cluster)
			return annotations.IsPaused(oldCluster, oldCluster) != annotations.IsPaused(newCluster, newCluster)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// poolMayUnblockClaims passes pool events that can let a waiting claim go
// on: creation, a change of the spec (a corrected pre-allocation, source or
// reservation), of readiness, of the paused annotation, or a rise of the
// free count.
func poolMayUnblockClaims() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPool, newPool := e.ObjectOld.(poolkind.Pool), e.ObjectNew.(poolkind.Pool)
			return oldPool.GetGeneration() != newPool.GetGeneration() ||
				conditions.IsTrue(oldPool, v1alpha1.ReadyCondition) != conditions.IsTrue(newPool, v1alpha1.ReadyCondition) ||
				annotations.HasPaused(oldPool) != annotations.HasPaused(newPool) ||
				freeCount(oldPool) < freeCount(newPool)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// secretToWaitingClaims wakes the claims that wait on a pool reading the
// Secret: new credentials may be what they wait for.
func (r *ClaimReconciler) secretToWaitingClaims(ctx context.Context, secret client.Object) []reconcile.Request {
	var requests []reconcile.Request
	for _, kind := range r.Kinds {
		pools, err := backendcache.PoolsOfSecret(ctx, r.Client, kind, r.Backends.ManagerNamespace, secret)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Waking the claims of a changed Secret")
			continue
		}
		for _, pool := range pools {
			ref := ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind.Kind, Name: pool.GetName()}
			requests = append(requests, r.waitingClaims(ctx, ref, pool.GetNamespace())...)
		}
	}
	return requests
}

// freeCount is the pool's count of free addresses, 0 when unknown.
func freeCount(p poolkind.Pool) int64 {
	if a := p.GetPoolStatus().Addresses; a != nil {
		return a.Free
	}
	return 0
}
