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

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// bind writes the IPAddress of the address the backend reserved for the
// claim, unless another live IPAddress holds it, and reports a failed
// reservation.
func (r *ClaimReconciler) bind(ctx context.Context, s *scope, answer allocationAnswer, err error) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	backend, alloc := answer.backend, answer.alloc
	if err != nil {
		switch {
		case poolstate.IsRefusal(err):
			r.Alarms.Refused(s.kind, s.pool, backend, s.claim, err)
		case errors.Is(err, backends.ErrUnusableAnswer):
			r.Recorder.Eventf(s.pool, s.claim, corev1.EventTypeWarning, reasons.UnusableAddressAnsweredReason, "Allocate",
				"Claim %s/%s: %v", s.claim.Namespace, s.claim.Name, err)
			r.Alarms.Revalidate(s.kind, s.pool)
		}
		return r.allocationFailed(s.claim, err)
	}

	holder, err := r.heldInCluster(ctx, s.claim, alloc)
	if err != nil {
		// Its retry would reserve again first: the wait spaces that too.
		r.holdBack(s.claim)
		return ctrl.Result{}, err
	}
	if holder != nil {
		return r.handOver(ctx, s, backend, alloc, holder)
	}

	address, err := r.newIPAddress(s, alloc)
	if err != nil {
		return ctrl.Result{}, err
	}
	recordReservation(address, alloc, r.backendClaim(s.claim).Marker)
	if err := r.Client.Create(ctx, address); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return r.lostToAnotherWriter(ctx, s.claim, backend, alloc)
		}
		setClaimReady(s.claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyAllocationFailedReason,
			fmt.Sprintf("creating IPAddress for %s: %v", alloc.Address, err))
		r.holdBack(s.claim)
		return ctrl.Result{}, fmt.Errorf("creating IPAddress: %w", err)
	}
	r.written.Set(s.claim.UID, false, writtenMemory)
	describeRecordMAC(s, alloc.MAC)
	log.Info("Allocated address", "address", alloc.Address.String(), "reference", alloc.Reference)
	metrics.ClaimBindSeconds.WithLabelValues(s.kind.Kind).Observe(time.Since(s.claim.CreationTimestamp.Time).Seconds())
	r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeNormal, reasons.AddressAllocatedReason, "Allocate",
		"Allocated %s from %s %s (%s)", alloc.Address, s.kind.Kind, s.pool.GetName(), alloc.Reference)

	forgetReservation(s.claim)
	s.claim.Status.AddressRef = ipamv1.IPAddressReference{Name: address.Name}
	setClaimReady(s.claim, metav1.ConditionTrue, reasons.AddressAllocatedReason, "")
	return ctrl.Result{}, nil
}

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
