package netbox_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

func requesting(name, addr string) backends.Claim {
	c := claim(name)
	c.Requested = netip.MustParseAddr(addr)
	return c
}

// beforeCreate puts a proxy in front of sim that runs seed once, just
// before the first creation of an IP address at a given address reaches
// NetBox: someone else reserving the address between the provider's look
// and its create.
func beforeCreate(t *testing.T, sim *netboxsim.Server, seed func()) string {
	t.Helper()
	target, err := url.Parse(sim.URL())
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/ipam/ip-addresses/" {
			once.Do(seed)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// NetBox's own uniqueness rules decide whether it refuses a second IP
// address at one address: ENFORCE_GLOBAL_UNIQUE for the global table,
// enforce_unique for a VRF, and never for two addresses whose roles may
// share one (vip, anycast, …). The provider never gives a requested address
// that something holds, whether NetBox would refuse the duplicate or not,
// and a record made at the same time as the claim's wins over it.
func TestRequestedAddressIsNeverShared(t *testing.T) {
	const want = "10.9.0.50"
	for _, tc := range []struct {
		name string
		// globalUnique is ENFORCE_GLOBAL_UNIQUE.
		globalUnique bool
		// role is the pool's reservation role, and the role of the record
		// someone else holds.
		role string
		// before seeds the record before the claim looks; otherwise
		// between its look and its create.
		before bool
		// vrf puts the prefix in a VRF without enforce_unique.
		vrf  bool
		says string
	}{
		{name: "held before the claim looks", globalUnique: true, before: true, says: "held by NetBox IP address"},
		{name: "held before, NetBox would accept a duplicate", globalUnique: false, before: true, says: "held by NetBox IP address"},
		{name: "held before by a vip, the pool's role vip", globalUnique: true, role: "vip", before: true, says: "held by NetBox IP address"},
		{name: "taken meanwhile, NetBox refuses the duplicate", globalUnique: true, says: "held by NetBox IP address"},
		{name: "taken meanwhile, ENFORCE_GLOBAL_UNIQUE off", globalUnique: false, says: "held by NetBox IP address"},
		{name: "taken meanwhile by a vip, the pool's role vip", globalUnique: true, role: "vip", says: "held by NetBox IP address"},
		{name: "taken meanwhile, a VRF without enforce_unique", globalUnique: true, vrf: true, says: "VRF blue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t)
			sim.SetEnforceGlobalUnique(tc.globalUnique)
			var vrf int32
			source := netbox.Source{Kind: netbox.SourcePrefix, CIDR: netip.MustParsePrefix("10.9.0.0/24")}
			if tc.vrf {
				vrf = sim.AddVRF("blue", "")
				sim.SetVRFEnforceUnique(vrf, false)
				source.VRF = "blue"
			}
			sim.AddPrefixWithGateway("10.9.0.0/24", netboxsim.PrefixOptions{VRF: vrf})
			seed := func() {
				sim.AddIPAddress(want+"/24", netboxsim.IPOptions{VRF: vrf, Role: tc.role, Description: "the DNS team's"})
			}
			endpoint := sim.URL()
			if tc.before {
				seed()
			} else {
				endpoint = beforeCreate(t, sim, seed)
			}
			b := newBackend(t, sim, withSources(source), func(c *netbox.Config) {
				c.URL = endpoint
				c.Reservation.Role = tc.role
			})
			ctx := context.Background()
			_, err := b.Allocate(ctx, requesting("vip", want))
			require.ErrorIs(t, err, backends.ErrRequestedUnavailable)
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), "carries no marker")
			assert.Empty(t, marked(sim, "ns/vip"), "the claim keeps no record")
			var at []netboxsim.IPAddress
			for _, ip := range sim.IPAddresses() {
				if strings.HasPrefix(ip.Address, want+"/") {
					at = append(at, ip)
				}
			}
			require.Len(t, at, 1, "only the other record holds the address")
			assert.Equal(t, "the DNS team's", at[0].Description)
		})
	}
}

// TestRequestedAddressWhereNetBoxSaysWho: what holds an address is what
// NetBox counts in the source's VRF, whatever the record's mask; another
// VRF's record holds nothing here, and a range marked populated holds every
// address in it.
func TestRequestedAddressWhereNetBoxSaysWho(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seed    func(sim *netboxsim.Server)
		inRange bool
		addr    string
		says    string // "" when the claim gets the address
	}{
		{name: "a record with another mask", seed: func(sim *netboxsim.Server) {
			sim.AddIPAddress("10.9.1.60/32", netboxsim.IPOptions{Status: "reserved"})
		}, addr: "10.9.1.60", says: "held by NetBox IP address"},
		{name: "a record in another VRF", seed: func(sim *netboxsim.Server) {
			sim.AddIPAddress("10.9.1.61/24", netboxsim.IPOptions{VRF: sim.AddVRF("other", "")})
		}, addr: "10.9.1.61"},
		{name: "a deprecated record still holds it", seed: func(sim *netboxsim.Server) {
			sim.AddIPAddress("10.9.1.62/24", netboxsim.IPOptions{Status: "deprecated"})
		}, addr: "10.9.1.62", says: "held by NetBox IP address"},
		{name: "a populated range that is no source", seed: func(sim *netboxsim.Server) {
			sim.AddIPRange("10.9.1.100/24", "10.9.1.120/24", netboxsim.RangeOptions{MarkPopulated: true})
		}, addr: "10.9.1.110", says: "inside range"},
		{name: "a populated range that is the source", inRange: true, seed: func(sim *netboxsim.Server) {
			sim.AddIPRange("10.9.1.100/24", "10.9.1.120/24", netboxsim.RangeOptions{MarkPopulated: true})
		}, addr: "10.9.1.110", says: "marks populated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.9.1.0/24")
			tc.seed(sim)
			sources := prefixSources("10.9.1.0/24")
			if tc.inRange {
				sources = []netbox.Source{{Kind: netbox.SourceIPRange, Start: netip.MustParseAddr("10.9.1.100"), End: netip.MustParseAddr("10.9.1.120")}}
			}
			b := newBackend(t, sim, withSources(sources...))
			_, err := b.Validate(context.Background())
			require.NoError(t, err)
			sim.ResetCalls()
			alloc, err := b.Allocate(context.Background(), requesting("wants", tc.addr))
			if tc.says == "" {
				require.NoError(t, err)
				assert.Len(t, sim.Calls(), 4, "the marker search, the look at the address, the create, the look after it (docs/netbox.md)")
				assert.Equal(t, tc.addr, alloc.Address.Addr().String())
				assert.Equal(t, "vrf/global", alloc.Scope)
				return
			}
			require.ErrorIs(t, err, backends.ErrRequestedUnavailable)
			assert.Contains(t, err.Error(), tc.says)
			assert.Empty(t, marked(sim, "ns/wants"))
		})
	}
}
