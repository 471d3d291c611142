package infoblox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// Pools on one grid, with one user, check the marker's attribute
// definition and the network view once between them; other credentials
// check again, and a check that failed is not remembered.
func TestPoolsOfOneGridConfirmTheirSetupOnce(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24", "10.0.1.0/24")
	setupRequests := func() int {
		return sim.CountCalls("GET", "/wapi/v2.12/extensibleattributedef") + sim.CountCalls("GET", "/wapi/v2.12/networkview")
	}
	ctx := context.Background()

	_, err := newBackend(t, config(sim, "10.0.0.0/24")).Validate(ctx)
	require.NoError(t, err)
	first := setupRequests()
	require.Positive(t, first)
	_, err = newBackend(t, config(sim, "10.0.1.0/24")).Validate(ctx)
	require.NoError(t, err)
	assert.Equal(t, first, setupRequests(), "a second pool of the same setup asks nothing of it")

	sim.AddUser("other", password, wapisim.Permissions{Write: true, Superuser: true})
	other := config(sim, "10.0.1.0/24")
	other.Username = "other"
	_, err = newBackend(t, other).Validate(ctx)
	require.NoError(t, err)
	assert.Greater(t, setupRequests(), first, "other credentials check again")

	withEA := config(sim, "10.0.0.0/24")
	withEA.Reservation.ExtensibleAttributes = map[string]string{"Site": "ams1"}
	_, err = newBackend(t, withEA).Validate(ctx)
	require.ErrorIs(t, err, backends.ErrInvalidConfig, "an attribute the grid does not define yet")
	sim.AddEADefinition("Site", "STRING")
	before := setupRequests()
	_, err = newBackend(t, withEA).Validate(ctx)
	require.NoError(t, err)
	assert.Greater(t, setupRequests(), before, "a failed check is not remembered")
}
