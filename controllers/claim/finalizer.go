package claim

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// finalizerFirst persists the release finalizer before anything is
// reserved, so a claim can never be deleted without its address being
// released. The Machine's name, which the records will carry, goes in the
// same write. A pool being deleted waits for every claim with the
// finalizer: a new claim of it gets none, so that it cannot hold the pool.
//
// The write is made at once and the reconcile goes on to the reservation:
// waiting for the write's event instead would put the claim back at the
// end of the queue, behind a whole burst's first writes, before anything
// is reserved for it.
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
	switch err := s.writeMetadata(ctx); {
	case apierrors.IsConflict(err):
		// Read from a cache that had not seen the claim's last change: that
		// change's event brings it back, the wait covers a missed one.
		ctrl.LoggerFrom(ctx).V(2).Info("The claim changed since it was read, looking again")
		return stop(ctrl.Result{RequeueAfter: cacheLagRetry}), nil
	case apierrors.IsNotFound(err):
		// Deleted meanwhile, and nothing reserved: nothing to do.
		return stop(ctrl.Result{}), nil
	case err != nil:
		return stop(ctrl.Result{}), err
	}
	// The write's optimistic lock proves the finalizer was missing from
	// the claim's latest version. A claim that says it was bound, or
	// carries a reservation, lost its finalizer to someone and is not
	// fresh.
	s.fresh = s.claim.Status.AddressRef.Name == "" && reservation.Recorded(s.claim, nil).Reference == ""
	return next, nil
}
