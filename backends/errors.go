package backends

import (
	"errors"
	"fmt"
	"net/netip"
)

// Kinds of failure a Backend reports, wrapped with context. The reconcilers
// map them to condition reasons, so a backend must wrap the right one.
var (
	// ErrExhausted: no source of the pool has a free address.
	ErrExhausted = errors.New("no free address left in the pool")
	// ErrNotFound: the object looked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: the system refused the credentials.
	ErrUnauthorized = errors.New("credentials refused")
	// ErrForbidden: the credentials lack a permission.
	ErrForbidden = errors.New("permission denied")
	// ErrConflict: the system refused a change that conflicts with its data.
	ErrConflict = errors.New("conflict")
	// ErrInvalidConfig: the pool's configuration cannot work with this system.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrSetupRequired: the system lacks an object the provider needs and may not create.
	ErrSetupRequired = errors.New("setup required")
	// ErrUnavailable: the system could not be reached or failed.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrThrottled: the system refused requests as too many (HTTP 429), or
	// asked for a pause longer than a request may wait. It is an
	// ErrUnavailable: retrying later is the cure.
	ErrThrottled = fmt.Errorf("%w: throttled by the IPAM system", ErrUnavailable)
	// ErrNotOwned: a record holds the address but not the claim's marker,
	// so the provider must leave it alone.
	ErrNotOwned = errors.New("record does not carry the claim's marker")
	// ErrOutsidePool: a record carries the claim's marker but lies outside
	// the pool's sources, so the pool could not have given it.
	ErrOutsidePool = errors.New("reservation outside the pool")
	// ErrUnreachable: the claim's record lives where the pool's current
	// configuration does not reach (another endpoint, or a search the system
	// now refuses), so it was left in place.
	ErrUnreachable = errors.New("record not reachable from the pool")
	// ErrAddressTaken: another record, not the claim's, holds the address.
	ErrAddressTaken = errors.New("address held by another record")
	// ErrUnusableAnswer: the system reserved an address the pool must never
	// bind (outside its sources, or its gateway); the reservation was
	// released.
	ErrUnusableAnswer = errors.New("the IPAM system answered an address the pool may not give")
	// ErrRequestedUnavailable: the address a claim requested cannot be its
	// (outside the pool's sources, the gateway, or held by someone else),
	// and the claim gets no other. A *RequestedUnavailableError says why
	// and who holds it.
	ErrRequestedUnavailable = errors.New("requested address unavailable")
	// ErrPlannedConflict: the record the IPAM team planned for the claim
	// is another claim's (it adopted it first), and the claim gets no
	// other. A *PlannedConflictError names the record and its holder.
	ErrPlannedConflict = errors.New("planned record held by another claim")
	// ErrMACAddressInUse: the system refused a DHCP reservation for the
	// claim's MAC (Claim.MAC) because another of its records holds that
	// MAC; nothing was reserved. The message names the MAC and the holder.
	ErrMACAddressInUse = errors.New("MAC address held by another record")
	// ErrUnsupported: the system's driver does not offer what the
	// operation needs (an optional role of Driver).
	ErrUnsupported = errors.New("not offered by this IPAM system's driver")
)

// PlannedConflictError is an ErrPlannedConflict: the record planned for
// the claim, and what holds it. Nothing was reserved for the claim.
type PlannedConflictError struct {
	// Record names the planned record as the IPAM team reads it.
	Record string
	// Holder names the marker the record carries instead of the claim's.
	Holder string
}

func (e *PlannedConflictError) Error() string {
	return fmt.Sprintf("the record planned for this claim, %s, is held by %s: another claim adopted it first; the claim gets no other address",
		e.Record, e.Holder)
}

// Unwrap makes the error an ErrPlannedConflict.
func (e *PlannedConflictError) Unwrap() error { return ErrPlannedConflict }

// RequestedUnavailableError is an ErrRequestedUnavailable: why the address
// a claim requested is not its, and who holds it. Nothing was reserved for
// the claim.
type RequestedUnavailableError struct {
	// Address is the address the claim requested.
	Address netip.Addr
	// Why says it in the IPAM team's words: where the address lies, or who
	// holds it.
	Why string
	// Holders are the records that hold the address, as far as the
	// system names them; none when the address is unusable for another
	// reason.
	Holders []Record
}

func (e *RequestedUnavailableError) Error() string {
	return fmt.Sprintf("requested address %s is unavailable: %s", e.Address, e.Why)
}

// Unwrap makes the error an ErrRequestedUnavailable.
func (e *RequestedUnavailableError) Unwrap() error { return ErrRequestedUnavailable }
