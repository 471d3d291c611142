package claim

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// reservation returns the call that reserves the claim's address in
// backend, as the scope's request describes it: its Allocate, or
// allocateRequested for a claim that requests an address. It copies what
// it needs now: the call may run after the reconcile has moved on.
func (r *ClaimReconciler) reservation(s *scope, backend backends.Reserver) func(context.Context) (backends.Allocation, error) {
	claim, req := s.request, s.requested
	if req.err == nil && !req.addr.IsValid() {
		return func(ctx context.Context) (backends.Allocation, error) { return backend.Allocate(ctx, claim) }
	}
	asked := requestedAllocation{req: req, kind: s.kind, pool: s.pool, bound: s.rebuilding()}
	return func(ctx context.Context) (backends.Allocation, error) {
		return r.allocateRequested(ctx, backend, claim, asked)
	}
}

// requestedAllocation is what the allocation of a claim that requests an address
// knows of it.
type requestedAllocation struct {
	req  addressRequest
	kind poolkind.Kind
	pool poolkind.Pool
	// bound: the claim had its IPAddress once (status.addressRef), and
	// rebuilds it: its machine uses the address its record holds.
	bound bool
}

// allocateRequested reserves the requested address for the claim, or says
// why not:
//   - an unreadable or contradictory request reserves nothing;
//   - a record the claim's marker holds at another address (reserved
//     before the claim requested this one) is released and the requested
//     address reserved, unless the claim was bound to it: a bound claim
//     keeps its machine's address;
//   - an address another live IPAddress of this management cluster holds in
//     the same system and scope is never bound: the record just made for
//     the claim is handed to that IPAddress's claim (see handToHolder), and
//     the claim told which IPAddress holds it.
func (r *ClaimReconciler) allocateRequested(ctx context.Context, backend backends.Reserver, claim backends.Claim, asked requestedAllocation) (backends.Allocation, error) {
	if asked.req.err != nil {
		return backends.Allocation{}, asked.req.err
	}
	claim.Requested = asked.req.addr
	alloc, err := backend.Allocate(ctx, claim)
	if err == nil && alloc.Address.Addr() != claim.Requested && !asked.bound {
		if err := backend.Delete(ctx, recordOf(claim, alloc)); err != nil {
			return backends.Allocation{}, fmt.Errorf("releasing %s (%s), reserved for the claim before it requested %s: %w",
				alloc.Address, alloc.Reference, claim.Requested, err)
		}
		alloc, err = backend.Allocate(ctx, claim)
		if err == nil && alloc.Address.Addr() != claim.Requested {
			err = fmt.Errorf("%w: %s answered %s (%s) to a claim requesting %s",
				backends.ErrUnusableAnswer, alloc.Endpoint, alloc.Address, alloc.Reference, claim.Requested)
		}
	}
	if err != nil {
		if errors.Is(err, backends.ErrRequestedUnavailable) {
			return backends.Allocation{}, fmt.Errorf("%w; requested by %s, the claim gets no other address", err, asked.req.from)
		}
		return backends.Allocation{}, err
	}
	if alloc.Address.Addr() != claim.Requested {
		// Bound to that address before it requested another: the machine
		// keeps its address.
		return alloc, nil
	}
	holder, err := r.heldInCluster(ctx, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name}}, alloc)
	if err != nil || holder == nil {
		return alloc, err
	}
	handed, err := r.handToHolder(ctx, backend, asked, claim, alloc, holder)
	if err != nil {
		return backends.Allocation{}, err
	}
	why := fmt.Sprintf("IPAddress %s/%s of claim %s/%s holds it in this management cluster, in the same IPAM system and scope (%s, %s), "+
		"where nothing held it for that claim (its record was moved or deleted); the record just made, %s, now holds it for that claim",
		holder.Namespace, holder.Name, holder.Namespace, holder.Spec.ClaimRef.Name, alloc.Endpoint, alloc.Scope, alloc.Reference)
	if !handed {
		why = fmt.Sprintf("IPAddress %s/%s of claim %s/%s, which is being deleted, still holds it in this management cluster, in the same IPAM system and scope (%s, %s); "+
			"the record just made, %s, stays this claim's, which gets the address once that IPAddress is gone",
			holder.Namespace, holder.Name, holder.Namespace, holder.Spec.ClaimRef.Name, alloc.Endpoint, alloc.Scope, alloc.Reference)
	}
	return backends.Allocation{}, fmt.Errorf("%w; requested by %s, the claim gets no other address", &backends.RequestedUnavailableError{
		Address: claim.Requested, Why: why,
	}, asked.req.from)
}

// handToHolder gives the record just made for the requesting claim, at an
// address holder's machine uses, to holder's claim, as the guard does for
// any claim (see giveToHolder): the IPAM system holds the machine's address
// for it again, and the requesting claim, whose marker the record no
// longer carries, finds it held at its next attempt instead of making a
// record again. It says whether the record was handed over: a holder
// claim being deleted keeps nothing, and the requesting claim keeps its
// record until the holder's IPAddress is gone.
func (r *ClaimReconciler) handToHolder(ctx context.Context, backend backends.Reserver, asked requestedAllocation, claim backends.Claim, alloc backends.Allocation,
	holder *ipamv1.IPAddress) (bool, error) {
	holderKey := client.ObjectKey{Namespace: holder.Namespace, Name: holder.Spec.ClaimRef.Name}
	holderClaim, err := r.giveToHolder(ctx, backend, asked.kind, asked.pool, recordOf(claim, alloc), claim.MAC, holder, fmt.Sprintf(
		"another address or scope (%s answered %s to claim %s/%s, which requested it)", alloc.Endpoint, alloc.Address.Addr(), claim.Namespace, claim.Name))
	if err != nil || holderClaim == nil {
		return false, err
	}
	metrics.AddressConflicts.WithLabelValues(asked.kind.Kind).Inc()
	ctrl.LoggerFrom(ctx).Info("A requested address is held in the cluster; handed the record made for it to the holder",
		"address", alloc.Address.Addr().String(), "reference", alloc.Reference, "holder", holderKey.String())
	held := fmt.Sprintf("claim %s/%s requested this claim's address %s, which %s no longer held for this claim's machine (its record was moved, readdressed or deleted); record %s holds it for this claim again",
		claim.Namespace, claim.Name, alloc.Address.Addr(), alloc.Endpoint, alloc.Reference)
	r.Recorder.Eventf(holderClaim, nil, corev1.EventTypeWarning, reasons.AddressHeldInClusterReason, "Allocate", "%s", held)
	return true, reservation.SetAddressReserved(ctx, r.Client, holderClaim, metav1.ConditionTrue, reasons.AddressHeldInClusterReason, held)
}

// recordOf is the record an allocation for claim names.
func recordOf(claim backends.Claim, alloc backends.Allocation) backends.Record {
	return backends.Record{Address: alloc.Address, Marker: claim.Marker, Reference: alloc.Reference}
}
