package conformance_test

import (
	"testing"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/conformance"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

// TestNetBox runs the suite against the NetBox simulator, or against a real
// NetBox when NETBOX_URL is set (make test-real-netbox).
func TestNetBox(t *testing.T) {
	conformance.Run(t, conformance.NetBoxHarness(netboxtarget.New(t)))
}

// TestInfoblox runs the suite against the WAPI simulator, once with fixed
// addresses and once with host records.
func TestInfoblox(t *testing.T) {
	for _, objectType := range []infoblox.ObjectType{infoblox.FixedAddress, infoblox.HostRecord} {
		t.Run(string(objectType), func(t *testing.T) {
			conformance.Run(t, conformance.InfobloxHarness(t, objectType))
		})
	}
}
