package backends

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Protocol is the reservation protocol both IPAM systems follow, driven
// through a Driver: validation once and reused, adoption by marker, batched
// allocation with its fallbacks (allocate.go) and batched release with its
// settling (release.go). A system's Backend embeds it, so that these rules
// exist once, and adds what is its own (the audit's listings and repairs).
type Protocol[P any, S Source, R, Q any] struct {
	d Driver[P, S, R, Q]
	// owner is the Backend embedding the protocol: CheckAnswer releases
	// through it, and its Endpoint says where a reservation lives.
	owner       Backend
	preparation Prepared[P]
	allocations *Batcher[Claim, Allocation]
	releases    *Batcher[releaseCall, struct{}]
}

// NewProtocol returns the protocol of owner, driven by d, batching as o says.
func NewProtocol[P any, S Source, R, Q any](owner Backend, d Driver[P, S, R, Q], o BatchOptions) *Protocol[P, S, R, Q] {
	p := &Protocol[P, S, R, Q]{d: d, owner: owner}
	p.allocations = NewBatcher(o, "allocate", p.allocateBatch)
	p.releases = NewBatcher(o, "release", p.releaseBatch)
	return p
}

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
		p.preparation.Set(pool)
	}
	return pool, err
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
	return p.d.Allocation(pool, own[0])
}

// Allocate returns the claim's address, reserving the next free one of the
// first source with space when the system holds none for the claim, or the
// one the claim requests (requested.go). Claims allocated at once share one
// marker search and one request (see allocateBatch).
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
	return CheckAnswer(ctx, p.owner, claim, alloc, func(a netip.Addr) bool {
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
	return p.release(ctx, claim, last, func(ctx context.Context, r R) error { return p.d.Mark(ctx, r, tombstone) })
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

// adoptOne finds the claim's records and keeps one (see keep).
func (p *Protocol[P, S, R, Q]) adoptOne(ctx context.Context, pool P, marker string) (R, bool, error) {
	found, err := p.search(ctx, []string{marker}, InPool)
	if err != nil {
		var zero R
		return zero, false, err
	}
	return p.keep(ctx, pool, marker, found[marker])
}

// keep keeps the first of the records carrying the marker that the pool
// could have given, and deletes the others: only a retried request can
// have made them. Records elsewhere are neither adopted nor deleted.
func (p *Protocol[P, S, R, Q]) keep(ctx context.Context, pool P, marker string, records []R) (R, bool, error) {
	var zero R
	own, err := p.own(pool, marker, records)
	if err != nil || len(own) == 0 {
		return zero, false, err
	}
	for _, extra := range own[1:] {
		if err := p.d.Drop(ctx, extra); err != nil {
			return zero, false, fmt.Errorf("releasing duplicate reservation %s: %w", p.d.Describe(extra), err)
		}
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
