package backends

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// releaseCall is one Release of a batch.
type releaseCall struct {
	claim Claim
	last  Reservation
}

// releaseBatch releases claims that arrived together: one search for their
// markers and one deletion of what it found. Whatever the batch did not
// settle (a failed deletion, a recorded record the search did not find)
// each claim settles on its own, as a lone Release would.
func (p *Protocol[P, S, R, Q]) releaseBatch(ctx context.Context, calls []releaseCall) []Result[struct{}] {
	results := make([]Result[struct{}], len(calls))
	if len(calls) == 1 {
		results[0].Err = p.release(ctx, calls[0].claim, calls[0].last, p.d.Drop)
		return results
	}
	markers := make([]string, len(calls))
	for i, c := range calls {
		markers[i] = c.claim.Marker
	}
	found, searchErr := p.search(ctx, markers, Everywhere)
	deleted := p.dropAll(ctx, found)
	// Records the bulk deletion removed need no second request.
	drop := func(ctx context.Context, r R) error {
		if deleted[p.d.View(r).Reference] {
			return nil
		}
		return p.d.Drop(ctx, r)
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { results[i].Err = p.settle(ctx, c.claim, c.last, found[c.claim.Marker], searchErr, drop, false) })
	}
	wg.Wait()
	return results
}

// dropAll deletes the found records with one request and returns the
// references deleted: all of them, or none when the request failed.
// Planned records go back to the IPAM team one by one first (see Drop).
func (p *Protocol[P, S, R, Q]) dropAll(ctx context.Context, found map[string][]R) map[string]bool {
	refs := map[string]bool{}
	var deleted []R
	for _, records := range found {
		for _, r := range records {
			v := p.d.View(r)
			if refs[v.Reference] {
				continue
			}
			refs[v.Reference] = true
			if !v.Planned {
				deleted = append(deleted, r)
			} else if p.d.Drop(ctx, r) != nil {
				return nil
			}
		}
	}
	if len(deleted) > 0 && p.d.DropAll(ctx, deleted) != nil {
		return nil
	}
	return refs
}

// release finds the claim's records wherever they are and lets drop delete
// or retire each.
func (p *Protocol[P, S, R, Q]) release(ctx context.Context, claim Claim, last Reservation, drop func(context.Context, R) error) error {
	found, err := p.search(ctx, []string{claim.Marker}, Everywhere)
	return p.settle(ctx, claim, last, found[claim.Marker], err, drop, false)
}

// settle is release once the marker search has answered (found, or
// searchErr): it drops what was found and, when the search did not find
// it, the recorded record, or says why nothing was released. keeping: drop
// removes the marker, so a recorded record without one is already kept
// (when the search answered: else the marker may only be unreadable).
func (p *Protocol[P, S, R, Q]) settle(ctx context.Context, claim Claim, last Reservation, found []R, searchErr error, drop func(context.Context, R) error, keeping bool) error {
	if errors.Is(searchErr, ErrUnavailable) || errors.Is(searchErr, ErrUnauthorized) || errors.Is(searchErr, ErrForbidden) {
		return searchErr
	}
	released := map[string]bool{}
	for _, r := range found {
		if err := drop(ctx, r); err != nil {
			return err
		}
		released[p.d.View(r).Reference] = true
	}
	endpoint := p.d.Endpoint()
	// The recorded record is read only when the search did not find it: it
	// may lie where the search no longer looks, or have been disowned.
	var notOwned error
	here := last.Endpoint == "" || last.Endpoint == endpoint
	if last.Reference != "" && here && !released[last.Reference] {
		r, ok, err := p.d.Get(ctx, last.Reference)
		marker := p.d.View(r).Marker
		switch {
		case err != nil:
			return err
		case ok && IsTombstoneOf(marker, claim.Marker):
			// Retired by an earlier attempt.
			released[last.Reference] = true
		case ok && marker == "" && (last.Planned || keeping && searchErr == nil):
			// A plan the claim adopted returned, or a record kept, by an
			// earlier attempt whose answer was lost.
			released[last.Reference] = true
		case ok && marker == "" && keeping:
			// Unmarked, but the search that would say whether it was kept
			// was refused: say so (below), not that someone took it.
		case ok && (marker == claim.Marker || p.movedHere(r, claim, last)):
			if err := drop(ctx, r); err != nil {
				return err
			}
			released[last.Reference] = true
		case ok && len(released) == 0:
			notOwned = p.notOwned(r, claim)
		}
	}
	switch {
	case len(released) > 0:
		return nil
	case notOwned != nil:
		return notOwned
	case searchErr != nil:
		// Say a renamed field or attribute: the system refuses the search.
		return fmt.Errorf("%w: %s %s refused the marker search, so %s (%s) was left in place: %v",
			ErrUnreachable, p.d.Name(), endpoint, last.Address, last.Reference, searchErr)
	case !here:
		return fmt.Errorf("%w: %s was reserved as %s in %s, but the pool now points at %s, where nothing carries %s; it was left in %s",
			ErrUnreachable, last.Address, last.Reference, last.Endpoint, endpoint, p.d.Label(claim.Marker), last.Endpoint)
	case last.Reference == "" && last.Address.IsValid():
		// Recorded before references were: look the address up.
		// Without validation if need be: the pool is then the zero one.
		pool, _ := p.Prepared(ctx)
		held, err := p.d.AtAddress(ctx, pool, last.Address.Addr())
		if err != nil || len(held) == 0 {
			return err
		}
		switch r := held[0]; {
		case IsTombstoneOf(p.d.View(r).Marker, claim.Marker):
			return nil
		case p.movedHere(r, claim, last):
			return drop(ctx, r)
		default:
			return p.notOwned(r, claim)
		}
	}
	return nil
}

// movedHere says whether a record is the claim's under the marker its
// reservation was recorded with (see Claim.Holds): a clusterctl move or an
// upgrade changed the claim's marker since. It must hold the very address
// of the claim's IPAddress too.
func (p *Protocol[P, S, R, Q]) movedHere(r R, claim Claim, last Reservation) bool {
	v := p.d.View(r)
	claim.Recorded = last.Marker
	return v.Address.IsValid() && last.Address.IsValid() && v.Address.Addr() == last.Address.Addr() && claim.Holds(v.Marker)
}

func (p *Protocol[P, S, R, Q]) notOwned(r R, claim Claim) error {
	return fmt.Errorf("%w: %s in %s no longer carries %s (it has %q); it was left in place",
		ErrNotOwned, p.d.Describe(r), p.d.Endpoint(), p.d.Label(claim.Marker), p.d.View(r).Marker)
}
