package netboxsim

import (
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConcurrentAllocationIsAtomic(t *testing.T) {
	s := newSim(t)
	pid := s.AddPrefix("10.20.0.0/26", PrefixOptions{})
	path := fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/", pid)

	const n = 40
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client(t, s)
			status, body, _ := c.do(http.MethodPost, path, []any{map[string]any{"description": fmt.Sprint(i)}})
			if assert.Equal(t, http.StatusCreated, status, string(body)) {
				got[i] = addresses(t, decode(t, body))[0]
			}
		}()
	}
	wg.Wait()

	seen := map[string]bool{}
	prefix := netip.MustParsePrefix("10.20.0.0/26")
	for _, a := range got {
		require.False(t, seen[a], "address %s handed out twice", a)
		seen[a] = true
		p := netip.MustParsePrefix(a)
		assert.Equal(t, 26, p.Bits())
		assert.True(t, prefix.Contains(p.Addr()))
		assert.NotEqual(t, "10.20.0.0", p.Addr().String(), "network address allocated")
		assert.NotEqual(t, "10.20.0.63", p.Addr().String(), "broadcast address allocated")
	}
	assert.Len(t, s.IPAddresses(), n)

	// 62 usable - 40 used = 22 left.
	status, body, _ := client(t, s).do(http.MethodPost, path, make([]any, 30))
	require.Equal(t, http.StatusConflict, status)
	assert.Equal(t, map[string]any{"detail": insufficient}, decode(t, body))
}

func TestPrefixAvailabilityRules(t *testing.T) {
	tests := []struct {
		name      string
		cidr      string
		opts      PrefixOptions
		seed      func(s *Server)
		wantFirst string
		wantCount int
	}{
		{name: "ipv4 skips network and broadcast", cidr: "192.0.2.0/29", wantFirst: "192.0.2.1/29", wantCount: 6},
		{name: "ipv4 pool uses every address", cidr: "192.0.2.0/29", opts: PrefixOptions{IsPool: true}, wantFirst: "192.0.2.0/29", wantCount: 8},
		{name: "ipv4 /31 uses both", cidr: "192.0.2.4/31", wantFirst: "192.0.2.4/31", wantCount: 2},
		{name: "ipv4 /32 uses the one", cidr: "192.0.2.9/32", wantFirst: "192.0.2.9/32", wantCount: 1},
		{name: "ipv6 skips subnet-router anycast only", cidr: "2001:db8::/125", wantFirst: "2001:db8::1/125", wantCount: 7},
		{name: "ipv6 /64 is lazy", cidr: "2001:db8:1::/64", wantFirst: "2001:db8:1::1/64", wantCount: 1000},
		{name: "ipv6 /127 uses both", cidr: "2001:db8::/127", wantFirst: "2001:db8::/127", wantCount: 2},
		{name: "ipv6 pool uses the first", cidr: "2001:db8::/126", opts: PrefixOptions{IsPool: true}, wantFirst: "2001:db8::/126", wantCount: 4},
		{
			name: "used hosts count whatever their mask", cidr: "192.0.2.0/29", wantFirst: "192.0.2.3/29", wantCount: 4,
			seed: func(s *Server) {
				s.AddIPAddress("192.0.2.1/32", IPOptions{})
				s.AddIPAddress("192.0.2.2/24", IPOptions{})
			},
		},
		{
			name: "addresses in another VRF do not count", cidr: "192.0.2.0/29", wantFirst: "192.0.2.1/29", wantCount: 6,
			seed: func(s *Server) { s.AddIPAddress("192.0.2.1/29", IPOptions{VRF: s.AddVRF("other", "")}) },
		},
		{
			name: "populated ranges are excluded", cidr: "192.0.2.0/29", wantFirst: "192.0.2.4/29", wantCount: 3,
			seed: func(s *Server) { s.AddIPRange("192.0.2.1/29", "192.0.2.3/29", RangeOptions{MarkPopulated: true}) },
		},
		{
			name: "unpopulated ranges are not excluded", cidr: "192.0.2.0/29", wantFirst: "192.0.2.1/29", wantCount: 6,
			seed: func(s *Server) { s.AddIPRange("192.0.2.1/29", "192.0.2.3/29", RangeOptions{}) },
		},
		{
			name: "global container counts every VRF", cidr: "192.0.2.0/29", opts: PrefixOptions{Status: "container"},
			wantFirst: "192.0.2.2/29", wantCount: 5,
			seed: func(s *Server) { s.AddIPAddress("192.0.2.1/29", IPOptions{VRF: s.AddVRF("other", "")}) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t)
			if tt.seed != nil {
				tt.seed(s)
			}
			pid := s.AddPrefix(tt.cidr, tt.opts)
			avail := list(t, client(t, s).getJSON(fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/?limit=0", pid), 200))
			require.Len(t, avail, tt.wantCount)
			first := obj(t, avail[0])
			assert.Equal(t, tt.wantFirst, first["address"])
			assert.Nil(t, first["vrf"])
			assert.EqualValues(t, familyNumber(netip.MustParsePrefix(tt.cidr).Addr()), first["family"])

			// POST allocates exactly what GET announced first.
			status, body, _ := client(t, s).do(http.MethodPost, fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/", pid), map[string]any{})
			require.Equal(t, http.StatusCreated, status, string(body))
			assert.Equal(t, tt.wantFirst, obj(t, decode(t, body))["address"], "a single object gets a single object back")
		})
	}
}

func TestAvailableIPsListLimit(t *testing.T) {
	s := newSim(t)
	vrf := s.AddVRF("blue", "65000:1")
	pid := s.AddPrefix("10.1.0.0/16", PrefixOptions{VRF: vrf})
	c := client(t, s)
	for query, want := range map[string]int{"": 50, "?limit=7": 7, "?limit=0": 1000, "?limit=5000": 1000, "?limit=x": 50} {
		avail := list(t, c.getJSON(fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/%s", pid, query), 200))
		assert.Len(t, avail, want, query)
	}
	entry := obj(t, list(t, c.getJSON(fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/?limit=1", pid), 200))[0])
	vrfJSON := obj(t, entry["vrf"])
	assert.Equal(t, "blue (65000:1)", vrfJSON["display"])
	requireKeys(t, vrfJSON, "id", "url", "display", "name", "rd", "description")
}

func TestRangeAllocation(t *testing.T) {
	s := newSim(t)
	rid := s.AddIPRange("10.0.1.10/24", "10.0.1.12/24", RangeOptions{})
	full := s.AddIPRange("10.0.2.10/24", "10.0.2.20/24", RangeOptions{MarkPopulated: true})
	c := client(t, s)
	path := fmt.Sprintf("/api/ipam/ip-ranges/%d/available-ips/", rid)

	status, body, _ := c.do(http.MethodPost, path, []any{map[string]any{}, map[string]any{}})
	require.Equal(t, http.StatusCreated, status, string(body))
	assert.Equal(t, []string{"10.0.1.10/24", "10.0.1.11/24"}, addresses(t, decode(t, body)), "range mask, start first")

	status, body, _ = c.do(http.MethodPost, path, []any{map[string]any{}, map[string]any{}})
	require.Equal(t, http.StatusConflict, status)
	assert.Equal(t, map[string]any{"detail": insufficient}, decode(t, body))

	status, body, _ = c.do(http.MethodPost, path, map[string]any{})
	require.Equal(t, http.StatusCreated, status, string(body))
	assert.Equal(t, "10.0.1.12/24", obj(t, decode(t, body))["address"])

	fullPath := fmt.Sprintf("/api/ipam/ip-ranges/%d/available-ips/", full)
	assert.Empty(t, list(t, c.getJSON(fullPath, 200)), "a populated range offers nothing")
	status, body, _ = c.do(http.MethodPost, fullPath, map[string]any{})
	require.Equal(t, http.StatusConflict, status)
	assert.Equal(t, insufficient, obj(t, decode(t, body))["detail"])
}

func TestPrefixExhaustion(t *testing.T) {
	s := newSim(t)
	pid := s.AddPrefix("10.0.0.0/30", PrefixOptions{})
	s.AddIPAddress("10.0.0.1/30", IPOptions{})
	s.AddIPAddress("10.0.0.2/30", IPOptions{})
	status, body, _ := client(t, s).do(http.MethodPost, fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/", pid), []any{map[string]any{}})
	require.Equal(t, http.StatusConflict, status)
	assert.JSONEq(t, `{"detail":"Insufficient resources are available to satisfy the request"}`, string(body))

	status, body, _ = client(t, s).do(http.MethodPost, "/api/ipam/prefixes/999/available-ips/", map[string]any{})
	require.Equal(t, http.StatusNotFound, status)
	assert.JSONEq(t, `{"detail":"No Prefix matches the given query."}`, string(body))
}

func TestAllocationRequestFields(t *testing.T) {
	s := newSim(t)
	vrf := s.AddVRF("blue", "")
	other := s.AddVRF("red", "")
	tenant := s.AddTenant("Acme", "acme")
	s.AddTag("Managed", "managed")
	s.AddCustomField("claim", "exact")
	pid := s.AddPrefix("10.9.0.0/24", PrefixOptions{VRF: vrf})
	path := fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/", pid)
	c := client(t, s)

	req := map[string]any{
		"address": "1.2.3.4/32", "vrf": other, // both overwritten by NetBox
		"status": "reserved", "role": "vip", "tenant": map[string]any{"slug": "acme"},
		"dns_name": "Node-1.Example.COM", "description": "claimed",
		"tags":          []any{map[string]any{"name": "Managed", "slug": "managed"}},
		"custom_fields": map[string]any{"claim": "ns/claim-1"},
	}
	status, body, _ := c.do(http.MethodPost, path, []any{req})
	require.Equal(t, http.StatusCreated, status, string(body))
	ip := obj(t, list(t, decode(t, body))[0])
	assert.Equal(t, "10.9.0.1/24", ip["address"])
	assert.EqualValues(t, vrf, obj(t, ip["vrf"])["id"])
	assert.EqualValues(t, tenant, obj(t, ip["tenant"])["id"])
	assert.Equal(t, map[string]any{"value": "reserved", "label": "Reserved"}, ip["status"])
	assert.Equal(t, map[string]any{"value": "vip", "label": "VIP"}, ip["role"])
	assert.Equal(t, "node-1.example.com", ip["dns_name"], "NetBox lowercases dns_name")
	assert.Equal(t, "managed", obj(t, list(t, ip["tags"])[0])["slug"])
	assert.Equal(t, map[string]any{"claim": "ns/claim-1"}, ip["custom_fields"])

	failures := []struct {
		name string
		req  map[string]any
		want map[string]any
	}{
		{"unknown tag", map[string]any{"tags": []any{map[string]any{"name": "Nope", "slug": "nope"}}},
			map[string]any{"tags": []any{"Related object not found using the provided attributes: {'name': 'Nope', 'slug': 'nope'}"}}},
		{"unknown tag id", map[string]any{"tags": []any{99}},
			map[string]any{"tags": []any{"Related object not found using the provided numeric ID: 99"}}},
		{"unknown tenant", map[string]any{"tenant": map[string]any{"slug": "ghost"}},
			map[string]any{"tenant": []any{"Related object not found using the provided attributes: {'slug': 'ghost'}"}}},
		{"bad dns name", map[string]any{"dns_name": "bad name"},
			map[string]any{"dns_name": []any{"Only alphanumeric characters, asterisks, hyphens, periods, and underscores are allowed in DNS names"}}},
		{"bad status", map[string]any{"status": "bogus"}, map[string]any{"status": []any{"bogus is not a valid choice."}}},
		{"unknown custom field", map[string]any{"custom_fields": map[string]any{"nope": "x"}},
			map[string]any{"__all__": []any{"Unknown field name 'nope' in custom field data."}}},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			before := len(s.IPAddresses())
			status, body, _ := c.do(http.MethodPost, path, []any{map[string]any{}, tt.req})
			require.Equal(t, http.StatusBadRequest, status, string(body))
			assert.Equal(t, []any{map[string]any{}, tt.want}, decode(t, body), "list errors carry {} for valid items")
			assert.Len(t, s.IPAddresses(), before, "nothing is created when one item fails")
		})
	}

	t.Run("non-dict item crashes like NetBox", func(t *testing.T) {
		status, body, _ := c.do(http.MethodPost, path, []any{"x"})
		require.Equal(t, http.StatusInternalServerError, status)
		assert.Equal(t, "TypeError", obj(t, decode(t, body))["exception"])
	})

	t.Run("hook sees the created addresses", func(t *testing.T) {
		var mu sync.Mutex
		var seen []IPAddress
		s.OnAllocate(func(created []IPAddress) { mu.Lock(); seen = created; mu.Unlock() })
		status, body, _ := c.do(http.MethodPost, path, []any{map[string]any{}, map[string]any{}})
		require.Equal(t, http.StatusCreated, status, string(body))
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, seen, 2)
		assert.Equal(t, addresses(t, decode(t, body)), []string{seen[0].Address, seen[1].Address})
		assert.Equal(t, vrf, seen[0].VRF)
	})
}

// insufficient is NetBox 4.7.3's 409 detail for available-ips.
const insufficient = "Insufficient resources are available to satisfy the request"

func TestAllocationsOfOneParentHoldItsLock(t *testing.T) {
	s := newSim(t)
	pid := s.AddPrefix("10.21.0.0/24", PrefixOptions{})
	path := fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/", pid)
	s.SetAllocationCost(time.Millisecond, time.Millisecond)
	// The hook runs while the allocation still holds the parent's lock; it
	// lingers so that overlapping allocations would be seen.
	var mu sync.Mutex
	inside, most := 0, 0
	s.OnAllocate(func([]IPAddress) {
		mu.Lock()
		inside++
		most = max(most, inside)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		inside--
		mu.Unlock()
	})

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			status, body, _ := client(t, s).do(http.MethodPost, path, []any{map[string]any{"description": fmt.Sprint(i)}, map[string]any{}})
			assert.Equal(t, http.StatusCreated, status, string(body))
		})
	}
	wg.Wait()
	assert.Equal(t, 1, most, "allocations of one prefix run one after another")
	assert.Len(t, s.IPAddresses(), 16)
}
