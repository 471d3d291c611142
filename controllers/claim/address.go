package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// findAddress reads the IPAddress of the claim's name, whoever it belongs
// to, into the scope.
func (r *ClaimReconciler) findAddress(ctx context.Context, s *scope) (step, error) {
	address := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.claim), address)
	switch {
	case apierrors.IsNotFound(err):
		s.address = nil
	case err != nil:
		return next, fmt.Errorf("getting IPAddress: %w", err)
	default:
		s.address = address
	}
	return next, nil
}

// clearAddressInTheWay deals with an IPAddress of the claim's name that
// cannot bind it: a deleted predecessor's is removed, another claim's is
// reported, and the claim's own that someone is deleting is let go, its
// reservation kept on the claim. Each change's event brings the claim
// back; the wait covers one that is missed.
func (r *ClaimReconciler) clearAddressInTheWay(ctx context.Context, s *scope) (step, error) {
	log := ctrl.LoggerFrom(ctx)
	address := s.address
	switch {
	case address == nil:
		return next, nil
	case isPredecessorsAddress(address, s.claim):
		// A claim of the same name that is gone left its IPAddress; it is
		// garbage, and never this claim's.
		log.Info("Removing the IPAddress of a deleted claim of the same name", "owner", metav1.GetControllerOf(address).UID)
		s.setReady(metav1.ConditionFalse, reasons.AddressConflictReason,
			fmt.Sprintf("IPAddress %s belonged to a deleted claim of the same name and is being removed", address.Name))
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return next, err
		}
		if err := r.Client.Delete(ctx, address, client.Preconditions{UID: &address.UID}); client.IgnoreNotFound(err) != nil {
			return next, fmt.Errorf("deleting the IPAddress of a deleted claim: %w", err)
		}
		return stop(r.wait(s.claim)), nil
	case !reservation.AddressBelongsTo(address, s.claim):
		s.setReady(metav1.ConditionFalse, reasons.AddressConflictReason,
			fmt.Sprintf("IPAddress %s exists but belongs to claim %q of pool %s %s", address.Name,
				address.Spec.ClaimRef.Name, address.Spec.PoolRef.Kind, address.Spec.PoolRef.Name))
		return stop(r.wait(s.claim)), nil
	case !address.DeletionTimestamp.IsZero():
		// Someone deleted the IPAddress while its claim lives. Let it go;
		// the marker finds the same address again.
		log.Info("IPAddress is being deleted while its claim exists, recreating it")
		s.setReady(metav1.ConditionFalse, reasons.AddressDeletedReason,
			fmt.Sprintf("IPAddress %s is being deleted; it is written again with the same address", address.Name))
		keepReservation(s.claim, address)
		if err := r.persistReservation(ctx, s.claim); err != nil {
			return next, err
		}
		r.written.Delete(s.claim.UID)
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return next, err
		}
		return stop(r.wait(s.claim)), nil
	}
	return next, nil
}

// stayBound keeps a claim with its IPAddress bound, whatever the pool's
// state: its resync costs no backend call. It settles a reservation that
// answered after another writer bound the claim, and the MAC its record
// carries.
func (r *ClaimReconciler) stayBound(ctx context.Context, s *scope) (step, error) {
	if s.address == nil {
		return next, nil
	}
	if err := r.settleLateAnswer(ctx, s.claim, s.address); err != nil {
		return next, err
	}
	if err := r.writeDeferredMAC(ctx, s); err != nil {
		return next, err
	}
	if err := r.checkBoundMAC(ctx, s); err != nil {
		return next, err
	}
	s.bound(s.address)
	return stop(ctrl.Result{}), nil
}
