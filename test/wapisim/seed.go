package wapisim

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Object is a copy of a stored object, for tests to inspect.
type Object struct {
	Ref         string
	Type        string       // WAPI object type, e.g. "fixedaddress", "record:host"
	Addresses   []netip.Addr // fixed address; host record's ipv4addrs then ipv6addrs
	Prefix      netip.Prefix // network, ipv6network, network containers; a range's or fixed address's network
	Start, End  netip.Addr   // range, ipv6range
	Name        string       // host, fixed address, range, EA definition, view, zone fqdn
	NetworkView string
	DNSView     string // record:host (" " when not in DNS), zone_auth
	EAs         map[string]string
	Comment     string
	MAC         string
	MatchClient string
	DUID        string
	// ConfigureForDNS is record:host's configure_for_dns.
	ConfigureForDNS bool
	// DHCP holds, per host address, its configure_for_dhcp.
	DHCP []bool
	// EAType is an EA definition's type (STRING, INTEGER, ...).
	EAType string
}

func (st *store) export(o *object) Object {
	out := Object{
		Ref: o.ref, Type: o.typ, Prefix: o.prefix, Start: o.start, End: o.end, Name: o.name,
		NetworkView: o.netView, DNSView: o.dnsView, EAs: map[string]string{}, Comment: o.comment,
		MAC: o.mac, MatchClient: o.matchClient, DUID: o.duid, ConfigureForDNS: o.dns, EAType: o.eaType,
	}
	for k, v := range o.eas {
		out.EAs[k] = eaString(v)
	}
	if o.addr.IsValid() {
		out.Addresses = append(out.Addresses, o.addr)
	}
	for _, h := range append(slices.Clone(o.v4), o.v6...) {
		out.Addresses = append(out.Addresses, h.addr)
		out.DHCP = append(out.DHCP, h.dhcp)
	}
	return out
}

// Seeding helpers panic on invalid input: a broken fixture is a bug in the
// test, not a condition to handle. They bypass permissions and WAPI
// validation except where noted.

func mustPrefix(cidr string) netip.Prefix {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		panic(fmt.Sprintf("wapisim: bad CIDR %q: %v", cidr, err))
	}
	return p.Masked()
}

func mustAddr(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		panic(fmt.Sprintf("wapisim: bad address %q: %v", s, err))
	}
	return a
}

func toEAs(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// AddNetworkView creates a network view and returns its reference.
func (s *Server) AddNetworkView(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.db.networkView(name); v != nil {
		return v.ref
	}
	return s.db.insert(&object{typ: typeNetworkView, name: name}).ref
}

// AddNetwork creates a network (IPv4) or ipv6network in a network view
// (created if missing), with extensible attributes stored as strings, and
// returns its reference.
func (s *Server) AddNetwork(view, cidr string, eas map[string]string) string {
	p := mustPrefix(cidr)
	s.AddNetworkView(view)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.insert(&object{typ: networkType(p.Addr()), netView: view, prefix: p, eas: toEAs(eas)}).ref
}

// AddNetworkContainer creates a networkcontainer (IPv4) or
// ipv6networkcontainer in a network view (created if missing), and returns
// its reference.
func (s *Server) AddNetworkContainer(view, cidr string) string {
	p := mustPrefix(cidr)
	s.AddNetworkView(view)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.insert(&object{typ: containerType(p.Addr().Is6()), netView: view, prefix: p, eas: toEAs(nil)}).ref
}

// AddRange creates a DHCP range (range or ipv6range) in the network of the
// view that holds start, and returns its reference.
func (s *Server) AddRange(view, start, end string) string {
	a, b := mustAddr(start), mustAddr(end)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.db.networkContaining(view, a)
	if n == nil || !n.prefix.Contains(b) {
		panic(fmt.Sprintf("wapisim: no network of view %q holds %s-%s", view, start, end))
	}
	return s.db.insert(&object{typ: rangeType(a), netView: view, start: a, end: b, prefix: n.prefix}).ref
}

// AddEADefinition defines an extensible attribute (typ: STRING, INTEGER,
// ...) and returns its reference.
func (s *Server) AddEADefinition(name, typ string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.db.eaDef(name); d != nil {
		return d.ref
	}
	return s.db.insert(&object{typ: typeEADef, name: name, eaType: typ}).ref
}

// AddDNSView creates a DNS view (view object) bound to a network view.
func (s *Server) AddDNSView(name, networkView string) string {
	s.AddNetworkView(networkView)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.db.dnsViewByName(name); v != nil {
		return v.ref
	}
	return s.db.insert(&object{typ: typeDNSView, name: name, netView: networkView}).ref
}

// AddZone creates an authoritative zone (zone_auth) in a DNS view, creating
// the view (bound to the default network view) if needed.
func (s *Server) AddZone(dnsView, fqdn string) string {
	s.AddDNSView(dnsView, "default")
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.insert(&object{typ: typeZone, dnsView: dnsView, name: strings.ToLower(strings.TrimSuffix(fqdn, "."))}).ref
}

// AddFixedAddress creates a RESERVED fixed address (fixedaddress, or
// ipv6fixedaddress with a generated DUID) in the network of the view
// holding ip, and returns its reference.
func (s *Server) AddFixedAddress(view, ip string, eas map[string]string) string {
	a := mustAddr(ip)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.db.networkContaining(view, a)
	if n == nil {
		panic(fmt.Sprintf("wapisim: no network of view %q holds %s", view, ip))
	}
	o := &object{typ: typeFixed, netView: view, addr: a, prefix: n.prefix, eas: toEAs(eas), extra: map[string]any{}}
	if a.Is6() {
		o.typ, o.duid = typeFixed6, "00:01:00:01:"+strings.ReplaceAll(a.StringExpanded()[30:], ":", "")
	} else {
		o.mac, o.matchClient = zeroMAC, "RESERVED"
	}
	return s.db.insert(o).ref
}

// HostRecord describes a seeded host record.
type HostRecord struct {
	Name        string
	NetworkView string // default "default"
	DNSView     string // default "default"; ignored without DNS
	DNS         bool   // configure_for_dns; the name must be in a zone (AddZone)
	Addresses   []string
	EAs         map[string]string
	Comment     string
	// MAC, when set, turns DHCP on for the IPv4 addresses, with this MAC.
	MAC string
}

// AddHostRecord creates a host record (without DHCP unless h.MAC is set)
// and returns its reference.
func (s *Server) AddHostRecord(h HostRecord) string {
	view := h.NetworkView
	if view == "" {
		view = "default"
	}
	o := &object{typ: typeHost, name: strings.ToLower(h.Name), netView: view, dns: h.DNS, eas: toEAs(h.EAs),
		comment: h.Comment, dnsView: " ", extra: map[string]any{}}
	if h.DNS {
		o.dnsView = h.DNSView
		if o.dnsView == "" {
			o.dnsView = "default"
		}
	}
	for _, ip := range h.Addresses {
		a := mustAddr(ip)
		if a.Is4() {
			o.v4 = append(o.v4, &hostAddr{addr: a, mac: strings.ToLower(h.MAC), dhcp: h.MAC != ""})
		} else {
			o.v6 = append(o.v6, &hostAddr{addr: a})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.DNS && s.db.zoneFor(o.dnsView, o.name) == nil {
		panic(fmt.Sprintf("wapisim: no zone of DNS view %q holds %s", o.dnsView, o.name))
	}
	return s.db.insert(o).ref
}

// Objects returns copies of the stored objects of a type, in WAPI order.
func (s *Server) Objects(objtype string) []Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Object
	for _, o := range s.db.list(objtype) {
		out = append(out, s.db.export(o))
	}
	return out
}

// Object returns a copy of the object behind a reference.
func (s *Server) Object(ref string) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.db.get(ref)
	if !ok {
		return Object{}, false
	}
	return s.db.export(o), true
}

// SetEA sets a string extensible attribute on an object (no definition
// check, as an administrator's GUI edit would not need this API's rules).
func (s *Server) SetEA(ref, name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustObj(ref).eas[name] = s.db.typedEA(name, value)
}

// SetComment sets an object's comment, as an administrator's GUI edit
// would.
func (s *Server) SetComment(ref, comment string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustObj(ref).comment = comment
}

// SetName names an object, as an administrator's GUI edit would.
func (s *Server) SetName(ref, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustObj(ref).name = name
}

// SetMAC makes an IPv4 fixed address a DHCP reservation for mac
// (match_client MAC_ADDRESS), as an administrator's GUI edit would; no
// check that another fixed address of the network holds the MAC.
func (s *Server) SetMAC(ref, mac string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.mustObj(ref)
	if o.typ != typeFixed {
		panic(fmt.Sprintf("wapisim: SetMAC sets the MAC of fixed addresses, not %s", o.typ))
	}
	o.mac, o.matchClient = strings.ToLower(strings.ReplaceAll(mac, "-", ":")), "MAC_ADDRESS"
}

// RemoveEA removes an extensible attribute from an object.
func (s *Server) RemoveEA(ref, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mustObj(ref).eas, name)
}

// MoveAddress changes a fixed address's IP, as a grid admin editing it:
// the object keeps its attributes, and its reference changes with its
// address, as NIOS's do. It returns the new reference.
func (s *Server) MoveAddress(ref, ip string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.mustObj(ref)
	s.db.remove(o)
	o.addr = mustAddr(ip)
	return s.db.insert(o).ref
}

// MoveToNetworkView moves a fixed address into another network view, as a
// grid admin recreating it there with the same attributes (NIOS does not
// let an object change its view in place). The view must hold a network
// with the address. It returns the new reference.
func (s *Server) MoveToNetworkView(ref, view string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.mustObj(ref)
	if o.typ != typeFixed && o.typ != typeFixed6 {
		panic(fmt.Sprintf("wapisim: MoveToNetworkView moves fixed addresses, not %s", o.typ))
	}
	n := s.db.networkContaining(view, o.addr)
	if n == nil {
		panic(fmt.Sprintf("wapisim: no network of view %q holds %s", view, o.addr))
	}
	s.db.remove(o)
	o.netView, o.prefix = view, n.prefix
	return s.db.insert(o).ref
}

// DeleteObject removes an object; it reports whether it existed.
func (s *Server) DeleteObject(ref string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.db.get(ref)
	if ok {
		s.db.remove(o)
	}
	return ok
}

// EAs returns a copy of an object's extensible attributes.
func (s *Server) EAs(ref string) map[string]string {
	o, ok := s.Object(ref)
	if !ok {
		return nil
	}
	return maps.Clone(o.EAs)
}

func (s *Server) mustObj(ref string) *object {
	o, ok := s.db.get(ref)
	if !ok {
		panic("wapisim: no object " + ref)
	}
	return o
}
