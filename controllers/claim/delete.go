package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// reconcileDelete releases the address, deletes the IPAddress and lets the
// claim go.
func (r *ClaimReconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if !controllerutil.ContainsFinalizer(s.claim, reservation.ClaimFinalizer) || kept(s) {
		return ctrl.Result{}, nil
	}
	// An allocation under way may still reserve an address: the release
	// waits for it, so that it finds and releases that record too.
	switch call, state := r.allocations.take(s.claim); state {
	case callRunning:
		return ctrl.Result{}, nil
	case callDone:
		call.Finish()
	}
	address := &ipamv1.IPAddress{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.claim), address); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("getting IPAddress: %w", err)
		}
		address = nil
	}
	if address != nil && !reservation.AddressBelongsTo(address, s.claim) && !strippedOfItsClaim(address, s.claim) {
		address = nil
	}

	if s.pool == nil {
		// The pool's finalizer should prevent this; without the pool there is
		// no backend to release in.
		log.Info("Pool is gone, the address cannot be released in the backend")
		r.Recorder.Eventf(s.claim, nil, corev1.EventTypeWarning, reasons.PoolNotFoundReason, "Release",
			"%s %s not found: the address was not released in the IPAM system", s.kind.Kind, s.claim.Spec.PoolRef.Name)
	} else if _, done := r.released.Get(s.claim.UID); !done {
		// The release runs in the background; the reconcile its answer
		// brings goes on from here.
		released, err := r.release(ctx, s, address)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !released {
			// Its answer brings the claim back; a release refused for the
			// limit of calls under way is woken too, or looks again.
			return ctrl.Result{RequeueAfter: busyRetry}, nil
		}
		// The reconcile that the IPAddress's deletion brings may still see
		// the claim with its finalizer in the cache: it must not release
		// (search, delete, report) a second time.
		r.released.Set(s.claim.UID, false, releasedMemory)
	}

	if address != nil {
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Delete(ctx, address); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting IPAddress: %w", err)
		}
	}
	controllerutil.RemoveFinalizer(s.claim, reservation.ClaimFinalizer)
	return ctrl.Result{}, nil
}

// release releases the claim's address in the backend, in the background:
// it returns true once the release is done (or left, and reported), false
// while it is under way.
func (r *ClaimReconciler) release(ctx context.Context, s *scope, address *ipamv1.IPAddress) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	var (
		backend backends.Reserver
		last    backends.Reservation
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
		backend, last, err = call.value.backend, call.value.last, call.err
	default:
		last = reservation.Recorded(s.claim, address)
		if backend, err = r.Backends.Reserver(ctx, s.kind, s.pool); err == nil {
			r.startRelease(ctx, s, backend, last)
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
		setClaimReady(s.claim, metav1.ConditionFalse, reason, err.Error())
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
		setClaimReady(s.claim, metav1.ConditionFalse, reasons.ReleaseFailedReason, err.Error())
		r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeWarning, reasons.ReleaseFailedReason, "Release", "%v", err)
		return false, fmt.Errorf("releasing address: %w", err)
	}
	if last.Address.IsValid() {
		log.Info("Released address", "address", last.Address.String())
		r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeNormal, reasons.AddressReleasedReason, "Release",
			"Released %s to %s %s", last.Address, s.kind.Kind, s.pool.GetName())
	}
	return true, nil
}

// releaseAnswer is a background release's answer.
type releaseAnswer struct {
	backend backends.Reserver
	last    backends.Reservation
}

// startRelease releases the claim's record in the background, or keeps it
// as a tombstone for the pool's grace period, which the audit deletes once
// the period is over.
func (r *ClaimReconciler) startRelease(ctx context.Context, s *scope, backend backends.Reserver, last backends.Reservation) {
	grace := time.Duration(0)
	if d := s.pool.GetRelease().GracePeriod; d != nil {
		grace = d.Duration
	}
	bc, poolUID := r.backendClaim(s.claim), s.pool.GetUID()
	// Refused for the limit of calls under way, the claim is woken when
	// one ends (see reconcileDelete).
	_ = r.releases.start(ctx, s.claim, nil, func(ctx context.Context) (releaseAnswer, error) {
		answer := releaseAnswer{backend: backend, last: last}
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
