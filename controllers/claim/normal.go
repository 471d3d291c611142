package claim

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
)

// reconcileNormal makes sure the claim has its IPAddress, in the order of
// the contract. Every phase that leaves the claim waiting either ends with
// an event the reconciler watches (pool, Cluster, IPAddress, an answer) or
// is retried with a capped backoff, so that no claim waits for an event
// that may never come.
func (r *ClaimReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	return runPhases(ctx, s,
		// The pool the claim names exists.
		r.poolFound,
		// The release finalizer is on the claim before anything is reserved.
		r.finalizerFirst,
		// The claim's IPAddress, as found: another's is cleared away or
		// reported, a bound claim stays bound whatever the pool's state.
		r.findAddress,
		r.clearAddressInTheWay,
		r.stayBound,
		// A new claim waits for a ready pool that is not being deleted.
		r.poolReady,
		// The reservation: its answer bound, or one started in the
		// background, unless the claim is held back.
		r.takeReservationAnswer,
		r.notHeldBack,
		r.startReservation,
	)
}
