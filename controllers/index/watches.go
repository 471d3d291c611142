package index

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// ClaimToPool maps a deleted claim to its pool of kind, which may be
// waiting for it before it goes.
func ClaimToPool(kind poolkind.Kind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		return poolRequest(kind, o.(*ipamv1.IPAddressClaim).Spec.PoolRef, o.GetNamespace())
	}
}

// AddressToPool maps an IPAddress to its pool of kind, if it has one: the
// pool refreshes its counts, a deleted pool goes once its last address is
// gone, and the audit deletes a tombstone on time.
func AddressToPool(kind poolkind.Kind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		return poolRequest(kind, o.(*ipamv1.IPAddress).Spec.PoolRef, o.GetNamespace())
	}
}

// poolRequest is the request of the pool of kind that ref names from an
// object in namespace, if ref names one.
func poolRequest(kind poolkind.Kind, ref ipamv1.IPPoolReference, namespace string) []reconcile.Request {
	if ref.APIGroup != v1alpha1.GroupVersion.Group || ref.Kind != kind.Kind {
		return nil
	}
	key := client.ObjectKey{Name: ref.Name}
	if kind.Namespaced {
		key.Namespace = namespace
	}
	return []reconcile.Request{{NamespacedName: key}}
}
