package netbox

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	netbox "github.com/netbox-community/go-netbox/v4"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// coreOnly is NetBox's driver with its optional roles hidden: the core a
// new system's driver must offer, and nothing more.
type coreOnly struct {
	backends.Driver[preparation, resolvedSource, ipRecord, netbox.IPAddressRequest]
}

// TestTheCoreAloneReservesLooksUpAndReleases: a driver that offers only the
// core Driver still reserves, looks up and releases; what needs a role it
// lacks is refused with a reason, never a panic.
func TestTheCoreAloneReservesLooksUpAndReleases(t *testing.T) {
	ctx := context.Background()
	sim := netboxsim.New()
	t.Cleanup(sim.Close)
	sim.AddToken(internalToken, true)
	sim.AddPrefixWithGateway("10.77.0.0/28", netboxsim.PrefixOptions{})
	cfg := Config{
		URL: sim.URL(), Token: internalToken,
		HTTP:    HTTPOptions{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
		Sources: []Source{{Kind: SourcePrefix, CIDR: netip.MustParsePrefix("10.77.0.0/28")}},
	}
	d, o, err := newDriver(cfg)
	require.NoError(t, err)
	b, err := backends.New(coreOnly{d}, o)
	require.NoError(t, err)
	for _, role := range []backends.Role{backends.RoleAddressRequester, backends.RolePlanAdopter, backends.RoleAuditLister, backends.RoleMACWriter} {
		assert.False(t, backends.Offers(b, role), "hidden: %s", role)
	}
	full, err := backends.New(d, o)
	require.NoError(t, err)
	for _, role := range []backends.Role{backends.RoleAddressRequester, backends.RolePlanAdopter, backends.RoleAuditLister} {
		assert.True(t, backends.Offers(full, role), "NetBox's driver offers %s", role)
	}

	_, err = b.Validate(ctx)
	require.NoError(t, err)
	c := backends.Claim{Marker: "ns/core", Namespace: "ns", Name: "core", ClusterName: "c1"}
	alloc, err := b.Allocate(ctx, c)
	require.NoError(t, err, "the core reserves")
	found, err := b.Lookup(ctx, c)
	require.NoError(t, err, "the core looks up")
	assert.Equal(t, alloc.Address, found.Address)

	// A claim whose record exists and that then requests the address
	// it holds keeps it: the core settles it without the role.
	holding := c
	holding.Requested = alloc.Address.Addr()
	kept, err := b.Allocate(ctx, holding)
	require.NoError(t, err, "a requested address the claim's record holds")
	assert.Equal(t, alloc.Address, kept.Address)

	requesting := backends.Claim{Marker: "ns/asks", Namespace: "ns", Name: "asks", ClusterName: "c1", Requested: netip.MustParseAddr("10.77.0.9")}
	_, err = b.Allocate(ctx, requesting)
	var unavailable *backends.RequestedUnavailableError
	require.ErrorAs(t, err, &unavailable, "a requested address needs an AddressRequester")
	assert.Contains(t, unavailable.Why, "AddressRequester")
	_, err = b.Records(ctx, "ns/")
	assert.ErrorIs(t, err, backends.ErrUnsupported, "the audit's listing needs an AuditLister")
	_, err = b.WriteMAC(ctx, backends.Record{Address: alloc.Address, Marker: c.Marker, Reference: alloc.Reference}, "00:11:22:33:44:55")
	assert.ErrorIs(t, err, backends.ErrNoMACMatch)

	require.NoError(t, b.Release(ctx, c, alloc.Reservation()), "the core releases")
	_, err = b.Lookup(ctx, c)
	assert.ErrorIs(t, err, backends.ErrNotFound)
	_, err = b.Restore(ctx, c, alloc.Address)
	assert.ErrorIs(t, err, backends.ErrUnsupported, "a restore at a free address needs an AddressRequester")

	o.Plans = true
	_, err = backends.New(coreOnly{d}, o)
	assert.ErrorIs(t, err, backends.ErrInvalidConfig, "a pool that adopts plans needs a PlanAdopter")
}
