// Package backends defines the contract between the shared claim reconciler
// and the external IPAM systems. Implementations know nothing of Kubernetes:
// they reserve, find and release addresses in their system, keyed by a
// reservation marker that identifies the claim.
package backends

import (
	"context"
	"encoding/binary"
	"math"
	"net/netip"
	"time"
)

// Backend is one configured pool in an external IPAM system: what the pool
// reconciler (Prober), the claim reconciler (Reserver) and the audit
// (Auditor) each ask of it.
//
// Every method is safe for concurrent use and idempotent: calling Allocate
// twice for the same claim returns the same address, and Release of an
// address that is already gone succeeds.
type Backend interface {
	Prober
	Reserver
	Auditor
}

// Prober is what the pool reconciler asks: does the configuration work, and
// how full is the pool.
type Prober interface {
	// Validate checks the configuration against the system (credentials work,
	// sources exist, the gateway lies inside them) and prepares what the
	// provider needs there, such as its tag or marker field. It returns the
	// address counts of the pool's sources.
	Validate(ctx context.Context) (Usage, error)

	// Usage returns the address counts of the pool's sources.
	Usage(ctx context.Context) (Usage, error)
}

// Reserver is the claim's path: reserve, find and release its address.
type Reserver interface {
	// Endpoint names the system the backend talks to, as recorded in
	// Reservation.Endpoint.
	Endpoint() string

	// Allocate returns the address reserved for the claim, reserving one if
	// the system holds none carrying the claim's marker: the next free
	// address, or the one the claim requests (Claim.Requested). If more
	// than one record carries the marker (a retried request), it keeps one
	// and releases the others. A record carrying the marker is returned
	// whatever its address: the caller decides about a claim that requests
	// another one.
	Allocate(ctx context.Context, claim Claim) (Allocation, error)

	// Lookup returns the address reserved for the claim, or ErrNotFound.
	Lookup(ctx context.Context, claim Claim) (Allocation, error)

	// Release deletes every record that carries the claim's marker, and the
	// record last names if it still does. It needs only the connection: no
	// validation, so a pool whose sources, gateway or references changed in
	// the system can still release. If nothing was released but last's
	// record is still there under another or no marker, it leaves it alone
	// and returns ErrNotOwned; if last's record lives where the pool no
	// longer reaches, ErrUnreachable. Nothing to release is not an error.
	Release(ctx context.Context, claim Claim, last Reservation) error

	// Retire is Release for a pool with a grace period: instead of deleting
	// the claim's records it marks them TombstoneMarker(marker, at), so that
	// their addresses are not handed out again until an audit deletes them.
	Retire(ctx context.Context, claim Claim, last Reservation, at time.Time) error

	// Keep is Release for a claim whose record goes to the IPAM team (a
	// claim whose reclaim policy is Retain): it removes the claim's marker
	// from the record its machine uses (the one last names, else the one
	// at last's address, as after a restore under a new reference) and
	// keeps it, so that nothing of the provider's holds it any more and
	// nothing hands its address out; other records carrying the marker
	// (duplicates of a resent request) are deleted. A recorded record
	// found without a marker was kept by an attempt whose answer was lost;
	// one under another marker is ErrNotOwned, as for Release.
	Keep(ctx context.Context, claim Claim, last Reservation) error

	// Remark sets a record's marker to marker if it still carries
	// rec.Marker (ErrNotOwned otherwise); a tombstone marker also marks the
	// record as no longer in use where the system can say so. The guard
	// uses it to hand a record the system answered for one claim to the
	// claim whose machine already uses that address: where the system's
	// records carry a MAC, the record of the provider's own then serves
	// rec.MAC, that machine's, or no machine if it is "".
	Remark(ctx context.Context, rec Record, marker string) error

	// Delete deletes a record if it still carries rec.Marker (ErrNotOwned
	// otherwise). A record that is gone is not an error. A claim whose
	// IPAddress another writer created first drops its own reservation.
	Delete(ctx context.Context, rec Record) error

	// MACWriter writes the MAC a machine reported after its claim was
	// bound into the record reserved without one; ErrNoMACMatch where the
	// system's records serve no DHCP.
	MACWriter
}

// Auditor is what the audit asks: list the pool's records and this
// cluster's records outside it, and repair what drifted.
type Auditor interface {
	Endpoint() string
	Lookup(ctx context.Context, claim Claim) (Allocation, error)
	Delete(ctx context.Context, rec Record) error

	// Records lists, in one server-filtered and paginated listing, the
	// records within the pool's sources whose marker begins with prefix.
	Records(ctx context.Context, prefix string) ([]Record, error)

	// Strays lists the records whose marker begins with prefix that lie
	// outside the pool's sources (another VRF or network view, or an
	// address no source holds), wherever the IPAM team moved them. The
	// listing behind it is the same for every pool of the system, the
	// credentials and the prefix: one that began at most maxAge ago, for
	// any such pool, may serve again; 0 always lists.
	Strays(ctx context.Context, prefix string, maxAge time.Duration) ([]Record, error)

	// Restore reserves address for the claim again, carrying its marker,
	// after its record was deleted outside the provider. A record that
	// holds the address under a marker the claim holds (see Claim.Holds) is
	// marked as the claim's; any other record holding it, another
	// management cluster's above all, gives ErrAddressTaken. An address outside the pool's sources gives
	// ErrOutsidePool.
	Restore(ctx context.Context, claim Claim, address netip.Prefix) (Allocation, error)
}

// Record is a reservation as an audit lists it.
type Record struct {
	Address netip.Prefix
	Marker  string
	// Reference is the system's identifier of the record.
	Reference string
	// Planned: the IPAM team planned the record and the claim adopted it
	// (see Claim and docs/planned-records.md). Releasing it removes the
	// marker and keeps the record, as planned.
	Planned bool
	// MAC is the MAC the record serves as the system's DHCP answers it;
	// given to Remark, the one a record handed to another claim serves
	// afterwards. "" for none.
	MAC string
}

// Reservation says where a claim's address was reserved, as recorded when
// it was; a field is empty when unknown.
type Reservation struct {
	Address netip.Prefix
	// Endpoint is Backend.Endpoint of the backend that reserved it.
	Endpoint string
	// Reference is the system's identifier of the record.
	Reference string
	// Planned: the record was planned by the IPAM team and adopted. A
	// release that finds it without a marker has already returned it.
	Planned bool
	// Marker is the marker the record was made or last marked with, as
	// recorded then; "" for a reservation recorded before markers were.
	Marker string
}

// Claim identifies the owner of a reservation.
type Claim struct {
	// Marker is the claim's reservation marker (see Marker).
	Marker string
	// Recorded is the marker recorded with the claim's reservation
	// (Reservation.Marker), "" when none was: it differs from Marker after
	// a clusterctl move, until the claim's record is marked anew. Only a
	// record carrying Marker or Recorded is the claim's (see Holds).
	Recorded string
	// Namespace, Name and ClusterName describe the claim to the IPAM team,
	// for example in the reservation's description or DNS name.
	Namespace   string
	Name        string
	ClusterName string
	// MachineName is the Machine the address is for, as the caller
	// resolved it (it may fall back to the claim's name).
	MachineName string
	// Requested is the address the claim asks for (a requested-address
	// annotation, or the pool's pre-allocation for it), or the zero Addr
	// for the next free one. A claim that requests an address gets that
	// address or none: Allocate answers a *RequestedUnavailableError when
	// the address lies in none of the pool's sources, is one they never
	// give (the gateway, a network or broadcast address), or is held by a
	// record that does not carry the claim's marker.
	Requested netip.Addr
	// MAC is the hardware address of the machine's interface the address
	// is for, lower case with colons, or "" for none (the caller sets it
	// only for pools that ask for it). A backend that makes DHCP
	// reservations gives the claim's new record this MAC; one whose system
	// refuses the MAC as another record's answers ErrMACAddressInUse.
	MAC string
	// Fresh says that the caller knows of no reservation the claim could
	// hold: it has just persisted the claim's release finalizer on a
	// version of the claim that had none, and nothing is reserved before
	// that finalizer is. A fresh claim that takes the next free address is
	// reserved at once, and the search for an earlier record carrying its
	// marker (one left by a finalizer someone removed, say) runs beside
	// the request instead of before it: a claim it finds one for is
	// answered an error, and its next call, not fresh, keeps one record.
	Fresh bool
}

// Allocation is an address reserved in the external system.
type Allocation struct {
	// Address with the prefix length to configure on the machine.
	Address netip.Prefix
	// Gateway, or the zero Addr when the pool sets none.
	Gateway netip.Addr
	// Reference is the system's identifier of the record.
	Reference string
	// Endpoint is the system that holds the record (Backend.Endpoint).
	Endpoint string
	// Scope names the address space of the record within its system (a
	// NetBox VRF, an Infoblox network view): one address may be held once
	// per scope, and in several scopes at once.
	Scope string
	// Planned: the record is a plan the claim adopted (see Record).
	Planned bool
	// MAC is the hardware address the system's DHCP serves the address to,
	// lower case with colons, as the record carries it; "" when it serves
	// it to no one (a reservation without a MAC, an IPv6 fixed address, a
	// host address without DHCP, a system without DHCP). A record the
	// claim did not make just now (a plan it adopted, one its marker found)
	// carries what it carries, whatever Claim.MAC asked for.
	MAC string
}

// Reservation is where the allocation lives, for a later release.
func (a Allocation) Reservation() Reservation {
	return Reservation{Address: a.Address, Endpoint: a.Endpoint, Reference: a.Reference, Planned: a.Planned}
}

// Usage counts the addresses of a pool's sources.
type Usage struct {
	Total int64
	Used  int64
}

// Free is the number of addresses left.
func (u Usage) Free() int64 {
	if u.Used > u.Total {
		return 0
	}
	return u.Total - u.Used
}

// CountAddresses counts the addresses from first to last, saturating at
// MaxInt64 (large IPv6 ranges).
func CountAddresses(first, last netip.Addr) int64 {
	a, z := first.As16(), last.As16()
	if [8]byte(a[:8]) != [8]byte(z[:8]) {
		return math.MaxInt64
	}
	d := binary.BigEndian.Uint64(z[8:]) - binary.BigEndian.Uint64(a[8:])
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(d) + 1
}

// Pow2 is 2 to the bits, saturating at MaxInt64: the addresses of a
// network with bits host bits, or the blocks of one length in a parent.
func Pow2(bits int) int64 {
	if bits >= 63 {
		return math.MaxInt64
	}
	return int64(1) << bits
}

// SaturatingAdd adds two counts, saturating at MaxInt64.
func SaturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
