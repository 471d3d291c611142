package infoblox_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// batchOf makes claims allocated or released at once share requests, n at
// a time. The window is long so that only a full batch starts: the tests
// then see exactly one batch, whatever the machine's speed.
func batchOf(cfg infoblox.Config, n int) infoblox.Config {
	cfg.Batch = backends.BatchOptions{MaxSize: n, Window: time.Hour}
	return cfg
}

func numbered(n int) []backends.Claim {
	out := make([]backends.Claim, n)
	for i := range out {
		out[i] = claim(fmt.Sprintf("m-%02d", i))
	}
	return out
}

// allocateAll allocates for the claims at once, as the claim workers do.
func allocateAll(b backends.Backend, cs []backends.Claim) ([]backends.Allocation, []error) {
	allocs := make([]backends.Allocation, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { allocs[i], errs[i] = b.Allocate(context.Background(), c) })
	}
	wg.Wait()
	return allocs, errs
}

func releaseAll(b backends.Backend, cs []backends.Claim, allocs []backends.Allocation) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = b.Release(context.Background(), c, allocs[i].Reservation()) })
	}
	wg.Wait()
	return errs
}

// requireOwnAddresses checks that each claim got a distinct address whose
// only object of objectType carries its marker.
func requireOwnAddresses(t *testing.T, sim *wapisim.Server, objectType string, cs []backends.Claim, allocs []backends.Allocation, errs []error) {
	t.Helper()
	seen := map[netip.Prefix]string{}
	for i, c := range cs {
		require.NoError(t, errs[i], c.Marker)
		require.NotContains(t, seen, allocs[i].Address, "%s and %s got the same address", seen[allocs[i].Address], c.Marker)
		seen[allocs[i].Address] = c.Marker
		objs := markedWith(sim, objectType, c.Marker)
		require.Len(t, objs, 1, c.Marker)
		assert.Equal(t, allocs[i].Address.Addr(), objs[0].Addresses[0], c.Marker)
		assert.Equal(t, objs[0].Ref, allocs[i].Reference, c.Marker)
	}
}

// validatedBackend returns a validated backend whose calls are counted from
// here on.
func validatedBackend(t *testing.T, sim *wapisim.Server, cfg infoblox.Config) *infoblox.Backend {
	t.Helper()
	b := newBackend(t, cfg)
	_, err := b.Validate(context.Background())
	require.NoError(t, err)
	sim.ResetCalls()
	return b
}

func TestConcurrentAllocationsShareOneSearchAndOneRequest(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		name                     string
		batch                    int
		searches, creations, all int
	}{
		{name: "batching off", batch: 1, searches: n, creations: n, all: 2 * n},
		{name: "batching on", batch: n, searches: 0, creations: 0, all: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			b := validatedBackend(t, sim, batchOf(config(sim, "10.0.0.0/24"), tc.batch))

			cs := numbered(n)
			allocs, errs := allocateAll(b, cs)
			requireOwnAddresses(t, sim, "fixedaddress", cs, allocs, errs)
			assert.Equal(t, tc.searches, sim.CountObjectCalls("GET", "fixedaddress"), "plain marker searches")
			assert.Equal(t, tc.creations, sim.CountObjectCalls("POST", "fixedaddress"), "plain creations")
			assert.Len(t, sim.Calls(), tc.all, "%d claims cost %d WAPI calls: %v", n, tc.all, sim.Calls())

			// Allocating again adopts: the marker searches only.
			sim.ResetCalls()
			again, errs := allocateAll(b, cs)
			requireOwnAddresses(t, sim, "fixedaddress", cs, again, errs)
			assert.Equal(t, allocs, again)
			assert.Len(t, sim.Calls(), tc.all/2, "an existing reservation costs the marker search only")
		})
	}
}

// A host record whose DNS name is taken makes the grid refuse the whole
// request object; the batch then creates one object per claim, and only
// that claim fails.
func TestFailingObjectInABatchDoesNotFailTheOthers(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	sim.AddZone("default", "k8s.example.com")
	sim.AddHostRecord(wapisim.HostRecord{Name: "c1-bad.k8s.example.com", DNS: true, Addresses: []string{"10.0.0.250"}})
	cfg := batchOf(config(sim, "10.0.0.0/24"), 4)
	cfg.Reservation = infoblox.Reservation{ObjectType: infoblox.HostRecord, DNS: &infoblox.DNS{Zone: "k8s.example.com"}}
	b := validatedBackend(t, sim, cfg)

	cs := []backends.Claim{claim("a"), claim("b"), claim("bad"), claim("d")}
	allocs, errs := allocateAll(b, cs)

	require.ErrorIs(t, errs[2], backends.ErrConflict)
	assert.Contains(t, errs[2].Error(), "already exists", "the grid's own reason")
	assert.Empty(t, markedWith(sim, "record:host", "ns/bad"))
	good := []int{0, 1, 3}
	var goodClaims []backends.Claim
	var goodAllocs []backends.Allocation
	var goodErrs []error
	for _, i := range good {
		goodClaims, goodAllocs, goodErrs = append(goodClaims, cs[i]), append(goodAllocs, allocs[i]), append(goodErrs, errs[i])
	}
	requireOwnAddresses(t, sim, "record:host", goodClaims, goodAllocs, goodErrs)
	assert.Equal(t, 2, sim.CountObjectCalls("POST", "request"), "the searches, the refused batch")
	assert.Equal(t, len(cs), sim.CountObjectCalls("POST", "record:host"), "then one create per claim")
}

// A batch whose answer is lost is resent by the HTTP client; the claims keep
// the objects of the first attempt, found by their markers, and the resent
// request's duplicates are released: no claim is handed a second address.
func TestLostBatchAnswerIsAdoptedByMarkers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lost     int // answers lost in a row
		requests int // request objects sent
	}{
		{name: "the resent request answers", lost: 1, requests: 1 + 2 + 1},
		{name: "every answer lost", lost: 3, requests: 1 + 3 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			cfg := batchOf(config(sim, "10.0.0.0/24"), 5)
			cfg.HTTP.RetryMax = 2
			b := validatedBackend(t, sim, cfg)
			sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Method: "POST", BodyContains: "func:nextavailableip", Times: tc.lost})

			cs := numbered(5)
			allocs, errs := allocateAll(b, cs)
			requireOwnAddresses(t, sim, "fixedaddress", cs, allocs, errs)
			assert.Equal(t, tc.requests, sim.CountObjectCalls("POST", "request"),
				"the searches, one batch resent by the client only, the searches resolving it")
			assert.Zero(t, sim.CountObjectCalls("POST", "fixedaddress"), "nothing allocated again")
			for _, a := range allocs {
				// The first attempt took .2 to .6; resent ones took later addresses.
				assert.True(t, a.Address.Addr().Less(netip.MustParseAddr("10.0.0.7")), "%s is not the first attempt's", a.Address)
			}
			assert.Len(t, sim.Objects("fixedaddress"), 1+len(cs), "the gateway and one object per claim")
		})
	}
}

// A source with fewer free addresses than the batch gives out what it has,
// one claim at a time, and the rest move on to the next source together.
func TestBatchLargerThanItsSourceFillsItAndMovesOn(t *testing.T) {
	sim := newSim(t, "10.0.0.0/29", "10.0.1.0/24")
	b := validatedBackend(t, sim, batchOf(config(sim, "10.0.0.0/29", "10.0.1.0/24"), 8))

	cs := numbered(8)
	allocs, errs := allocateAll(b, cs)
	requireOwnAddresses(t, sim, "fixedaddress", cs, allocs, errs)
	inFirst := 0
	for _, a := range allocs {
		if netip.MustParsePrefix("10.0.0.0/29").Contains(a.Address.Addr()) {
			inFirst++
		}
	}
	assert.Equal(t, 5, inFirst, "the first source's five free addresses")
	assert.Equal(t, 1+1+1, sim.CountObjectCalls("POST", "request"), "the searches, the batch the first source refuses, the other three together")
	assert.Equal(t, 5+1, sim.CountObjectCalls("POST", "fixedaddress"), "five claims alone, the sixth finding the source full")

	// A full pool fails each claim of a batch with ErrExhausted.
	_, errs = allocateAll(newBackend(t, batchOf(config(sim, "10.0.0.0/29"), 2)), []backends.Claim{claim("x"), claim("y")})
	for _, err := range errs {
		assert.ErrorIs(t, err, backends.ErrExhausted)
	}
}

// allocatedOneByOne gives n claims an address each in 10.0.0.0/24, without
// batching, for release tests to start from.
func allocatedOneByOne(t *testing.T, n int) (*wapisim.Server, []backends.Claim, []backends.Allocation) {
	t.Helper()
	sim := newSim(t, "10.0.0.0/24")
	cs := numbered(n)
	allocs, errs := allocateAll(newBackend(t, batchOf(config(sim, "10.0.0.0/24"), 1)), cs)
	requireOwnAddresses(t, sim, "fixedaddress", cs, allocs, errs)
	return sim, cs, allocs
}

func TestBatchedReleaseDeletesExactlyTheClaimsObjects(t *testing.T) {
	sim, cs, allocs := allocatedOneByOne(t, 6)
	sim.AddFixedAddress("default", "10.0.0.200", map[string]string{infoblox.DefaultMarkerEA: "other/claim"})

	b := newBackend(t, batchOf(config(sim, "10.0.0.0/24"), 5))
	sim.ResetCalls()
	for _, err := range releaseAll(b, cs[:5], allocs[:5]) {
		require.NoError(t, err)
	}
	assert.Equal(t, 2, sim.CountObjectCalls("POST", "request"), "one request of searches, one of deletions")
	assert.Len(t, sim.Calls(), 2, "nothing else: %v", sim.Calls())
	for _, c := range cs[:5] {
		assert.Empty(t, markedWith(sim, "fixedaddress", c.Marker), c.Marker)
	}
	assert.Len(t, markedWith(sim, "fixedaddress", cs[5].Marker), 1, "a claim not released keeps its object")
	assert.Len(t, sim.Objects("fixedaddress"), 3, "the gateway, the sixth claim's and someone else's")

	// Releasing again finds nothing and deletes nothing.
	sim.ResetCalls()
	for _, err := range releaseAll(b, cs[:5], allocs[:5]) {
		require.NoError(t, err)
	}
	assert.Zero(t, sim.CountCalls("DELETE", ""))
	assert.Equal(t, 1, sim.CountObjectCalls("POST", "request"), "the searches only")
}

// A bulk deletion that fails falls back to one deletion per object, so each
// claim gets its own answer.
func TestFailedBulkDeleteFallsBackToOneDeletePerObject(t *testing.T) {
	sim, cs, allocs := allocatedOneByOne(t, 3)

	cfg := batchOf(config(sim, "10.0.0.0/24"), 3)
	cfg.HTTP.RetryMax = 1
	b := newBackend(t, cfg)
	sim.ResetCalls()
	sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultStatus, Status: 502, Method: "POST", BodyContains: `"DELETE"`, Times: 2})
	for _, err := range releaseAll(b, cs, allocs) {
		require.NoError(t, err)
	}
	assert.Equal(t, 1+2, sim.CountObjectCalls("POST", "request"), "the searches, the bulk deletion and its retry")
	assert.Equal(t, len(cs), sim.CountCalls("DELETE", ""), "then one deletion per object")
	for _, c := range cs {
		assert.Empty(t, markedWith(sim, "fixedaddress", c.Marker), c.Marker)
	}
}
