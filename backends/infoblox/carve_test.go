package infoblox_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
)

func TestCarvingPoolRefusesWhatAChildCannotHave(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*infoblox.Config)
		want   string
	}{
		{"a length out of range", func(c *infoblox.Config) { c.ChildPrefixLength = 129 }, "out of range"},
		{"a range source", func(c *infoblox.Config) {
			c.Sources = []infoblox.Source{{Start: netip.MustParseAddr("10.0.0.1"), End: netip.MustParseAddr("10.0.0.9")}}
		}, "range source"},
		{"a prefix length", func(c *infoblox.Config) { c.PrefixLength = 24 }, "prefix length"},
		{"a gateway", func(c *infoblox.Config) { c.Gateway.Address = netip.MustParseAddr("10.0.0.1") }, "a gateway"},
		{"planned objects", func(c *infoblox.Config) { c.Planned = &infoblox.Planned{ExtensibleAttribute: "Owner"} }, "planned objects"},
		{"host records", func(c *infoblox.Config) { c.Reservation.ObjectType = infoblox.HostRecord }, "host records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t)
			c := config(sim, "10.0.0.0/16")
			c.ChildPrefixLength = 24
			tc.mutate(&c)
			_, err := infoblox.New(c)
			require.ErrorIs(t, err, backends.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCarvingPoolNeedsItsNetworkContainer(t *testing.T) {
	sim := newSim(t)
	c := config(sim, "10.0.0.0/16")
	c.ChildPrefixLength = 24
	b := newBackend(t, c)
	_, err := b.Validate(context.Background())
	require.ErrorIs(t, err, backends.ErrNotFound)
	assert.Contains(t, err.Error(), "network container 10.0.0.0/16 does not exist")

	sim.AddNetworkContainer("default", "10.0.0.0/16")
	u, err := b.Validate(context.Background())
	require.NoError(t, err)
	assert.Equal(t, backends.Usage{Total: 256}, u, "counted in /24s")
	sim.AddNetwork("default", "10.0.7.0/25", nil)
	sim.AddNetwork("default", "10.0.8.0/23", nil)
	u, err = b.Usage(context.Background())
	require.NoError(t, err)
	assert.Equal(t, backends.Usage{Total: 256, Used: 3}, u, "every network inside counts, whoever made it")
	alloc, err := b.Allocate(context.Background(), claim("m"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.0/24", alloc.Address.String())
}
