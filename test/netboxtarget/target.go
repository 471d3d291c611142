// Package netboxtarget gives tests one NetBox to run against: the
// in-process simulator, or, when NETBOX_URL is set, a real NetBox behind a
// local proxy that counts calls and injects the same faults. The same suites
// thereby prove the provider on both.
package netboxtarget

import (
	"os"
	"testing"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// Target is a NetBox under test. The seeding methods panic or fail the test
// on error: a broken fixture is a bug in the test.
type Target interface {
	// URL is where the provider reaches NetBox.
	URL() string
	Close()

	// AddToken makes token valid for the provider: read-write or read-only.
	AddToken(token string, writeEnabled bool)
	// RemoveToken revokes token: NetBox refuses it from then on.
	RemoveToken(token string)
	AddVRF(name, rd string) int32
	AddTenant(name, slug string) int32
	// AddRole adds a prefix and VLAN role.
	AddRole(name, slug string) int32
	// AddScope adds an object a prefix may be scoped to: scopeType is
	// dcim.site, dcim.region or dcim.sitegroup.
	AddScope(scopeType, name, slug string) int32
	AddTag(name, slug string) int32
	AddCustomField(name, filterLogic string) int32
	AddPrefix(cidr string, o netboxsim.PrefixOptions) int32
	AddPrefixWithGateway(cidr string, o netboxsim.PrefixOptions) int32
	AddIPRange(startWithMask, endWithMask string, o netboxsim.RangeOptions) int32
	AddIPAddress(addrWithMask string, o netboxsim.IPOptions) int32

	// IPAddresses lists every IP address, oldest first.
	IPAddresses() []netboxsim.IPAddress
	// EditIPAddress changes an IP address as a human would in the UI.
	EditIPAddress(id int32, edit func(*netboxsim.IPAddress))
	// DeleteIPAddress deletes an IP address as a human would in the UI.
	DeleteIPAddress(id int32)
	// PrefixesWithin lists the prefixes strictly inside parent, in any
	// VRF, oldest first.
	PrefixesWithin(parent string) []netboxsim.Prefix
	// DeletePrefix deletes a prefix as a human would in the UI.
	DeletePrefix(id int32)
	// SetPrefixCustomField sets one custom field of a prefix (nil clears
	// it) as a human would in the UI.
	SetPrefixCustomField(id int32, name string, value any)

	InjectFault(f netboxsim.Fault)
	ClearFaults()
	SetLatency(d time.Duration)
	// SetThrottle answers 429 with Retry-After to the requests beyond l;
	// ThrottleArrivals lists the requests since.
	SetThrottle(l httpfault.ThrottleLimit)
	ThrottleArrivals() []httpfault.Arrival
	Calls() []netboxsim.Call
	ResetCalls()
	CountCalls(method, pathPrefix string) int
}

var _ Target = (*netboxsim.Server)(nil)

// Real says whether tests run against a real NetBox.
func Real() bool { return os.Getenv("NETBOX_URL") != "" }

// New returns the NetBox for one test, closed when the test ends.
func New(t testing.TB) Target {
	t.Helper()
	var target Target
	if Real() {
		target = newReal(t)
	} else {
		target = netboxsim.New()
	}
	t.Cleanup(target.Close)
	return target
}

// SimOnly skips a test that needs what only the simulator offers.
func SimOnly(t testing.TB, why string) {
	t.Helper()
	if Real() {
		t.Skip("simulator only: " + why)
	}
}
