package conformance

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

const netboxToken = "0123456789abcdef0123456789abcdef01234567"

type netboxHarness struct {
	target netboxtarget.Target
	// planned are the networks PlannedPool created.
	planned sync.Map
	// ownerField creates, once, the custom field Plan fills.
	ownerField sync.Once
}

// plannedOwnerField is a custom field of the IPAM team's on planned IP
// addresses.
const plannedOwnerField = "ipam_owner"

// NetBoxHarness runs the suite against target: the simulator, or a real
// NetBox (netboxtarget.New).
func NetBoxHarness(target netboxtarget.Target) Harness {
	target.AddToken(netboxToken, true)
	return &netboxHarness{target: target}
}

// url is where a backend built with o reaches NetBox.
func (h *netboxHarness) url(t testing.TB, o PoolOptions) string {
	if !o.SecondWriter {
		return h.target.URL()
	}
	return otherName(t, h.target.URL())
}

func (h *netboxHarness) backend(t testing.TB, token string, o PoolOptions, cidrs ...string) backends.Backend {
	cfg := netbox.Config{
		URL: h.url(t, o), Token: token, PrefixLength: o.PrefixLength, ChildPrefixLength: o.childLength, Batch: o.Batch, Uncertain: o.Uncertain,
		HTTP: netbox.HTTPOptions{RetryMax: o.RetryMax, RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
	}
	for _, cidr := range cidrs {
		cfg.Sources = append(cfg.Sources, netbox.Source{Kind: netbox.SourcePrefix, CIDR: netip.MustParsePrefix(cidr)})
	}
	b, err := netbox.New(cfg)
	require.NoError(t, err)
	return b
}

func (h *netboxHarness) Pool(t testing.TB, cidr string) backends.Backend {
	h.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
	return h.backend(t, netboxToken, PoolOptions{}, cidr)
}

func (h *netboxHarness) PoolOver(t testing.TB, o PoolOptions, cidrs ...string) backends.Backend {
	return h.backend(t, netboxToken, o, cidrs...)
}

func (h *netboxHarness) NarrowedPool(t testing.TB, cidr string, prefixLength int) backends.Backend {
	h.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
	for _, gw := range narrowedGateways(t, cidr, prefixLength)[1:] {
		h.target.AddIPAddress(netip.PrefixFrom(gw, netip.MustParsePrefix(cidr).Bits()).String(), netboxsim.IPOptions{Status: "reserved"})
	}
	return h.backend(t, netboxToken, PoolOptions{PrefixLength: prefixLength}, cidr)
}

func (h *netboxHarness) BarePool(t testing.TB, cidr string, o PoolOptions) backends.Backend {
	h.target.AddPrefix(cidr, netboxsim.PrefixOptions{})
	return h.backend(t, netboxToken, o, cidr)
}

// RefusingPool refuses, by a custom validator on the description, the
// record of a claim whose name holds "!". Validators live in NetBox's
// configuration, which only the simulator lets a test change.
func (h *netboxHarness) RefusingPool(t testing.TB, cidr string, o PoolOptions) (backends.Backend, Refusal) {
	netboxtarget.SimOnly(t, "NetBox's custom validators are set in its configuration")
	sim := h.target.(*netboxsim.Server)
	sim.SetDescriptionValidator(regexp.MustCompile(`^[^!]*$`))
	t.Cleanup(func() { sim.SetDescriptionValidator(nil) })
	h.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
	return h.backend(t, netboxToken, o, cidr), Refusal{Name: "bad!", Kind: backends.ErrInvalidConfig, Text: "Enter a valid value."}
}

func (h *netboxHarness) RetiredPool(t testing.TB, cidr string) backends.Backend {
	return h.backend(t, netboxToken, PoolOptions{}, cidr)
}

func (h *netboxHarness) PoolWithBadCredentials(t testing.TB, cidr string) backends.Backend {
	h.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
	return h.backend(t, "ffffffffffffffffffffffffffffffffffffffff", PoolOptions{}, cidr)
}

func (h *netboxHarness) Reservations(t testing.TB, cidr string) []Reservation {
	network := netip.MustParsePrefix(cidr)
	var out []Reservation
	for _, ip := range h.target.IPAddresses() {
		addr := netip.MustParsePrefix(ip.Address).Addr()
		value, _ := ip.CustomFields[netbox.DefaultMarkerField].(string)
		marker, planned := backends.ParsePlanned(value)
		if network.Contains(addr) && marker != "" {
			out = append(out, Reservation{Address: addr, Marker: marker, Reference: fmt.Sprintf("ipam/ip-addresses/%d", ip.ID), Planned: planned})
		}
	}
	return out
}

func (h *netboxHarness) Hold(t testing.TB, addr netip.Prefix, marker string) {
	o := netboxsim.IPOptions{Description: "someone else's"}
	if marker != "" {
		// As the provider marks its records.
		o.Tags = []string{netbox.DefaultTag}
		o.CustomFields = map[string]any{netbox.DefaultMarkerField: marker}
	}
	h.target.AddIPAddress(addr.String(), o)
}

func (h *netboxHarness) Disown(t testing.TB, addr netip.Addr) {
	for _, ip := range h.target.IPAddresses() {
		if netip.MustParsePrefix(ip.Address).Addr() == addr {
			h.target.EditIPAddress(ip.ID, func(ip *netboxsim.IPAddress) { ip.CustomFields[netbox.DefaultMarkerField] = nil })
			return
		}
	}
	t.Fatalf("no IP address %s", addr)
}

func (h *netboxHarness) LoseAllocationAnswers(_ testing.TB, n int) {
	f := h.AllocationWrite()
	f.Kind, f.Times = netboxsim.FaultLoseResponse, n
	h.target.InjectFault(f)
}

// AllocationWrite matches the POSTs to a prefix's available IPs.
func (h *netboxHarness) AllocationWrite() httpfault.Fault {
	return httpfault.Fault{Method: "POST", PathContains: "/available-ips/"}
}

// LoseRequestedAnswers loses the answers of the next creations of an IP
// address at a given address (available-ips requests go elsewhere).
func (h *netboxHarness) LoseRequestedAnswers(_ testing.TB, n int) {
	h.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "POST", PathContains: "/api/ipam/ip-addresses/", Times: n})
}

// RaceWrites gathers creations of an IP address at a given address, or
// changes of one IP address (a marker written on a planned one).
func (h *netboxHarness) RaceWrites(_ testing.TB, w Write, n int) *httpfault.Gathering {
	g := httpfault.NewGathering(n, raceWait)
	f := netboxsim.Fault{Kind: httpfault.Gather, Gathering: g, Method: "POST", PathContains: "/api/ipam/ip-addresses/"}
	if w == PlannedAdoption {
		f.Method = "PATCH"
	}
	h.target.InjectFault(f)
	return g
}

// LoseNextDeletion loses the answer of the next deletion of IP addresses,
// one or a list.
func (h *netboxHarness) LoseNextDeletion(_ testing.TB, then func()) {
	h.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Then: then, Method: "DELETE", PathContains: "/api/ipam/ip-addresses/"})
}

// BeforeNextMarking runs then before the next change of an IP address.
func (h *netboxHarness) BeforeNextMarking(_ testing.TB, then func()) {
	h.target.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Then: then, Method: "PATCH", PathContains: "/api/ipam/ip-addresses/"})
}

// LoseNextMarking loses the answer of the next change of an IP address.
func (h *netboxHarness) LoseNextMarking(_ testing.TB, then func()) {
	h.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Then: then, Method: "PATCH", PathContains: "/api/ipam/ip-addresses/"})
}

// FailBulkDeletions fails deletions of the IP address list, which come
// before any single record's.
func (h *netboxHarness) FailBulkDeletions(_ testing.TB, retryMax int) int {
	h.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultStatus, Status: 502, Method: "DELETE", PathContains: "/api/ipam/ip-addresses/", Times: retryMax + 1})
	return retryMax + 1
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

func (h *netboxHarness) Requests() int { return len(h.target.Calls()) }

func (h *netboxHarness) SetLatency(d time.Duration) { h.target.SetLatency(d) }

func (h *netboxHarness) Server() httpfault.Disturbable { return h.target }

// plannedDNSName is the DNS name the planned pools render for a machine.
func plannedDNSName(machine string) string { return machine + ".planned.example" }

// PlannedPool adopts IP addresses with status reserved and the DNS name
// rendered for the claim's machine.
func (h *netboxHarness) PlannedPool(t testing.TB, cidr string) backends.Backend {
	return h.PlannedPoolOver(t, PoolOptions{}, cidr)
}

func (h *netboxHarness) PlannedPoolOver(t testing.TB, o PoolOptions, cidr string) backends.Backend {
	if _, created := h.planned.LoadOrStore(cidr, true); !created {
		h.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
	}
	cfg := netbox.Config{
		URL: h.url(t, o), Token: netboxToken,
		Sources: []netbox.Source{{Kind: netbox.SourcePrefix, CIDR: netip.MustParsePrefix(cidr)}},
		// The provider's own records get the planned status too: they are
		// still no plans.
		Reservation: netbox.Reservation{DNSNamePattern: plannedDNSName("{{ .MachineName }}"), Status: "reserved"},
		Planned:     &netbox.Planned{Status: "reserved"},
	}
	b, err := netbox.New(cfg)
	require.NoError(t, err)
	return b
}

// Plan makes the IP address with a custom field of the IPAM team's, which
// adoption and release must leave as it is.
func (h *netboxHarness) Plan(t testing.TB, addr netip.Prefix, machine string) string {
	h.ownerField.Do(func() { h.target.AddCustomField(plannedOwnerField, "") })
	id := h.target.AddIPAddress(addr.String(), netboxsim.IPOptions{
		Status: "reserved", DNSName: plannedDNSName(machine), Description: "planned by the IPAM team for " + machine,
		CustomFields: map[string]any{plannedOwnerField: "network-eng"},
	})
	return fmt.Sprintf("ipam/ip-addresses/%d", id)
}

// Snapshot is the IP address without custom fields that hold nothing:
// NetBox lists every field defined, null when unset.
func (h *netboxHarness) Snapshot(t testing.TB, ref string) any {
	for _, ip := range h.target.IPAddresses() {
		if fmt.Sprintf("ipam/ip-addresses/%d", ip.ID) == ref {
			fields := map[string]any{}
			for k, v := range ip.CustomFields {
				if v != nil {
					fields[k] = v
				}
			}
			ip.CustomFields = fields
			return ip
		}
	}
	t.Fatalf("no IP address %s", ref)
	return nil
}

// CarvingPool creates parent as a container prefix, with nothing in it
// (on a real NetBox, what an earlier run left in it is deleted), and
// returns a backend carving children of length from it.
func (h *netboxHarness) CarvingPool(t testing.TB, parent string, length int, o PoolOptions) backends.Backend {
	h.target.AddPrefix(parent, netboxsim.PrefixOptions{Status: "container"})
	clear := func() {
		for _, p := range h.target.PrefixesWithin(parent) {
			h.target.DeletePrefix(p.ID)
		}
	}
	clear()
	t.Cleanup(clear)
	return h.CarvingPoolOver(t, parent, length, o)
}

func (h *netboxHarness) CarvingPoolOver(t testing.TB, parent string, length int, o PoolOptions) backends.Backend {
	o.childLength = length
	return h.backend(t, netboxToken, o, parent)
}

func (h *netboxHarness) Children(_ testing.TB, parent string) []Child {
	var out []Child
	for _, p := range h.target.PrefixesWithin(parent) {
		value, _ := p.CustomFields[netbox.DefaultMarkerField].(string)
		if value != "" {
			out = append(out, Child{Prefix: netip.MustParsePrefix(p.Prefix), Marker: value, Reference: fmt.Sprintf("ipam/prefixes/%d", p.ID)})
		}
	}
	return out
}

func (h *netboxHarness) LoseCarveAnswers(_ testing.TB, n int) {
	h.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "POST", PathContains: "/available-prefixes/", Times: n})
}

func (h *netboxHarness) DeleteChild(t testing.TB, ref string) {
	var id int32
	_, err := fmt.Sscanf(ref, "ipam/prefixes/%d", &id)
	require.NoError(t, err, ref)
	h.target.DeletePrefix(id)
}

func (h *netboxHarness) CarveRequests() int {
	return h.target.CountCalls("POST", "/api/ipam/prefixes/")
}

func (h *netboxHarness) ClearChildMarker(t testing.TB, ref string) {
	var id int32
	_, err := fmt.Sscanf(ref, "ipam/prefixes/%d", &id)
	require.NoError(t, err, ref)
	h.target.SetPrefixCustomField(id, netbox.DefaultMarkerField, nil)
}
