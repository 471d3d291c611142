package claim

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// finalizerFirst persists the release finalizer before anything is
// reserved, so a claim can never be deleted without its address being
// released. The Machine's name, which the records will carry, goes in the
// same write. A pool being deleted waits for every claim with the
// finalizer: a new claim of it gets none, so that it cannot hold the pool.
func (r *ClaimReconciler) finalizerFirst(ctx context.Context, s *scope) (step, error) {
	if controllerutil.ContainsFinalizer(s.claim, reservation.ClaimFinalizer) {
		return next, nil
	}
	if !s.pool.GetDeletionTimestamp().IsZero() {
		return stop(r.poolBeingDeleted(s)), nil
	}
	if err := r.MachineNames.Ensure(ctx, s.claim); err != nil {
		return next, err
	}
	controllerutil.AddFinalizer(s.claim, reservation.ClaimFinalizer)
	// The finalizer's write brings the claim back.
	return stop(ctrl.Result{}), nil
}
