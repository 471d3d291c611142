package backends

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/attempts"
)

// A claim that requests an address (Claim.Requested) gets exactly that
// address or none. It shares its batch's marker search: a claim whose
// record exists keeps it, as any other. A claim without one is reserved on
// its own, beside the batch's requests, so that an address someone else
// holds fails that claim alone:
//   - the address must lie in one of the pool's sources and not be one they
//     never give (the gateway, a network or broadcast address, a range the
//     system counts as used);
//   - whatever holds it in the source's address space (the IPAM team's
//     record, another claim's, a tombstone kept for a grace period) makes
//     it unavailable, and the error names the holder; a record carrying the
//     claim's own marker is the claim's;
//   - the record is created at the address. Claims of one manager that
//     request one address take turns (requestedTurns). A system that
//     refuses a duplicate (NetBox in a VRF, or a global table, that
//     enforces uniqueness; NIOS for fixed addresses) settles a race with
//     another manager itself. One that accepts it (NetBox without
//     enforcement, or for roles such as vip that may share an address;
//     Infoblox host records without DHCP) is asked again after the create:
//     where it lists records in the order they were made, the oldest keeps
//     the address; elsewhere the claim's record yields to any other. A
//     claim that does not keep its record deletes it;
//   - a create whose answer was lost, or that was sent more than once, is
//     resolved by the claim's marker, never by creating again.

// allocateRequested reserves the address a claim that holds no record
// requests, or says why it cannot be the claim's.
func (p *Protocol[P, S, R, Q]) allocateRequested(ctx context.Context, pool P, claim Claim) (Allocation, error) {
	addr := claim.Requested
	if p.requester == nil {
		return Allocation{}, &RequestedUnavailableError{Address: addr,
			Why: fmt.Sprintf("%s cannot create a record at a given address (its driver offers no %s)", p.d.Name(), RoleAddressRequester)}
	}
	src, err := p.requestedSource(pool, addr)
	if err != nil {
		return Allocation{}, err
	}
	unlock := requestedTurns.lock(p.d.Endpoint() + "|" + addr.String())
	defer unlock()
	held, err := p.holders(ctx, pool, src, addr)
	if err != nil {
		return Allocation{}, err
	}
	for _, r := range held {
		if p.claimable(r, claim) {
			// Made by another attempt since the marker search.
			return p.settleRequested(ctx, pool, claim, src, r)
		}
	}
	if r, ok, err := p.plannedHolder(ctx, pool, claim, held); err != nil || ok {
		if err != nil {
			return Allocation{}, err
		}
		// Planned for the claim by the IPAM team: adopted, not refused.
		if r, err = p.takePlanned(ctx, claim, r); err != nil {
			return Allocation{}, err
		}
		return p.settleRequested(ctx, pool, claim, src, r)
	}
	if len(held) > 0 {
		return Allocation{}, p.unavailable(addr, held)
	}
	r, err := p.createRequested(ctx, pool, claim, src)
	if err != nil {
		return Allocation{}, err
	}
	return p.settleRequested(ctx, pool, claim, src, r)
}

// claimable says whether a record holding the requested address is the
// claim's: it carries the claim's marker. A record the IPAM team planned
// for the claim becomes the claim's too (plannedHolder).
func (p *Protocol[P, S, R, Q]) claimable(r R, claim Claim) bool {
	return p.d.View(r).Marker == claim.Marker
}

// plannedHolder returns the record without a marker among held that the
// IPAM team planned for the claim, if the pool adopts planned records.
func (p *Protocol[P, S, R, Q]) plannedHolder(ctx context.Context, pool P, claim Claim, held []R) (R, bool, error) {
	var zero R
	if !p.o.Plans || !slices.ContainsFunc(held, func(r R) bool { return p.d.View(r).Marker == "" }) {
		return zero, false, nil
	}
	refs, err := p.plannedRefs(ctx, pool, claim)
	if err != nil {
		return zero, false, err
	}
	for _, r := range held {
		if v := p.d.View(r); v.Marker == "" && refs[v.Reference] {
			return r, true, nil
		}
	}
	return zero, false, nil
}

// requestedSource is the source that may give addr: the first that holds
// it, unless it is an address that source never gives.
func (p *Protocol[P, S, R, Q]) requestedSource(pool P, addr netip.Addr) (S, error) {
	var zero S
	sources := p.d.Sources(pool)
	for _, s := range sources {
		if !s.Contains(addr) {
			continue
		}
		if why := p.unusable(s, addr); why != "" {
			return zero, &RequestedUnavailableError{Address: addr, Why: why}
		}
		return s, nil
	}
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.String()
	}
	return zero, &RequestedUnavailableError{Address: addr, Why: fmt.Sprintf(
		"it lies in none of the pool's sources (%s), or is an address they never give (a network or broadcast address)",
		strings.Join(names, ", "))}
}

// holders is Driver.Holders, its error naming what was looked for.
func (p *Protocol[P, S, R, Q]) holders(ctx context.Context, pool P, src S, addr netip.Addr) ([]R, error) {
	held, err := p.requester.Holders(ctx, src, addr)
	if err != nil {
		return nil, fmt.Errorf("looking up what holds %s in %s: %w", addr, src, err)
	}
	return held, nil
}

// createRequested creates the claim's record at the address it requests
// and returns the record the claim keeps. A request that took more than
// one attempt, or whose answer may have been lost, may have been applied:
// then the marker search decides.
func (p *Protocol[P, S, R, Q]) createRequested(ctx context.Context, pool P, claim Claim, src S) (R, error) {
	var zero R
	addr := claim.Requested
	counted, tries := attempts.WithCounter(ctx)
	created, err := p.requester.CreateAt(counted, pool, claim, src, addr)
	if err == nil && tries.Load() <= 1 {
		return created, nil
	}
	if tries.Load() > 1 || errors.Is(err, ErrUnavailable) {
		p.uncertain()
		// A resent create is refused as a duplicate of the first attempt's
		// record, whose answer was lost.
		var made []R
		if err == nil {
			made = []R{created}
		}
		kept, found, lookupErr := p.adoptOne(ctx, pool, claim.Marker, made)
		switch {
		case lookupErr == nil && found:
			return kept, nil
		case lookupErr != nil:
			return zero, fmt.Errorf("reserving %s in %s: resolving a resent request: %w", addr, src, lookupErr)
		case err == nil:
			// Never hand out an answer's record the search did not
			// confirm: it may be a duplicate just released.
			return zero, fmt.Errorf("%w: reserving %s in %s: no record carries %s after a resent request; retrying",
				ErrUnavailable, addr, src, p.d.Label(claim.Marker))
		}
	}
	if errors.Is(err, ErrAddressTaken) {
		// Taken between the look-up and the create: say by whom.
		if held, herr := p.holders(ctx, pool, src, addr); herr == nil && len(held) > 0 {
			return zero, p.unavailable(addr, held)
		}
		return zero, &RequestedUnavailableError{Address: addr, Why: fmt.Sprintf("%s refused to reserve it: %s", p.d.Name(), p.said(err))}
	}
	return zero, fmt.Errorf("reserving %s in %s: %w", addr, src, err)
}

// settleRequested keeps the claim's record at the requested address unless
// another holds the address too (a system that accepts duplicates, and
// someone who reserved it at the same time). Where the system lists
// records in the order they were made, the oldest keeps it: every claim
// that raced sees the same order. Elsewhere the claim's record yields to
// any other: a record that another claim kept was alone when that claim
// looked, so it was made before this one, which sees it. The claim's
// record is deleted when it does not keep the address, and the claim told
// who holds it.
func (p *Protocol[P, S, R, Q]) settleRequested(ctx context.Context, pool P, claim Claim, src S, r R) (Allocation, error) {
	if p.requester == nil {
		// Without the role nothing creates at a given address, so no
		// create of the claim's raced another's there: the record the
		// marker found is the claim's.
		return p.allocation(pool, r)
	}
	held, err := p.holders(ctx, pool, src, claim.Requested)
	if err != nil {
		// The record stays; the next attempt adopts it and settles again.
		return Allocation{}, err
	}
	ref := p.d.View(r).Reference
	var older []R
	for _, h := range held {
		if p.d.View(h).Reference == ref && p.requester.CreationOrdered() {
			break
		}
		if !p.claimable(h, claim) {
			older = append(older, h)
		}
	}
	if len(older) == 0 {
		return p.allocation(pool, r)
	}
	if err := p.d.Drop(ctx, r); err != nil {
		return Allocation{}, fmt.Errorf("releasing %s, made for the claim at an address %s already held: %w",
			p.d.Describe(r), p.d.Name(), err)
	}
	return Allocation{}, p.unavailable(claim.Requested, older)
}

// settleAdopted settles the records that claims requesting an address
// adopted by their marker, at once: a create whose settling failed left
// its record to the next attempt. A record elsewhere than the requested
// address is the caller's to judge.
func (p *Protocol[P, S, R, Q]) settleAdopted(ctx context.Context, pool P, adopted []adoptedClaim[R], results []Result[Allocation]) {
	var wg sync.WaitGroup
	for _, a := range adopted {
		wg.Go(func() {
			src, err := p.requestedSource(pool, a.claim.Requested)
			if err != nil || p.d.View(a.record).Address.Addr() != a.claim.Requested {
				results[a.index].Value, results[a.index].Err = p.allocation(pool, a.record)
				return
			}
			results[a.index].Value, results[a.index].Err = p.settleRequested(ctx, pool, a.claim, src, a.record)
		})
	}
	wg.Wait()
}

// adoptedClaim is a claim requesting an address whose record the marker
// search found.
type adoptedClaim[R any] struct {
	pendingClaim
	record R
}

// unavailable is the error of an address others hold.
func (p *Protocol[P, S, R, Q]) unavailable(addr netip.Addr, held []R) error {
	parts := make([]string, len(held))
	records := make([]Record, len(held))
	for i, r := range held {
		records[i] = p.d.View(r)
		marker := records[i].Marker
		switch claimMarker, at, tombstone := ParseTombstone(marker); {
		case marker == "":
			parts[i] = p.d.Describe(r) + ", which carries no marker"
		case tombstone:
			parts[i] = fmt.Sprintf("%s, a tombstone of %s released at %s and kept for the pool's grace period",
				p.d.Describe(r), p.d.Label(claimMarker), at.Format("2006-01-02T15:04:05Z07:00"))
		default:
			parts[i] = fmt.Sprintf("%s, which carries %s", p.d.Describe(r), p.d.Label(marker))
		}
	}
	return &RequestedUnavailableError{Address: addr, Why: "it is held by " + strings.Join(parts, "; and by "), Holders: records}
}

// requestedTurns makes the claims of one manager that request one address
// of one IPAM system take turns: the look-up, the create and the settling
// of one claim end before the next claim's begin, so that on a system
// that accepts duplicates they never race each other.
var requestedTurns = &turns{held: map[string]*turn{}}

type turns struct {
	mu   sync.Mutex
	held map[string]*turn
}

type turn struct {
	sync.Mutex
	waiting int
}

// lock waits for key's turn and returns its end.
func (t *turns) lock(key string) (unlock func()) {
	t.mu.Lock()
	k, ok := t.held[key]
	if !ok {
		k = &turn{}
		t.held[key] = k
	}
	k.waiting++
	t.mu.Unlock()
	k.Lock()
	return func() {
		k.Unlock()
		t.mu.Lock()
		if k.waiting--; k.waiting == 0 {
			delete(t.held, key)
		}
		t.mu.Unlock()
	}
}
