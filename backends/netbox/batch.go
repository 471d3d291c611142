package netbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	netbox "github.com/netbox-community/go-netbox/v4"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// NetBox allocates every object of an available-ips list in one
// transaction under one lock on the parent, filters by several values of a
// custom field at once, and deletes a list of IDs in one request. A burst of
// claims thus costs a few requests instead of two per claim.

// pendingClaim is a claim of a batch that still needs an address.
type pendingClaim struct {
	index   int // in the batch
	claim   backends.Claim
	request netbox.IPAddressRequest
}

// allocateBatch allocates for claims that arrived together: one marker
// search, then one available-ips request per source for the claims that
// hold no record yet.
func (b *Backend) allocateBatch(ctx context.Context, claims []backends.Claim) []backends.Result[backends.Allocation] {
	results := make([]backends.Result[backends.Allocation], len(claims))
	if len(claims) == 1 {
		results[0].Value, results[0].Err = b.allocateOne(ctx, claims[0])
		return results
	}
	return backends.Deduplicated(claims, func(unique []backends.Claim) []backends.Result[backends.Allocation] {
		return b.allocateUnique(ctx, unique)
	})
}

// allocateUnique is allocateBatch for claims with distinct markers.
func (b *Backend) allocateUnique(ctx context.Context, claims []backends.Claim) []backends.Result[backends.Allocation] {
	results := make([]backends.Result[backends.Allocation], len(claims))
	fail := func(err error) []backends.Result[backends.Allocation] {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	sources, refs, err := b.prepared(ctx)
	if err != nil {
		return fail(err)
	}
	var pending []pendingClaim
	for i, c := range claims {
		pending = append(pending, pendingClaim{index: i, claim: c})
	}
	// Records may exist from earlier attempts whose answers were lost, or
	// from before a crash or clusterctl move: reuse them.
	if pending, err = b.adoptPending(ctx, pending, sources, results); err != nil {
		return fail(err)
	}
	var ready []pendingClaim
	for _, p := range pending {
		if p.request, err = b.ipRequest(p.claim, refs); err != nil {
			results[p.index].Err = err
			continue
		}
		ready = append(ready, p)
	}
	b.allocatePending(ctx, ready, sources, results)
	return results
}

// adoptPending finds, with one search, the records carrying the pending
// claims' markers; claims that have one get it (duplicates are released).
// It returns the claims that have none.
func (b *Backend) adoptPending(ctx context.Context, pending []pendingClaim, sources []resolvedSource,
	results []backends.Result[backends.Allocation]) ([]pendingClaim, error) {
	markers := make([]string, len(pending))
	for i, p := range pending {
		markers[i] = p.claim.Marker
	}
	found, err := b.findByMarkers(ctx, markers, true)
	if err != nil {
		return nil, fmt.Errorf("looking up the markers of %d claims: %w", len(markers), err)
	}
	var left []pendingClaim
	for _, p := range pending {
		own, err := ownRecords(p.claim.Marker, found[p.claim.Marker], sources)
		switch {
		case err != nil:
			results[p.index].Err = err
		case len(own) == 0:
			left = append(left, p)
		default:
			results[p.index] = b.keepAllocation(ctx, own)
		}
	}
	return left, nil
}

// keepAllocation keeps the oldest of a claim's records as its allocation.
func (b *Backend) keepAllocation(ctx context.Context, records []ipRecord) backends.Result[backends.Allocation] {
	kept, err := b.keepOne(ctx, records)
	if err != nil {
		return backends.Result[backends.Allocation]{Err: err}
	}
	alloc, err := b.toAllocation(kept)
	return backends.Result[backends.Allocation]{Value: alloc, Err: err}
}

// allocatePending reserves addresses for the pending claims, source after
// source, with one request for all of them while that works:
//   - a source with fewer free addresses than claims (409) gives what it has
//     to the claims one by one, and the rest move on to the next source;
//   - a request whose answer was lost (or that was sent more than once) is
//     resolved by the claims' markers, never by allocating again;
//   - a request NetBox refuses as a whole (one object invalid) is sent
//     again once per claim, so that one bad claim cannot fail the others.
func (b *Backend) allocatePending(ctx context.Context, pending []pendingClaim, sources []resolvedSource,
	results []backends.Result[backends.Allocation]) {
	var exhausted []string
	si := 0
	for ; si < len(sources) && len(pending) > 1; si++ {
		src := sources[si]
		counted, attempts := backendhttp.WithAttemptCounter(ctx)
		requests := make([]netbox.IPAddressRequest, len(pending))
		for i, p := range pending {
			requests[i] = p.request
		}
		created, resp, err := b.postAvailable(counted, src, requests)
		answered := resp != nil && resp.StatusCode >= 300 && resp.StatusCode < 500
		if attempts.Load() > 1 || (err != nil && !answered) {
			// An attempt may have been applied though its answer was lost
			// or unreadable: the markers decide, nothing is allocated again.
			left, adoptErr := b.adoptPending(ctx, pending, sources, results)
			switch {
			case adoptErr != nil:
				failPending(pending, results, fmt.Errorf("allocating from %s: resolving a resent request: %w", src.display, adoptErr))
				return
			case err == nil:
				// Never hand out an answer's record the search did not
				// confirm: it may be a duplicate just released.
				failPending(left, results, fmt.Errorf("%w: allocating from %s: no record carries the claim's marker after a resent request; retrying",
					backends.ErrUnavailable, src.display))
				return
			case !answered:
				failPending(left, results, classify(fmt.Sprintf("allocating from %s", src.display), resp, err))
				return
			}
			pending = left
		}
		switch {
		case err == nil:
			b.assignCreated(src, pending, created, results)
			return
		case resp.StatusCode == http.StatusConflict:
			// Fewer free addresses than claims: give out what there is.
			exhausted = append(exhausted, fullSource(src, &sourceFullError{detail: errorDetail(err)}))
			pending = b.allocateOneByOne(ctx, src, pending, results)
		default:
			// Refused as a whole, say for one invalid object: one by one,
			// so that each claim gets its own answer.
			b.allocateEach(ctx, pending, sources[si:], exhausted, results)
			return
		}
	}
	// One claim left, or every source full.
	b.allocateEach(ctx, pending, sources[si:], exhausted, results)
}

// assignCreated hands each claim the record NetBox created for it, matched
// by marker.
func (b *Backend) assignCreated(src resolvedSource, pending []pendingClaim, created []netbox.IPAddress, results []backends.Result[backends.Allocation]) {
	byMarker := map[string]ipRecord{}
	for _, ip := range created {
		r := recordFromAPI(ip)
		byMarker[markerValue(r.CustomFields, b.cfg.MarkerField)] = r
	}
	for _, p := range pending {
		r, ok := byMarker[p.claim.Marker]
		if !ok {
			results[p.index].Err = fmt.Errorf("%w: allocating from %s: NetBox's answer holds no record for marker %q; retrying",
				backends.ErrUnavailable, src.display, p.claim.Marker)
			continue
		}
		results[p.index].Value, results[p.index].Err = b.toAllocation(r)
	}
}

// allocateOneByOne gives the free addresses of a source too small for the
// whole batch to the claims one at a time, until the source is full; it
// returns the claims left without an address.
func (b *Backend) allocateOneByOne(ctx context.Context, src resolvedSource, pending []pendingClaim, results []backends.Result[backends.Allocation]) []pendingClaim {
	for i, p := range pending {
		alloc, err := b.allocateFromSources(ctx, p.claim, p.request, []resolvedSource{src}, nil)
		if errors.Is(err, backends.ErrExhausted) {
			return pending[i:]
		}
		results[p.index] = backends.Result[backends.Allocation]{Value: alloc, Err: err}
	}
	return nil
}

// allocateEach allocates for every pending claim on its own, at once.
func (b *Backend) allocateEach(ctx context.Context, pending []pendingClaim, sources []resolvedSource, exhausted []string,
	results []backends.Result[backends.Allocation]) {
	var wg sync.WaitGroup
	for _, p := range pending {
		wg.Go(func() {
			alloc, err := b.allocateFromSources(ctx, p.claim, p.request, sources, append([]string(nil), exhausted...))
			results[p.index] = backends.Result[backends.Allocation]{Value: alloc, Err: err}
		})
	}
	wg.Wait()
}

func failPending(pending []pendingClaim, results []backends.Result[backends.Allocation], err error) {
	for _, p := range pending {
		results[p.index].Err = err
	}
}

// releaseCall is one Release of a batch.
type releaseCall struct {
	claim backends.Claim
	last  backends.Reservation
}

// releaseBatch releases claims that arrived together: one search for their
// markers and one bulk delete of their records. If the bulk delete fails,
// each claim deletes its own records, so one cannot fail the others.
func (b *Backend) releaseBatch(ctx context.Context, calls []releaseCall) []backends.Result[struct{}] {
	results := make([]backends.Result[struct{}], len(calls))
	if len(calls) == 1 {
		results[0].Err = b.release(ctx, calls[0].claim, calls[0].last, b.deleteRecord)
		return results
	}
	markers := make([]string, len(calls))
	for i, c := range calls {
		markers[i] = c.claim.Marker
	}
	found, err := b.findByMarkers(ctx, markers, false)
	if err != nil {
		for i, c := range calls {
			results[i].Err = b.releaseSearchFailed(fmt.Errorf("looking up the markers of %d claims: %w", len(markers), err), c.last)
		}
		return results
	}
	var ids []map[string]int32
	for _, records := range found {
		for _, r := range records {
			ids = append(ids, map[string]int32{"id": r.ID})
		}
	}
	// NetBox deletes the listed IDs in one transaction; IDs already gone
	// are no error. If it fails, each claim deletes its own records.
	bulkDeleted := len(ids) > 0 && b.sendJSON(ctx, http.MethodDelete, "/api/ipam/ip-addresses/", nil, ids, nil) == nil
	var wg sync.WaitGroup
	for i, c := range calls {
		records := found[c.claim.Marker]
		if bulkDeleted && len(records) > 0 {
			continue
		}
		wg.Go(func() { results[i].Err = b.dropAll(ctx, c.claim, c.last, records, b.deleteRecord) })
	}
	wg.Wait()
	return results
}
