package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// reconcileNormal makes sure the claim has its IPAddress. Every outcome that
// leaves the claim waiting either ends with an event the reconciler watches
// (pool, Cluster, IPAddress) or is retried with a capped backoff, so that no
// claim waits for an event that may never come.
func (r *ClaimReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)

	if s.pool == nil {
		setClaimReady(s.claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason,
			fmt.Sprintf("%s %s not found", s.kind.Kind, s.claim.Spec.PoolRef.Name))
		return r.wait(s.claim), nil
	}

	// The finalizer is persisted before anything is reserved, so a claim
	// can never be deleted without its address being released. The
	// Machine's name, which the records will carry, goes in the same write.
	// A pool being deleted waits for every claim with the finalizer: a new
	// claim of it gets none, so that it cannot hold the pool.
	if !controllerutil.ContainsFinalizer(s.claim, reservation.ClaimFinalizer) {
		if !s.pool.GetDeletionTimestamp().IsZero() {
			return r.poolBeingDeleted(s), nil
		}
		if err := r.MachineNames.Ensure(ctx, s.claim); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.AddFinalizer(s.claim, reservation.ClaimFinalizer)
		return ctrl.Result{}, nil
	}

	// The IPAddress comes first: a bound claim stays bound whatever the
	// pool's state, and its resync costs no backend call.
	address := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.claim), address)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("getting IPAddress: %w", err)
	case isPredecessorsAddress(address, s.claim):
		// A claim of the same name that is gone left its IPAddress; it is
		// garbage, and never this claim's.
		log.Info("Removing the IPAddress of a deleted claim of the same name", "owner", metav1.GetControllerOf(address).UID)
		setClaimReady(s.claim, metav1.ConditionFalse, reasons.AddressConflictReason,
			fmt.Sprintf("IPAddress %s belonged to a deleted claim of the same name and is being removed", address.Name))
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Delete(ctx, address, client.Preconditions{UID: &address.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting the IPAddress of a deleted claim: %w", err)
		}
		return r.wait(s.claim), nil
	case !reservation.AddressBelongsTo(address, s.claim):
		setClaimReady(s.claim, metav1.ConditionFalse, reasons.AddressConflictReason,
			fmt.Sprintf("IPAddress %s exists but belongs to claim %q of pool %s %s", address.Name,
				address.Spec.ClaimRef.Name, address.Spec.PoolRef.Kind, address.Spec.PoolRef.Name))
		return r.wait(s.claim), nil
	case !address.DeletionTimestamp.IsZero():
		// Someone deleted the IPAddress while its claim lives. Let it go;
		// the marker finds the same address again. The delete event brings
		// the claim back, and the wait covers an event that is missed.
		log.Info("IPAddress is being deleted while its claim exists, recreating it")
		setClaimReady(s.claim, metav1.ConditionFalse, reasons.AddressDeletedReason,
			fmt.Sprintf("IPAddress %s is being deleted; it is written again with the same address", address.Name))
		keepReservation(s.claim, address)
		if err := r.persistReservation(ctx, s.claim); err != nil {
			return ctrl.Result{}, err
		}
		r.written.Delete(s.claim.UID)
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return ctrl.Result{}, err
		}
		return r.wait(s.claim), nil
	default:
		if err := r.settleLateAnswer(ctx, s.claim, address); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.writeDeferredMAC(ctx, s, address); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.checkBoundMAC(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		s.claim.Status.AddressRef = ipamv1.IPAddressReference{Name: address.Name}
		setClaimReady(s.claim, metav1.ConditionTrue, reasons.AddressAllocatedReason, "")
		return ctrl.Result{}, nil
	}

	// A claim that lost its IPAddress (status.addressRef is set) rebuilds it
	// from its marker, which needs the connection but not the pool's counts
	// or readiness; a new claim waits for a ready pool.
	rebuilding := s.claim.Status.AddressRef.Name != ""
	if !rebuilding && !s.pool.GetDeletionTimestamp().IsZero() {
		return r.poolBeingDeleted(s), nil
	}
	if !rebuilding && !conditions.IsTrue(s.pool, v1alpha1.ReadyCondition) {
		msg := fmt.Sprintf("%s %s is not ready", s.kind.Kind, s.pool.GetName())
		if m := conditions.GetMessage(s.pool, v1alpha1.ReadyCondition); m != "" {
			msg += ": " + m
		}
		setClaimReady(s.claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, msg)
		return r.wait(s.claim), nil
	}
	return r.allocate(ctx, s)
}

// wait is the result of a reconcile that leaves the claim waiting for
// something no event is guaranteed to announce: it comes back after a capped
// backoff.
func (r *ClaimReconciler) wait(claim *ipamv1.IPAddressClaim) ctrl.Result {
	return ctrl.Result{RequeueAfter: r.waits.Next(client.ObjectKeyFromObject(claim))}
}

// holdBack is wait for a claim whose reservation was refused or failed: it
// also holds the claim back for that wait (see holds).
func (r *ClaimReconciler) holdBack(claim *ipamv1.IPAddressClaim) ctrl.Result {
	retry := r.wait(claim)
	r.holds.hold(claim, retry.RequeueAfter)
	return retry
}

// poolBeingDeleted leaves a claim of a pool being deleted waiting. A claim
// with the release finalizer may hold a reservation in the pool (a record
// made before a manager died, say), so the pool waits in turn until the
// claim is deleted and its release, which goes through the pool, is done.
func (r *ClaimReconciler) poolBeingDeleted(s *scope) ctrl.Result {
	msg := fmt.Sprintf("%s %s is being deleted and gives no address out", s.kind.Kind, s.pool.GetName())
	if controllerutil.ContainsFinalizer(s.claim, reservation.ClaimFinalizer) {
		msg += "; its deletion waits for this claim to be deleted"
	}
	setClaimReady(s.claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, msg)
	return r.wait(s.claim)
}
