package netbox_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// The conformance suite holds what a fresh claim gets on every system; this
// is when NetBox is asked.

// A fresh claim (backends.Claim.Fresh) is reserved while its marker search
// runs: here the search waits for the reservation to arrive, which a
// search made first waits for in vain. Either way the claim costs the
// search and the reservation, and holds one record.
func TestFreshClaimIsReservedWhileItsSearchRuns(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fresh       bool
		searchFirst bool
	}{
		{"fresh", true, false},
		{"not fresh", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
			ctx := context.Background()
			_, err := b.Validate(ctx)
			require.NoError(t, err)
			sim.ResetCalls()

			reserving := make(chan struct{})
			sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodPost, PathContains: "/available-ips/", Then: func() { close(reserving) }})
			var searchWaitedInVain atomic.Bool
			sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodGet, PathContains: "/api/ipam/ip-addresses/", Then: func() {
				select {
				case <-reserving:
				case <-time.After(2 * time.Second):
					searchWaitedInVain.Store(true)
				}
			}})

			c := claim("m0")
			c.Fresh = tc.fresh
			alloc, err := b.Allocate(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, tc.searchFirst, searchWaitedInVain.Load(), "the search ran before the reservation")
			assert.Len(t, sim.Calls(), 2, "the marker search and the reservation")
			records := marked(sim, c.Marker)
			require.Len(t, records, 1)
			assert.Equal(t, alloc.Address.String(), records[0].Address)
		})
	}
}

// A fresh claim whose search beside the reservation fails is answered an
// error, though the reservation was made: nothing confirmed that the claim
// held no record before. Its next call, not fresh, finds the reservation
// by its marker and makes none.
func TestFreshClaimWhoseSearchFailedGetsItsRecordOnItsNextCall(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	ctx := context.Background()
	_, err := b.Validate(ctx)
	require.NoError(t, err)
	sim.InjectFault(netboxsim.Fault{Kind: httpfault.Status, Status: http.StatusBadGateway, Method: http.MethodGet, PathContains: "/api/ipam/ip-addresses/", Times: 100})

	c := claim("m0")
	c.Fresh = true
	_, err = b.Allocate(ctx, c)
	require.ErrorIs(t, err, backends.ErrUnavailable)
	assert.Contains(t, err.Error(), "held no record before")
	require.Len(t, marked(sim, c.Marker), 1, "the reservation was made")
	assert.Equal(t, 1, sim.CountCalls(http.MethodPost, "/api/ipam/prefixes/"))

	sim.ClearFaults()
	c.Fresh = false
	alloc, err := b.Allocate(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2/24", alloc.Address.String())
	assert.Equal(t, 1, sim.CountCalls(http.MethodPost, "/api/ipam/prefixes/"), "no second reservation")
	assert.Len(t, marked(sim, c.Marker), 1)
}
