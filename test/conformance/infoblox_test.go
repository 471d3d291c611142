package conformance_test

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/conformance"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// TestInfoblox runs the suite against the WAPI simulator, once with fixed
// addresses and once with host records.
func TestInfoblox(t *testing.T) {
	for _, objectType := range []infoblox.ObjectType{infoblox.FixedAddress, infoblox.HostRecord} {
		t.Run(string(objectType), func(t *testing.T) {
			sim := wapisim.NewTLS()
			t.Cleanup(sim.Close)
			sim.AddUser("capi", "secret", wapisim.Permissions{Write: true, Superuser: true})
			conformance.Run(t, &infobloxHarness{sim: sim, objectType: objectType})
		})
	}
}

type infobloxHarness struct {
	sim        *wapisim.Server
	objectType infoblox.ObjectType
}

func (h *infobloxHarness) backend(t *testing.T, cidr, password string, prefixLength ...int) backends.Backend {
	port, err := strconv.Atoi(h.sim.Port())
	require.NoError(t, err)
	b, err := infoblox.New(infoblox.Config{
		Host: h.sim.Host(), Port: port, Username: "capi", Password: password,
		CABundle:     h.sim.CACertPEM(),
		Sources:      []infoblox.Source{{Network: netip.MustParsePrefix(cidr)}},
		Reservation:  infoblox.Reservation{ObjectType: h.objectType},
		PrefixLength: append(prefixLength, 0)[0],
		HTTP:         infoblox.HTTPOptions{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
	})
	require.NoError(t, err)
	return b
}

// seed creates the network with its gateway held by a fixed address, as a
// grid holds its routers.
func (h *infobloxHarness) seed(cidr string) {
	network := netip.MustParsePrefix(cidr)
	h.sim.AddNetwork("default", cidr, nil)
	h.sim.AddFixedAddress("default", network.Addr().Next().String(), nil)
}

func (h *infobloxHarness) Pool(t *testing.T, cidr string) backends.Backend {
	h.seed(cidr)
	return h.backend(t, cidr, "secret")
}

func (h *infobloxHarness) NarrowedPool(t *testing.T, cidr string, prefixLength int) backends.Backend {
	h.seed(cidr)
	for _, gw := range narrowedGateways(t, cidr, prefixLength)[1:] {
		h.sim.AddFixedAddress("default", gw.String(), nil)
	}
	return h.backend(t, cidr, "secret", prefixLength)
}

// narrowedGateways are the gateways prefixLength carves out of cidr, the
// first of which the harnesses' seed already holds.
func narrowedGateways(t *testing.T, cidr string, prefixLength int) []netip.Addr {
	network := netip.MustParsePrefix(cidr)
	gateways, err := backends.DerivedGateways(network, network.Addr(), netipx.PrefixLastIP(network), prefixLength)
	require.NoError(t, err)
	require.NotEmpty(t, gateways)
	return gateways
}

func (h *infobloxHarness) RetiredPool(t *testing.T, cidr string) backends.Backend {
	return h.backend(t, cidr, "secret")
}

func (h *infobloxHarness) PoolWithBadCredentials(t *testing.T, cidr string) backends.Backend {
	h.seed(cidr)
	return h.backend(t, cidr, "wrong")
}

// objects lists the pool's objects that hold an address in network.
func (h *infobloxHarness) objects(network netip.Prefix) []wapisim.Object {
	var out []wapisim.Object
	for _, t := range []string{"fixedaddress", "ipv6fixedaddress", "record:host"} {
		for _, o := range h.sim.Objects(t) {
			if len(o.Addresses) > 0 && network.Contains(o.Addresses[0]) {
				out = append(out, o)
			}
		}
	}
	return out
}

func (h *infobloxHarness) Reservations(t *testing.T, cidr string) []conformance.Reservation {
	var out []conformance.Reservation
	for _, o := range h.objects(netip.MustParsePrefix(cidr)) {
		if marker := o.EAs[infoblox.DefaultMarkerEA]; marker != "" {
			out = append(out, conformance.Reservation{Address: o.Addresses[0], Marker: marker})
		}
	}
	return out
}

func (h *infobloxHarness) Disown(t *testing.T, addr netip.Addr) {
	for _, o := range h.objects(netip.PrefixFrom(addr, addr.BitLen())) {
		h.sim.RemoveEA(o.Ref, infoblox.DefaultMarkerEA)
		return
	}
	t.Fatalf("no object holds %s", addr)
}

// LoseNextAllocationAnswer loses the answer of the next POST asking for a
// next available address: a lone claim's create, or a batch's request
// object (whose searches ask for none).
func (h *infobloxHarness) LoseNextAllocationAnswer(*testing.T) {
	h.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Method: "POST", BodyContains: "func:nextavailableip"})
}

func (h *infobloxHarness) createPath() string {
	if h.objectType == infoblox.HostRecord {
		return "/record:host"
	}
	return "fixedaddress"
}

func (h *infobloxHarness) AllocationRequests() int {
	n := 0
	for _, c := range h.sim.Calls() {
		if c.Method == "POST" && strings.Contains(c.Path, h.createPath()) {
			n++
		}
	}
	return n
}

func (h *infobloxHarness) Server() httpfault.Disturbable { return h.sim }
