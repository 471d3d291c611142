package backends

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// The audit's half of the protocol: re-marking and deleting one record by
// its reference, and restoring a claim's reservation at its address. Each
// reads the record afresh and writes only what still carries the marker it
// was listed with; the driver makes the write conditional where its system
// can (NetBox's If-Match) and never resends it blindly where it cannot.

// Remark sets the marker of the record rec names, if it still carries
// rec.Marker, handing it to the claim marker names (see Backend.Remark).
func (p *Protocol[P, S, R, Q]) Remark(ctx context.Context, rec Record, marker string) error {
	r, err := p.owned(ctx, rec)
	if err != nil {
		return err
	}
	return p.mark(ctx, r, marker, rec.MAC)
}

// mark sets a record's marker, and has it serve mac where the system's
// records serve one (see Driver.Mark). A planned record keeps saying that
// it was planned under its new marker, and the MAC the IPAM team gave it;
// retired, it goes back to the IPAM team as they planned it (see
// Driver.Drop): its plan holds the address.
func (p *Protocol[P, S, R, Q]) mark(ctx context.Context, r R, marker, mac string) error {
	if v := p.d.View(r); v.Planned {
		if _, _, tombstone := ParseTombstone(marker); tombstone {
			return p.d.Drop(ctx, r)
		}
		marker, mac = PlannedMarker(marker), v.MAC
	}
	return p.d.Mark(ctx, r, marker, mac)
}

// Delete deletes the record rec names if it still carries rec.Marker; a
// planned record goes back to the IPAM team, and one that is gone is no
// error.
func (p *Protocol[P, S, R, Q]) Delete(ctx context.Context, rec Record) error {
	r, err := p.owned(ctx, rec)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return p.d.Drop(ctx, r)
}

// owned reads the record rec names afresh and checks that it still carries
// the marker it was listed with: someone may have taken it over since.
func (p *Protocol[P, S, R, Q]) owned(ctx context.Context, rec Record) (R, error) {
	var zero R
	r, found, err := p.d.Get(ctx, rec.Reference)
	switch {
	case err != nil:
		return zero, err
	case !found:
		return zero, fmt.Errorf("%w: %s", ErrNotFound, rec.Reference)
	}
	if marker := p.d.View(r).Marker; marker != rec.Marker {
		return zero, fmt.Errorf("%w: %s now carries %s, not %s; it was left in place",
			ErrNotOwned, p.d.Describe(r), p.d.Label(marker), p.d.Label(rec.Marker))
	}
	return r, nil
}

// Restore reserves address for the claim again after its record was
// deleted outside the provider (see Backend.Restore): a record at the
// address under a marker the claim holds becomes the claim's, anything
// else there is ErrAddressTaken, and a free address gets the claim's
// record as an allocation would have made it, at that address.
func (p *Protocol[P, S, R, Q]) Restore(ctx context.Context, claim Claim, address netip.Prefix) (Allocation, error) {
	pool, err := p.Prepared(ctx)
	if err != nil {
		return Allocation{}, err
	}
	addr := address.Addr()
	var src S
	found := false
	for _, s := range p.d.Sources(pool) {
		if s.Contains(addr) {
			src, found = s, true
			break
		}
	}
	if !found {
		return Allocation{}, fmt.Errorf("%w: %s lies in none of the pool's sources", ErrOutsidePool, addr)
	}
	held, err := p.d.AtAddress(ctx, pool, addr)
	if err != nil {
		return Allocation{}, err
	}
	if len(held) > 0 {
		r := held[0]
		v := p.d.View(r)
		switch {
		case v.Marker == claim.Marker:
		case claim.Holds(v.Marker):
			// The claim's own record under the marker it was recorded
			// with (clusterctl move, or from before identities): it
			// becomes the claim's, if it still carries that marker.
			if r, err = p.owned(ctx, v); err != nil {
				return Allocation{}, err
			}
			if err := p.mark(ctx, r, claim.Marker, v.MAC); err != nil {
				return Allocation{}, err
			}
		default:
			owner := p.d.Label(v.Marker)
			if v.Marker == "" {
				owner = "no marker"
			}
			return Allocation{}, fmt.Errorf("%w: %s holds it, with %s", ErrAddressTaken, p.d.Describe(r), owner)
		}
		return p.allocation(pool, r)
	}
	if p.requester == nil {
		return Allocation{}, fmt.Errorf("restoring %s: creating a record at a given address: %w", addr, ErrUnsupported)
	}
	created, err := p.requester.CreateAt(ctx, pool, claim, src, addr)
	if err != nil {
		// An answer lost after the system applied the create, or a resent
		// create that then found the address taken: the record at the
		// address under the claim's marker is the one this restore made.
		if r, ok := p.markedAt(ctx, pool, addr, claim.Marker); ok {
			return p.allocation(pool, r)
		}
	}
	switch {
	case errors.Is(err, ErrAddressTaken) || errors.Is(err, ErrConflict):
		return Allocation{}, fmt.Errorf("%w: %s was taken while it was being restored: %v", ErrAddressTaken, addr, err)
	case err != nil:
		return Allocation{}, fmt.Errorf("restoring %s: %w", addr, err)
	}
	return p.allocation(pool, created)
}

// markedAt returns the record at addr that carries marker, if a listing
// of the address finds one.
func (p *Protocol[P, S, R, Q]) markedAt(ctx context.Context, pool P, addr netip.Addr, marker string) (r R, found bool) {
	held, err := p.d.AtAddress(ctx, pool, addr)
	if err != nil {
		return r, false
	}
	for _, h := range held {
		if p.d.View(h).Marker == marker {
			return h, true
		}
	}
	return r, false
}

// Records lists the records within the pool's sources whose marker begins
// with prefix (see Backend.Records).
func (p *Protocol[P, S, R, Q]) Records(ctx context.Context, prefix string) ([]Record, error) {
	return p.marked(ctx, prefix, InPool, 0)
}

// Strays lists the records whose marker begins with prefix that lie
// outside the pool's sources (see Backend.Strays).
func (p *Protocol[P, S, R, Q]) Strays(ctx context.Context, prefix string, maxAge time.Duration) ([]Record, error) {
	return p.marked(ctx, prefix, Outside, maxAge)
}

func (p *Protocol[P, S, R, Q]) marked(ctx context.Context, prefix string, scope Scope, maxAge time.Duration) ([]Record, error) {
	pool, err := p.Prepared(ctx)
	if err != nil {
		return nil, err
	}
	if p.lister == nil {
		return nil, fmt.Errorf("listing records by marker: %w", ErrUnsupported)
	}
	return p.lister.Marked(ctx, pool, prefix, scope, maxAge)
}
