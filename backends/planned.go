package backends

import (
	"context"
	"fmt"
	"net/netip"
)

// A pool may adopt records the IPAM team planned for its claims
// (Driver.Planned): a record in the pool's sources, without a marker, whose
// name is the one the pool renders for the claim. A claim that holds no
// record takes the one planned for it before it asks for the next free
// address:
//   - adoption writes the claim's marker, saying that the record was
//     planned (PlannedMarker), and nothing else the IPAM team set; release
//     removes the marker and keeps the record (the drivers' Drop and Mark);
//   - the claims of one manager that adopt one record take turns; the
//     record is read again before the write and after it, so that of two
//     claims that write one after the other, the first sees the second's
//     marker and yields. Neither system has a conditional write: two
//     managers that write at once may both read their own marker back
//     (docs/planned-records.md says what is and is not protected);
//   - a planned record another claim holds is a conflict: the claim gets
//     no other address (PlannedConflictError).

// adoptPlanned adopts the record planned for the claim; found is false
// when the pool plans none for it.
func (p *Protocol[P, S, R, Q]) adoptPlanned(ctx context.Context, pool P, claim Claim) (Allocation, bool, error) {
	free, taken, err := p.plannedFor(ctx, pool, claim)
	switch {
	case err != nil:
		return Allocation{}, false, err
	case len(free) == 0 && len(taken) == 0:
		return Allocation{}, false, nil
	case len(free) == 0:
		return Allocation{}, true, p.plannedConflict(taken[0])
	}
	r, err := p.takePlanned(ctx, claim, free[0])
	if err != nil {
		return Allocation{}, true, err
	}
	alloc, err := p.allocation(pool, r)
	return alloc, true, err
}

// plannedFor lists the records planned for the claim in the pool's
// sources: those free to adopt (no marker, or the claim's own), and those
// another claim holds. A record the provider made (its marker, or a
// tombstone, not planned) is no plan, though it may carry the name and
// status the search looks for; nor is one at an address the pool never
// gives (its gateway), which the claim would adopt, be refused by
// CheckAnswer and give back, again and again.
func (p *Protocol[P, S, R, Q]) plannedFor(ctx context.Context, pool P, claim Claim) (free, taken []R, err error) {
	records, err := p.planner.Planned(ctx, claim)
	if err != nil {
		return nil, nil, fmt.Errorf("looking up the records planned for %s: %w", p.d.Label(claim.Marker), err)
	}
	for _, r := range records {
		v := p.d.View(r)
		switch {
		case !p.d.InPool(pool, r), v.Marker != "" && !v.Planned, p.neverGives(pool, v.Address.Addr()):
			continue
		case v.Marker == "" || v.Marker == claim.Marker:
			free = append(free, r)
		default:
			taken = append(taken, r)
		}
	}
	return free, taken, nil
}

// neverGives says whether the first source holding addr never gives it.
func (p *Protocol[P, S, R, Q]) neverGives(pool P, addr netip.Addr) bool {
	for _, s := range p.d.Sources(pool) {
		if s.Contains(addr) {
			return p.unusable(s, addr) != ""
		}
	}
	return false
}

// takePlanned writes the claim's marker on a planned record, read again
// just before (another claim may have taken it since the look-up) and just
// after (another claim may have written its own over it): the claim keeps
// the record only if it still carries its marker then.
func (p *Protocol[P, S, R, Q]) takePlanned(ctx context.Context, claim Claim, r R) (R, error) {
	var zero R
	ref := p.d.View(r).Reference
	unlock := requestedTurns.lock(p.d.Endpoint() + "|" + ref)
	defer unlock()
	current, err := p.reread(ctx, ref)
	if err != nil {
		return zero, err
	}
	switch v := p.d.View(current); {
	case v.Marker == claim.Marker:
		return current, nil
	case v.Marker != "":
		return zero, p.plannedConflict(current)
	}
	if err := p.planner.Adopt(ctx, current, claim.Marker); err != nil {
		return zero, fmt.Errorf("adopting %s, planned for the claim: %w", p.d.Describe(current), err)
	}
	after, err := p.reread(ctx, ref)
	if err != nil {
		return zero, err
	}
	if v := p.d.View(after); v.Marker != claim.Marker {
		return zero, p.plannedConflict(after)
	}
	return after, nil
}

// reread reads a planned record again; one deleted since is unavailable
// for now (the next attempt looks again).
func (p *Protocol[P, S, R, Q]) reread(ctx context.Context, ref string) (R, error) {
	r, found, err := p.d.Get(ctx, ref)
	switch {
	case err != nil:
		return r, fmt.Errorf("reading the planned record %s: %w", ref, err)
	case !found:
		return r, fmt.Errorf("%w: the planned record %s was deleted while the claim adopted it; looking again", ErrUnavailable, ref)
	}
	return r, nil
}

// plannedConflict is the error of a planned record another claim holds.
func (p *Protocol[P, S, R, Q]) plannedConflict(r R) error {
	marker := p.d.View(r).Marker
	holder := p.d.Label(marker)
	if claimMarker, at, tombstone := ParseTombstone(marker); tombstone {
		holder = fmt.Sprintf("a tombstone of %s released at %s", p.d.Label(claimMarker), at.Format("2006-01-02T15:04:05Z07:00"))
	}
	return &PlannedConflictError{Record: p.d.Describe(r), Holder: holder}
}

// plannedRefs lists the references of the unmarked records planned for the
// claim, for claimable: a requested address held by one of them is the
// claim's.
func (p *Protocol[P, S, R, Q]) plannedRefs(ctx context.Context, pool P, claim Claim) (map[string]bool, error) {
	free, _, err := p.plannedFor(ctx, pool, claim)
	if err != nil {
		return nil, err
	}
	refs := map[string]bool{}
	for _, r := range free {
		refs[p.d.View(r).Reference] = true
	}
	return refs, nil
}
