package main

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// record is one reservation in the IPAM system, read straight from its
// store (or, for a real NetBox, around the fault proxy).
type record struct {
	Address netip.Prefix
	// Marker is the provider's claim marker; "" when the record has none.
	Marker string
	ID     string
	// Planned: the marker says the IPAM team planned the record.
	Planned bool
}

// system is an IPAM system under chaos: seeded by the harness, reached by
// the manager through the fault proxy, inspected directly.
type system interface {
	// upstream is the base URL the fault proxy forwards to.
	upstream() string
	// proxyTLS says whether the manager must reach the proxy over HTTPS.
	proxyTLS() bool
	// writeStatus answers an injected 5xx as the system's front end would.
	writeStatus(w http.ResponseWriter, status int) int
	// seedNetwork creates network cidr with its first usable address
	// recorded as the gateway.
	seedNetwork(cidr netip.Prefix)
	// seedParent creates cidr as the parent a carving pool carves from: a
	// container prefix (NetBox) or network container (Infoblox).
	seedParent(cidr netip.Prefix)
	// children lists the prefixes or networks strictly inside parents, the
	// children carved from them, as records.
	children(parents []netip.Prefix) ([]record, error)
	// networks lists the networks and prefixes the system holds in
	// 10.0.0.0/8: a real NetBox keeps earlier runs'.
	networks() ([]netip.Prefix, error)
	// secretData holds credentials the system accepts; proxyCA is the
	// fault proxy's certificate when it serves HTTPS.
	secretData(proxyCA []byte) map[string][]byte
	// newPool returns (without creating) a namespaced pool allocating from
	// cidr through the proxy, or with carve above 0 carving children of
	// that length from it.
	newPool(namespace, name string, cidr netip.Prefix, secret, proxyURL string, carve int) poolkind.Pool
	poolKind() string
	// records lists every reservation held in the system.
	records() ([]record, error)
	// readdress, rescope and deleteRecord edit a record as the IPAM team
	// does, straight in the system: readdress moves it to another address
	// of its network, rescope into another VRF or network view (same
	// address), and both keep its marker.
	readdress(rec record, to netip.Addr) error
	rescope(rec record) error
	deleteRecord(rec record) error
	// deleteChild and disownChild edit a carved child (see children) as
	// the IPAM team does: delete it, or clear its marker.
	deleteChild(rec record) error
	disownChild(rec record) error
	// plan creates, as the IPAM team would, the record of addr planned for
	// the claim whose pool renders name, and returns its ID.
	plan(addr netip.Prefix, name string) (string, error)
	// rotateCredentials makes the system refuse the credentials secretData
	// gave and returns the Secret data of new ones.
	rotateCredentials(proxyCA []byte) map[string][]byte
	close()
}

// netboxSystem is the NetBox simulator, or a real NetBox behind
// netboxtarget's proxy (which swaps the harness's token for a real one).
type netboxSystem struct {
	target netboxtarget.Target
	token  string
	tb     *netboxtarget.Harness
	// elsewhere is the VRF rescoped records go to (0: not made yet).
	elsewhere int32
	rotations int
}

func newNetboxSim() *netboxSystem {
	s := &netboxSystem{target: netboxsim.New(), token: "0123456789abcdef0123456789abcdef01234567"}
	s.target.AddToken(s.token, true)
	return s
}

// newNetboxReal reaches the NetBox named by NETBOX_URL and the tokens of
// the env file hack/netbox/up.sh prints.
func newNetboxReal() (s *netboxSystem, err error) {
	h := &netboxtarget.Harness{}
	target, err := netboxtarget.NewReal(h)
	if err != nil {
		return nil, fmt.Errorf("-backend netbox-real: %w", err)
	}
	defer h.RecoverFatal(&err)
	s = &netboxSystem{target: target, token: "fedcba9876543210fedcba9876543210fedcba98", tb: h}
	s.target.AddToken(s.token, true)
	return s, nil
}

func (s *netboxSystem) upstream() string { return s.target.URL() }
func (s *netboxSystem) proxyTLS() bool   { return false }
func (s *netboxSystem) poolKind() string { return "NetboxIPPool" }

func (s *netboxSystem) writeStatus(w http.ResponseWriter, status int) int {
	return netboxsim.WriteFaultStatus(w, status)
}

func (s *netboxSystem) seedNetwork(cidr netip.Prefix) {
	s.target.AddPrefixWithGateway(cidr.String(), netboxsim.PrefixOptions{})
}

func (s *netboxSystem) seedParent(cidr netip.Prefix) {
	s.target.AddPrefix(cidr.String(), netboxsim.PrefixOptions{Status: "container"})
}

func (s *netboxSystem) children(parents []netip.Prefix) (out []record, err error) {
	if s.tb != nil {
		defer s.tb.RecoverFatal(&err)
	}
	for _, parent := range parents {
		for _, p := range s.target.PrefixesWithin(parent.String()) {
			rec, err := netboxRecord("prefix", p.ID, p.Prefix, p.CustomFields)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

func (s *netboxSystem) networks() (out []netip.Prefix, err error) {
	if s.tb != nil {
		defer s.tb.RecoverFatal(&err)
	}
	for _, p := range s.target.PrefixesWithin("10.0.0.0/8") {
		if held, perr := netip.ParsePrefix(p.Prefix); perr == nil {
			out = append(out, held)
		}
	}
	return out, nil
}

func (s *netboxSystem) secretData([]byte) map[string][]byte {
	return map[string][]byte{v1alpha1.NetboxTokenKey: []byte(s.token)}
}

// chaosRateLimit lets the faults, not the client-side limit, set the pace:
// the run is about what faults and kills do to claims.
var chaosRateLimit = &v1alpha1.RateLimit{RequestsPerSecond: 1000, Burst: 1000, MaxConcurrentRequests: 100}

// chaosOrphans lets the audit after the burst delete a duplicate at once.
var chaosOrphans = v1alpha1.Orphans{MinAge: &metav1.Duration{}}

func (s *netboxSystem) newPool(namespace, name string, cidr netip.Prefix, secret, proxyURL string, carve int) poolkind.Pool {
	pool := &v1alpha1.NetboxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: proxyURL, CredentialsSecretRef: v1alpha1.SecretReference{Name: secret},
				RateLimit: chaosRateLimit},
			Sources:     []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr.String()}}},
			Orphans:     chaosOrphans,
			Reservation: v1alpha1.NetboxReservation{DNSNamePattern: plannedNamePattern},
			Planned:     &v1alpha1.NetboxPlanned{Status: "reserved"},
		},
	}
	if carve > 0 {
		// A carving pool plans nothing and names no DNS record.
		pool.Spec.Reservation, pool.Spec.Planned = v1alpha1.NetboxReservation{}, nil
		pool.Spec.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: int32(carve)}}
	}
	return pool
}

func (s *netboxSystem) records() (out []record, err error) {
	if s.tb != nil {
		defer s.tb.RecoverFatal(&err)
	}
	for _, ip := range s.target.IPAddresses() {
		rec, err := netboxRecord("IP address", ip.ID, ip.Address, ip.CustomFields)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// netboxRecord is the record of a NetBox object (an IP address or a
// prefix) with its CIDR and custom fields.
func netboxRecord(kind string, id int32, cidr string, fields map[string]any) (record, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return record{}, fmt.Errorf("NetBox %s %d: %w", kind, id, err)
	}
	value, _ := fields[netbox.DefaultMarkerField].(string)
	m, planned := backends.ParsePlanned(value)
	return record{Address: p, Marker: m, ID: strconv.Itoa(int(id)), Planned: planned}, nil
}

func (s *netboxSystem) recordID(rec record) (int32, error) {
	id, err := strconv.Atoi(rec.ID)
	if err != nil {
		return 0, fmt.Errorf("NetBox IP address id %q: %w", rec.ID, err)
	}
	return int32(id), nil
}

// edit runs an edit of a record; a real NetBox's harness fails by panicking.
func (s *netboxSystem) edit(rec record, do func(id int32)) (err error) {
	if s.tb != nil {
		defer s.tb.RecoverFatal(&err)
	}
	id, err := s.recordID(rec)
	if err != nil {
		return err
	}
	do(id)
	return nil
}

func (s *netboxSystem) readdress(rec record, to netip.Addr) error {
	return s.edit(rec, func(id int32) {
		s.target.EditIPAddress(id, func(ip *netboxsim.IPAddress) { ip.Address = netip.PrefixFrom(to, rec.Address.Bits()).String() })
	})
}

func (s *netboxSystem) rescope(rec record) error {
	return s.edit(rec, func(id int32) {
		if s.elsewhere == 0 {
			s.elsewhere = s.target.AddVRF(fmt.Sprintf("chaos-elsewhere-%d", time.Now().UnixNano()), "")
		}
		s.target.EditIPAddress(id, func(ip *netboxsim.IPAddress) { ip.VRF = s.elsewhere })
	})
}

func (s *netboxSystem) deleteRecord(rec record) error {
	return s.edit(rec, func(id int32) { s.target.DeleteIPAddress(id) })
}

func (s *netboxSystem) deleteChild(rec record) error {
	return s.edit(rec, func(id int32) { s.target.DeletePrefix(id) })
}

func (s *netboxSystem) disownChild(rec record) error {
	return s.edit(rec, func(id int32) { s.target.SetPrefixCustomField(id, netbox.DefaultMarkerField, nil) })
}

// plan creates a reserved IP address with the DNS name the pools render.
func (s *netboxSystem) plan(addr netip.Prefix, name string) (id string, err error) {
	if s.tb != nil {
		defer s.tb.RecoverFatal(&err)
	}
	return strconv.Itoa(int(s.target.AddIPAddress(addr.String(), netboxsim.IPOptions{
		Status: "reserved", DNSName: name, Description: "planned by the IPAM team",
	}))), nil
}

func (s *netboxSystem) rotateCredentials([]byte) map[string][]byte {
	old := s.token
	s.rotations++
	s.token = fmt.Sprintf("%040x", uint64(time.Now().UnixNano())+uint64(s.rotations))
	s.target.AddToken(s.token, true)
	s.target.RemoveToken(old)
	return s.secretData(nil)
}

func (s *netboxSystem) close() {
	if s.tb != nil {
		s.tb.Close()
		return
	}
	s.target.Close()
}

// wapiSystem is the Infoblox WAPI simulator. It serves plain HTTP to the
// proxy; the proxy serves HTTPS to the manager, which speaks only HTTPS to
// a grid.
type wapiSystem struct {
	sim      *wapisim.Server
	password string
	// rescoped are the networks made in the view rescoped objects go to.
	rescoped map[netip.Prefix]bool
}

func newWapiSim() *wapiSystem {
	s := &wapiSystem{password: "chaos-password"}
	s.sim = wapisim.New(wapisim.WithUser("capi", s.password, wapisim.Permissions{Write: true, Superuser: true}))
	return s
}

func (s *wapiSystem) upstream() string { return s.sim.URL() }
func (s *wapiSystem) proxyTLS() bool   { return true }
func (s *wapiSystem) poolKind() string { return "InfobloxIPPool" }

func (s *wapiSystem) writeStatus(w http.ResponseWriter, status int) int {
	return wapisim.WriteFaultStatus(w, status)
}

func (s *wapiSystem) seedNetwork(cidr netip.Prefix) {
	s.sim.AddNetwork("default", cidr.String(), nil)
	s.sim.AddFixedAddress("default", cidr.Addr().Next().String(), nil)
}

func (s *wapiSystem) seedParent(cidr netip.Prefix) {
	s.sim.AddNetworkContainer("default", cidr.String())
}

// wapiNetworks are the object types of networks and network containers.
var wapiNetworks = []string{"network", "ipv6network", "networkcontainer", "ipv6networkcontainer"}

func (s *wapiSystem) children(parents []netip.Prefix) ([]record, error) {
	var out []record
	for _, typ := range wapiNetworks {
		for _, o := range s.sim.Objects(typ) {
			for _, parent := range parents {
				if o.Prefix != parent && parent.Bits() < o.Prefix.Bits() && parent.Contains(o.Prefix.Addr()) {
					m, planned := backends.ParsePlanned(o.EAs[infoblox.DefaultMarkerEA])
					out = append(out, record{Address: o.Prefix, Marker: m, ID: o.Ref, Planned: planned})
				}
			}
		}
	}
	return out, nil
}

func (s *wapiSystem) networks() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, typ := range wapiNetworks {
		for _, o := range s.sim.Objects(typ) {
			out = append(out, o.Prefix)
		}
	}
	return out, nil
}

func (s *wapiSystem) secretData(proxyCA []byte) map[string][]byte {
	return map[string][]byte{
		v1alpha1.InfobloxUsernameKey: []byte("capi"),
		v1alpha1.InfobloxPasswordKey: []byte(s.password),
		v1alpha1.CABundleKey:         proxyCA,
	}
}

func (s *wapiSystem) newPool(namespace, name string, cidr netip.Prefix, secret, proxyURL string, carve int) poolkind.Pool {
	u := mustParseURL(proxyURL)
	port, _ := strconv.Atoi(u.Port())
	pool := &v1alpha1.InfobloxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.InfobloxIPPoolSpec{
			Connection: v1alpha1.InfobloxConnection{
				Host: u.Hostname(), Port: int32(port), CredentialsSecretRef: v1alpha1.SecretReference{Name: secret},
				RateLimit: chaosRateLimit,
			},
			Sources:     []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: cidr.String()}}},
			Orphans:     chaosOrphans,
			Reservation: v1alpha1.InfobloxReservation{NamePattern: plannedNamePattern},
			Planned:     &v1alpha1.InfobloxPlanned{},
		},
	}
	if carve > 0 {
		pool.Spec.Reservation, pool.Spec.Planned = v1alpha1.InfobloxReservation{}, nil
		pool.Spec.ChildPrefixes = &v1alpha1.ChildPrefixes{Length: int32(carve)}
	}
	return pool
}

func (s *wapiSystem) records() ([]record, error) {
	var out []record
	for _, typ := range []string{"fixedaddress", "ipv6fixedaddress", "record:host"} {
		for _, o := range s.sim.Objects(typ) {
			for _, a := range o.Addresses {
				bits := o.Prefix.Bits()
				if bits <= 0 {
					bits = a.BitLen()
				}
				m, planned := backends.ParsePlanned(o.EAs[infoblox.DefaultMarkerEA])
				out = append(out, record{Address: netip.PrefixFrom(a, bits), Marker: m, ID: o.Ref, Planned: planned})
			}
		}
	}
	return out, nil
}

// elsewhereView is the network view rescoped objects go to.
const elsewhereView = "chaos-elsewhere"

func (s *wapiSystem) readdress(rec record, to netip.Addr) error {
	s.sim.MoveAddress(rec.ID, to.String())
	return nil
}

func (s *wapiSystem) rescope(rec record) error {
	network := rec.Address.Masked()
	if s.rescoped == nil {
		s.rescoped = map[netip.Prefix]bool{}
	}
	if !s.rescoped[network] {
		s.sim.AddNetwork(elsewhereView, network.String(), nil)
		s.rescoped[network] = true
	}
	s.sim.MoveToNetworkView(rec.ID, elsewhereView)
	return nil
}

func (s *wapiSystem) deleteRecord(rec record) error {
	if !s.sim.DeleteObject(rec.ID) {
		return fmt.Errorf("no object %s", rec.ID)
	}
	return nil
}

func (s *wapiSystem) deleteChild(rec record) error { return s.deleteRecord(rec) }

func (s *wapiSystem) disownChild(rec record) error {
	s.sim.RemoveEA(rec.ID, infoblox.DefaultMarkerEA)
	return nil
}

// plan creates a fixed address with the name the pools render.
func (s *wapiSystem) plan(addr netip.Prefix, name string) (string, error) {
	ref := s.sim.AddFixedAddress("default", addr.Addr().String(), nil)
	s.sim.SetName(ref, name)
	return ref, nil
}

// rotateCredentials changes the user's password, as a grid admin does:
// the old one fails at once.
func (s *wapiSystem) rotateCredentials(proxyCA []byte) map[string][]byte {
	s.password += "-rotated"
	s.sim.AddUser("capi", s.password, wapisim.Permissions{Write: true, Superuser: true})
	return s.secretData(proxyCA)
}

func (s *wapiSystem) close() { s.sim.Close() }
