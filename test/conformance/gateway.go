package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// gatewayAgreesAtValidationAndAllocation: validation demands that the IPAM
// system hold exactly the gateways allocation gives, whatever the source's
// size. A /31 or /32 source, and a source narrowed by prefixLength to /31s,
// give no gateway, so a pool over them with nothing recorded validates and
// hands out every address without one; a source narrowed to /30s gives each
// /30 its own first usable address, so with nothing recorded validation
// names that gateway. A claim requesting an address gets the same: in a /31
// or /32 every address is a machine's, and in a /30 of a narrowed source
// the first usable address is the gateway, never a machine's. cidr is a
// /27 the case carves its networks from.
func gatewayAgreesAtValidationAndAllocation(t *testing.T, h Harness, cidr string) {
	parts := subnets(cidr, 29)
	for n, tc := range []struct {
		name         string
		network      string
		prefixLength int
		bits         int
		addresses    int
		// requested is the address the first claim requests: the one a
		// gateway rule of /30s and wider would take.
		requested netip.Addr
	}{
		{"/31", subnets(parts[0], 31)[0], 0, 31, 2, nth(parts[0], 1)},
		{"/32", subnets(parts[0], 32)[4], 0, 32, 1, nth(parts[0], 4)},
		{"/29 narrowed to /31s", parts[1], 31, 31, 6, nth(parts[1], 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b := h.BarePool(t, tc.network, PoolOptions{PrefixLength: tc.prefixLength})
			_, err := b.Validate(ctx)
			require.NoError(t, err, "allocation gives %s no gateway: validation must demand none", tc.network)
			network := netip.MustParsePrefix(tc.network)
			seen := map[netip.Addr]bool{}
			for i := range tc.addresses {
				c := claim(fmt.Sprintf("gw-%d-%d", n, i))
				asks := i == 0 && backends.Offers(b, backends.RoleAddressRequester)
				if asks {
					c = requesting(c.Name, tc.requested)
				}
				alloc, err := b.Allocate(ctx, c)
				require.NoError(t, err)
				if asks {
					assert.Equal(t, tc.requested, alloc.Address.Addr(), "a requested address of a subnet without a gateway")
				}
				assert.True(t, network.Contains(alloc.Address.Addr()), "%s outside %s", alloc.Address, network)
				assert.Equal(t, tc.bits, alloc.Address.Bits(), "the machine's prefix length")
				assert.False(t, alloc.Gateway.IsValid(), "%s: a /%d subnet has no gateway, got %s", alloc.Address, tc.bits, alloc.Gateway)
				assert.False(t, seen[alloc.Address.Addr()], "%s handed out twice", alloc.Address)
				seen[alloc.Address.Addr()] = true
			}
		})
	}
	t.Run("/29 narrowed to /30s", func(t *testing.T) {
		b := h.BarePool(t, parts[2], PoolOptions{PrefixLength: 30})
		_, err := b.Validate(context.Background())
		require.ErrorIs(t, err, backends.ErrInvalidConfig, "each /30's first usable address is a gateway nothing holds")
		assert.Contains(t, err.Error(), nth(parts[2], 1).String(), "validation names the gateway allocation gives the first /30")
	})
	t.Run("/29 narrowed to /30s, gateways held", func(t *testing.T) {
		ctx := context.Background()
		b := h.NarrowedPool(t, parts[3], 30)
		validated(t, b)
		if !backends.Offers(b, backends.RoleAddressRequester) {
			t.Skipf("the driver offers no %s", backends.RoleAddressRequester)
		}
		gateway := nth(parts[3], 5)
		_, err := b.Allocate(ctx, requesting("gw-requested-gateway", gateway))
		var unavailable *backends.RequestedUnavailableError
		require.ErrorAs(t, err, &unavailable, "the second /30's gateway is no machine's")
		assert.Contains(t, unavailable.Why, "gateway", "refused as the gateway, before whoever holds it")
		alloc, err := b.Allocate(ctx, requesting("gw-requested-beside", gateway.Next()))
		require.NoError(t, err)
		assert.Equal(t, 30, alloc.Address.Bits(), "the machine's prefix length")
		assert.Equal(t, gateway, alloc.Gateway, "the gateway of its own /30")
	})
}
