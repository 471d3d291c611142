package claim

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// allocationFailed reports a refused or failed reservation, and holds the
// claim back until its wait is over (see holds), wherever the refusal came
// from: this reconcile, or the background reservation whose answer brought
// the claim back. The reconcile that starts the next reservation returns
// success, which resets controller-runtime's error backoff; the claim's own
// wait, which only Ready resets, spaces the attempts.
func (r *ClaimReconciler) allocationFailed(s *scope, err error) (ctrl.Result, error) {
	claim := s.claim
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
	s.setReady(metav1.ConditionFalse, reason, msg)
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
