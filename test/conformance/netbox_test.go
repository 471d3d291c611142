package conformance_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/conformance"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

// TestNetBox runs the suite against the NetBox simulator, or against a real
// NetBox when NETBOX_URL is set (make test-real-netbox).
func TestNetBox(t *testing.T) {
	target := netboxtarget.New(t)
	target.AddToken(netboxToken, true)
	conformance.Run(t, &netboxHarness{target: target})
}

const netboxToken = "0123456789abcdef0123456789abcdef01234567"

type netboxHarness struct {
	target netboxtarget.Target
}

func (h *netboxHarness) backend(t *testing.T, cidr, token string, prefixLength ...int) backends.Backend {
	b, err := netbox.New(netbox.Config{
		URL: h.target.URL(), Token: token, PrefixLength: append(prefixLength, 0)[0],
		Sources: []netbox.Source{{Kind: netbox.SourcePrefix, CIDR: netip.MustParsePrefix(cidr)}},
		HTTP:    netbox.HTTPOptions{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
	})
	require.NoError(t, err)
	return b
}

func (h *netboxHarness) Pool(t *testing.T, cidr string) backends.Backend {
	h.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
	return h.backend(t, cidr, netboxToken)
}

func (h *netboxHarness) NarrowedPool(t *testing.T, cidr string, prefixLength int) backends.Backend {
	h.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
	for _, gw := range narrowedGateways(t, cidr, prefixLength)[1:] {
		h.target.AddIPAddress(netip.PrefixFrom(gw, netip.MustParsePrefix(cidr).Bits()).String(), netboxsim.IPOptions{Status: "reserved"})
	}
	return h.backend(t, cidr, netboxToken, prefixLength)
}

func (h *netboxHarness) RetiredPool(t *testing.T, cidr string) backends.Backend {
	return h.backend(t, cidr, netboxToken)
}

func (h *netboxHarness) PoolWithBadCredentials(t *testing.T, cidr string) backends.Backend {
	h.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
	return h.backend(t, cidr, "ffffffffffffffffffffffffffffffffffffffff")
}

func (h *netboxHarness) Reservations(t *testing.T, cidr string) []conformance.Reservation {
	network := netip.MustParsePrefix(cidr)
	var out []conformance.Reservation
	for _, ip := range h.target.IPAddresses() {
		addr := netip.MustParsePrefix(ip.Address).Addr()
		marker, _ := ip.CustomFields[netbox.DefaultMarkerField].(string)
		if network.Contains(addr) && marker != "" {
			out = append(out, conformance.Reservation{Address: addr, Marker: marker})
		}
	}
	return out
}

func (h *netboxHarness) Disown(t *testing.T, addr netip.Addr) {
	for _, ip := range h.target.IPAddresses() {
		if netip.MustParsePrefix(ip.Address).Addr() == addr {
			h.target.EditIPAddress(ip.ID, func(ip *netboxsim.IPAddress) { ip.CustomFields[netbox.DefaultMarkerField] = nil })
			return
		}
	}
	t.Fatalf("no IP address %s", addr)
}

func (h *netboxHarness) LoseNextAllocationAnswer(*testing.T) {
	h.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "POST", PathContains: "/available-ips/"})
}

func (h *netboxHarness) AllocationRequests() int {
	n := 0
	for _, c := range h.target.Calls() {
		if c.Method == "POST" && strings.Contains(c.Path, "/available-ips/") {
			n++
		}
	}
	return n
}

func (h *netboxHarness) Server() httpfault.Disturbable { return h.target }
