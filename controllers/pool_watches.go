package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// claimToPool maps a deleted claim to its pool of kind, which may be
// waiting for it before it goes.
func claimToPool(kind PoolKind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		return poolRequest(kind, o.(*ipamv1.IPAddressClaim).Spec.PoolRef, o.GetNamespace())
	}
}

// addressToPool maps an IPAddress to its pool of kind, if it has one: the
// pool refreshes its counts, a deleted pool goes once its last address is
// gone, and the audit deletes a tombstone on time.
func addressToPool(kind PoolKind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		return poolRequest(kind, o.(*ipamv1.IPAddress).Spec.PoolRef, o.GetNamespace())
	}
}
