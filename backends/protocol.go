package backends

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Protocol is the reservation protocol both IPAM systems follow, driven
// through a Driver: validation once and reused, with the pool's rules
// checked against what the driver resolved (the prefix length, the
// gateways: gateway.go); adoption by marker; batched allocation with its
// fallbacks (allocate.go); batched release with its settling (release.go);
// and the audit's half (audit.go). It is the Backend of every system: the
// drivers hold only what differs between them.
type Protocol[P any, S Source, R, Q any] struct {
	d Driver[P, S, R, Q]
	// The driver's optional roles, nil where it lacks one.
	requester AddressRequester[P, S, R]
	planner   PlanAdopter[R]
	lister    AuditLister[P]
	macWriter MACWriter
	// oldestFirst: the driver's Search lists records in the order they
	// were made (OldestFirst).
	oldestFirst bool

	o           Options
	preparation Prepared[P]
	allocations *Batcher[Claim, Allocation]
	releases    *Batcher[releaseCall, struct{}]
}

// Options are the rules of one pool that the protocol enforces whatever
// its system: both systems' configurations carry them.
type Options struct {
	// Gateway is the pool's gateway rule.
	Gateway Gateway
	// PrefixLength, when set, is the prefix length the machines configure,
	// narrowing or widening the networks of the pool's sources.
	PrefixLength int
	// Plans says whether the pool adopts records the IPAM team planned for
	// its claims (planned.go).
	Plans bool
	// Batch bounds batching.
	Batch BatchOptions
	// Uncertain, if set, is told of every create the system may still
	// apply after the protocol looked: its answer was lost, or it took
	// more than one attempt, so an attempt may still wait in the system (a
	// server queues requests behind its lock, and finishes those whose
	// client gave up). A record it makes then duplicates the claim's, and
	// only a later look finds it (see docs/audit.md, late records).
	Uncertain func()
}

// New returns the Backend of a pool whose system d drives, with the
// optional roles d offers. A pool that needs a role d lacks (o.Plans
// without PlanAdopter) is ErrInvalidConfig.
func New[P any, S Source, R, Q any](d Driver[P, S, R, Q], o Options) (*Protocol[P, S, R, Q], error) {
	p := &Protocol[P, S, R, Q]{d: d, o: o}
	p.requester, _ = any(d).(AddressRequester[P, S, R])
	p.planner, _ = any(d).(PlanAdopter[R])
	p.lister, _ = any(d).(AuditLister[P])
	p.macWriter, _ = any(d).(MACWriter)
	if o, ok := any(d).(OldestFirst); ok {
		p.oldestFirst = o.SearchesOldestFirst()
	}
	if o.Plans && p.planner == nil {
		return nil, fmt.Errorf("%w: %s adopts no planned records", ErrInvalidConfig, d.Name())
	}
	p.allocations = NewStagedBatcher(o.Batch, "allocate", p.lookThenAllocate, claimMarker)
	p.releases = NewBatcher(o.Batch, "release", p.releaseBatch)
	return p, nil
}

// Open is New for a driver constructor's results: its error, or the
// Backend.
func Open[P any, S Source, R, Q any](d Driver[P, S, R, Q], o Options, err error) (Backend, error) {
	if err != nil {
		return nil, err
	}
	return New(d, o)
}

// Role is an optional part of the Driver contract.
type Role string

// The optional roles a driver may offer.
const (
	RoleAddressRequester Role = "AddressRequester"
	RolePlanAdopter      Role = "PlanAdopter"
	RoleAuditLister      Role = "AuditLister"
	RoleMACWriter        Role = "MACWriter"
	RoleOldestFirst      Role = "OldestFirst"
)

// Offers says whether the driver offers role.
func (p *Protocol[P, S, R, Q]) Offers(role Role) bool {
	switch role {
	case RoleAddressRequester:
		return p.requester != nil
	case RolePlanAdopter:
		return p.planner != nil
	case RoleAuditLister:
		return p.lister != nil
	case RoleMACWriter:
		return p.macWriter != nil
	case RoleOldestFirst:
		return p.oldestFirst
	}
	return false
}

// Offers says whether b, a backend New built, offers role; a backend of
// another kind offers none.
func Offers(b any, role Role) bool {
	o, ok := b.(interface{ Offers(Role) bool })
	return ok && o.Offers(role)
}

var _ Backend = (*Protocol[any, Source, any, any])(nil)

// uncertain tells Options.Uncertain of a create the system may still
// apply.
func (p *Protocol[P, S, R, Q]) uncertain() {
	if p.o.Uncertain != nil {
		p.o.Uncertain()
	}
}

// Endpoint names the system the driver talks to.
func (p *Protocol[P, S, R, Q]) Endpoint() string { return p.d.Endpoint() }

// Validate prepares afresh (see Backend.Validate), then counts.
func (p *Protocol[P, S, R, Q]) Validate(ctx context.Context) (Usage, error) {
	return p.count(ctx, p.prepare)
}

// Usage counts the addresses of the pool's sources.
func (p *Protocol[P, S, R, Q]) Usage(ctx context.Context) (Usage, error) {
	return p.count(ctx, p.Prepared)
}

// count counts the sources of the pool that prepared returns.
func (p *Protocol[P, S, R, Q]) count(ctx context.Context, prepared func(context.Context) (P, error)) (Usage, error) {
	pool, err := prepared(ctx)
	if err != nil {
		return Usage{}, err
	}
	return p.d.Count(ctx, pool)
}

// prepare is Validate without the counts: what allocation depends on. A
// failed count must not stop an allocation.
func (p *Protocol[P, S, R, Q]) prepare(ctx context.Context) (P, error) {
	pool, err := p.d.Prepare(ctx)
	if err == nil {
		err = p.checkSources(ctx, pool)
	}
	if err != nil {
		var zero P
		return zero, err
	}
	p.preparation.Set(pool)
	return pool, nil
}

// Prepared returns what the last validation prepared, validating on first
// use.
func (p *Protocol[P, S, R, Q]) Prepared(ctx context.Context) (P, error) {
	return p.preparation.Get(ctx, func(ctx context.Context) error {
		_, err := p.prepare(ctx)
		return err
	})
}

// Lookup returns the claim's record in the pool's scope. A record moved out
// of the sources is not the claim's reservation in this pool:
// ErrOutsidePool says where it is.
func (p *Protocol[P, S, R, Q]) Lookup(ctx context.Context, claim Claim) (Allocation, error) {
	pool, err := p.Prepared(ctx)
	if err != nil {
		return Allocation{}, err
	}
	found, err := p.search(ctx, []string{claim.Marker}, InPool)
	if err != nil {
		return Allocation{}, err
	}
	own, err := p.own(pool, claim.Marker, found[claim.Marker])
	if err != nil {
		return Allocation{}, err
	}
	if len(own) == 0 {
		return Allocation{}, fmt.Errorf("%w: no record in %s carries %s", ErrNotFound, p.d.Name(), p.d.Label(claim.Marker))
	}
	return p.allocation(pool, own[0])
}

// Allocate returns the claim's address, reserving the next free one of the
// first source with space when the system holds none for the claim, or the
// one the claim requests (requested.go). Claims allocated at once share one
// marker search and one request (see lookThenAllocate).
func (p *Protocol[P, S, R, Q]) Allocate(ctx context.Context, claim Claim) (Allocation, error) {
	// Prepared first: a system refuses a search on a tag or attribute it
	// lacks, and a pool that does not validate fails its own claims only.
	pool, err := p.Prepared(ctx)
	if err != nil {
		return Allocation{}, err
	}
	alloc, err := p.allocations.Do(ctx, claim)
	if err != nil {
		return alloc, err
	}
	return CheckAnswer(ctx, p, claim, alloc, func(a netip.Addr) bool {
		return slices.ContainsFunc(p.d.Sources(pool), func(s S) bool { return s.Contains(a) })
	})
}

// Release deletes the claim's records, found by a marker search that needs
// no validation (see Backend.Release). Claims released at once share one
// search and one deletion (see releaseBatch).
func (p *Protocol[P, S, R, Q]) Release(ctx context.Context, claim Claim, last Reservation) error {
	_, err := p.releases.Do(ctx, releaseCall{claim: claim, last: last})
	return err
}

// Retire keeps the claim's records as tombstones instead of deleting them.
func (p *Protocol[P, S, R, Q]) Retire(ctx context.Context, claim Claim, last Reservation, at time.Time) error {
	tombstone := TombstoneMarker(claim.Marker, at)
	return p.release(ctx, claim, last, func(ctx context.Context, r R) error { return p.mark(ctx, r, tombstone, p.d.View(r).MAC) })
}

// Keep hands the claim's record to the IPAM team instead of deleting it:
// the record its machine uses loses its marker and stays (see kept). Any
// other record carrying the marker is a duplicate a resent request made,
// which no machine used: it is deleted, as a release would, not left to
// hold an address for no one.
func (p *Protocol[P, S, R, Q]) Keep(ctx context.Context, claim Claim, last Reservation) error {
	found, err := p.search(ctx, []string{claim.Marker}, Everywhere)
	records := found[claim.Marker]
	keep := p.kept(records, last)
	return p.settle(ctx, claim, last, records, err, func(ctx context.Context, r R) error {
		if p.d.View(r).Reference == keep {
			return p.d.Disown(ctx, r)
		}
		return p.d.Drop(ctx, r)
	}, true)
}

// kept names, of the records carrying the claim's marker, the one its
// machine uses: the one its reservation recorded, by reference (in this
// system), else by address (a record the audit restored, or the IPAM team
// renamed or made again, has another reference), else the first, which
// Search orders the claim's own. With none found, the recorded one, which
// the release reads by its reference.
func (p *Protocol[P, S, R, Q]) kept(records []R, last Reservation) string {
	here := last.Endpoint == "" || last.Endpoint == p.d.Endpoint()
	for _, r := range records {
		if v := p.d.View(r); here && last.Reference != "" && v.Reference == last.Reference {
			return v.Reference
		}
	}
	for _, r := range records {
		if v := p.d.View(r); last.Address.IsValid() && v.Address.IsValid() && v.Address.Addr() == last.Address.Addr() {
			return v.Reference
		}
	}
	switch {
	case len(records) > 0:
		return p.d.View(records[0]).Reference
	case here:
		return last.Reference
	}
	return ""
}

// search is Driver.Search, its error naming what was looked for.
func (p *Protocol[P, S, R, Q]) search(ctx context.Context, markers []string, scope Scope) (map[string][]R, error) {
	found, err := p.d.Search(ctx, markers, scope)
	switch {
	case err == nil:
		return found, nil
	case len(markers) == 1:
		return nil, fmt.Errorf("looking up marker %q: %w", markers[0], err)
	}
	return nil, fmt.Errorf("looking up the markers of %d claims: %w", len(markers), err)
}

// adoptOne finds the claim's records and keeps one (see keep); made are
// the records the caller's request was answered.
func (p *Protocol[P, S, R, Q]) adoptOne(ctx context.Context, pool P, marker string, made []R) (R, bool, error) {
	found, err := p.search(ctx, []string{marker}, InPool)
	if err != nil {
		var zero R
		return zero, false, err
	}
	return p.keep(ctx, pool, marker, found[marker], made)
}

// keep keeps the first of the records carrying the marker that the pool
// could have given, the claim's oldest where the driver searches in the
// order records were made. Of the others it deletes those in made, the
// records the caller's own request was answered (a resend's duplicates),
// and those at the kept record's address, which stays held whoever binds
// which: any other may be the record a second writer made and bound (a
// replica without leader election, or a leader paused past its lease), and
// its machine uses that address. They are left to the late-record sweep,
// which knows the record the claim is bound to, and the system is told it
// is uncertain so that a sweep comes. Records elsewhere are neither adopted
// nor deleted.
func (p *Protocol[P, S, R, Q]) keep(ctx context.Context, pool P, marker string, records, made []R) (R, bool, error) {
	var zero R
	own, err := p.own(pool, marker, records)
	if err != nil || len(own) == 0 {
		return zero, false, err
	}
	kept := p.d.View(own[0]).Address.Addr()
	left := false
	for _, extra := range own[1:] {
		v := p.d.View(extra)
		if v.Address.Addr() != kept && !slices.ContainsFunc(made, func(r R) bool { return p.d.View(r).Reference == v.Reference }) {
			left = true
			continue
		}
		if err := p.d.Drop(ctx, extra); err != nil {
			return zero, false, fmt.Errorf("releasing duplicate reservation %s: %w", p.d.Describe(extra), err)
		}
	}
	if left {
		p.uncertain()
	}
	return own[0], true, nil
}

// own keeps the records the pool could have given. When the marker is only
// elsewhere, the claim is told and gets nothing.
func (p *Protocol[P, S, R, Q]) own(pool P, marker string, records []R) ([]R, error) {
	if len(records) == 0 {
		return nil, nil
	}
	own := slices.DeleteFunc(slices.Clone(records), func(r R) bool { return !p.d.InPool(pool, r) })
	if len(own) == 0 {
		return nil, fmt.Errorf("%w: %s carries %s but lies in none of the pool's sources; nothing was handed out",
			ErrOutsidePool, p.d.Describe(records[0]), p.d.Label(marker))
	}
	return own, nil
}
