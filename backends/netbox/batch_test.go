package netbox_test

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// batchOf makes claims allocated or released at once share requests, n at
// a time. The window is long so that only a full batch starts: the tests
// then see exactly one batch, whatever the machine's speed.
func batchOf(n int) func(*netbox.Config) {
	return func(c *netbox.Config) { c.Batch = backends.BatchOptions{MaxSize: n, Window: time.Hour} }
}

func claims(names ...string) []backends.Claim {
	out := make([]backends.Claim, len(names))
	for i, n := range names {
		out[i] = claim(n)
	}
	return out
}

func numbered(n int) []backends.Claim {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("m-%02d", i)
	}
	return claims(names...)
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
// only record carries its marker.
func requireOwnAddresses(t *testing.T, sim *netboxsim.Server, cs []backends.Claim, allocs []backends.Allocation, errs []error) {
	t.Helper()
	seen := map[netip.Prefix]string{}
	for i, c := range cs {
		require.NoError(t, errs[i], c.Marker)
		require.NotContains(t, seen, allocs[i].Address, "%s and %s got the same address", seen[allocs[i].Address], c.Marker)
		seen[allocs[i].Address] = c.Marker
		records := marked(sim, c.Marker)
		require.Len(t, records, 1, c.Marker)
		assert.Equal(t, allocs[i].Address.String(), records[0].Address, c.Marker)
		assert.Equal(t, fmt.Sprintf("ipam/ip-addresses/%d", records[0].ID), allocs[i].Reference, c.Marker)
	}
}

func TestConcurrentAllocationsShareOneSearchAndOneRequest(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		name                string
		batch               func(*netbox.Config)
		searches, creations int
	}{
		{name: "batching off", batch: batchOf(1), searches: n, creations: n},
		{name: "batching on", batch: batchOf(n), searches: 1, creations: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), tc.batch)
			_, err := b.Validate(context.Background())
			require.NoError(t, err)
			sim.ResetCalls()

			cs := numbered(n)
			allocs, errs := allocateAll(b, cs)
			requireOwnAddresses(t, sim, cs, allocs, errs)
			assert.Equal(t, tc.searches, sim.CountCalls("GET", "/api/ipam/ip-addresses/"), "marker searches")
			assert.Equal(t, tc.creations, sim.CountCalls("POST", "/api/ipam/prefixes/"), "allocation requests")
			assert.Len(t, sim.Calls(), tc.searches+tc.creations, "nothing else")

			// Allocating again adopts: one search, nothing created.
			sim.ResetCalls()
			again, errs := allocateAll(b, cs)
			requireOwnAddresses(t, sim, cs, again, errs)
			assert.Equal(t, allocs, again)
			assert.Equal(t, tc.searches, len(sim.Calls()), "an existing reservation costs the marker search only")
		})
	}
}

// A claim whose object NetBox refuses (here by a custom validator on the
// description) makes NetBox refuse the whole list; the batch then sends one
// request per claim, and only that claim fails.
func TestFailingObjectInABatchDoesNotFailTheOthers(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	sim.SetDescriptionValidator(regexp.MustCompile(`^[^!]*$`))
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), batchOf(4))
	_, err := b.Validate(context.Background())
	require.NoError(t, err)
	sim.ResetCalls()

	cs := claims("a", "b", "bad!", "d")
	allocs, errs := allocateAll(b, cs)

	require.ErrorIs(t, errs[2], backends.ErrInvalidConfig)
	assert.Contains(t, errs[2].Error(), "Enter a valid value.", "NetBox's own reason")
	assert.Empty(t, marked(sim, "ns/bad!"))
	good := []int{0, 1, 3}
	var goodClaims []backends.Claim
	var goodAllocs []backends.Allocation
	var goodErrs []error
	for _, i := range good {
		goodClaims, goodAllocs, goodErrs = append(goodClaims, cs[i]), append(goodAllocs, allocs[i]), append(goodErrs, errs[i])
	}
	requireOwnAddresses(t, sim, goodClaims, goodAllocs, goodErrs)
	assert.Equal(t, 1+len(cs), sim.CountCalls("POST", "/api/ipam/prefixes/"), "the refused list, then one request per claim")
}

// A batch whose answer is lost is resent by the HTTP client; the claims keep
// the records of the first attempt, found by their markers, and the resent
// request's duplicates are released: no claim is handed a second address.
func TestLostBatchAnswerIsAdoptedByMarkers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lost  int // answers lost in a row
		posts int
	}{
		{name: "the resent request answers", lost: 1, posts: 2},
		{name: "every answer lost", lost: 3, posts: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), batchOf(5), func(c *netbox.Config) { c.HTTP.RetryMax = 2 })
			_, err := b.Validate(context.Background())
			require.NoError(t, err)
			sim.ResetCalls()
			sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "POST", PathContains: "available-ips", Times: tc.lost})

			cs := numbered(5)
			allocs, errs := allocateAll(b, cs)
			requireOwnAddresses(t, sim, cs, allocs, errs)
			assert.Equal(t, tc.posts, sim.CountCalls("POST", "/api/ipam/prefixes/"), "one batch, resent by the client only")
			for _, a := range allocs {
				// The first attempt took .2 to .6; resent ones took later addresses.
				assert.True(t, a.Address.Addr().Less(netip.MustParseAddr("10.0.0.7")), "%s is not the first attempt's", a.Address)
			}
			assert.Len(t, sim.IPAddresses(), 1+len(cs), "the gateway and one record per claim")
		})
	}
}

// A source with fewer free addresses than the batch gives out what it has,
// one claim at a time, and the rest move on to the next source together.
func TestBatchLargerThanItsSourceFillsItAndMovesOn(t *testing.T) {
	sim := newSim(t, "10.0.0.0/29", "10.0.1.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/29", "10.0.1.0/24")...), batchOf(8))
	_, err := b.Validate(context.Background())
	require.NoError(t, err)
	sim.ResetCalls()

	cs := numbered(8)
	allocs, errs := allocateAll(b, cs)
	requireOwnAddresses(t, sim, cs, allocs, errs)
	inFirst := 0
	for _, a := range allocs {
		if netip.MustParsePrefix("10.0.0.0/29").Contains(a.Address.Addr()) {
			inFirst++
		}
	}
	assert.Equal(t, 5, inFirst, "the first source's five free addresses")
	assert.Equal(t, 1+5+1, sim.CountCalls("POST", "/api/ipam/prefixes/1/"), "the batch (409), five claims alone, the sixth finding it full")
	assert.Equal(t, 1, sim.CountCalls("POST", "/api/ipam/prefixes/2/"), "the other three together")

	// A full pool fails each claim of a batch with ErrExhausted.
	_, errs = allocateAll(newBackend(t, sim, withSources(prefixSources("10.0.0.0/29")...), batchOf(2)), claims("x", "y"))
	for _, err := range errs {
		assert.ErrorIs(t, err, backends.ErrExhausted)
	}
}

// allocatedOneByOne gives n claims an address each in 10.0.0.0/24, without
// batching, for release tests to start from.
func allocatedOneByOne(t *testing.T, n int) (*netboxsim.Server, []backends.Claim, []backends.Allocation) {
	t.Helper()
	sim := newSim(t, "10.0.0.0/24")
	setup := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), batchOf(1))
	cs := numbered(n)
	allocs, errs := allocateAll(setup, cs)
	requireOwnAddresses(t, sim, cs, allocs, errs)
	return sim, cs, allocs
}

func TestBatchedReleaseDeletesExactlyTheClaimsRecords(t *testing.T) {
	sim, cs, allocs := allocatedOneByOne(t, 6)
	sim.AddIPAddress("10.0.0.200/24", netboxsim.IPOptions{Description: "someone else's"})

	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), batchOf(5))
	sim.ResetCalls()
	for _, err := range releaseAll(b, cs[:5], allocs[:5]) {
		require.NoError(t, err)
	}
	assert.Equal(t, 1, sim.CountCalls("GET", "/api/ipam/ip-addresses/"), "one marker search")
	assert.Equal(t, 1, sim.CountCalls("DELETE", "/api/ipam/ip-addresses/"), "one bulk delete")
	assert.Len(t, sim.Calls(), 2, "nothing else")
	for _, c := range cs[:5] {
		assert.Empty(t, marked(sim, c.Marker), c.Marker)
	}
	assert.Len(t, marked(sim, cs[5].Marker), 1, "a claim not released keeps its record")
	assert.Len(t, sim.IPAddresses(), 3, "the gateway, the sixth claim's and someone else's")

	// Releasing again finds nothing and deletes nothing.
	sim.ResetCalls()
	for _, err := range releaseAll(b, cs[:5], allocs[:5]) {
		require.NoError(t, err)
	}
	assert.Zero(t, sim.CountCalls("DELETE", ""))
}

// A bulk delete that fails falls back to one delete per record, so each
// claim gets its own answer.
func TestFailedBulkDeleteFallsBackToOneDeletePerRecord(t *testing.T) {
	sim, cs, allocs := allocatedOneByOne(t, 3)

	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), batchOf(3), func(c *netbox.Config) { c.HTTP.RetryMax = 1 })
	sim.ResetCalls()
	sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultStatus, Status: 502, Method: "DELETE", PathContains: "/api/ipam/ip-addresses/", Times: 2})
	for _, err := range releaseAll(b, cs, allocs) {
		require.NoError(t, err)
	}
	assert.Equal(t, 2+len(cs), sim.CountCalls("DELETE", ""), "the bulk delete and its retry, then one per record")
	for _, c := range cs {
		assert.Empty(t, marked(sim, c.Marker), c.Marker)
	}
}

// gunicorn, which serves NetBox, refuses request lines over 4094 bytes: a
// batch of long markers is searched in as many requests as it takes.
func TestLongMarkersAreSearchedInRequestsGunicornAccepts(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), batchOf(40))
	_, err := b.Validate(context.Background())
	require.NoError(t, err)
	sim.ResetCalls()

	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%02d", strings.Repeat("long-machine-name", 5), i)
	}
	cs := claims(names...)
	allocs, errs := allocateAll(b, cs)
	requireOwnAddresses(t, sim, cs, allocs, errs)
	searches := 0
	for _, c := range sim.Calls() {
		if c.Method == "GET" {
			searches++
			assert.Less(t, len("GET "+c.Path+"?"+c.Query+" HTTP/1.1"), 4094, "request line")
		}
	}
	assert.Equal(t, 2, searches, "the markers fill two searches")
	assert.Equal(t, 1, sim.CountCalls("POST", "/api/ipam/prefixes/"))
}
