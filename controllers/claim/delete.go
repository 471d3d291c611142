package claim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// reconcileDelete releases the claim's address, deletes its IPAddress and
// lets the claim go, in the order of the contract.
func (r *ClaimReconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	return runPhases(ctx, s,
		// Only a claim with the release finalizer may hold an address, and
		// one whose consumer keeps it releases nothing yet.
		holdsAnAddress,
		// A reservation under way may still reserve: the release waits for
		// it, so that it finds and releases that record too.
		r.reservationSettled,
		r.findOwnAddress,
		r.reclaimPolicyKnown,
		r.releaseAddress,
		r.letAddressGo,
		letClaimGo,
	)
}

// holdsAnAddress stops the deletion of a claim without the release
// finalizer (nothing was reserved for it), or that its consumer keeps.
func holdsAnAddress(_ context.Context, s *scope) (step, error) {
	if !controllerutil.ContainsFinalizer(s.claim, reservation.ClaimFinalizer) || kept(s) {
		return stop(ctrl.Result{}), nil
	}
	return next, nil
}

// reservationSettled waits for a reservation under way; its answer brings
// the claim back.
func (r *ClaimReconciler) reservationSettled(_ context.Context, s *scope) (step, error) {
	switch call, state := r.allocations.take(s.claim); state {
	case callRunning:
		return stop(ctrl.Result{}), nil
	case callDone:
		call.Finish()
	}
	return next, nil
}

// findOwnAddress finds the claim's own IPAddress, including one the
// garbage collector stripped of its reference to the claim; nil for
// another's.
func (r *ClaimReconciler) findOwnAddress(ctx context.Context, s *scope) (step, error) {
	if _, err := r.findAddress(ctx, s); err != nil {
		return next, err
	}
	if s.address != nil && !reservation.AddressBelongsTo(s.address, s.claim) && !strippedOfItsClaim(s.address, s.claim) {
		s.address = nil
	}
	return next, nil
}

// reclaimPolicyKnown reads what becomes of the claim's record: released,
// or kept for the IPAM team. A policy it cannot read stops the deletion
// until it is corrected, whose change brings the claim back.
func (r *ClaimReconciler) reclaimPolicyKnown(_ context.Context, s *scope) (step, error) {
	if s.pool == nil {
		// Nothing can be released or kept without the pool (releaseAddress).
		return next, nil
	}
	retain, err := retains(s.claim)
	if err != nil {
		s.setReady(metav1.ConditionFalse, reasons.ReclaimPolicyUnknownReason, err.Error())
		r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeWarning, reasons.ReclaimPolicyUnknownReason, "Release", "%v", err)
		return stop(ctrl.Result{}), nil
	}
	s.retain = retain
	return next, nil
}

// releaseAddress releases the claim's address in the IPAM system, in the
// background; the reconcile its answer brings goes on from here.
func (r *ClaimReconciler) releaseAddress(ctx context.Context, s *scope) (step, error) {
	if s.pool == nil {
		// The pool's finalizer should prevent this; without the pool there is
		// no backend to release in.
		ctrl.LoggerFrom(ctx).Info("Pool is gone, the address cannot be released in the backend")
		r.Recorder.Eventf(s.claim, nil, corev1.EventTypeWarning, reasons.PoolNotFoundReason, "Release",
			"%s %s not found: the address was not released in the IPAM system", s.kind.Kind, s.claim.Spec.PoolRef.Name)
		return next, nil
	}
	if _, done := r.released.Get(s.claim.UID); done {
		return next, nil
	}
	released, err := r.release(ctx, s)
	if err != nil {
		return next, err
	}
	if !released {
		// Its answer brings the claim back; a release refused for the
		// limit of calls under way is woken too, or looks again.
		return stop(ctrl.Result{RequeueAfter: busyRetry}), nil
	}
	// The reconcile that the IPAddress's deletion brings may still see the
	// claim with its finalizer in the cache: it must not release (search,
	// delete, report) a second time.
	r.released.Set(s.claim.UID, false, releasedMemory)
	return next, nil
}

// letAddressGo deletes the claim's IPAddress, now that its address is
// released.
func (r *ClaimReconciler) letAddressGo(ctx context.Context, s *scope) (step, error) {
	if s.address == nil {
		return next, nil
	}
	if err := r.removeAddressFinalizer(ctx, s.address); err != nil {
		return next, err
	}
	if err := r.Client.Delete(ctx, s.address); client.IgnoreNotFound(err) != nil {
		return next, fmt.Errorf("deleting IPAddress: %w", err)
	}
	return next, nil
}

// letClaimGo removes the release finalizer: nothing is held for the claim
// any more.
func letClaimGo(_ context.Context, s *scope) (step, error) {
	controllerutil.RemoveFinalizer(s.claim, reservation.ClaimFinalizer)
	return next, nil
}
