package fidelity

import (
	"regexp"
	"testing"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"github.com/stretchr/testify/require"
)

// networkCases carve child networks and containers from a network
// container with the client's own AllocateNetwork and
// AllocateNetworkContainer: func:nextavailablenetwork and the
// _object_function form.
var networkCases = []clientCase{
	{
		name: "AllocateNetwork carves the next free networks of a container, IPv4 and IPv6",
		seed: seedNetwork,
		run: func(t *testing.T, e *env) any {
			c4, err := e.om.CreateNetworkContainer("default", "10.40.0.0/16", false, "parent", nil)
			require.NoError(t, err)
			_, err = e.om.CreateNetworkContainer("default", "2001:db8:40::/48", true, "parent", nil)
			require.NoError(t, err)
			var got []any
			for range 2 {
				n, err := e.om.AllocateNetwork("default", "10.40.0.0/16", false, 24, "cluster-a", ibclient.EA{"Site": "lab"})
				require.NoError(t, err)
				got = append(got, ref(n.Ref), n.Cidr, n.NetviewName)
			}
			n6, err := e.om.AllocateNetwork("default", "2001:db8:40::/48", true, 64, "", nil)
			require.NoError(t, err)
			found, err := e.om.GetNetworkContainer("default", "10.40.0.0/16", false, nil)
			require.NoError(t, err)
			carved, err := e.om.GetNetwork("default", "10.40.1.0/24", false, nil)
			require.NoError(t, err)
			return append(got, ref(n6.Ref), n6.Cidr, ref(found.Ref), found.Cidr, ref(c4.Ref) == ref(found.Ref),
				carved.Comment, map[string]any(carved.Ea))
		},
		want: []any{"network/*:10.40.0.0/24/default", "10.40.0.0/24", "default",
			"network/*:10.40.1.0/24/default", "10.40.1.0/24", "default",
			"ipv6network/*:2001%3Adb8%3A40%3A%3A/64/default", "2001:db8:40::/64",
			"networkcontainer/*:10.40.0.0/16/default", "10.40.0.0/16", true,
			"cluster-a", map[string]any{"Site": "lab"}},
	},
	{
		name: "AllocateNetworkContainer until the container is full, then DeleteNetworkContainer",
		run: func(t *testing.T, e *env) any {
			parent, err := e.om.CreateNetworkContainer("default", "10.41.0.0/23", false, "", nil)
			require.NoError(t, err)
			var got []any
			for range 2 {
				c, err := e.om.AllocateNetworkContainer("default", "10.41.0.0/23", false, 24, "", nil)
				require.NoError(t, err)
				got = append(got, ref(c.Ref), c.Cidr)
			}
			_, err = e.om.AllocateNetworkContainer("default", "10.41.0.0/23", false, 24, "", nil)
			require.Error(t, err)
			full := regexp.MustCompile(`Can not find requested number of networks`).MatchString(err.Error())
			_, err = e.om.DeleteNetworkContainer(parent.Ref)
			require.NoError(t, err)
			return append(got, full, len(e.s.Objects("networkcontainer")))
		},
		want: []any{"networkcontainer/*:10.41.0.0/24/default", "10.41.0.0/24",
			"networkcontainer/*:10.41.1.0/24/default", "10.41.1.0/24", true, 0},
	},
}
