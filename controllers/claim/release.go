package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// release releases the claim's address in the backend, in the background:
// it returns true once the release is done (or left, and reported), false
// while it is under way.
func (r *ClaimReconciler) release(ctx context.Context, s *scope) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	var (
		backend backends.Reserver
		last    backends.Reservation
		kept    bool
		err     error
	)
	switch call, state := r.releases.take(s.claim); state {
	case callRunning:
		if call != nil && call.Slow() {
			waitingForAnswer(s, reasons.ReleasePendingReason, "release")
		}
		return false, nil
	case callDone:
		call.Finish()
		backend, last, kept, err = call.value.backend, call.value.last, call.value.kept, call.err
	default:
		last = reservation.Recorded(s.claim, s.address)
		if backend, err = s.reserver(); err == nil {
			r.startRelease(ctx, s, backend, last, s.retain)
			return false, nil
		}
	}
	if backend != nil && poolstate.IsRefusal(err) {
		r.Alarms.Refused(s.kind, s.pool, backend, s.claim, err)
	}
	// A record left in the IPAM system is never silent: a condition, an
	// event on the claim and on the pool (which outlives it), and a metric.
	leave := func(reason string) error {
		log.Info("Leaving the backend record in place", "reason", err.Error())
		metrics.RecordsLeft.WithLabelValues(s.kind.Kind, reason).Inc()
		s.setReady(metav1.ConditionFalse, reason, err.Error())
		r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeWarning, reason, "Release", "%v", err)
		r.Recorder.Eventf(s.pool, s.claim, corev1.EventTypeWarning, reason, "Release",
			"Claim %s/%s: %v", s.claim.Namespace, s.claim.Name, err)
		return nil
	}
	switch {
	case errors.Is(err, backends.ErrNotOwned):
		// Someone took the record over in the IPAM system: respect that.
		return true, leave(reasons.ReleaseSkippedReason)
	case errors.Is(err, backends.ErrUnreachable):
		// The record lives where the pool no longer reaches.
		return true, leave(reasons.ReleaseLeftReason)
	case err != nil:
		s.setReady(metav1.ConditionFalse, reasons.ReleaseFailedReason, err.Error())
		r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeWarning, reasons.ReleaseFailedReason, "Release", "%v", err)
		return false, fmt.Errorf("releasing address: %w", err)
	}
	if kept {
		// The IPAddress may be gone already: then the record's reference
		// names what was kept.
		what := last.Reference
		if last.Address.IsValid() {
			what = last.Address.String()
		}
		if what != "" {
			log.Info("Kept the record for the IPAM team, without the claim's marker", "record", what)
			r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeNormal, reasons.AddressRetainedReason, "Release",
				"Kept %s in %s %s for the IPAM team, without the claim's marker (%s %s)", what, s.kind.Kind, s.pool.GetName(),
				v1alpha1.ReclaimPolicyAnnotation, v1alpha1.ReclaimRetain)
		}
		return true, nil
	}
	if last.Address.IsValid() {
		log.Info("Released address", "address", last.Address.String())
		r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeNormal, reasons.AddressReleasedReason, "Release",
			"Released %s to %s %s", last.Address, s.kind.Kind, s.pool.GetName())
	}
	return true, nil
}

// startRelease releases the claim's record in the background, or keeps it
// as a tombstone for the pool's grace period, which the audit deletes once
// the period is over, or, kept, hands it to the IPAM team unmarked.
func (r *ClaimReconciler) startRelease(ctx context.Context, s *scope, backend backends.Reserver, last backends.Reservation, kept bool) {
	grace := time.Duration(0)
	if d := s.pool.GetRelease().GracePeriod; d != nil {
		grace = d.Duration
	}
	bc, poolUID := r.backendClaim(s.claim), s.pool.GetUID()
	// Refused for the limit of calls under way, the claim is woken when
	// one ends (see reconcileDelete).
	_ = r.releases.start(ctx, s.claim, nil, func(ctx context.Context) (releaseAnswer, error) {
		answer := releaseAnswer{backend: backend, last: last, kept: kept}
		if kept {
			return answer, backend.Keep(ctx, bc, last)
		}
		if grace <= 0 {
			return answer, backend.Release(ctx, bc, last)
		}
		now := time.Now()
		if err := backend.Retire(ctx, bc, last, now); err != nil {
			return answer, err
		}
		r.Tombstones.Add(poolUID, now.Add(grace))
		return answer, nil
	})
}
