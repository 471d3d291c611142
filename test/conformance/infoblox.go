package conformance

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

type infobloxHarness struct {
	sim        *wapisim.Server
	objectType infoblox.ObjectType
	// planned are the networks PlannedPool created.
	planned sync.Map
}

// refusingZone is where RefusingPool's host records take their names.
const refusingZone = "k8s.example.com"

// InfobloxHarness runs the suite against a WAPI simulator of its own, the
// pools creating objects of objectType.
func InfobloxHarness(t testing.TB, objectType infoblox.ObjectType) Harness {
	sim := wapisim.NewTLS()
	t.Cleanup(sim.Close)
	sim.AddUser("capi", "secret", wapisim.Permissions{Write: true, Superuser: true})
	sim.AddZone("default", refusingZone)
	return &infobloxHarness{sim: sim, objectType: objectType}
}

func (h *infobloxHarness) config(t testing.TB, password string, o PoolOptions, cidrs ...string) infoblox.Config {
	port, err := strconv.Atoi(h.sim.Port())
	require.NoError(t, err)
	host := h.sim.Host()
	if o.SecondWriter {
		host = otherName(t, host)
	}
	cfg := infoblox.Config{
		Host: host, Port: port, Username: "capi", Password: password,
		CABundle:     h.sim.CACertPEM(),
		Reservation:  infoblox.Reservation{ObjectType: h.objectType},
		PrefixLength: o.PrefixLength,
		Batch:        o.Batch,
		Uncertain:    o.Uncertain,
		HTTP:         infoblox.HTTPOptions{RetryMax: o.RetryMax, RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
	}
	for _, cidr := range cidrs {
		cfg.Sources = append(cfg.Sources, infoblox.Source{Network: netip.MustParsePrefix(cidr)})
	}
	return cfg
}

func (h *infobloxHarness) backend(t testing.TB, cidr, password string, prefixLength ...int) backends.Backend {
	return newBackend(t, h.config(t, password, PoolOptions{PrefixLength: append(prefixLength, 0)[0]}, cidr))
}

func newBackend(t testing.TB, cfg infoblox.Config) backends.Backend {
	b, err := infoblox.New(cfg)
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

func (h *infobloxHarness) Pool(t testing.TB, cidr string) backends.Backend {
	h.seed(cidr)
	return h.backend(t, cidr, "secret")
}

func (h *infobloxHarness) PoolOver(t testing.TB, o PoolOptions, cidrs ...string) backends.Backend {
	return newBackend(t, h.config(t, "secret", o, cidrs...))
}

func (h *infobloxHarness) BarePool(t testing.TB, cidr string, o PoolOptions) backends.Backend {
	h.sim.AddNetwork("default", cidr, nil)
	return newBackend(t, h.config(t, "secret", o, cidr))
}

// RefusingPool creates host records in a DNS zone where the name of the
// claim "bad" is already taken: the grid refuses its record as a conflict.
func (h *infobloxHarness) RefusingPool(t testing.TB, cidr string, o PoolOptions) (backends.Backend, Refusal) {
	h.seed(cidr)
	taken := netipx.PrefixLastIP(netip.MustParsePrefix(cidr)).Prev()
	h.sim.AddHostRecord(wapisim.HostRecord{Name: "c1-bad." + refusingZone, DNS: true, Addresses: []string{taken.String()}})
	cfg := h.config(t, "secret", o, cidr)
	cfg.Reservation = infoblox.Reservation{ObjectType: infoblox.HostRecord, DNS: &infoblox.DNS{Zone: refusingZone}}
	return newBackend(t, cfg), Refusal{Name: "bad", Kind: backends.ErrConflict, Text: "already exists"}
}

func (h *infobloxHarness) NarrowedPool(t testing.TB, cidr string, prefixLength int) backends.Backend {
	h.seed(cidr)
	for _, gw := range narrowedGateways(t, cidr, prefixLength)[1:] {
		h.sim.AddFixedAddress("default", gw.String(), nil)
	}
	return h.backend(t, cidr, "secret", prefixLength)
}

// narrowedGateways are the gateways prefixLength carves out of cidr, the
// first of which the harnesses' seed already holds.
func narrowedGateways(t testing.TB, cidr string, prefixLength int) []netip.Addr {
	network := netip.MustParsePrefix(cidr)
	gateways, err := backends.SourceGateways(network, network.Addr(), netipx.PrefixLastIP(network), prefixLength)
	require.NoError(t, err)
	require.NotEmpty(t, gateways)
	return gateways
}

func (h *infobloxHarness) RetiredPool(t testing.TB, cidr string) backends.Backend {
	return h.backend(t, cidr, "secret")
}

func (h *infobloxHarness) PoolWithBadCredentials(t testing.TB, cidr string) backends.Backend {
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

func (h *infobloxHarness) Reservations(t testing.TB, cidr string) []Reservation {
	var out []Reservation
	for _, o := range h.objects(netip.MustParsePrefix(cidr)) {
		if marker, planned := backends.ParsePlanned(o.EAs[infoblox.DefaultMarkerEA]); marker != "" {
			out = append(out, Reservation{Address: o.Addresses[0], Marker: marker, Reference: o.Ref, Planned: planned})
		}
	}
	return out
}

func (h *infobloxHarness) Hold(t testing.TB, addr netip.Prefix, marker string) {
	var eas map[string]string
	if marker != "" {
		eas = map[string]string{infoblox.DefaultMarkerEA: marker}
	}
	h.sim.AddFixedAddress("default", addr.Addr().String(), eas)
}

func (h *infobloxHarness) Disown(t testing.TB, addr netip.Addr) {
	for _, o := range h.objects(netip.PrefixFrom(addr, addr.BitLen())) {
		h.sim.RemoveEA(o.Ref, infoblox.DefaultMarkerEA)
		return
	}
	t.Fatalf("no object holds %s", addr)
}

// LoseAllocationAnswers loses the answers of the next POSTs asking for a
// next available address: a lone claim's create, or a batch's request
// object (whose searches ask for none).
func (h *infobloxHarness) LoseAllocationAnswers(_ testing.TB, n int) {
	f := h.AllocationWrite()
	f.Kind, f.Times = wapisim.FaultLoseResponse, n
	h.sim.InjectFault(f)
}

// AllocationWrite matches the POSTs that create at the next available IP.
func (h *infobloxHarness) AllocationWrite() httpfault.Fault {
	return httpfault.Fault{Method: "POST", BodyContains: "func:nextavailableip"}
}

// LoseRequestedAnswers loses the answers of the next POSTs of the pool's
// object type that name their address (a requested address's create).
func (h *infobloxHarness) LoseRequestedAnswers(_ testing.TB, n int) {
	h.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Method: "POST", PathContains: h.createPath(), Times: n})
}

// RaceWrites gathers the creates of the pool's object type that name their
// address (a requested address's), or the PUTs that change an object (a
// marker written on a planned one).
func (h *infobloxHarness) RaceWrites(_ testing.TB, w Write, n int) *httpfault.Gathering {
	g := httpfault.NewGathering(n, raceWait)
	f := wapisim.Fault{Kind: httpfault.Gather, Gathering: g, Method: "POST", PathContains: h.createPath()}
	if w == PlannedAdoption {
		f = wapisim.Fault{Kind: httpfault.Gather, Gathering: g, Match: wapisim.WriteTo(http.MethodPut, "")}
	}
	h.sim.InjectFault(f)
	return g
}

// LoseNextDeletion loses the answer of the next deletion of an object,
// plain or in a request object.
func (h *infobloxHarness) LoseNextDeletion(_ testing.TB, then func()) {
	h.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Then: then, Match: wapisim.WriteTo(http.MethodDelete, "")})
}

// BeforeNextMarking runs then before the next change of an object, plain
// or in a request object.
func (h *infobloxHarness) BeforeNextMarking(_ testing.TB, then func()) {
	h.sim.InjectFault(wapisim.Fault{Kind: httpfault.Before, Then: then, Match: wapisim.WriteTo(http.MethodPut, "")})
}

// LoseNextMarking loses the answer of the next change of an object, plain
// or in a request object.
func (h *infobloxHarness) LoseNextMarking(_ testing.TB, then func()) {
	h.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Then: then, Match: wapisim.WriteTo(http.MethodPut, "")})
}

// FailBulkDeletions fails a request object of DELETEs, which is sent once.
func (h *infobloxHarness) FailBulkDeletions(_ testing.TB, _ int) int {
	h.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultStatus, Status: 502, Method: "POST", BodyContains: `"DELETE"`})
	return 1
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

func (h *infobloxHarness) Requests() int { return len(h.sim.Calls()) }

func (h *infobloxHarness) SetLatency(d time.Duration) { h.sim.SetLatency(d) }

func (h *infobloxHarness) Server() httpfault.Disturbable { return h.sim }

// PlannedPool adopts objects of the harness's type named for the claim's
// machine.
func (h *infobloxHarness) PlannedPool(t testing.TB, cidr string) backends.Backend {
	return h.PlannedPoolOver(t, PoolOptions{}, cidr)
}

func (h *infobloxHarness) PlannedPoolOver(t testing.TB, o PoolOptions, cidr string) backends.Backend {
	if _, created := h.planned.LoadOrStore(cidr, true); !created {
		h.seed(cidr)
	}
	cfg := h.config(t, "secret", o, cidr)
	cfg.Reservation.NamePattern = plannedDNSName("{{ .MachineName }}")
	cfg.Planned = &infoblox.Planned{}
	return newBackend(t, cfg)
}

// Plan makes the object with a comment and an extensible attribute of the
// IPAM team's, which adoption and release must leave as they are.
func (h *infobloxHarness) Plan(t testing.TB, addr netip.Prefix, machine string) string {
	var ref string
	if h.objectType == infoblox.HostRecord {
		ref = h.sim.AddHostRecord(wapisim.HostRecord{Name: plannedDNSName(machine), Addresses: []string{addr.Addr().String()}})
	} else {
		ref = h.sim.AddFixedAddress("default", addr.Addr().String(), nil)
		h.sim.SetName(ref, plannedDNSName(machine))
	}
	h.sim.SetComment(ref, "planned by the IPAM team for "+machine)
	h.sim.SetEA(ref, "Owner-Team", "network-eng")
	return ref
}

func (h *infobloxHarness) Snapshot(t testing.TB, ref string) any {
	o, ok := h.sim.Object(ref)
	require.True(t, ok, "no object %s", ref)
	return o
}

// CarvingPool creates parent as a network container and returns a backend
// carving child networks of length from it.
func (h *infobloxHarness) CarvingPool(t testing.TB, parent string, length int, o PoolOptions) backends.Backend {
	h.sim.AddNetworkContainer("default", parent)
	return h.CarvingPoolOver(t, parent, length, o)
}

func (h *infobloxHarness) CarvingPoolOver(t testing.TB, parent string, length int, o PoolOptions) backends.Backend {
	cfg := h.config(t, "secret", o, parent)
	cfg.Reservation = infoblox.Reservation{}
	cfg.ChildPrefixLength = length
	return newBackend(t, cfg)
}

func (h *infobloxHarness) Children(_ testing.TB, parent string) []Child {
	p := netip.MustParsePrefix(parent)
	var out []Child
	for _, t := range []string{"network", "ipv6network"} {
		for _, o := range h.sim.Objects(t) {
			if marker := o.EAs[infoblox.DefaultMarkerEA]; marker != "" && o.Prefix.Bits() > p.Bits() && p.Contains(o.Prefix.Addr()) {
				out = append(out, Child{Prefix: o.Prefix, Marker: marker, Reference: o.Ref})
			}
		}
	}
	return out
}

func (h *infobloxHarness) LoseCarveAnswers(_ testing.TB, n int) {
	h.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Method: "POST", BodyContains: "func:nextavailablenetwork", Times: n})
}

func (h *infobloxHarness) DeleteChild(t testing.TB, ref string) {
	require.True(t, h.sim.DeleteObject(ref), ref)
}

func (h *infobloxHarness) ClearChildMarker(t testing.TB, ref string) {
	h.sim.RemoveEA(ref, infoblox.DefaultMarkerEA)
}

// CarveRequests counts the POSTs of networks: a lone claim's carve (a
// batch's request object is not counted).
func (h *infobloxHarness) CarveRequests() int {
	return h.sim.CountObjectCalls("POST", "network") + h.sim.CountObjectCalls("POST", "ipv6network")
}
