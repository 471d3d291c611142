package infoblox_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

func requesting(name, addr string) backends.Claim {
	c := claim(name)
	c.Requested = netip.MustParseAddr(addr)
	return c
}

// What holds an address in the grid is whatever its ipv4address object
// names in the pool's network view, not only objects of the pool's own
// type: NIOS accepts a fixed address beside a host record without DHCP,
// and host records beside each other, but the provider never gives a
// requested address that anything holds. A host record made between the
// provider's look and its create wins over the claim's.
func TestRequestedAddressHeldByAnyObjectOfTheView(t *testing.T) {
	const network, want = "10.8.0.0/24", "10.8.0.70"
	for _, tc := range []struct {
		name       string
		objectType infoblox.ObjectType
		// seed holds the address; meanwhile seeds it between the
		// provider's look and its create.
		seed      func(sim *wapisim.Server)
		meanwhile bool
		says      string // "" when the claim gets the address
	}{
		{name: "a host record without DHCP, a fixed address pool", objectType: infoblox.FixedAddress, seed: func(sim *wapisim.Server) {
			sim.AddHostRecord(wapisim.HostRecord{Name: "vip.example.com", Addresses: []string{want}})
		}, says: "record:host/"},
		{name: "a fixed address, a host record pool", objectType: infoblox.HostRecord, seed: func(sim *wapisim.Server) {
			sim.AddFixedAddress("default", want, nil)
		}, says: "fixedaddress/"},
		{name: "a host record of another network view", objectType: infoblox.FixedAddress, seed: func(sim *wapisim.Server) {
			sim.AddNetworkView("other")
			sim.AddNetwork("other", network, nil)
			sim.AddHostRecord(wapisim.HostRecord{Name: "elsewhere", NetworkView: "other", Addresses: []string{want}})
		}},
		{name: "a host record made meanwhile, a host record pool", objectType: infoblox.HostRecord, meanwhile: true, seed: func(sim *wapisim.Server) {
			sim.AddHostRecord(wapisim.HostRecord{Name: "vip.example.com", Addresses: []string{want}})
		}, says: "record:host/"},
		{name: "a fixed address made meanwhile, a fixed address pool", objectType: infoblox.FixedAddress, meanwhile: true, seed: func(sim *wapisim.Server) {
			sim.AddFixedAddress("default", want, nil)
		}, says: "fixedaddress/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := wapisim.New()
			t.Cleanup(sim.Close)
			sim.AddUser(user, password, wapisim.Permissions{Write: true, Superuser: true})
			sim.AddNetwork("default", network, nil)
			sim.AddFixedAddress("default", netip.MustParsePrefix(network).Addr().Next().String(), nil)
			cfg := config(sim, network)
			cfg.Scheme, cfg.CABundle = "http", nil
			cfg.Reservation.ObjectType = tc.objectType
			if tc.meanwhile {
				cfg.Host, cfg.Port = beforeCreate(t, sim, func() { tc.seed(sim) })
			} else {
				tc.seed(sim)
			}
			b := newBackend(t, cfg)
			_, err := b.Validate(context.Background())
			require.NoError(t, err)
			sim.ResetCalls()
			alloc, err := b.Allocate(context.Background(), requesting("vip", want))
			if tc.says == "" {
				require.NoError(t, err)
				assert.Equal(t, want, alloc.Address.Addr().String())
				assert.Len(t, sim.Calls(), 5, "the marker search, the address, the POST, the address and the object made (docs/infoblox.md)")
				return
			}
			require.ErrorIs(t, err, backends.ErrRequestedUnavailable)
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), "carries no marker")
			for _, objectType := range []string{"fixedaddress", "record:host"} {
				assert.Empty(t, markedWith(sim, objectType, "ns/vip"), "the claim keeps no %s", objectType)
			}
		})
	}
}

// beforeCreate puts a proxy in front of sim that runs seed once, just
// before the first POST of a fixed address or host record reaches the grid,
// and returns the proxy's host and port.
func beforeCreate(t *testing.T, sim *wapisim.Server, seed func()) (string, int) {
	t.Helper()
	target, err := url.Parse(sim.URL())
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/fixedaddress") || strings.HasSuffix(r.URL.Path, "/record:host")) {
			once.Do(seed)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	return u.Hostname(), port
}
