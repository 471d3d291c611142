package infoblox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// WAPI's request object (POST /wapi/vX/request) runs a list of operations
// in order in one transaction: all apply, or none does and the grid answers
// with the failing operation's error. A burst of claims thus costs one
// request for their marker searches and one for their objects (or their
// deletions) instead of two per claim.

// pendingClaim is a claim of a batch that still needs an address.
type pendingClaim struct {
	index int // in the batch
	claim backends.Claim
}

// allocateBatch allocates for claims that arrived together: one request of
// marker searches, then one request creating an object per claim that
// holds none yet, source after source.
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
	sources, err := b.prepared(ctx)
	if err != nil {
		failAll(results, err)
		return results
	}
	pending := make([]pendingClaim, len(claims))
	for i, c := range claims {
		pending[i] = pendingClaim{index: i, claim: c}
	}
	// Objects may exist from earlier attempts whose answers were lost, or
	// from before a crash or clusterctl move: reuse them.
	if pending, err = b.adoptPending(ctx, pending, sources, results); err != nil {
		failAll(results, err)
		return results
	}
	b.allocatePending(ctx, pending, sources, results)
	return results
}

// adoptPending finds, with one request, the objects carrying the pending
// claims' markers; claims that have one keep it (duplicates are released).
// It returns the claims that have none.
func (b *Backend) adoptPending(ctx context.Context, pending []pendingClaim, sources []resolvedSource,
	results []backends.Result[backends.Allocation]) ([]pendingClaim, error) {
	markers := make([]string, len(pending))
	for i, p := range pending {
		markers[i] = p.claim.Marker
	}
	found, err := b.findByMarkers(ctx, markers, inPoolView)
	if err != nil {
		return nil, fmt.Errorf("looking up the markers of %d claims: %w", len(markers), err)
	}
	var left []pendingClaim
	for _, p := range pending {
		kept, ok, err := b.keepOwn(ctx, p.claim, found[p.claim.Marker], sources)
		switch {
		case err != nil:
			results[p.index].Err = err
		case !ok:
			left = append(left, p)
		default:
			results[p.index].Value, results[p.index].Err = b.toAllocation(kept, sources)
		}
	}
	return left, nil
}

// allocatePending creates objects for the pending claims, source after
// source, with one request object for all of them while that works:
//   - a source with fewer free addresses than claims (the grid refuses the
//     whole request as exhausted) gives what it has to the claims one by
//     one, and the rest move on to the next source;
//   - a request whose answer was lost (or that was sent more than once) is
//     resolved by the claims' markers, never by allocating again;
//   - a request the grid refuses as a whole for another reason (one object
//     invalid) is sent again once per claim, so that one bad claim cannot
//     fail the others.
func (b *Backend) allocatePending(ctx context.Context, pending []pendingClaim, sources []resolvedSource,
	results []backends.Result[backends.Allocation]) {
	var exhausted []string
	si := 0
	for ; si < len(sources) && len(pending) > 1; si++ {
		src := sources[si]
		var ops []*ibclient.RequestBody
		if ops, pending = b.createOps(pending, src, results); len(pending) <= 1 {
			break
		}
		counted, attempts := backendhttp.WithAttemptCounter(ctx)
		answers, err := b.sendRequest(counted, ops)
		answered := gridAnswered(err)
		if attempts.Load() > 1 || (err != nil && !answered) {
			// An attempt may have been applied though its answer was lost
			// or unreadable: the markers decide, nothing is allocated again.
			left, adoptErr := b.adoptPending(ctx, pending, sources, results)
			switch {
			case adoptErr != nil:
				failPending(pending, results, fmt.Errorf("allocating from %s: resolving a resent request: %w", src, adoptErr))
				return
			case err == nil:
				// Never hand out an answer's object the search did not
				// confirm: it may be a duplicate just released.
				failPending(left, results, fmt.Errorf("%w: allocating from %s: no object carries the claim's marker after a resent request; retrying",
					backends.ErrUnavailable, src))
				return
			case !answered:
				failPending(left, results, fmt.Errorf("allocating from %s: %w", src, err))
				return
			}
			pending = left
		}
		switch {
		case err == nil:
			b.assignCreated(src, pending, answers, sources, results)
			return
		case errors.Is(err, backends.ErrExhausted):
			// Fewer free addresses than claims: give out what there is.
			exhausted = append(exhausted, fullSource(src, err))
			pending = b.allocateOneByOne(ctx, src, pending, sources, results)
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

// gridAnswered says whether err is the grid's own refusal, as opposed to a
// lost answer or a server error after which the request may have applied.
func gridAnswered(err error) bool {
	var we *wapiError
	return errors.As(err, &we) && we.status < http.StatusInternalServerError
}

// createOps builds one POST per pending claim creating its object at the
// next available address of src. Claims whose object cannot be built get
// their error (it does not depend on the source) and are left out.
func (b *Backend) createOps(pending []pendingClaim, src resolvedSource,
	results []backends.Result[backends.Allocation]) ([]*ibclient.RequestBody, []pendingClaim) {
	objectType := b.objectTypeFor(src.network.Addr())
	args := map[string]string{"_return_fields": strings.Join(b.returnFieldsFor(objectType), ",")}
	var ops []*ibclient.RequestBody
	var ready []pendingClaim
	for _, p := range pending {
		obj, err := b.newObject(p.claim, src)
		var data map[string]any
		if err == nil {
			data, err = b.objectData(obj)
		}
		if err != nil {
			results[p.index].Err = err
			continue
		}
		ops = append(ops, &ibclient.RequestBody{Method: http.MethodPost, Object: objectType, Data: data, Args: args})
		ready = append(ready, p)
	}
	return ops, ready
}

// objectData is the body the client's request builder would POST for obj,
// as a request object's data.
func (b *Backend) objectData(obj ibclient.IBObject) (map[string]any, error) {
	raw := b.builder.BuildBody(ibclient.CREATE, obj)
	var data map[string]any
	if raw == nil || json.Unmarshal(raw, &data) != nil {
		return nil, fmt.Errorf("encoding a %s for WAPI failed", obj.ObjectType())
	}
	return data, nil
}

// assignCreated hands each claim the object the grid created for it,
// matched by marker.
func (b *Backend) assignCreated(src resolvedSource, pending []pendingClaim, answers []json.RawMessage, sources []resolvedSource,
	results []backends.Result[backends.Allocation]) {
	byMarker := map[string]object{}
	for _, a := range answers {
		var o object
		if json.Unmarshal(a, &o) == nil && o.Ref != "" {
			byMarker[o.ExtAttrs.get(b.cfg.MarkerEA)] = o
		}
	}
	for _, p := range pending {
		o, ok := byMarker[p.claim.Marker]
		if !ok {
			results[p.index].Err = fmt.Errorf("%w: allocating from %s: the grid's answer holds no object for marker %q; retrying",
				backends.ErrUnavailable, src, p.claim.Marker)
			continue
		}
		results[p.index].Value, results[p.index].Err = b.toAllocation(o, sources)
	}
}

// allocateOneByOne gives the free addresses of a source too small for the
// whole batch to the claims one at a time, until the source is full; it
// returns the claims left without an address.
func (b *Backend) allocateOneByOne(ctx context.Context, src resolvedSource, pending []pendingClaim, sources []resolvedSource,
	results []backends.Result[backends.Allocation]) []pendingClaim {
	for i, p := range pending {
		kept, err := b.allocateFrom(ctx, p.claim, src)
		if errors.Is(err, backends.ErrExhausted) {
			return pending[i:]
		}
		if err != nil {
			results[p.index].Err = err
			continue
		}
		results[p.index].Value, results[p.index].Err = b.toAllocation(kept, sources)
	}
	return nil
}

// allocateEach allocates for every pending claim on its own, at once.
func (b *Backend) allocateEach(ctx context.Context, pending []pendingClaim, sources []resolvedSource, exhausted []string,
	results []backends.Result[backends.Allocation]) {
	var wg sync.WaitGroup
	for _, p := range pending {
		wg.Go(func() {
			alloc, err := b.allocateFromSources(ctx, p.claim, sources, append([]string(nil), exhausted...))
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

func failAll[T any](results []backends.Result[T], err error) {
	for i := range results {
		results[i].Err = err
	}
}

// releaseCall is one Release of a batch.
type releaseCall struct {
	claim backends.Claim
	last  backends.Reservation
}

// releaseBatch releases claims that arrived together: one request of
// marker searches and one request deleting what they found. Whatever the
// batch did not settle (a failed deletion, a recorded object the search
// did not find) each claim settles on its own, as a lone Release would.
func (b *Backend) releaseBatch(ctx context.Context, calls []releaseCall) []backends.Result[struct{}] {
	results := make([]backends.Result[struct{}], len(calls))
	if len(calls) == 1 {
		results[0].Err = b.release(ctx, calls[0].claim, calls[0].last, b.deleteDrop)
		return results
	}
	markers := make([]string, len(calls))
	for i, c := range calls {
		markers[i] = c.claim.Marker
	}
	found, searchErr := b.findByMarkers(ctx, markers, inEveryView)
	if searchErr != nil {
		searchErr = fmt.Errorf("looking up the markers of %d claims: %w", len(markers), searchErr)
	}
	deleted := b.deleteAll(ctx, found)
	// Objects the bulk deletion removed need no second request.
	drop := func(ctx context.Context, o object) error {
		if deleted[o.Ref] {
			return nil
		}
		return b.deleteObject(ctx, o.Ref)
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			results[i].Err = b.settleRelease(ctx, c.claim, c.last, found[c.claim.Marker], searchErr, drop)
		})
	}
	wg.Wait()
	return results
}

// deleteAll deletes the found objects with one request object and returns
// the references deleted: all of them, or none when the request failed (a
// reference already gone fails the whole transaction).
func (b *Backend) deleteAll(ctx context.Context, found map[string][]object) map[string]bool {
	refs := map[string]bool{}
	var ops []*ibclient.RequestBody
	for _, objects := range found {
		for _, o := range objects {
			if !refs[o.Ref] {
				refs[o.Ref] = true
				ops = append(ops, &ibclient.RequestBody{Method: http.MethodDelete, Object: o.Ref})
			}
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := b.sendRequest(ctx, ops); err != nil {
		return nil
	}
	return refs
}

// findByMarkers searches the pool's object types for each marker with one
// request object; each marker's objects are sorted by address.
func (b *Backend) findByMarkers(ctx context.Context, markers []string, scope markerScope) (map[string][]object, error) {
	types := b.objectTypes()
	if len(markers) == 0 || len(types) == 0 {
		return map[string][]object{}, nil
	}
	var ops []*ibclient.RequestBody
	for _, m := range markers {
		for _, t := range types {
			search := map[string]any{"*" + b.cfg.MarkerEA: m}
			if scope == inPoolView {
				search["network_view"] = b.cfg.NetworkView
			}
			ops = append(ops, &ibclient.RequestBody{
				Method: http.MethodGet,
				Object: t,
				Data:   search,
				Args:   map[string]string{"_return_fields": strings.Join(b.returnFieldsFor(t), ",")},
			})
		}
	}
	answers, err := b.sendRequest(ctx, ops)
	if err != nil {
		return nil, fmt.Errorf("searching %s for %s: %w", strings.Join(types, " and "), b.cfg.MarkerEA, err)
	}
	found := map[string][]object{}
	for i, a := range answers {
		marker := markers[i/len(types)]
		var page []object
		if err := json.Unmarshal(a, &page); err != nil {
			return nil, fmt.Errorf("%w: decoding the search for %s=%q: %v", backends.ErrUnavailable, b.cfg.MarkerEA, marker, err)
		}
		for _, o := range page {
			// The search is exact, but an object is only ours if it says so.
			if o.ExtAttrs.get(b.cfg.MarkerEA) == marker {
				found[marker] = append(found[marker], o)
			}
		}
	}
	for _, objects := range found {
		sortByAddress(objects)
	}
	return found, nil
}

// sendRequest sends operations as one request object, built by the
// client's request builder, and returns one answer per operation.
func (b *Backend) sendRequest(ctx context.Context, ops []*ibclient.RequestBody) ([]json.RawMessage, error) {
	req, err := b.builder.BuildRequest(ibclient.CREATE, ibclient.NewMultiRequest(ops), "", nil)
	if err != nil {
		return nil, fmt.Errorf("building a WAPI request object: %w", err)
	}
	body, err := (&requestor{ctx: ctx, client: b.http}).SendRequest(req)
	if err != nil {
		return nil, err
	}
	var answers []json.RawMessage
	if err := json.Unmarshal(body, &answers); err != nil || len(answers) != len(ops) {
		return nil, fmt.Errorf("%w: %s: the grid answered %d results to %d operations (%v)",
			backends.ErrUnavailable, describe(req), len(answers), len(ops), err)
	}
	return answers, nil
}
