package integration

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// system is an IPAM system a test's pools point at. The contract tests run
// once per system, so the claim reconciler is proven with every backend.
type system interface {
	name() string
	poolKind(global bool) string
	// secretData holds credentials the system accepts.
	secretData() map[string][]byte
	// revokeCredentials makes the system refuse the credentials of
	// secretData, as an IPAM team revoking a token or changing a password.
	revokeCredentials()
	// rotateCredentials makes new credentials valid and returns them, as
	// secretData returns them from then on.
	rotateCredentials() map[string][]byte
	// readOnlyCredentials makes new credentials valid that may read but not
	// write, and returns them.
	readOnlyCredentials() map[string][]byte
	// seedNetwork creates network cidr with its first usable address held
	// as the gateway.
	seedNetwork(cidr string)
	// newPool returns (without creating) a pool allocating from cidr with
	// the credentials of Secret secretName.
	newPool(namespace, name, cidr, secretName string, global bool) poolkind.Pool
	// retarget points a pool's only source at cidr, as an edit of the spec.
	retarget(pool poolkind.Pool, cidr string)
	// records lists every reservation that carries a marker.
	records() []record
	// disown removes the marker from a record, as a human taking it over.
	disown(r record)
	// deleteRecord deletes a record, as a human in the IPAM system would.
	deleteRecord(r record)
	// deleteAt deletes whatever holds addr, marked or not, as a human would
	// (for example the record that holds a gateway).
	deleteAt(addr netip.Addr)
	// holdGateway records addr as held, as seedNetwork records a gateway.
	holdGateway(addr netip.Addr)
	// moveRecord changes a record's address, as the IPAM team editing it;
	// the record keeps its marker.
	moveRecord(r record, to netip.Addr)
	// moveOutOfScope moves a record, same address and marker, into another
	// scope of the system: a new VRF (NetBox) or network view (Infoblox),
	// which gets a network like the record's. It names the new scope.
	moveOutOfScope(r record) string
	// holds says whether any record holds addr, marked or not.
	holds(addr netip.Addr) bool
	// plan creates, as the IPAM team would, the record of addr planned for
	// the claims of a planned pool (plannedPool) whose name renders name,
	// without a marker, and returns its reference.
	plan(addr netip.Prefix, name string) string
	// plannedPool makes pool adopt the records plan makes, by the name
	// rendered from its claims' machine name and namespace.
	plannedPool(pool poolkind.Pool)
	// snapshot is the record ref names, every field the IPAM team sees.
	snapshot(ref string) any
	// reserveForeign makes a marked reservation of addr as another
	// management cluster would.
	reserveForeign(addr netip.Prefix, marker string)
	// loseNextDeleteAnswer applies the next deletion of a record but cuts
	// its answer, and holds what the release sends next about that record
	// until gate closes (NetBox: the deletion resent; Infoblox, whose
	// guarded deletions are never resent: the read that settles it): a
	// release the IPAM system has applied while its claim, still being
	// deleted, keeps its IPAddress. A gate rather than a delay, so that a
	// slow machine cannot end the window before the test has looked.
	loseNextDeleteAnswer(gate <-chan struct{})
	loseNextAllocationAnswer()
	// loseNextRestoreAnswer applies the next creation of a record at a
	// given address (the audit's restore) and loses its answer.
	loseNextRestoreAnswer()
	// loseRemarkAnswers applies the next n changes of a record's marker
	// and loses their answers.
	loseRemarkAnswers(n int)
	// slowNextAllocation delays the next allocation request by d; the
	// system completes it even if the client has given up.
	slowNextAllocation(d time.Duration)
	// holdNextAllocation holds the next allocation request in the system
	// until gate closes, then applies it, as a server applies a request
	// queued behind its lock whose client died meanwhile; arrived closes
	// when the request is held.
	holdNextAllocation(gate <-chan struct{}) (arrived <-chan struct{})
	allocationRequests() int
	// countRequests is the number of requests that counted a pool's used
	// addresses.
	countRequests() int
	// failAllRequests answers every request with status until
	// clearFaults.
	failAllRequests(status int)
	clearFaults()
	callCount() int
	resetCalls()
	// exhaustedText is what the system says when a source is full.
	exhaustedText() string
	// url is where pools reach the system.
	url() string
	// throttle makes the system answer 429 with Retry-After to the
	// requests beyond l; throttleArrivals lists the requests since.
	throttle(l httpfault.ThrottleLimit)
	throttleArrivals() []httpfault.Arrival
}

// record is a reservation in the IPAM system.
type record struct {
	Address netip.Prefix
	Marker  string
	// Planned: the marker says the IPAM team planned the record.
	Planned     bool
	Description string
	ref         string
	id          int32
}

// forEachSystem runs a test once against NetBox and once against Infoblox.
func forEachSystem(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Run("NetBox", func(t *testing.T) { test(t, newFixture(t)) })
	t.Run("Infoblox", func(t *testing.T) { test(t, newInfobloxFixture(t)) })
}

// netboxSystem is NetBox: the simulator, or a real NetBox (NETBOX_URL).
type netboxSystem struct {
	target netboxtarget.Target
	token  string
	// providerObjects: the provider's tag and custom field were seeded.
	providerObjects bool
	// plannedTag: the tag of planned IP addresses was seeded.
	plannedTag bool
}

func (s *netboxSystem) name() string { return "NetBox" }

func (s *netboxSystem) poolKind(global bool) string {
	if global {
		return "GlobalNetboxIPPool"
	}
	return "NetboxIPPool"
}

func (s *netboxSystem) secretData() map[string][]byte {
	return map[string][]byte{v1alpha1.NetboxTokenKey: []byte(s.token)}
}

func (s *netboxSystem) revokeCredentials() { s.target.RemoveToken(s.token) }

func (s *netboxSystem) rotateCredentials() map[string][]byte {
	s.token = randomHex(20)
	s.target.AddToken(s.token, true)
	return s.secretData()
}

func (s *netboxSystem) readOnlyCredentials() map[string][]byte {
	s.token = randomHex(20)
	s.target.AddToken(s.token, false)
	return s.secretData()
}

func (s *netboxSystem) seedNetwork(cidr string) {
	s.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
}

func (s *netboxSystem) newPool(namespace, name, cidr, secretName string, global bool) poolkind.Pool {
	spec := v1alpha1.NetboxIPPoolSpec{
		Connection: v1alpha1.NetboxConnection{URL: s.target.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: secretName}},
		Sources:    []v1alpha1.NetboxAddressSource{prefixSource(cidr)},
	}
	if global {
		return &v1alpha1.GlobalNetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	return &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec}
}

func (s *netboxSystem) retarget(pool poolkind.Pool, cidr string) {
	pool.(interface {
		GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
	}).GetNetboxSpec().Sources = []v1alpha1.NetboxAddressSource{prefixSource(cidr)}
}

func (s *netboxSystem) records() []record {
	var out []record
	for _, ip := range s.target.IPAddresses() {
		value, _ := ip.CustomFields[netbox.DefaultMarkerField].(string)
		if m, planned := backends.ParsePlanned(value); m != "" {
			out = append(out, record{Address: netip.MustParsePrefix(ip.Address), Marker: m, Planned: planned, Description: ip.Description, id: ip.ID})
		}
	}
	return out
}

func (s *netboxSystem) disown(r record) {
	s.target.EditIPAddress(r.id, func(ip *netboxsim.IPAddress) { ip.CustomFields[netbox.DefaultMarkerField] = nil })
}

func (s *netboxSystem) deleteRecord(r record) { s.target.DeleteIPAddress(r.id) }

func (s *netboxSystem) deleteAt(addr netip.Addr) {
	for _, ip := range s.target.IPAddresses() {
		if p, err := netip.ParsePrefix(ip.Address); err == nil && p.Addr() == addr {
			s.target.DeleteIPAddress(ip.ID)
		}
	}
}

func (s *netboxSystem) moveRecord(r record, to netip.Addr) {
	s.target.EditIPAddress(r.id, func(ip *netboxsim.IPAddress) { ip.Address = netip.PrefixFrom(to, r.Address.Bits()).String() })
}

func (s *netboxSystem) moveOutOfScope(r record) string {
	name := "elsewhere-" + randomHex(4)
	vrf := s.target.AddVRF(name, "")
	s.target.EditIPAddress(r.id, func(ip *netboxsim.IPAddress) { ip.VRF = vrf })
	return name
}

func (s *netboxSystem) holdGateway(addr netip.Addr) {
	s.target.AddIPAddress(netip.PrefixFrom(addr, 24).String(), netboxsim.IPOptions{Status: "reserved"})
}

func (s *netboxSystem) holds(addr netip.Addr) bool {
	for _, ip := range s.target.IPAddresses() {
		if netip.MustParsePrefix(ip.Address).Addr() == addr {
			return true
		}
	}
	return false
}

func (s *netboxSystem) reserveForeign(addr netip.Prefix, marker string) {
	if !s.providerObjects {
		// As the other cluster's provider created them, once.
		s.target.AddTag(netbox.DefaultTag, netbox.DefaultTag)
		s.target.AddCustomField(netbox.DefaultMarkerField, "exact")
		s.providerObjects = true
	}
	s.target.AddIPAddress(addr.String(), netboxsim.IPOptions{
		Tags: []string{netbox.DefaultTag}, CustomFields: map[string]any{netbox.DefaultMarkerField: marker},
	})
}

func (s *netboxSystem) loseNextDeleteAnswer(gate <-chan struct{}) {
	s.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "DELETE", PathContains: "/api/ipam/ip-addresses/"})
	s.target.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: "DELETE", PathContains: "/api/ipam/ip-addresses/", Then: func() { <-gate }})
}

func (s *netboxSystem) loseNextAllocationAnswer() {
	s.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "POST", PathContains: allocatePath})
}

func (s *netboxSystem) loseNextRestoreAnswer() {
	s.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "POST", PathContains: "/api/ipam/ip-addresses/"})
}

func (s *netboxSystem) loseRemarkAnswers(n int) {
	s.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "PATCH", PathContains: "/api/ipam/ip-addresses/", Times: n})
}

func (s *netboxSystem) slowNextAllocation(d time.Duration) {
	s.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLatency, Latency: d, Method: "POST", PathContains: allocatePath})
}

func (s *netboxSystem) holdNextAllocation(gate <-chan struct{}) <-chan struct{} {
	arrived := make(chan struct{})
	s.target.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: "POST", PathContains: allocatePath, Then: holdUntil(arrived, gate)})
	return arrived
}

// holdUntil is a Before fault's hook that says the request arrived and
// holds it until gate closes.
func holdUntil(arrived chan<- struct{}, gate <-chan struct{}) func() {
	return func() {
		close(arrived)
		<-gate
	}
}

func (s *netboxSystem) allocationRequests() int {
	n := 0
	for _, c := range s.target.Calls() {
		if c.Method == "POST" && strings.Contains(c.Path, allocatePath) {
			n++
		}
	}
	return n
}

func (s *netboxSystem) countRequests() int {
	n := 0
	for _, c := range s.target.Calls() {
		if c.Method == "GET" && c.Path == "/api/ipam/ip-addresses/" && strings.Contains(c.Query, "parent=") {
			n++
		}
	}
	return n
}

func (s *netboxSystem) failAllRequests(status int) {
	s.target.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultStatus, Status: status, Times: 1 << 30})
}
func (s *netboxSystem) clearFaults()                          { s.target.ClearFaults() }
func (s *netboxSystem) callCount() int                        { return len(s.target.Calls()) }
func (s *netboxSystem) resetCalls()                           { s.target.ResetCalls() }
func (s *netboxSystem) url() string                           { return s.target.URL() }
func (s *netboxSystem) throttle(l httpfault.ThrottleLimit)    { s.target.SetThrottle(l) }
func (s *netboxSystem) throttleArrivals() []httpfault.Arrival { return s.target.ThrottleArrivals() }
func (s *netboxSystem) exhaustedText() string {
	return "Insufficient resources are available to satisfy the request"
}

// infobloxSystem is the WAPI simulator over TLS, with fixed addresses.
type infobloxSystem struct {
	sim      *wapisim.Server
	password string
}

func newInfobloxSystem(t *testing.T) *infobloxSystem {
	sim := wapisim.NewTLS()
	t.Cleanup(sim.Close)
	s := &infobloxSystem{sim: sim, password: "pw-" + randomHex(8)}
	sim.AddUser("capi", s.password, wapisim.Permissions{Write: true, Superuser: true})
	return s
}

func (s *infobloxSystem) name() string { return "Infoblox" }

func (s *infobloxSystem) poolKind(global bool) string {
	if global {
		return "GlobalInfobloxIPPool"
	}
	return "InfobloxIPPool"
}

func (s *infobloxSystem) secretData() map[string][]byte {
	return map[string][]byte{
		v1alpha1.InfobloxUsernameKey: []byte("capi"),
		v1alpha1.InfobloxPasswordKey: []byte(s.password),
		v1alpha1.CABundleKey:         s.sim.CACertPEM(),
	}
}

// revokeCredentials changes the user's password behind the provider's back.
func (s *infobloxSystem) revokeCredentials() {
	s.sim.AddUser("capi", "revoked-"+randomHex(8), wapisim.Permissions{Write: true, Superuser: true})
}

func (s *infobloxSystem) rotateCredentials() map[string][]byte {
	s.password = "pw-" + randomHex(8)
	s.sim.AddUser("capi", s.password, wapisim.Permissions{Write: true, Superuser: true})
	return s.secretData()
}

func (s *infobloxSystem) readOnlyCredentials() map[string][]byte {
	s.password = "ro-" + randomHex(8)
	s.sim.AddUser("capi", s.password, wapisim.Permissions{})
	return s.secretData()
}

func (s *infobloxSystem) seedNetwork(cidr string) {
	s.sim.AddNetwork("default", cidr, nil)
	s.sim.AddFixedAddress("default", netip.MustParsePrefix(cidr).Addr().Next().String(), nil)
}

func (s *infobloxSystem) newPool(namespace, name, cidr, secretName string, global bool) poolkind.Pool {
	port, _ := strconv.Atoi(s.sim.Port())
	spec := v1alpha1.InfobloxIPPoolSpec{
		Connection: v1alpha1.InfobloxConnection{
			Host: s.sim.Host(), Port: int32(port), CredentialsSecretRef: v1alpha1.SecretReference{Name: secretName},
		},
		Sources: []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: cidr}}},
	}
	if global {
		return &v1alpha1.GlobalInfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	return &v1alpha1.InfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec}
}

func (s *infobloxSystem) retarget(pool poolkind.Pool, cidr string) {
	pool.(interface {
		GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
	}).GetInfobloxSpec().Sources = []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: cidr}}}
}

func (s *infobloxSystem) objects() []wapisim.Object {
	var out []wapisim.Object
	for _, t := range []string{"fixedaddress", "ipv6fixedaddress", "record:host"} {
		out = append(out, s.sim.Objects(t)...)
	}
	return out
}

func (s *infobloxSystem) records() []record {
	var out []record
	for _, o := range s.objects() {
		if m, planned := backends.ParsePlanned(o.EAs[infoblox.DefaultMarkerEA]); m != "" && len(o.Addresses) > 0 {
			out = append(out, record{Address: netip.PrefixFrom(o.Addresses[0], o.Prefix.Bits()), Marker: m, Planned: planned,
				Description: o.Comment, ref: o.Ref})
		}
	}
	return out
}

func (s *infobloxSystem) moveOutOfScope(r record) string {
	view := "elsewhere-" + randomHex(4)
	s.sim.AddNetwork(view, r.Address.Masked().String(), nil)
	s.sim.MoveToNetworkView(r.ref, view)
	return view
}

func (s *infobloxSystem) disown(r record) { s.sim.RemoveEA(r.ref, infoblox.DefaultMarkerEA) }

func (s *infobloxSystem) deleteRecord(r record) { s.sim.DeleteObject(r.ref) }

func (s *infobloxSystem) deleteAt(addr netip.Addr) {
	for _, o := range s.objects() {
		if slices.Contains(o.Addresses, addr) {
			s.sim.DeleteObject(o.Ref)
		}
	}
}

func (s *infobloxSystem) moveRecord(r record, to netip.Addr) { s.sim.MoveAddress(r.ref, to.String()) }

func (s *infobloxSystem) holdGateway(addr netip.Addr) {
	s.sim.AddFixedAddress("default", addr.String(), nil)
}

func (s *infobloxSystem) holds(addr netip.Addr) bool {
	for _, o := range s.objects() {
		for _, a := range o.Addresses {
			if a == addr {
				return true
			}
		}
	}
	return false
}

func (s *infobloxSystem) reserveForeign(addr netip.Prefix, marker string) {
	s.sim.AddEADefinition(infoblox.DefaultMarkerEA, "STRING")
	s.sim.AddFixedAddress("default", addr.Addr().String(), map[string]string{infoblox.DefaultMarkerEA: marker})
}

func (s *infobloxSystem) loseNextDeleteAnswer(gate <-chan struct{}) {
	s.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Match: wapisim.WriteTo(http.MethodDelete, "fixedaddress")})
	// A read by reference (a search has no reference in its path).
	s.sim.InjectFault(wapisim.Fault{Kind: httpfault.Before, Method: http.MethodGet, PathContains: "/fixedaddress/", Then: func() { <-gate }})
}

func (s *infobloxSystem) loseNextAllocationAnswer() {
	s.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Method: "POST", PathContains: "fixedaddress"})
}

func (s *infobloxSystem) loseNextRestoreAnswer() {
	s.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Match: wapisim.WriteTo(http.MethodPost, "fixedaddress")})
}

func (s *infobloxSystem) loseRemarkAnswers(n int) {
	s.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLoseResponse, Match: wapisim.WriteTo(http.MethodPut, "fixedaddress"), Times: n})
}

func (s *infobloxSystem) slowNextAllocation(d time.Duration) {
	s.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultLatency, Latency: d, Method: "POST", PathContains: "fixedaddress"})
}

func (s *infobloxSystem) holdNextAllocation(gate <-chan struct{}) <-chan struct{} {
	arrived := make(chan struct{})
	s.sim.InjectFault(wapisim.Fault{Kind: httpfault.Before, Method: "POST", PathContains: "fixedaddress", Then: holdUntil(arrived, gate)})
	return arrived
}

func (s *infobloxSystem) allocationRequests() int {
	return s.sim.CountObjectCalls("POST", "fixedaddress") + s.sim.CountObjectCalls("POST", "ipv6fixedaddress")
}

func (s *infobloxSystem) countRequests() int {
	n := 0
	for _, c := range s.sim.Calls() {
		if c.Method == "GET" && strings.HasSuffix(c.Path, "/ipv4address") && (strings.Contains(c.Query, "network=") || strings.Contains(c.Query, "_page_id=")) {
			n++
		}
	}
	return n
}

func (s *infobloxSystem) failAllRequests(status int) {
	s.sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultStatus, Status: status, Times: 1 << 30})
}
func (s *infobloxSystem) clearFaults()          { s.sim.ClearFaults() }
func (s *infobloxSystem) callCount() int        { return len(s.sim.Calls()) }
func (s *infobloxSystem) resetCalls()           { s.sim.ResetCalls() }
func (s *infobloxSystem) exhaustedText() string { return "Cannot find 1 available IP address(es)" }
func (s *infobloxSystem) url() string           { return s.sim.URL() }
func (s *infobloxSystem) throttle(l httpfault.ThrottleLimit) {
	s.sim.SetThrottle(l)
}
func (s *infobloxSystem) throttleArrivals() []httpfault.Arrival { return s.sim.ThrottleArrivals() }

// plannedNamePattern renders the name of a claim's planned record: its
// machine's, in a domain of the test's namespace (a real NetBox is shared
// by every test of a run).
const plannedNamePattern = "{{ .MachineName }}.{{ .Namespace }}.planned.example"

// plannedTag marks the IP addresses the IPAM team plans in NetBox.
const plannedTag = "planned"

// seedPlannedTag creates the tag of planned IP addresses, once: the
// simulator, as NetBox, would make a second tag of one slug.
func (s *netboxSystem) seedPlannedTag() {
	if !s.plannedTag {
		s.target.AddTag(plannedTag, plannedTag)
		s.plannedTag = true
	}
}

func (s *netboxSystem) plannedPool(pool poolkind.Pool) {
	s.seedPlannedTag()
	spec := pool.(interface {
		GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
	}).GetNetboxSpec()
	spec.Reservation.DNSNamePattern = plannedNamePattern
	spec.Planned = &v1alpha1.NetboxPlanned{Tag: plannedTag}
}

func (s *netboxSystem) plan(addr netip.Prefix, name string) string {
	s.seedPlannedTag()
	id := s.target.AddIPAddress(addr.String(), netboxsim.IPOptions{
		Status: "reserved", Tags: []string{plannedTag}, DNSName: name, Description: "planned by the IPAM team",
	})
	return fmt.Sprintf("ipam/ip-addresses/%d", id)
}

// snapshot is the IP address without custom fields that hold nothing:
// NetBox lists every field defined, null when unset.
func (s *netboxSystem) snapshot(ref string) any {
	for _, ip := range s.target.IPAddresses() {
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
	return nil
}

func (s *infobloxSystem) plannedPool(pool poolkind.Pool) {
	spec := pool.(interface {
		GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
	}).GetInfobloxSpec()
	spec.Reservation.NamePattern = plannedNamePattern
	spec.Planned = &v1alpha1.InfobloxPlanned{}
}

func (s *infobloxSystem) plan(addr netip.Prefix, name string) string {
	ref := s.sim.AddFixedAddress("default", addr.Addr().String(), nil)
	s.sim.SetName(ref, name)
	return ref
}

func (s *infobloxSystem) snapshot(ref string) any {
	o, ok := s.sim.Object(ref)
	if !ok {
		return nil
	}
	return o
}
