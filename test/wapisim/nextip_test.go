package wapisim

import (
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"testing"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextAvailableIPRules(t *testing.T) {
	tests := []struct {
		name  string
		setup func(s *Server) string // returns the func: argument
		want  []string               // successive allocations
	}{
		{"skips the network and broadcast addresses", func(s *Server) string {
			s.AddNetwork("default", "10.1.0.0/30", nil)
			return "10.1.0.0/30"
		}, []string{"10.1.0.1", "10.1.0.2"}},
		{"skips held addresses and the broadcast", func(s *Server) string {
			s.AddNetwork("default", "10.1.0.0/29", nil)
			s.AddFixedAddress("default", "10.1.0.1", nil)
			s.AddHostRecord(HostRecord{Name: "h1", Addresses: []string{"10.1.0.3"}})
			return "10.1.0.0/29"
		}, []string{"10.1.0.2", "10.1.0.4", "10.1.0.5", "10.1.0.6"}},
		{"skips DHCP ranges of the network", func(s *Server) string {
			s.AddNetwork("default", "10.1.0.0/28", nil)
			s.AddRange("default", "10.1.0.2", "10.1.0.12")
			return "10.1.0.0/28,default"
		}, []string{"10.1.0.1", "10.1.0.13", "10.1.0.14"}},
		{"other network views do not count", func(s *Server) string {
			s.AddNetwork("default", "10.1.0.0/30", nil)
			s.AddNetwork("lab", "10.1.0.0/30", nil)
			s.AddFixedAddress("default", "10.1.0.1", nil)
			return "10.1.0.0/30,lab"
		}, []string{"10.1.0.1", "10.1.0.2"}},
		{"a range reference stays inside the range", func(s *Server) string {
			s.AddNetwork("default", "10.1.0.0/24", nil)
			r := s.AddRange("default", "10.1.0.10", "10.1.0.12")
			s.AddFixedAddress("default", "10.1.0.11", nil)
			return r
		}, []string{"10.1.0.10", "10.1.0.12"}},
		{"a network reference", func(s *Server) string {
			return s.AddNetwork("default", "10.1.0.0/30", nil)
		}, []string{"10.1.0.1", "10.1.0.2"}},
		{"an address span", func(s *Server) string {
			s.AddNetwork("default", "10.1.0.0/24", nil)
			s.AddFixedAddress("default", "10.1.0.21", nil)
			return "10.1.0.20-10.1.0.22"
		}, []string{"10.1.0.20", "10.1.0.22"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t)
			arg := tt.setup(s)
			c := client(t, s, writerUser)
			view := "default"
			if arg == "10.1.0.0/30,lab" {
				view = "lab"
			}
			for _, want := range tt.want {
				status, body, _ := c.do(http.MethodPost, "fixedaddress?_return_fields=ipv4addr", map[string]any{
					"ipv4addr": funcPrefix + arg, "match_client": "RESERVED", "network_view": view})
				require.Equal(t, http.StatusCreated, status, body)
				assert.Contains(t, body, fmt.Sprintf(`"ipv4addr": %q`, want))
			}
			status, body, resp := c.do(http.MethodPost, "fixedaddress", map[string]any{
				"ipv4addr": funcPrefix + arg, "match_client": "RESERVED", "network_view": view})
			kind := "network"
			if len(arg) > 6 && (arg[:6] == "range/" || arg == "10.1.0.20-10.1.0.22") {
				kind = "range"
			}
			text := "Cannot find 1 available IP address(es) in this " + kind + "."
			requireWAPIError(t, status, body, resp, 400, "AdmConDataError", "Client.Ibap.Data", text)
		})
	}
}

func TestNextAvailableIPErrors(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.2.0.0/24", nil)
	c := client(t, s, writerUser)

	status, body, resp := c.do(http.MethodPost, "fixedaddress",
		map[string]any{"ipv4addr": "func:nextavailableip:10.9.0.0/24,default", "match_client": "RESERVED"})
	requireWAPIError(t, status, body, resp, 404, "AdmConDataNotFoundError", "Client.Ibap.Data.NotFound",
		"Network 10.9.0.0/24 in network view default not found")

	ref := "network/ZG5zLm5ldHdvcmskMTAuOS4wLjAvMjQvMA:10.9.0.0/24/default"
	status, body, resp = c.do(http.MethodPost, "fixedaddress",
		map[string]any{"ipv4addr": "func:nextavailableip:" + ref, "match_client": "RESERVED"})
	requireWAPIError(t, status, body, resp, 404, "AdmConDataNotFoundError", "Client.Ibap.Data.NotFound",
		"Reference "+ref+" not found")
	assert.Empty(t, s.Objects("fixedaddress"))
}

func TestNextAvailableIPv6(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "2001:db8:1::/64", nil)
	s.AddFixedAddress("default", "2001:db8:1::1", nil)
	_, om := objectManager(t, s, writerUser)

	fa, err := om.AllocateIP("default", "2001:db8:1::/64", "", true, "00:01:00:01:aa:bb", "vm1", "",
		nil, "", "", "", nil, "", false, nil, false)
	require.NoError(t, err)
	assert.Equal(t, "2001:db8:1::2", fa.IPv6Address, "::0 and the held ::1 are skipped")
	assert.Equal(t, "00:01:00:01:aa:bb", fa.Duid)
	assert.Regexp(t, `^ipv6fixedaddress/\w+:2001%3Adb8%3A1%3A%3A2/default$`, fa.Ref)

	got, err := om.GetFixedAddressByRef(fa.Ref)
	require.NoError(t, err)
	assert.Equal(t, "vm1", *got.Name)

	c := client(t, s, writerUser)
	status, body, _ := c.do(http.MethodPost, "ipv6fixedaddress", map[string]any{"ipv6addr": "2001:db8:1::9"})
	assert.Equal(t, http.StatusBadRequest, status, "duid is required")
	assert.Contains(t, body, "duid")
}

func TestHostRecordAllocation(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.3.0.0/24", nil)
	s.AddNetwork("default", "2001:db8:3::/64", nil)
	s.AddZone("default", "example.com")
	s.AddEADefinition("CAPI-Claim", "STRING")
	_, om := objectManager(t, s, writerUser)

	h, err := om.CreateHostRecord(true, false, "node1.example.com", "default", "default", "10.3.0.0/24",
		"2001:db8:3::/64", "", "", "", "", false, 0, "machine", ibclient.EA{"CAPI-Claim": "ns/c1"}, nil, false)
	require.NoError(t, err)
	require.Len(t, h.Ipv4Addrs, 1)
	require.Len(t, h.Ipv6Addrs, 1)
	assert.Equal(t, "10.3.0.1", *h.Ipv4Addrs[0].Ipv4Addr)
	assert.Equal(t, "2001:db8:3::1", *h.Ipv6Addrs[0].Ipv6Addr)
	assert.Equal(t, "example.com", h.Zone)
	assert.Equal(t, "default", *h.View)
	assert.Equal(t, "ns/c1", h.Ea["CAPI-Claim"])
	assert.Regexp(t, `^record:host/\w+:node1\.example\.com/default$`, h.Ref)
	assert.Regexp(t, `^record:host_ipv4addr/\w+:10\.3\.0\.1/node1\.example\.com/default$`, h.Ipv4Addrs[0].Ref)

	t.Run("a name outside every zone", func(t *testing.T) {
		_, err := om.CreateHostRecord(true, false, "node2.other.org", "default", "default", "10.3.0.0/24",
			"", "", "", "", "", false, 0, "", nil, nil, false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "The action is not allowed. A parent was not found.")
	})
	t.Run("the same name twice", func(t *testing.T) {
		c := client(t, s, writerUser)
		status, body, resp := c.do(http.MethodPost, "record:host", map[string]any{
			"name": "node1.example.com", "ipv4addrs": []any{map[string]any{"ipv4addr": "func:nextavailableip:10.3.0.0/24"}}})
		requireWAPIError(t, status, body, resp, 400, "AdmConDataError", "Client.Ibap.Data.Conflict",
			"The record 'node1.example.com' already exists.")
	})
	t.Run("without DNS no zone is needed", func(t *testing.T) {
		h, err := om.CreateHostRecord(false, false, "bare", "default", "", "10.3.0.0/24",
			"", "", "", "", "", false, 0, "", nil, nil, false)
		require.NoError(t, err)
		assert.Equal(t, "10.3.0.2", *h.Ipv4Addrs[0].Ipv4Addr, "the first host's address is held")
		assert.Regexp(t, `^record:host/\w+:bare/%20$`, h.Ref)
	})
	t.Run("object function form", func(t *testing.T) {
		n := 1
		info := ibclient.NewIpNextAvailable("node3.example.com", "record:host",
			map[string]string{"network": "10.3.0.0/24", "network_view": "default"},
			map[string][]string{"exclude": {"10.3.0.3", "10.3.0.4"}}, false, nil, "", false, &n, "IPV4",
			true, false, "", "", "default", "default", false, 0, nil)
		conn := connector(t, s, writerUser)
		ref, err := conn.CreateObject(info)
		require.NoError(t, err)
		o, ok := s.Object(ref)
		require.True(t, ok)
		assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.3.0.5")}, o.Addresses)
	})
}

func TestConcurrentAllocationsAreDistinct(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.4.0.0/24", nil)
	var hooked sync.Map
	s.OnAllocate(func(o Object) { hooked.Store(o.Ref, o.Addresses[0]) })

	const n = 100
	addrs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, om := objectManager(t, s, writerUser)
			fa, err := om.AllocateIP("default", "10.4.0.0/24", "", false, "", fmt.Sprintf("vm%d", i), "",
				nil, "RESERVED", "", "", nil, "", false, nil, false)
			if assert.NoError(t, err) {
				addrs[i] = fa.IPv4Address
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, a := range addrs {
		require.NotEmpty(t, a)
		require.False(t, seen[a], "address %s handed out twice", a)
		seen[a] = true
	}
	assert.Len(t, s.Objects("fixedaddress"), n)
	count := 0
	hooked.Range(func(_, _ any) bool { count++; return true })
	assert.Equal(t, n, count, "OnAllocate ran once per allocation")
}

func TestOnAllocateActsMidFlight(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.5.0.0/24", nil)
	s.AddEADefinition("CAPI-Claim", "STRING")
	s.OnAllocate(func(o Object) { s.RemoveEA(o.Ref, "CAPI-Claim") })
	c := client(t, s, writerUser)
	ref := c.post("fixedaddress", map[string]any{"ipv4addr": "func:nextavailableip:10.5.0.0/24",
		"match_client": "RESERVED", "extattrs": map[string]any{"CAPI-Claim": map[string]any{"value": "ns/a"}}})
	assert.Empty(t, s.EAs(ref), "the hook ran before the client got its answer")
}
