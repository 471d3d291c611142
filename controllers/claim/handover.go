package claim

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/index"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// The guard in the cluster: whatever the IPAM system answers, the provider
// never binds an address that another live IPAddress of this management
// cluster holds in the same system and scope (VRF, network view). The IPAM
// system can answer one when its team moved, readdressed or deleted a bound
// claim's record: the machine still uses the address, the system thinks it
// free. The guard reads the cache only, and costs the IPAM system nothing.
//
// heldInCluster returns a live IPAddress of another claim that holds the
// allocation's address in the same system and scope, or nil.
func (r *ClaimReconciler) heldInCluster(ctx context.Context, claim *ipamv1.IPAddressClaim, alloc backends.Allocation) (*ipamv1.IPAddress, error) {
	if alloc.Scope == "" {
		return nil, nil
	}
	addresses := &ipamv1.IPAddressList{}
	key := index.AddressScopeKey(alloc.Endpoint, alloc.Scope, alloc.Address.Addr().String())
	if err := r.Client.List(ctx, addresses, client.MatchingFields{index.AddressScopeField: key}); err != nil {
		return nil, fmt.Errorf("listing the IPAddresses that hold %s: %w", alloc.Address.Addr(), err)
	}
	for i := range addresses.Items {
		a := &addresses.Items[i]
		if a.Namespace == claim.Namespace && a.Spec.ClaimRef.Name == claim.Name {
			continue
		}
		if a.DeletionTimestamp.IsZero() {
			return a, nil
		}
	}
	return nil, nil
}

// handOver gives a record that the IPAM system reserved for claim, at an
// address holder's machine uses, to holder's claim: it now keeps the
// machine's address reserved in the IPAM system, and claim, whose marker it
// no longer carries, gets another address at its next attempt. Both claims
// and the pool say so, and a metric counts it. A holder claim that is being
// deleted is handed nothing (see giveToHolder): claim keeps its record and
// waits for the holder's IPAddress to go.
func (r *ClaimReconciler) handOver(ctx context.Context, s *scope, backend backends.Reserver, alloc backends.Allocation, holder *ipamv1.IPAddress) (ctrl.Result, error) {
	holderKey := client.ObjectKey{Namespace: holder.Namespace, Name: holder.Spec.ClaimRef.Name}
	rec := backends.Record{Address: alloc.Address, Marker: r.backendClaim(s.claim).Marker, Reference: alloc.Reference, Planned: alloc.Planned}
	holderClaim, err := r.giveToHolder(ctx, backend, s.kind, s.pool, rec, macaddress.Recorded(s.claim, s.kind, s.pool), holder, fmt.Sprintf(
		"another address or scope (%s answered %s to claim %s/%s)", alloc.Endpoint, alloc.Address.Addr(), s.claim.Namespace, s.claim.Name))
	if err != nil {
		return ctrl.Result{}, err
	}
	if holderClaim == nil {
		s.setReady(metav1.ConditionFalse, reasons.AddressHeldInClusterReason, fmt.Sprintf(
			"%s reserved %s (%s) for this claim, but IPAddress %s of claim %s, which is being deleted, still holds that address in this management cluster; this claim keeps the record and gets the address once that IPAddress is gone",
			alloc.Endpoint, alloc.Address.Addr(), alloc.Reference, holder.Name, holderKey))
		return r.wait(s.claim), nil
	}
	metrics.AddressConflicts.WithLabelValues(s.kind.Kind).Inc()
	msg := fmt.Sprintf("%s reserved %s (%s) for this claim, but IPAddress %s of claim %s holds that address in this management cluster; the record now holds it for that claim, and this claim gets another address",
		alloc.Endpoint, alloc.Address.Addr(), alloc.Reference, holder.Name, holderKey)
	ctrl.LoggerFrom(ctx).Info("The IPAM system answered an address another claim holds; handed the record to it", "address", alloc.Address.Addr().String(),
		"reference", alloc.Reference, "holder", holderKey.String())
	s.setReady(metav1.ConditionFalse, reasons.AddressHeldInClusterReason, msg)
	r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeWarning, reasons.AddressHeldInClusterReason, "Allocate", "%s", msg)
	r.Recorder.Eventf(s.pool, s.claim, corev1.EventTypeWarning, reasons.AddressHeldInClusterReason, "Allocate", "Claim %s/%s: %s", s.claim.Namespace, s.claim.Name, msg)
	held := fmt.Sprintf("%s answered this claim's address %s to claim %s/%s: the IPAM system no longer held it for this claim's machine (its record was moved, readdressed or deleted); record %s holds it for this claim again",
		alloc.Endpoint, alloc.Address.Addr(), s.claim.Namespace, s.claim.Name, alloc.Reference)
	r.Recorder.Eventf(holderClaim, s.pool, corev1.EventTypeWarning, reasons.AddressHeldInClusterReason, "Allocate", "%s", held)
	if err := reservation.SetAddressReserved(ctx, r.Client, holderClaim, metav1.ConditionTrue, reasons.AddressHeldInClusterReason, held); err != nil {
		return ctrl.Result{}, err
	}
	return r.wait(s.claim), nil
}

// giveToHolder hands rec, a record just made for another claim (whose
// machine's MAC is ownMAC) at an address that holder's machine uses, to
// holder's claim, and returns that claim. The holder's own record, if the
// IPAM team moved it (movedTo says where it may be), is noted on holder
// first, so that the audit reports it and never deletes it as a duplicate,
// and a manager stopped in between loses nothing: the next attempt finds
// the record by its marker and hands it over again.
//
// A holder claim that is gone or being deleted is handed nothing, and nil
// is returned: its release may already have searched for its records, and
// a record handed to it then would outlive it. The record stays with the
// claim it was made for, which gets the address once holder is gone. Should
// the holder's deletion begin while the record is handed over, the record
// is taken back.
func (r *ClaimReconciler) giveToHolder(ctx context.Context, backend backends.Reserver, kind poolkind.Kind, pool poolkind.Pool, rec backends.Record, ownMAC string,
	holder *ipamv1.IPAddress, movedTo string) (*ipamv1.IPAddressClaim, error) {
	holderKey := client.ObjectKey{Namespace: holder.Namespace, Name: holder.Spec.ClaimRef.Name}
	holderClaim, err := r.holderClaim(ctx, r.Client, holderKey)
	if err != nil || holderClaim == nil || !holderClaim.DeletionTimestamp.IsZero() {
		return nil, err
	}
	if err := reservation.MarkRecordMoved(ctx, r.Client, holder, movedTo); err != nil {
		return nil, err
	}
	// The record was made with the other claim's machine's MAC, where the
	// pool's records carry one: handed over, it serves the holder's machine.
	handed := rec
	handed.MAC = macaddress.Recorded(holderClaim, kind, pool)
	holderMarker := backends.Marker(r.Identity, holderKey.Namespace, holderKey.Name)
	if err := backend.Remark(ctx, handed, holderMarker); err != nil && !errors.Is(err, backends.ErrNotOwned) {
		return nil, fmt.Errorf("handing %s (%s) to claim %s, whose IPAddress holds it: %w", rec.Address.Addr(), rec.Reference, holderKey, err)
	}
	live, err := r.holderClaim(ctx, r.APIReader, holderKey)
	if err != nil {
		return nil, err
	}
	if live != nil && live.DeletionTimestamp.IsZero() {
		// The holder's release, after a clusterctl move or under Retain,
		// goes by the record its IPAddress names: this one now.
		// A plan stays a plan under its new marker (see backends' mark).
		handedTo := backends.Allocation{Reference: rec.Reference, Endpoint: backend.Endpoint(), Planned: rec.Planned}
		if err := reservation.NoteRecord(ctx, r.Client, holder, handedTo, holderMarker); err != nil {
			return nil, err
		}
		return holderClaim, nil
	}
	back := rec
	back.Marker, back.MAC = holderMarker, ownMAC
	if err := backend.Remark(ctx, back, rec.Marker); err != nil && !errors.Is(err, backends.ErrNotOwned) && !errors.Is(err, backends.ErrNotFound) {
		return nil, fmt.Errorf("taking %s (%s) back from claim %s, which is being deleted: %w", rec.Address.Addr(), rec.Reference, holderKey, err)
	}
	return nil, nil
}

// holderClaim reads the claim whose IPAddress holds an address that is
// being handed to it; nil when that claim is gone.
func (r *ClaimReconciler) holderClaim(ctx context.Context, c client.Reader, key client.ObjectKey) (*ipamv1.IPAddressClaim, error) {
	claim := &ipamv1.IPAddressClaim{}
	if err := c.Get(ctx, key, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading claim %s, whose IPAddress holds the address: %w", key, err)
	}
	return claim, nil
}
