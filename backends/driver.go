package backends

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// Driver is what the reservation protocol asks of every IPAM system: its
// requests and answers, nothing of the protocol's rules (New builds the
// Backend). P is what a validation prepares (the resolved sources, the IDs
// requests name), S a resolved source, R a record as the system answers
// it, Q the request that creates one record. It is the core every system
// must offer to reserve, look up and release; what only some pools need is
// in optional roles a driver may also implement, which New looks for once:
// AddressRequester, PlanAdopter, AuditLister and MACWriter (see
// docs/drivers.md).
type Driver[P any, S Source, R, Q any] interface {
	// Endpoint names the system, as recorded in Reservation.Endpoint.
	Endpoint() string
	// Prepare checks the configuration against the system and resolves
	// what allocation needs (see Backend.Validate); the protocol then
	// checks the prefix length and the gateways of the sources it returns.
	Prepare(ctx context.Context) (P, error)
	// Sources are the prepared sources, in the order allocation tries them.
	Sources(pool P) []S
	// Count counts the addresses of the prepared sources.
	Count(ctx context.Context, pool P) (Usage, error)
	// Unheld returns those of gws, addresses of src, that nothing holds in
	// src's address space (its VRF, its network view): the system could
	// hand them to a machine. It may stop at the first.
	Unheld(ctx context.Context, src S, gws []netip.Addr) ([]netip.Addr, error)

	// Request builds the request that creates the claim's record at the
	// next free address of src; its error is the claim's alone.
	Request(pool P, claim Claim, src S) (Q, error)
	// Create sends requests to src as one request to the system, which
	// applies all of them or none, and returns the records it answered.
	Create(ctx context.Context, src S, requests []Q) ([]R, error)
	// Verdict says what an error of Create means, and what the system said
	// in it, in its own words.
	Verdict(err error) (v Verdict, said string)

	// Search returns the records that carry each marker in scope (InPool
	// or Everywhere), each marker's in the order to keep them: the first is
	// the claim's, the others duplicates of a retried request.
	Search(ctx context.Context, markers []string, scope Scope) (map[string][]R, error)
	// Get reads the record a reference names; found is false when it is
	// gone.
	Get(ctx context.Context, ref string) (r R, found bool, err error)
	// AtAddress lists the pool's records that hold addr, whatever their
	// marker. pool is the zero P when the pool does not validate: a
	// release needs no validation.
	AtAddress(ctx context.Context, pool P, addr netip.Addr) ([]R, error)
	// Drop deletes a record; one already gone is no error.
	Drop(ctx context.Context, r R) error
	// DropAll deletes records, none of them planned, with one request:
	// all of them, or none when it fails.
	DropAll(ctx context.Context, records []R) error
	// Mark sets the marker of a record the provider made, or of a plan to
	// the planned form of a marker (the protocol handles plans); a
	// tombstone retires it (see Backend.Retire). Where the system's
	// records serve a machine's MAC, the record serves mac from then on,
	// or no machine when mac is "" (see Backend.Remark); View(r).MAC keeps
	// the one it serves.
	Mark(ctx context.Context, r R, marker, mac string) error
	// Disown removes the marker of a record that still carries the one it
	// was read with, and keeps the record for the IPAM team: a plan the
	// claim adopted goes back (Drop), a record its claim retains stays
	// (Backend.Keep). One already gone is no error.
	Disown(ctx context.Context, r R) error

	// Unusable says why src, which contains addr, may still not give it
	// to a claim that requests it by the system's own rules (a range the
	// system counts as fully used, a network or broadcast address), or ""
	// when it may. The gateway the machine would get is the protocol's.
	Unusable(src S, addr netip.Addr) string

	// View is what the protocol reads of a record.
	View(r R) Record
	// InPool says whether the pool could have given the record: it lies in
	// one of the pool's sources (and their VRF).
	InPool(pool P, r R) bool
	// Allocation turns a record into the claim's allocation, its address
	// with the prefix length the system records for its network, in its
	// scope; the protocol sets the machine's prefix length, the gateway
	// and the endpoint.
	Allocation(pool P, r R) (Allocation, error)

	// Describe names a record, Label a marker and Name the system, for
	// errors.
	Describe(r R) string
	Label(marker string) string
	Name() string
}

// AddressRequester is the role of a driver that creates a record at a
// given address: a claim's requested address (requested.go) and the
// audit's restore of a record the IPAM team deleted (audit.go). Without
// it, a claim that requests an address is refused, and a restore that
// must create a record fails with ErrUnsupported.
type AddressRequester[P any, S Source, R any] interface {
	// Holders lists whatever holds addr in src's address space (its VRF,
	// its network view): records of the pool's kind whatever their
	// marker, and anything else the system counts as using the address.
	// They come oldest first if CreationOrdered.
	Holders(ctx context.Context, src S, addr netip.Addr) ([]R, error)
	// CreationOrdered says whether Holders lists records in the order they
	// were made: then the oldest of records made at once at one address
	// keeps it, else each yields to the others.
	CreationOrdered() bool
	// CreateAt creates the claim's record at addr in src, as Create does
	// at the next free address. A refusal because something holds the
	// address is an ErrAddressTaken quoting the system.
	CreateAt(ctx context.Context, pool P, claim Claim, src S, addr netip.Addr) (R, error)
}

// OldestFirst is the role of a driver whose Search lists each marker's
// records in the order they were made, as NetBox's IDs do. Only such a
// driver's pools reserve fresh claims (Claim.Fresh) before their marker
// search answers: a record made for a fresh claim then comes after any
// record the claim held before, so that keep, whoever calls it, keeps the
// earlier one. A driver that orders records otherwise (Infoblox, by
// address) searches for every claim first.
type OldestFirst interface {
	SearchesOldestFirst() bool
}

// PlanAdopter is the role of a driver that adopts the records the IPAM
// team planned for a claim (planned.go, Options.Plans). A pool that adopts
// plans cannot be built on a driver without it.
type PlanAdopter[R any] interface {
	// Planned lists the records the IPAM team planned for the claim in
	// the pool's sources (by the name the pool renders for the claim, and
	// the pool's planned tag, status or attribute), whatever their marker,
	// in the order to adopt them. It is asked only of a pool that adopts
	// planned records (Options.Plans). Every read of a record (View) tells
	// a planned record the claim adopted (Record.Planned), and Drop returns
	// such a record to the IPAM team instead of deleting it.
	Planned(ctx context.Context, claim Claim) ([]R, error)
	// Adopt writes the claim's marker on a planned record, saying that it
	// was planned, and changes nothing the IPAM team set.
	Adopt(ctx context.Context, r R, marker string) error
}

// AuditLister is the role of a driver that lists records by the beginning
// of their marker, which the audit's listings need (Backend.Records,
// Backend.Strays). Without it, the pool's audit fails with ErrUnsupported.
type AuditLister[P any] interface {
	// Marked lists, for an audit, the records whose marker begins with
	// prefix, in the pool's sources (scope InPool) or outside them (scope
	// Outside), in one server-filtered and paginated listing. Outside, a
	// listing of the same system, credentials and prefix that began at
	// most maxAge ago, for any pool, may serve again (SharedListing); 0
	// always lists.
	Marked(ctx context.Context, pool P, prefix string, scope Scope, maxAge time.Duration) ([]Record, error)
}

// Source is a resolved source of a pool.
type Source interface {
	fmt.Stringer
	// Contains says whether the source hands out a.
	Contains(a netip.Addr) bool
	// Subnet is the network that holds the source's addresses, with the
	// prefix length the system records for them.
	Subnet() netip.Prefix
	// Bounds are the first and last addresses the source hands out.
	Bounds() (first, last netip.Addr)
}

// Scope says where a marker search or listing looks.
type Scope int

const (
	// InPool: where the pool's records live (its VRFs, its network view).
	// Allocation and Lookup adopt only what the pool could have given.
	InPool Scope = iota
	// Everywhere: wherever the IPAM team may have moved a record. A release
	// deletes the claim's records there too: the marker names this cluster
	// and claim, so they are the claim's and nobody else's.
	Everywhere
	// Outside: everywhere but the pool's sources (another VRF or network
	// view, an address no source holds), where an audit looks for strays.
	Outside
)

// Verdict is what a system's answer to a create means.
type Verdict int

const (
	// Done: the records were created.
	Done Verdict = iota
	// Refused: the system answered no; nothing was created.
	Refused
	// Full: refused for want of free addresses in the source.
	Full
	// Unanswered: no answer, or a server error: the request may have been
	// applied, so the markers decide.
	Unanswered
)
