package backends

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/attempts"
)

// pendingClaim is a claim of a batch that still needs an address.
type pendingClaim struct {
	index int // in the batch
	claim Claim
}

// lookThenAllocate allocates for claims that arrived together, in the
// allocation batcher's two stages (Batcher.Look): one marker search now,
// then, once the batch before has made its records, one request per source
// for the claims that hold no record yet. A claim alone takes the same
// path and costs a search and a create. Fresh claims (Claim.Fresh) that
// take the next free address are searched for beside the request instead,
// where the driver searches oldest first (see searchBeside).
func (p *Protocol[P, S, R, Q]) lookThenAllocate(ctx context.Context, claims []Claim) func() []Result[Allocation] {
	unique, spread := deduplicate[Allocation](claims)
	rest := p.lookThenAllocateUnique(ctx, unique)
	return func() []Result[Allocation] { return spread(rest()) }
}

// lookThenAllocateUnique is lookThenAllocate for claims with distinct
// markers.
func (p *Protocol[P, S, R, Q]) lookThenAllocateUnique(ctx context.Context, claims []Claim) func() []Result[Allocation] {
	results := make([]Result[Allocation], len(claims))
	var pending, fresh []pendingClaim
	for i, c := range claims {
		// Not in a pool that adopts plans: what a fresh claim is answered
		// may be the IPAM team's plan, which is given back, never deleted.
		if c.Fresh && !c.Requested.IsValid() && p.oldestFirst && !p.o.Plans {
			fresh = append(fresh, pendingClaim{index: i, claim: c})
		} else {
			pending = append(pending, pendingClaim{index: i, claim: c})
		}
	}
	pool, err := p.Prepared(ctx)
	var settle []adoptedClaim[R]
	if err == nil && len(pending) > 0 {
		// Records may exist from earlier attempts whose answers were lost,
		// or from before a crash or clusterctl move: reuse them.
		pending, settle, err = p.findAdopted(ctx, pool, pending, results, nil)
	}
	if err != nil {
		failPending(append(pending, fresh...), results, err)
		return func() []Result[Allocation] { return results }
	}
	return func() []Result[Allocation] {
		// Settling a requested address reads who holds it, and may give
		// it up: not while the batch before reserves requested addresses.
		p.settleAdopted(ctx, pool, settle, results)
		earlier := p.searchBeside(ctx, fresh)
		p.allocateNew(ctx, pool, append(pending, fresh...), results)
		p.confirmFresh(ctx, pool, fresh, earlier, results)
		return results
	}
}

// searchBeside starts the marker search of the fresh claims, which runs
// while the batch reserves: a fresh claim cannot hold a record unless
// someone removed its finalizer by hand, and its reservation need not wait
// for the answer that says so. It returns what waits for the search.
func (p *Protocol[P, S, R, Q]) searchBeside(ctx context.Context, fresh []pendingClaim) func() (map[string][]R, error) {
	if len(fresh) == 0 {
		return func() (map[string][]R, error) { return nil, nil }
	}
	markers := make([]string, len(fresh))
	for i, c := range fresh {
		markers[i] = c.claim.Marker
	}
	type answer struct {
		found map[string][]R
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		found, err := p.search(ctx, markers, InPool)
		done <- answer{found, err}
	}()
	return func() (map[string][]R, error) {
		a := <-done
		return a.found, a.err
	}
}

// confirmFresh holds the batch's answers to fresh claims against the
// search made beside it. A claim the search found records of besides the
// one the batch answered is answered as a search before the batch would
// have answered it (see keepEarlier). When the search failed, every fresh
// claim is answered an error, and what it was answered stays: its next
// call, not fresh, searches first and keeps the oldest of its records
// (OldestFirst), which is the batch's only if it held none before.
func (p *Protocol[P, S, R, Q]) confirmFresh(ctx context.Context, pool P, fresh []pendingClaim, earlier func() (map[string][]R, error), results []Result[Allocation]) {
	found, err := earlier()
	for _, c := range fresh {
		res := &results[c.index]
		switch {
		case err != nil && res.Err == nil:
			*res = Result[Allocation]{Err: fmt.Errorf("confirming that claim %s/%s held no record before %s was reserved for it: %w",
				c.claim.Namespace, c.claim.Name, res.Value.Reference, err)}
		case err != nil:
			// Its own error stands.
		case slices.ContainsFunc(found[c.claim.Marker], func(r R) bool {
			return res.Err != nil || p.d.View(r).Reference != res.Value.Reference
		}):
			*res = p.keepEarlier(ctx, pool, c.claim.Marker, *res)
		}
	}
}

// keepEarlier answers a fresh claim whose marker other records carried (a
// finalizer removed by hand left them, or a second writer, a replica
// without leader election, made one meanwhile) as a search before the
// batch would have. When they all lie outside the pool, the claim is told
// so and gets nothing, and what the batch made for it is deleted.
// Otherwise it gets the oldest of its records in the pool, the one keep
// keeps, and the batch's, if newer, is deleted. The others are left alone:
// a second writer may bind one of them, and deletes its own if it loses;
// the audit deletes what is left over. The records are looked up again,
// now that the batch is done: the search beside it may have run before the
// batch made or deleted some.
func (p *Protocol[P, S, R, Q]) keepEarlier(ctx context.Context, pool P, marker string, answer Result[Allocation]) Result[Allocation] {
	found, err := p.search(ctx, []string{marker}, InPool)
	if err != nil {
		return Result[Allocation]{Err: err}
	}
	var earlier []R
	var made *R
	for _, r := range found[marker] {
		if answer.Err == nil && p.d.View(r).Reference == answer.Value.Reference {
			made = &r
			continue
		}
		earlier = append(earlier, r)
	}
	switch {
	case answer.Err == nil && made == nil:
		// Never hand out a record the search did not confirm: it may have
		// been deleted since.
		return Result[Allocation]{Err: fmt.Errorf("%w: %s is gone after the claim's reservation; retrying",
			ErrUnavailable, answer.Value.Reference)}
	case len(earlier) == 0:
		// Gone since: duplicates the batch itself deleted after a lost
		// answer, say.
		return answer
	}
	// Oldest first (OldestFirst): the first in the pool is keep's choice.
	// None when every other record lies outside the pool (own's error).
	_, outside := p.own(pool, marker, earlier)
	var kept *R
	if outside == nil {
		kept = &found[marker][slices.IndexFunc(found[marker], func(r R) bool { return p.d.InPool(pool, r) })]
	}
	if made != nil && (kept == nil || p.d.View(*kept).Reference != p.d.View(*made).Reference) {
		if err := p.d.Drop(ctx, *made); err != nil {
			err = fmt.Errorf("releasing %s, reserved for %s, which %s already carried: %w",
				p.d.Describe(*made), p.d.Label(marker), p.d.Describe(earlier[0]), err)
			if kept == nil {
				err = fmt.Errorf("%w; %v", outside, err)
			}
			return Result[Allocation]{Err: err}
		}
	}
	if kept == nil {
		return Result[Allocation]{Err: outside}
	}
	alloc, err := p.allocation(pool, *kept)
	return Result[Allocation]{Value: alloc, Err: err}
}

// allocateNew reserves for the claims the marker search found nothing for.
func (p *Protocol[P, S, R, Q]) allocateNew(ctx context.Context, pool P, pending []pendingClaim, results []Result[Allocation]) {
	// Claims that request an address are reserved each on its own, and
	// first: the others' next free addresses must not take what they
	// request (requested.go). The others take the records planned for them
	// first (planned.go).
	var requested, next []pendingClaim
	for _, c := range pending {
		if c.claim.Requested.IsValid() {
			requested = append(requested, c)
		} else {
			next = append(next, c)
		}
	}
	var wg sync.WaitGroup
	for _, c := range requested {
		wg.Go(func() { results[c.index].Value, results[c.index].Err = p.allocateRequested(ctx, pool, c.claim) })
	}
	wg.Wait()
	next = p.adoptAllPlanned(ctx, pool, next, results)
	p.allocatePending(ctx, pool, next, results)
}

// plannedAdoptions is how many claims of a batch look for their plans at
// once.
const plannedAdoptions = 4

// adoptAllPlanned adopts, each on its own and a few at once, the records planned
// for the pending claims, and returns the claims the pool plans none for.
func (p *Protocol[P, S, R, Q]) adoptAllPlanned(ctx context.Context, pool P, pending []pendingClaim, results []Result[Allocation]) []pendingClaim {
	if !p.o.Plans {
		return pending
	}
	planned := make([]bool, len(pending))
	// A few at a time: each asks up to four requests in turn, and a full
	// batch would otherwise hold every request slot of the endpoint.
	slots := make(chan struct{}, plannedAdoptions)
	var wg sync.WaitGroup
	for i, c := range pending {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			alloc, found, err := p.adoptPlanned(ctx, pool, c.claim)
			planned[i] = found || err != nil
			results[c.index] = Result[Allocation]{Value: alloc, Err: err}
		})
	}
	wg.Wait()
	var left []pendingClaim
	for i, c := range pending {
		if !planned[i] {
			left = append(left, c)
		}
	}
	return left
}

// adopt finds, with one search, the records carrying the pending claims'
// markers; claims that have one keep it (see keep). It returns the claims
// that have none.
func (p *Protocol[P, S, R, Q]) adopt(ctx context.Context, pool P, pending []pendingClaim, results []Result[Allocation], made []R) ([]pendingClaim, error) {
	left, requested, err := p.findAdopted(ctx, pool, pending, results, made)
	p.settleAdopted(ctx, pool, requested, results)
	return left, err
}

// findAdopted is adopt but for the settling of the records that claims
// requesting an address adopted: it returns those, to be settled. made are
// the records the caller's request was answered (see keep).
func (p *Protocol[P, S, R, Q]) findAdopted(ctx context.Context, pool P, pending []pendingClaim, results []Result[Allocation], made []R) ([]pendingClaim, []adoptedClaim[R], error) {
	markers := make([]string, len(pending))
	for i, c := range pending {
		markers[i] = c.claim.Marker
	}
	found, err := p.search(ctx, markers, InPool)
	if err != nil {
		return pending, nil, err
	}
	var left []pendingClaim
	var requested []adoptedClaim[R]
	for _, c := range pending {
		kept, ok, err := p.keep(ctx, pool, c.claim.Marker, found[c.claim.Marker], made)
		switch {
		case err != nil:
			results[c.index].Err = err
		case !ok:
			left = append(left, c)
		case c.claim.Requested.IsValid():
			requested = append(requested, adoptedClaim[R]{pendingClaim: c, record: kept})
		default:
			results[c.index].Value, results[c.index].Err = p.allocation(pool, kept)
		}
	}
	return left, requested, nil
}

// allocatePending reserves addresses for the pending claims, source after
// source, with one request for all of them while that works:
//   - a source with fewer free addresses than claims (Full) gives what it
//     has to the claims one by one, and the rest move on to the next source;
//   - a request whose answer was lost (or that was sent more than once) is
//     resolved by the claims' markers, never by allocating again;
//   - a request the system refuses as a whole (one object invalid) is sent
//     again once per claim, so that one bad claim cannot fail the others.
func (p *Protocol[P, S, R, Q]) allocatePending(ctx context.Context, pool P, pending []pendingClaim, results []Result[Allocation]) {
	sources := p.d.Sources(pool)
	var full []string
	si := 0
	for ; si < len(sources) && len(pending) > 1; si++ {
		src := sources[si]
		var requests []Q
		if requests, pending = p.requests(pool, src, pending, results); len(pending) <= 1 {
			break
		}
		counted, tries := attempts.WithCounter(ctx)
		created, err := p.d.Create(counted, src, requests)
		verdict := p.verdict(err)
		if tries.Load() > 1 || verdict == Unanswered {
			// An attempt may have been applied though its answer was lost
			// or unreadable: the markers decide, nothing is allocated again.
			p.uncertain()
			left, adoptErr := p.adopt(ctx, pool, pending, results, created)
			switch {
			case adoptErr != nil:
				failPending(pending, results, fmt.Errorf("allocating from %s: resolving a resent request: %w", src, adoptErr))
				return
			case err == nil:
				// Never hand out an answer's record the search did not
				// confirm: it may be a duplicate just released.
				failPending(left, results, fmt.Errorf("%w: allocating from %s: no record carries the claim's marker after a resent request; retrying",
					ErrUnavailable, src))
				return
			case verdict == Unanswered:
				failPending(left, results, fmt.Errorf("allocating from %s: %w", src, err))
				return
			}
			pending = left
		}
		switch verdict {
		case Done:
			p.assign(pool, src, pending, created, results)
			return
		case Full:
			// Fewer free addresses than claims: give out what there is.
			full = append(full, p.fullSource(src, err))
			pending = p.allocateOneByOne(ctx, pool, src, pending, results)
		default:
			// Refused as a whole, say for one invalid object: one by one,
			// so that each claim gets its own answer.
			p.allocateEach(ctx, pool, pending, sources[si:], full, results)
			return
		}
	}
	// One claim left, or every source full.
	p.allocateEach(ctx, pool, pending, sources[si:], full, results)
}

// requests builds the pending claims' requests for src. Claims whose
// request cannot be built get their error (it does not depend on the
// source) and are left out.
func (p *Protocol[P, S, R, Q]) requests(pool P, src S, pending []pendingClaim, results []Result[Allocation]) ([]Q, []pendingClaim) {
	var requests []Q
	var ready []pendingClaim
	for _, c := range pending {
		q, err := p.d.Request(pool, c.claim, src)
		if err != nil {
			results[c.index].Err = err
			continue
		}
		requests = append(requests, q)
		ready = append(ready, c)
	}
	return requests, ready
}

// assign hands each claim the record created for it, matched by marker.
func (p *Protocol[P, S, R, Q]) assign(pool P, src S, pending []pendingClaim, created []R, results []Result[Allocation]) {
	byMarker := map[string]R{}
	for _, r := range created {
		byMarker[p.d.View(r).Marker] = r
	}
	for _, c := range pending {
		r, ok := byMarker[c.claim.Marker]
		if !ok {
			results[c.index].Err = p.noAnswer(src, c.claim.Marker)
			continue
		}
		results[c.index].Value, results[c.index].Err = p.allocation(pool, r)
	}
}

// allocateOneByOne gives the free addresses of a source too small for the
// whole batch to the claims one at a time, until the source is full; it
// returns the claims left without an address.
func (p *Protocol[P, S, R, Q]) allocateOneByOne(ctx context.Context, pool P, src S, pending []pendingClaim, results []Result[Allocation]) []pendingClaim {
	for i, c := range pending {
		alloc, err := p.allocateFromSources(ctx, pool, c.claim, []S{src}, nil)
		if errors.Is(err, ErrExhausted) {
			return pending[i:]
		}
		results[c.index] = Result[Allocation]{Value: alloc, Err: err}
	}
	return nil
}

// allocateEach allocates for every pending claim on its own, at once.
func (p *Protocol[P, S, R, Q]) allocateEach(ctx context.Context, pool P, pending []pendingClaim, sources []S, full []string, results []Result[Allocation]) {
	var wg sync.WaitGroup
	for _, c := range pending {
		wg.Go(func() {
			alloc, err := p.allocateFromSources(ctx, pool, c.claim, sources, slices.Clone(full))
			results[c.index] = Result[Allocation]{Value: alloc, Err: err}
		})
	}
	wg.Wait()
}

// allocateFromSources reserves an address for the claim from the first of
// sources with space; full describes the full sources tried before.
func (p *Protocol[P, S, R, Q]) allocateFromSources(ctx context.Context, pool P, claim Claim, sources []S, full []string) (Allocation, error) {
	for _, src := range sources {
		kept, err := p.allocateFrom(ctx, pool, claim, src)
		var sf *sourceFull
		switch {
		case err == nil:
			return p.allocation(pool, kept)
		case errors.As(err, &sf):
			full = append(full, p.fullSource(src, sf.err))
		default:
			return Allocation{}, err
		}
	}
	return Allocation{}, fmt.Errorf("%w: every source is full: %s", ErrExhausted, strings.Join(full, ", "))
}

// allocateFrom creates the claim's record at the next free address of src
// and returns the record the claim keeps. A request that took more than one
// attempt, or whose answer may have been lost, may have been applied (even
// twice): then the marker search decides which record the claim keeps, and
// the duplicate the answered attempt made is released (see keep).
func (p *Protocol[P, S, R, Q]) allocateFrom(ctx context.Context, pool P, claim Claim, src S) (R, error) {
	var zero R
	request, err := p.d.Request(pool, claim, src)
	if err != nil {
		return zero, err
	}
	counted, tries := attempts.WithCounter(ctx)
	created, err := p.d.Create(counted, src, []Q{request})
	verdict := p.verdict(err)
	if tries.Load() > 1 || verdict == Unanswered {
		p.uncertain()
		kept, found, lookupErr := p.adoptOne(ctx, pool, claim.Marker, created)
		switch {
		case lookupErr == nil && found:
			return kept, nil
		case lookupErr != nil && tries.Load() > 1:
			// The answer's record may be a duplicate just deleted: never
			// hand it out; the next attempt adopts by marker.
			return zero, fmt.Errorf("allocating from %s: resolving a resent request: %w", src, lookupErr)
		}
	}
	switch {
	case verdict == Full:
		return zero, &sourceFull{err: err}
	case err != nil:
		return zero, fmt.Errorf("allocating from %s: %w", src, err)
	}
	for _, r := range created {
		if p.d.View(r).Marker == claim.Marker {
			return r, nil
		}
	}
	return zero, p.noAnswer(src, claim.Marker)
}

// verdict is Driver.Verdict, Done for no error.
func (p *Protocol[P, S, R, Q]) verdict(err error) Verdict {
	if err == nil {
		return Done
	}
	v, _ := p.d.Verdict(err)
	return v
}

// said is what the system said in err, in its own words.
func (p *Protocol[P, S, R, Q]) said(err error) string {
	_, said := p.d.Verdict(err)
	return said
}

// sourceFull is a source's refusal for want of free addresses.
type sourceFull struct{ err error }

func (e *sourceFull) Error() string { return e.err.Error() }

// fullSource describes a full source, in the system's words, for errors.
func (p *Protocol[P, S, R, Q]) fullSource(src S, err error) string {
	return fmt.Sprintf("%s (%s: %q)", src, p.d.Name(), p.said(err))
}

// noAnswer is an answer that holds no record for the claim: the claim is
// tried again, and then adopts by marker whatever the request made.
func (p *Protocol[P, S, R, Q]) noAnswer(src S, marker string) error {
	return fmt.Errorf("%w: allocating from %s: the answer of %s holds no record for %s; retrying",
		ErrUnavailable, src, p.d.Name(), p.d.Label(marker))
}

func failPending(pending []pendingClaim, results []Result[Allocation], err error) {
	for _, c := range pending {
		results[c.index].Err = err
	}
}
