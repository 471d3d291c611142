package netbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
)

// Pools on one NetBox, with one token, check the provider's tag and marker
// field once between them; another token, or a pool that needs another
// field, checks again, and a check that failed is not remembered.
func TestPoolsOfOneNetBoxConfirmTheirSetupOnce(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24")
	setupRequests := func() int {
		return sim.CountCalls("GET", "/api/extras/tags/") + sim.CountCalls("GET", "/api/extras/custom-fields/")
	}
	ctx := context.Background()
	validate := func(b backends.Backend) {
		t.Helper()
		_, err := b.Validate(ctx)
		require.NoError(t, err)
	}

	validate(newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...)))
	first := setupRequests()
	require.Positive(t, first)
	validate(newBackend(t, sim, withSources(prefixSources("10.0.1.0/24")...)))
	assert.Equal(t, first, setupRequests(), "a second pool of the same setup asks nothing of it")

	other := "fedcba9876543210fedcba9876543210fedcba98"
	sim.AddToken(other, true)
	validate(newBackend(t, sim, withSources(prefixSources("10.0.2.0/24")...), func(c *netbox.Config) { c.Token = other }))
	assert.Greater(t, setupRequests(), first, "another token checks again")

	needsField := func(c *netbox.Config) { c.Reservation.CustomFields = map[string]string{"rack": "r1"} }
	_, err := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), needsField).Validate(ctx)
	require.ErrorIs(t, err, backends.ErrNotFound, "a field NetBox does not have yet")
	sim.AddCustomField("rack", "exact")
	before := setupRequests()
	validate(newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), needsField))
	assert.Greater(t, setupRequests(), before, "a failed check is not remembered")
}
