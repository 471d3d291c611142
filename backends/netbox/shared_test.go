package netbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
)

// The pools of one NetBox and token share the listing behind their strays
// for as long as the caller accepts, each keeping what lies outside its own
// sources; another token, or a caller that asks for a fresh listing, lists.
func TestStraysShareOneListingBetweenPools(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24", "10.0.1.0/24")
	const otherToken = "89abcdef0123456789abcdef0123456789abcdef"
	sim.AddToken(otherToken, true)
	first := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	second := newBackend(t, sim, withSources(prefixSources("10.0.1.0/24")...))
	otherCredentials := newBackend(t, sim, withSources(prefixSources("10.0.1.0/24")...), func(c *netbox.Config) { c.Token = otherToken })
	ctx := context.Background()
	a, err := first.Allocate(ctx, claim("a"))
	require.NoError(t, err)
	b, err := second.Allocate(ctx, claim("b"))
	require.NoError(t, err)
	// Each backend prepared (setup checks) before the calls are counted.
	_, err = otherCredentials.Records(ctx, "ns/")
	require.NoError(t, err)

	addresses := func(recs []backends.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.Address.Addr().String())
		}
		return out
	}
	listings := func() int { return sim.CountCalls("GET", "/api/ipam/ip-addresses/") }
	sim.ResetCalls()

	strays, err := first.Strays(ctx, "ns/", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{b.Address.Addr().String()}, addresses(strays), "the first pool's strays: the second's record")
	assert.Equal(t, 1, listings())

	strays, err = second.Strays(ctx, "ns/", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{a.Address.Addr().String()}, addresses(strays), "the second pool's strays, from the same listing")
	assert.Equal(t, 1, listings(), "the second pool took the first's listing")

	_, err = otherCredentials.Strays(ctx, "ns/", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2, listings(), "another token lists for itself: it may see other records")

	_, err = second.Strays(ctx, "ns/other/", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 3, listings(), "another prefix lists")

	_, err = second.Strays(ctx, "ns/", 0)
	require.NoError(t, err)
	assert.Equal(t, 4, listings(), "maxAge 0 lists")
}
