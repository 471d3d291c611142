package claim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// allocate reserves the claim's address in the backend and writes the
// IPAddress. The reservation runs in the background (see backgroundCalls):
// this reconcile starts it and returns, and the one its answer brings
// writes the IPAddress. A crash between the two is harmless: the next
// attempt finds the reservation by its marker.
func (r *ClaimReconciler) allocate(ctx context.Context, s *scope) (ctrl.Result, error) {
	call, state := r.allocations.take(s.claim)
	switch state {
	case callRunning:
		if call != nil && call.Slow() && s.claim.Status.AddressRef.Name == "" {
			waitingForAnswer(s, reasons.ReservationPendingReason, "reservation")
		}
		return ctrl.Result{}, nil
	case callDone:
		if call.err == nil || !r.answeredBeforeAChange(ctx, s, call.value) {
			// The call held the pool's in-flight count until now: the
			// pool was not let go meanwhile.
			defer call.Finish()
			return r.bind(ctx, s, call.value, call.err)
		}
		// Refused with credentials or a pool spec that changed since (an
		// answer left untaken while the pool was not ready, say): the
		// change may be what the claim waited for, so it asks again now
		// rather than wait, or alarm the pool, on that old refusal.
		call.Finish()
		ctrl.LoggerFrom(ctx).V(2).Info("The reservation was refused before the pool's credentials or spec changed, asking again",
			"refusal", call.err.Error())
	}
	// Refused moments ago: asked now, the IPAM system would most likely
	// refuse again (see holds).
	if wait := r.holds.remaining(s.claim); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// The pool is being validated again because a claim got an address it
	// may not give: asking now would get the same answer (see Revalidate).
	if r.Alarms.Revalidating(s.pool) {
		return r.wait(s.claim), nil
	}
	// The pool reconciler lets a deleted pool go only when no allocation
	// from it is under way, and refuses new ones first (see InFlight). The
	// background reservation holds the pool's count until its answer is
	// taken; every other way out of here gives it back.
	done, open := r.InFlight.Start(s.pool.GetUID())
	handed := false
	defer func() {
		if !handed {
			done()
		}
	}()
	if !open || !s.pool.GetDeletionTimestamp().IsZero() {
		return r.poolBeingDeleted(s), nil
	}
	if err := r.MachineNames.Ensure(ctx, s.claim); err != nil {
		return ctrl.Result{}, err
	}
	// A pool whose fixed addresses carry the machine's MAC may have the
	// claim wait for it (mac.go).
	mac, later, err := r.macForAllocation(ctx, s)
	if err != nil || later != nil {
		return ptr.Deref(later, ctrl.Result{}), err
	}
	backend, err := r.Backends.Reserver(ctx, s.kind, s.pool)
	if err != nil {
		return r.allocationFailed(s.claim, err)
	}
	bc := r.backendClaim(s.claim)
	bc.MAC = mac
	reserve := r.reservation(s, backend, bc)
	handed = r.allocations.start(ctx, s.claim, done, func(ctx context.Context) (allocationAnswer, error) {
		alloc, err := reserve(ctx)
		return allocationAnswer{backend: backend, alloc: alloc}, err
	})
	if !handed {
		// Too many calls under way: one that ends wakes the claim.
		return ctrl.Result{RequeueAfter: busyRetry}, nil
	}
	return ctrl.Result{}, nil
}

// waitingForAnswer says on the claim that its reservation or release has
// waited slowAnswer for the IPAM system, which is slow or throttling: the
// answer still brings the claim back. Not an event: nothing is wrong yet.
func waitingForAnswer(s *scope, reason string, what string) {
	setClaimReady(s.claim, metav1.ConditionFalse, reason, fmt.Sprintf(
		"the IPAM system of %s %s has not answered the claim's %s for %s: it is slow or throttling (see the pool's conditions and the metrics capi_ipam_bridge_backend_*); the claim goes on once it answers",
		s.kind.Kind, s.pool.GetName(), what, slowAnswer))
}

// allocationAnswer is a background reservation's answer.
type allocationAnswer struct {
	// backend is the pool's backend the reservation went through, as
	// built from the pool's spec and Secret at the time.
	backend backends.Reserver
	alloc   backends.Allocation
}

// answeredBeforeAChange says whether the answer came through a backend
// that the pool's spec or Secret has replaced since.
func (r *ClaimReconciler) answeredBeforeAChange(ctx context.Context, s *scope, answer allocationAnswer) bool {
	if answer.backend == nil {
		return false
	}
	current, err := r.Backends.Reserver(ctx, s.kind, s.pool)
	return err == nil && current != answer.backend
}

// allocationFailed reports a refused or failed reservation, and holds the
// claim back until its wait is over (see holds), wherever the refusal came
// from: this reconcile, or the background reservation whose answer brought
// the claim back. The reconcile that starts the next reservation returns
// success, which resets controller-runtime's error backoff; the claim's own
// wait, which only Ready resets, spaces the attempts.
func (r *ClaimReconciler) allocationFailed(claim *ipamv1.IPAddressClaim, err error) (ctrl.Result, error) {
	reason := reasons.ClaimReason(err)
	msg := err.Error()
	var retry ctrl.Result
	switch reason {
	case ipamv1.IPAddressClaimReadyPoolExhaustedReason, reasons.PlannedRecordConflictReason:
		// A release in this cluster wakes the claim sooner (see
		// addressToWaitingClaims); this covers space freed, or a plan
		// given back, in the backend.
		retry = ctrl.Result{RequeueAfter: r.ExhaustedRetryInterval}
		r.holds.hold(claim, retry.RequeueAfter)
	case reasons.MACAddressInUseReason:
		// Until the MAC's holder or its source changes: a correction of
		// the claim's annotation, or a change of the object the MAC is
		// read from, ends the hold (see macaddress.Sources.Refused).
		if more := r.MACAddresses.Refused(claim); more != "" {
			msg += "; " + more
		}
		retry = r.holdBack(claim)
	default:
		retry = r.holdBack(claim)
	}
	setClaimReady(claim, metav1.ConditionFalse, reason, msg)
	r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, reason, "Allocate", "%s", msg)
	switch reason {
	case ipamv1.IPAddressClaimReadyPoolExhaustedReason, reasons.PlannedRecordConflictReason, reasons.RequestedAddressUnavailableReason,
		reasons.ReservationOutsidePoolReason, reasons.MACAddressInUseReason:
		// Expected outcomes, waiting on someone else (the holder of the
		// address or the MAC, a corrected request, pool or record), not
		// failed reconciles: the condition and the event say why.
		return retry, nil
	case reasons.UnusableAddressAnsweredReason:
		// Not a failed reconcile either: the system would answer the same
		// address again until the pool's validation, under way, says why.
		return retry, nil
	}
	// A failure, for controller-runtime to log and count; its retry finds
	// the claim held back.
	return ctrl.Result{}, err
}
