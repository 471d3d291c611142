package claim

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// The reservation runs in the background (see backgroundCalls): one
// reconcile starts it and returns, and the one its answer brings binds the
// claim to what it reserved. A crash between the two is harmless: the
// next attempt finds the reservation by its marker.

// takeReservationAnswer binds the claim to what its background reservation
// answered, or leaves it waiting while the reservation is under way.
func (r *ClaimReconciler) takeReservationAnswer(ctx context.Context, s *scope) (step, error) {
	call, state := r.allocations.take(s.claim)
	switch state {
	case callRunning:
		if call != nil && call.Slow() && !s.rebuilding() {
			waitingForAnswer(s, reasons.ReservationPendingReason, "reservation")
		}
		return stop(ctrl.Result{}), nil
	case callDone:
		if call.err == nil || !answeredBeforeAChange(s, call.value) {
			// The call held the pool's in-flight count until now: the
			// pool was not let go meanwhile.
			defer call.Finish()
			result, err := r.bind(ctx, s, call.value, call.err)
			return stop(result), err
		}
		// Refused with credentials or a pool spec that changed since (an
		// answer left untaken while the pool was not ready, say): the
		// change may be what the claim waited for, so it asks again now
		// rather than wait, or alarm the pool, on that old refusal.
		call.Finish()
		ctrl.LoggerFrom(ctx).V(2).Info("The reservation was refused before the pool's credentials or spec changed, asking again",
			"refusal", call.err.Error())
	}
	return next, nil
}

// answeredBeforeAChange says whether the answer came through a backend
// that the pool's spec or Secret has replaced since.
func answeredBeforeAChange(s *scope, answer allocationAnswer) bool {
	if answer.backend == nil {
		return false
	}
	current, err := s.reserver()
	return err == nil && current != answer.backend
}

// notHeldBack keeps a claim from asking the IPAM system a question it
// would answer as it just did: a claim refused moments ago (see holds),
// and the claims of a pool being validated again because a claim got an
// address it may not give (see Revalidate).
func (r *ClaimReconciler) notHeldBack(_ context.Context, s *scope) (step, error) {
	if wait := r.holds.remaining(s.claim); wait > 0 {
		return stop(ctrl.Result{RequeueAfter: wait}), nil
	}
	if r.Alarms.Revalidating(s.pool) {
		return stop(r.wait(s.claim)), nil
	}
	return next, nil
}

// describeRequest puts together what the reservation asks for: the
// claim's marker and Machine, the address it requests, and the MAC a pool
// whose fixed addresses carry the machine's may have it wait for (mac.go).
func (r *ClaimReconciler) describeRequest(ctx context.Context, s *scope) (step, error) {
	if err := r.MachineNames.Ensure(ctx, s.claim); err != nil {
		return next, err
	}
	s.request = r.backendClaim(s.claim)
	s.request.Fresh = s.fresh && s.address == nil
	s.requested = requestOf(s.claim, s.pool)
	return r.macForAllocation(ctx, s)
}

// startReservation describes the claim's request and starts its
// reservation in the background. The
// pool reconciler lets a deleted pool go only when no allocation from it
// is under way, and refuses new ones first (see InFlight): the background
// reservation holds the pool's count until its answer is taken; every
// other way out of here gives it back.
func (r *ClaimReconciler) startReservation(ctx context.Context, s *scope) (step, error) {
	done, open := r.InFlight.Start(s.pool.GetUID())
	handed := false
	defer func() {
		if !handed {
			done()
		}
	}()
	if !open || !s.pool.GetDeletionTimestamp().IsZero() {
		return stop(r.poolBeingDeleted(s)), nil
	}
	// Described only for a pool that gives addresses out: a claim of a
	// pool being deleted reads and writes nothing for a reservation that
	// will not be made.
	if st, err := r.describeRequest(ctx, s); err != nil || st.stop {
		return st, err
	}
	backend, err := s.reserver()
	if err != nil {
		result, err := r.allocationFailed(s, err)
		return stop(result), err
	}
	reserve := r.reservation(s, backend)
	handed = r.allocations.start(ctx, s.claim, done, func(ctx context.Context) (allocationAnswer, error) {
		alloc, err := reserve(ctx)
		return allocationAnswer{backend: backend, alloc: alloc}, err
	})
	if !handed {
		// Too many calls under way: one that ends wakes the claim.
		return stop(ctrl.Result{RequeueAfter: busyRetry}), nil
	}
	return stop(ctrl.Result{}), nil
}
