package claim

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// A second writer: another manager running without leader election, say,
// that reserved its own record for the claim and bound the claim to it
// first. This reconcile's own reservation is released at once rather than
// left for the audit.

// lostToAnotherWriter handles an IPAddress that another writer created
// between this reconcile's read and its create: a second manager running
// without leader election, say, that reserved its own record for the claim
// at the same time. If that IPAddress holds another address, this
// reservation is released at once rather than left for the audit; either
// way the IPAddress's event brings the claim back to be bound to it.
func (r *ClaimReconciler) lostToAnotherWriter(ctx context.Context, claim *ipamv1.IPAddressClaim, backend backends.Reserver, alloc backends.Allocation) (ctrl.Result, error) {
	existing := &ipamv1.IPAddress{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(claim), existing); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the IPAddress another writer created: %w", err)
	}
	if !reservation.AddressBelongsTo(existing, claim) {
		// Not this claim's: nothing of ours to undo.
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	}
	return ctrl.Result{RequeueAfter: cacheLagRetry}, r.releaseSecondReservation(ctx, claim, backend, alloc, existing)
}

// settleLateAnswer handles a reservation that answered after the claim was
// bound by another writer, which the claim's IPAddress, seen first, shows:
// see lostToAnotherWriter.
func (r *ClaimReconciler) settleLateAnswer(ctx context.Context, claim *ipamv1.IPAddressClaim, address *ipamv1.IPAddress) error {
	call, state := r.allocations.take(claim)
	if state != callDone {
		return nil
	}
	defer call.Finish()
	if call.err != nil {
		return nil
	}
	return r.releaseSecondReservation(ctx, claim, call.value.backend, call.value.alloc, address)
}

// releaseSecondReservation releases a reservation made for the claim while
// another writer bound it to the address of existing, unless it is that
// same reservation.
func (r *ClaimReconciler) releaseSecondReservation(ctx context.Context, claim *ipamv1.IPAddressClaim, backend backends.Reserver,
	alloc backends.Allocation, existing *ipamv1.IPAddress) error {
	if existing.Spec.Address == alloc.Address.Addr().String() {
		return nil
	}
	rec := backends.Record{Address: alloc.Address, Marker: r.backendClaim(claim).Marker, Reference: alloc.Reference}
	if err := backend.Delete(ctx, rec); err != nil {
		return fmt.Errorf("releasing %s (%s), reserved while another writer bound the claim to %s: %w",
			alloc.Address, alloc.Reference, existing.Spec.Address, err)
	}
	ctrl.LoggerFrom(ctx).Info("Another writer bound the claim first; released this reservation", "released", alloc.Address.String(),
		"reference", alloc.Reference, "bound", existing.Spec.Address)
	return nil
}
