package reasons

import (
	"errors"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// Reasons set on claims besides CAPI's own.
const (
	// AddressAllocatedReason: the claim's IPAddress exists.
	AddressAllocatedReason = "AddressAllocated"
	// AddressReleasedReason: the address was released in the backend.
	AddressReleasedReason = "AddressReleased"
	// ReleaseSkippedReason: the backend's record no longer carries the
	// claim's marker, so it was left in place.
	ReleaseSkippedReason = "ReleaseSkipped"
	// ReleaseLeftReason: on deletion, the claim's record lives where the
	// pool no longer reaches (another endpoint, or a search the system now
	// refuses), so it was left in place; the message names it.
	ReleaseLeftReason = "ReleaseLeft"
	// AddressRetainedReason: the claim's reclaim policy is Retain: its
	// record was kept in the IPAM system for the IPAM team, without the
	// claim's marker.
	AddressRetainedReason = "AddressRetained"
	// ReclaimPolicyUnknownReason: the claim is being deleted and its
	// reclaim-policy annotation is neither Delete nor Retain: nothing is
	// released or kept until it is.
	ReclaimPolicyUnknownReason = "ReclaimPolicyUnknown"
	// ReleaseFailedReason: releasing the address failed and will be retried.
	ReleaseFailedReason = "ReleaseFailed"
	// ClusterNotFoundReason: the claim's Cluster does not exist.
	ClusterNotFoundReason = "ClusterNotFound"
	// AddressConflictReason: an IPAddress with the claim's name belongs to something else.
	AddressConflictReason = "AddressConflict"
	// AddressDeletedReason: the claim's IPAddress is being deleted; it is
	// written again with the same address.
	AddressDeletedReason = "AddressDeleted"
	// ReservationOutsidePoolReason: a record carries the claim's marker but
	// lies outside the pool's sources, so nothing is handed out.
	ReservationOutsidePoolReason = "ReservationOutsidePool"
	// UnusableAddressAnsweredReason: the IPAM system reserved an address
	// outside the pool's sources, or its gateway; it was released, never
	// bound, and the pool is validated at once.
	UnusableAddressAnsweredReason = "UnusableAddressAnswered"
	// AddressKeptReason: the claim is being deleted, but its
	// KeepAddressFinalizer keeps its address reserved (a live Cluster's
	// control-plane endpoint): nothing is released until that finalizer is
	// gone.
	AddressKeptReason = "AddressKept"
	// AddressHeldInClusterReason: the IPAM system reserved an address that
	// another live IPAddress of this management cluster holds in the same
	// scope; the record was handed to that claim and this claim gets
	// another address.
	AddressHeldInClusterReason = "AddressHeldInCluster"
	// RequestedAddressUnavailableReason: the claim requests an address (by
	// its annotation ipam-bridge.github.io/requested-address, or the pool's
	// preAllocations) that cannot be its: outside the pool's sources, the
	// gateway, held by a record without the claim's marker or by another
	// live IPAddress, or a request that cannot be read. The message names
	// the holder; the claim gets no other address.
	RequestedAddressUnavailableReason = "RequestedAddressUnavailable"
	// PlannedRecordConflictReason: the pool adopts planned records, and
	// the record the IPAM team planned for the claim is held by another
	// claim, which adopted it first. The message names the record and its
	// holder; the claim gets no other address.
	PlannedRecordConflictReason = "PlannedRecordConflict"
	// MACAddressUnknownReason: the claim's pool gives fixed addresses the
	// machine's MAC, which is not known yet (the BareMetalHost has no
	// bootMACAddress, the VSphereVM's device no MAC) or cannot be read; the
	// claim waits, and is woken when the MAC appears.
	MACAddressUnknownReason = "MACAddressUnknown"
	// MACAddressDeferredReason (event, and condition MACAddressCurrent
	// False): the claim's pool gives fixed addresses the machine's MAC, but
	// the MAC cannot be known before the claim is bound (a CAPV device
	// without spec macAddr); the address is reserved without one, and the
	// MAC written into it once the machine reports it.
	MACAddressDeferredReason = "MACAddressDeferred"
	// MACAddressWrittenReason (condition MACAddressCurrent True, and an
	// event): the machine's MAC, which it reported only after the claim was
	// bound, was written into the claim's fixed address.
	MACAddressWrittenReason = "MACAddressWritten"
	// MACAddressNotWrittenReason (condition MACAddressCurrent False, and a
	// Warning): the MAC could not be written into the claim's record (the
	// grid refused it, the record is gone or no longer the claim's); it is
	// not tried again, the message says what to do.
	MACAddressNotWrittenReason = "MACAddressNotWritten"
	// MACAddressInUseReason: the IPAM system refused the machine's MAC,
	// which another of its records holds; the message names the MAC and the
	// holder. Nothing was reserved for the claim.
	MACAddressInUseReason = "MACAddressInUse"
	// ReservationPendingReason: the IPAM system has not answered the
	// claim's reservation within slowAnswer (slow, or throttling); the
	// answer brings the claim back.
	ReservationPendingReason = "ReservationPending"
	// ReleasePendingReason: as ReservationPendingReason, for the release of
	// a claim being deleted.
	ReleasePendingReason = "ReleasePending"
	// PoolNotFoundReason: the pool a claim being deleted referenced is gone.
	PoolNotFoundReason = "PoolNotFound"
	// ReservationRestoredReason (event): an audit found a bound claim's
	// record deleted in the IPAM system and reserved its address again.
	ReservationRestoredReason = "ReservationRestored"
	// AuditActionReason (event): an audit deleted an orphan, a duplicate
	// or an expired tombstone, or restored a record.
	AuditActionReason = "AuditAction"
)

// PoolReason maps a failure to build or validate a pool's backend to the
// pool's Ready reason.
func PoolReason(err error) string {
	var unusable *poolkind.UnusablePoolError
	switch {
	case errors.As(err, &unusable):
		return unusable.Reason
	case errors.Is(err, backends.ErrUnauthorized):
		return v1alpha1.AuthenticationFailedReason
	case errors.Is(err, backends.ErrForbidden):
		return v1alpha1.PermissionDeniedReason
	case errors.Is(err, backends.ErrSetupRequired):
		return v1alpha1.SetupRequiredReason
	case errors.Is(err, backends.ErrNotFound):
		return v1alpha1.SourceNotFoundReason
	case errors.Is(err, backends.ErrInvalidConfig):
		return v1alpha1.InvalidConfigurationReason
	case errors.Is(err, backends.ErrThrottled):
		return v1alpha1.BackendThrottledReason
	default:
		return v1alpha1.BackendUnavailableReason
	}
}

// ClaimReason maps an allocation failure to the claim's Ready reason.
func ClaimReason(err error) string {
	var unusable *poolkind.UnusablePoolError
	switch {
	case errors.Is(err, backends.ErrRequestedUnavailable):
		return RequestedAddressUnavailableReason
	case errors.Is(err, backends.ErrPlannedConflict):
		return PlannedRecordConflictReason
	case errors.Is(err, backends.ErrMACAddressInUse):
		return MACAddressInUseReason
	case errors.Is(err, backends.ErrExhausted):
		return ipamv1.IPAddressClaimReadyPoolExhaustedReason
	case errors.Is(err, backends.ErrOutsidePool):
		return ReservationOutsidePoolReason
	case errors.Is(err, backends.ErrUnusableAnswer):
		return UnusableAddressAnsweredReason
	case errors.Is(err, backends.ErrThrottled):
		return v1alpha1.BackendThrottledReason
	case errors.As(err, &unusable):
		return ipamv1.IPAddressClaimReadyPoolNotReadyReason
	default:
		return ipamv1.IPAddressClaimReadyAllocationFailedReason
	}
}
