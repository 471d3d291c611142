package wapisim

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNextAvailableNetworkCarvesFirstFitAligned: a network or container
// created with func:nextavailablenetwork is the first free block of the
// container, aligned to its length, past the networks and containers
// already inside it; both argument forms and both families.
func TestNextAvailableNetworkCarvesFirstFitAligned(t *testing.T) {
	s := newSim(t)
	c := client(t, s, adminUser)
	c.post("networkview", map[string]any{"name": "lab"})
	c.post("networkcontainer", map[string]any{"network": "10.20.0.0/16"})
	c.post("networkcontainer", map[string]any{"network": "10.20.0.0/16", "network_view": "lab"})
	c.post("ipv6networkcontainer", map[string]any{"network": "2001:db8:20::/48"})
	c.post("network", map[string]any{"network": "10.20.0.64/26"}) // taken by hand, inside the first /24

	for _, tc := range []struct {
		name, typ, network, view, want string
	}{
		{"past a smaller network inside the first block", "network", "func:nextavailablenetwork:10.20.0.0/16,default,24", "", "10.20.1.0/24"},
		{"the next block", "network", "func:nextavailablenetwork:10.20.0.0/16,default,24", "", "10.20.2.0/24"},
		{"a smaller block fills the gap before the hand-made network", "network", "func:nextavailablenetwork:10.20.0.0/16,default,26", "", "10.20.0.0/26"},
		{"then past it", "network", "func:nextavailablenetwork:10.20.0.0/16,default,26", "", "10.20.0.128/26"},
		{"a container is carved too", "networkcontainer", "func:nextavailablenetwork:10.20.0.0/16,default,20", "", "10.20.16.0/20"},
		{"the two-argument form, in the object's view", "network", "func:nextavailablenetwork:10.20.0.0/16,24", "lab", "10.20.0.0/24"},
		{"IPv6 /64s", "ipv6network", "func:nextavailablenetwork:2001:db8:20::/48,default,64", "", "2001:db8:20::/64"},
		{"the next IPv6 /64", "ipv6network", "func:nextavailablenetwork:2001:db8:20::/48,default,64", "", "2001:db8:20:1::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"network": tc.network, "comment": "carved"}
			if tc.view != "" {
				body["network_view"] = tc.view
			}
			status, out, _ := c.do(http.MethodPost, tc.typ+"?_return_fields=network,network_view,comment,network_container", body)
			require.Equal(t, http.StatusCreated, status, out)
			assert.Contains(t, out, fmt.Sprintf(`"network": %q`, tc.want))
			assert.Contains(t, out, `"comment": "carved"`)
			assert.NotContains(t, out, `"network_container": "/"`, "the child names its container")
		})
	}
}

// TestNextAvailableNetworkWhenTheContainerIsFull: NIOS's data error, with
// nothing created; a missing container and a length not longer than the
// container's are refused.
func TestNextAvailableNetworkWhenTheContainerIsFull(t *testing.T) {
	s := newSim(t)
	c := client(t, s, adminUser)
	c.post("networkcontainer", map[string]any{"network": "10.21.0.0/23"})
	for range 2 {
		c.post("network", map[string]any{"network": "func:nextavailablenetwork:10.21.0.0/23,default,24"})
	}
	for _, tc := range []struct {
		name, network string
		status        int
		code, text    string
	}{
		{"full", "func:nextavailablenetwork:10.21.0.0/23,default,24", 400, codeData, "Can not find requested number of networks"},
		{"no such container", "func:nextavailablenetwork:10.99.0.0/16,default,24", 404, codeDataNotFound,
			"Network container 10.99.0.0/16 in network view default not found"},
		{"not longer than the container", "func:nextavailablenetwork:10.21.0.0/23,default,23", 400, codeProto,
			`Invalid value for cidr: "23": the prefix length must be longer than the container's /23 and at most /32`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := c.do(http.MethodPost, "network", map[string]any{"network": tc.network})
			require.Equal(t, tc.status, status, body)
			e := wapiErr(t, body)
			assert.Equal(t, tc.code, e["code"])
			assert.Equal(t, tc.text, e["text"])
		})
	}
	assert.Len(t, s.Objects("network"), 2, "nothing created by a refused carve")
}

// TestConcurrentCarvesAreDisjoint: carves at once from one container never
// hand out overlapping children.
func TestConcurrentCarvesAreDisjoint(t *testing.T) {
	s := newSim(t)
	c := client(t, s, adminUser)
	c.post("networkcontainer", map[string]any{"network": "10.22.0.0/20"})
	var wg sync.WaitGroup
	statuses := make([]int, 16)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.try(http.MethodPost, "network", map[string]any{"network": "func:nextavailablenetwork:10.22.0.0/20,default,24"})
			if err == nil {
				statuses[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	for _, status := range statuses {
		assert.Equal(t, http.StatusCreated, status)
	}
	seen := map[string]bool{}
	for _, o := range s.Objects("network") {
		assert.False(t, seen[o.Prefix.String()], "carved twice: %s", o.Prefix)
		seen[o.Prefix.String()] = true
	}
	assert.Len(t, seen, 16)
	status, body, _ := c.do(http.MethodPost, "network", map[string]any{"network": "func:nextavailablenetwork:10.22.0.0/20,default,24"})
	assert.Equal(t, http.StatusBadRequest, status, body)
}

// TestNextAvailableNetworkObjectFunction: the _object_function form the go
// client's AllocateNetworkByEA and AllocateNetworkContainer send; its
// search ignores the object's network view, as NIOS's does.
func TestNextAvailableNetworkObjectFunction(t *testing.T) {
	s := newSim(t)
	c := client(t, s, adminUser)
	c.post("extensibleattributedef", map[string]any{"name": "Site", "type": "STRING"})
	c.post("networkview", map[string]any{"name": "lab"})
	c.post("networkcontainer", map[string]any{"network": "10.23.0.0/16", "extattrs": map[string]any{"Site": map[string]any{"value": "a"}}})
	c.post("networkcontainer", map[string]any{"network": "10.24.0.0/16", "network_view": "lab"})
	fn := func(params map[string]any, cidr int, exclude ...string) map[string]any {
		p := map[string]any{"cidr": cidr}
		if exclude != nil {
			p["exclude"] = exclude
		}
		return map[string]any{"_object_function": "next_available_network", "_object": "networkcontainer",
			"_object_parameters": params, "_parameters": p, "_result_field": "networks", "network_view": "lab"}
	}

	status, body, _ := c.do(http.MethodPost, "network?_return_fields=network", map[string]any{
		"network": fn(map[string]any{"*Site": "a"}, 24, "10.23.0.0/24")})
	require.Equal(t, http.StatusCreated, status, body)
	assert.Contains(t, body, `"network": "10.23.1.0/24"`, "by extensible attribute, past the excluded block")

	status, body, _ = c.do(http.MethodPost, "network", map[string]any{"network_view": "lab",
		"network": fn(map[string]any{"network": "10.24.0.0/16"}, 24)})
	require.Equal(t, http.StatusBadRequest, status, body)
	assert.Equal(t, `The search parameters {"network": "10.24.0.0/16"} for object networkcontainer did not return any result`,
		wapiErr(t, body)["text"], "a container of another view is not found without naming its view")

	status, body, _ = c.do(http.MethodPost, "network?_return_fields=network,network_view", map[string]any{"network_view": "lab",
		"network": fn(map[string]any{"network": "10.24.0.0/16", "network_view": "lab"}, 24)})
	require.Equal(t, http.StatusCreated, status, body)
	assert.Contains(t, body, `"network": "10.24.0.0/24"`)
	assert.Contains(t, body, `"network_view": "lab"`)
}

// TestNextAvailableNetworkFunctionOnlyLists: a container's
// _function=next_available_network answers candidates and creates
// nothing; a GET of it is refused as NIOS refuses it.
func TestNextAvailableNetworkFunctionOnlyLists(t *testing.T) {
	s := newSim(t)
	c := client(t, s, adminUser)
	ref := c.post("networkcontainer", map[string]any{"network": "10.25.0.0/22"})
	c.post("network", map[string]any{"network": "10.25.1.0/24"})

	status, body, _ := c.do(http.MethodPost, ref+"?_function=next_available_network", map[string]any{"cidr": 24, "num": 2})
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"networks": ["10.25.0.0/24", "10.25.2.0/24"]}`, body)
	assert.Len(t, s.Objects("network"), 1, "nothing created")

	status, body, _ = c.do(http.MethodPost, ref+"?_function=next_available_network", map[string]any{"cidr": 24, "num": 4})
	require.Equal(t, http.StatusBadRequest, status, body)
	assert.Equal(t, "Can not find requested number of networks", wapiErr(t, body)["text"])

	status, body, _ = c.do(http.MethodGet, ref+"?_function=next_available_network", nil)
	require.Equal(t, http.StatusBadRequest, status, body)
	assert.Equal(t, "Function next_available_network illegal with this method", wapiErr(t, body)["text"])
}

// TestDeletingAContainerDeletesWhatItHolds, unless remove_subnets=false.
func TestDeletingAContainerDeletesWhatItHolds(t *testing.T) {
	s := newSim(t)
	c := client(t, s, adminUser)
	outer := c.post("networkcontainer", map[string]any{"network": "10.26.0.0/16"})
	inner := c.post("networkcontainer", map[string]any{"network": "func:nextavailablenetwork:10.26.0.0/16,default,20"})
	c.post("network", map[string]any{"network": "func:nextavailablenetwork:10.26.0.0/20,default,24"})
	c.post("fixedaddress", map[string]any{"ipv4addr": "10.26.0.5", "match_client": "RESERVED"})
	kept := c.post("networkcontainer", map[string]any{"network": "10.27.0.0/16"})
	c.post("network", map[string]any{"network": "10.27.1.0/24"})

	status, body, _ := c.do(http.MethodGet, inner+"?_return_fields=network_container", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"network_container": "10.26.0.0/16"`)

	status, body, _ = c.do(http.MethodDelete, outer, nil)
	require.Equal(t, http.StatusOK, status, body)
	status, body, _ = c.do(http.MethodDelete, kept+"?remove_subnets=false", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Empty(t, s.Objects("networkcontainer"))
	assert.Empty(t, s.Objects("fixedaddress"))
	nets := s.Objects("network")
	require.Len(t, nets, 1, "only the network of the container deleted with remove_subnets=false stays")
	assert.Equal(t, "10.27.1.0/24", nets[0].Prefix.String())
}
