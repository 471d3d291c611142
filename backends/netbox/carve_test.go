package netbox_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

func TestCarvingPoolRefusesWhatAChildCannotHave(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*netbox.Config)
		want   string
	}{
		{"a length out of range", func(c *netbox.Config) { c.ChildPrefixLength = 129 }, "out of range"},
		{"an ip-range source", func(c *netbox.Config) {
			c.Sources = []netbox.Source{{Kind: netbox.SourceIPRange, Start: netip.MustParseAddr("10.0.0.1"), End: netip.MustParseAddr("10.0.0.9")}}
		}, "ip-range source"},
		{"a prefix length", func(c *netbox.Config) { c.PrefixLength = 24 }, "prefix length"},
		{"a gateway", func(c *netbox.Config) { c.Gateway.Address = netip.MustParseAddr("10.0.0.1") }, "a gateway"},
		{"planned records", func(c *netbox.Config) {
			c.Planned = &netbox.Planned{Tag: "planned"}
			c.Reservation.DNSNamePattern = "{{ .ClaimName }}"
		}, "planned records"},
		{"an IP address role", func(c *netbox.Config) { c.Reservation.Role = "vip" }, "role"},
		{"a DNS name pattern", func(c *netbox.Config) { c.Reservation.DNSNamePattern = "{{ .ClaimName }}" }, "DNS name pattern"},
		{"an IP address's status", func(c *netbox.Config) { c.Reservation.Status = "slaac" }, `status "slaac"`},
		{"a scope of a kind prefixes do not take", func(c *netbox.Config) { c.ChildScope = netbox.Scope{Type: "dcim.device", Slug: "r1"} }, "child scope"},
		{"a scope without a slug", func(c *netbox.Config) { c.ChildScope = netbox.Scope{Type: "dcim.site"} }, "child scope"},
		{"a child role on a pool that carves nothing", func(c *netbox.Config) { c.ChildPrefixLength, c.ChildRole = 0, "nodes" }, "needs a child prefix length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := netbox.Config{URL: "http://127.0.0.1:1", Token: token, Sources: prefixSources("10.0.0.0/16"), ChildPrefixLength: 24}
			tc.mutate(&c)
			_, err := netbox.New(c)
			require.ErrorIs(t, err, backends.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCarvingPoolChecksTheChildFitsEachParent(t *testing.T) {
	for _, tc := range []struct {
		parent string
		length int
		fits   bool
	}{
		{"10.0.0.0/16", 24, true},
		{"10.0.0.0/16", 32, true},
		{"10.0.0.0/24", 24, false},
		{"10.0.0.0/24", 16, false},
		{"10.0.0.0/16", 64, false},
		{"2001:db8::/48", 64, true},
	} {
		t.Run(tc.parent+" by "+netip.PrefixFrom(netip.IPv6Unspecified(), tc.length).String(), func(t *testing.T) {
			sim := newSim(t)
			sim.AddPrefix(tc.parent, netboxsim.PrefixOptions{Status: "container"})
			b := newBackend(t, sim, withSources(prefixSources(tc.parent)...), func(c *netbox.Config) { c.ChildPrefixLength = tc.length })
			_, err := b.Validate(context.Background())
			if tc.fits {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, backends.ErrInvalidConfig)
			assert.Contains(t, err.Error(), "does not fit")
		})
	}
}

// A marker field an address pool's administrator made for IP addresses
// alone must apply to prefixes too before a carving pool marks a child.
func TestCarvingPoolNeedsTheMarkerFieldOnPrefixes(t *testing.T) {
	sim := newSim(t)
	sim.AddPrefix("10.0.0.0/16", netboxsim.PrefixOptions{Status: "container"})
	sim.AddCustomField("capi_ipam_claim", "exact")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/16")...), func(c *netbox.Config) { c.ChildPrefixLength = 24 })
	_, err := b.Validate(context.Background())
	require.ErrorIs(t, err, backends.ErrSetupRequired)
	assert.Contains(t, err.Error(), "add ipam.prefix to its object types")

	fresh := newSim(t)
	fresh.AddPrefix("10.0.0.0/16", netboxsim.PrefixOptions{Status: "container"})
	b = newBackend(t, fresh, withSources(prefixSources("10.0.0.0/16")...), func(c *netbox.Config) { c.ChildPrefixLength = 24 })
	_, err = b.Validate(context.Background())
	require.NoError(t, err, "the provider makes the field for both")
	alloc, err := b.Allocate(context.Background(), claim("m"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.0/24", alloc.Address.String())
}
