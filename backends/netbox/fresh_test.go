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
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// The conformance suite holds what a fresh claim gets on every system; this
// is when NetBox is asked.

// A fresh claim (backends.Claim.Fresh) is reserved while its marker search
// runs: here the search and the reservation each wait for the other to
// arrive, which a search made first waits for in vain. Either way the
// claim costs the search and the reservation, and holds one record.
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

			// Each request waits, up to 2 s, for the other to arrive: sent
			// one after the other, the first waits in vain.
			reserving, searching := make(chan struct{}), make(chan struct{})
			var searchWaitedInVain, reservationWaitedInVain atomic.Bool
			meet := func(mine, theirs chan struct{}, inVain *atomic.Bool) func() {
				return func() {
					close(mine)
					select {
					case <-theirs:
					case <-time.After(2 * time.Second):
						inVain.Store(true)
					}
				}
			}
			sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodPost, PathContains: "/available-ips/",
				Then: meet(reserving, searching, &reservationWaitedInVain)})
			sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodGet, PathContains: "/api/ipam/ip-addresses/",
				Then: meet(searching, reserving, &searchWaitedInVain)})

			c := claim("m0")
			c.Fresh = tc.fresh
			alloc, err := b.Allocate(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, tc.searchFirst, searchWaitedInVain.Load(), "the search ran before the reservation")
			assert.False(t, reservationWaitedInVain.Load(), "the reservation ran before the search")
			assert.Len(t, sim.Calls(), 2, "the marker search and the reservation")
			records := marked(sim, c.Marker)
			require.Len(t, records, 1)
			assert.Equal(t, alloc.Address.String(), records[0].Address)
		})
	}
}

// A fresh claim whose search beside the reservation fails is answered an
// error: nothing confirmed that the claim held no record before. What was
// reserved for it stays, for it may be a record the claim held, adopted
// after a resent request. Its next call, not fresh, searches first and
// keeps the oldest of the claim's records: the one it held before, at an
// address above the one just reserved, or else the one just reserved.
func TestFreshClaimWhoseSearchFailedIsAnsweredOnItsNextCall(t *testing.T) {
	for _, tc := range []struct {
		name, held, want string
		// resent: the reservation's first answer is lost, and the request
		// resent.
		resent bool
		// left is how many records carry the marker after the first call.
		left int
	}{
		{name: "held nothing", want: "10.0.0.2/24", left: 1},
		{name: "held a record", held: "10.0.0.50/24", want: "10.0.0.50/24", left: 2},
		{name: "held a record, the reservation resent", held: "10.0.0.50/24", want: "10.0.0.50/24", resent: true, left: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			uncertain := 0
			b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), func(c *netbox.Config) { c.Uncertain = func() { uncertain++ } })
			ctx := context.Background()
			_, err := b.Validate(ctx)
			require.NoError(t, err)
			c := claim("m0")
			if tc.held != "" {
				sim.AddIPAddress(tc.held, netboxsim.IPOptions{CustomFields: map[string]any{"capi_ipam_claim": c.Marker}})
			}
			// The search fails; reading and deleting one record do not.
			sim.InjectFault(netboxsim.Fault{Kind: httpfault.Status, Status: http.StatusBadGateway, Times: 100,
				Match: func(method, path string, _ []byte) bool {
					return method == http.MethodGet && path == "/api/ipam/ip-addresses/"
				}})

			if tc.resent {
				sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: http.MethodPost, PathContains: "/available-ips/"})
			}
			c.Fresh = true
			_, err = b.Allocate(ctx, c)
			require.ErrorIs(t, err, backends.ErrUnavailable)
			if !tc.resent {
				assert.Contains(t, err.Error(), "held no record before")
			}
			assert.Len(t, marked(sim, c.Marker), tc.left, "nothing is deleted on an unconfirmed answer: what was reserved, and what the claim held, stay")
			posts := sim.CountCalls(http.MethodPost, "/api/ipam/prefixes/")

			sim.ClearFaults()
			c.Fresh = false
			uncertain = 0
			alloc, err := b.Allocate(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, posts, sim.CountCalls(http.MethodPost, "/api/ipam/prefixes/"), "no further reservation")
			assert.Equal(t, tc.want, alloc.Address.String())
			records := marked(sim, c.Marker)
			require.Len(t, records, tc.left, "the claim's other records are left: a second writer may have bound one")
			assert.Equal(t, tc.want, records[0].Address, "the oldest is the claim's")
			if tc.left > 1 {
				assert.Positive(t, uncertain, "the late-record sweep deletes the others, keeping the one the claim is bound to")
			}
		})
	}
}
