package wapisim

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The store holds the grid's objects. It has no lock of its own: every
// access happens under Server.mu, held for a whole request, which also makes
// next-available-IP allocation atomic.

// Object types the simulator knows. Any other type in a URL gets NIOS's
// "Unknown object type" error.
const (
	typeNetworkView = "networkview"
	typeNetwork     = "network"
	typeNetwork6    = "ipv6network"
	typeContainer   = "networkcontainer"
	typeContainer6  = "ipv6networkcontainer"
	typeRange       = "range"
	typeRange6      = "ipv6range"
	typeFixed       = "fixedaddress"
	typeFixed6      = "ipv6fixedaddress"
	typeHost        = "record:host"
	typeEADef       = "extensibleattributedef"
	typeIPv4Address = "ipv4address"
	typeIPv6Address = "ipv6address"
	typeZone        = "zone_auth"
	typeDNSView     = "view"
	typeGrid        = "grid"
)

// object is one stored WAPI object. Fields not used by a type stay zero.
type object struct {
	typ string
	ref string
	seq int // creation order, part of the opaque reference

	name, comment string
	netView       string         // network_view
	dnsView       string         // view (record:host, zone_auth)
	eas           map[string]any // EA name -> value (string or int64)
	extra         map[string]any // accepted fields we do not model, echoed back verbatim

	prefix     netip.Prefix // network, ipv6network, network containers; the network of a fixed address
	start, end netip.Addr   // range, ipv6range
	addr       netip.Addr   // fixedaddress, ipv6fixedaddress

	mac, matchClient, duid string

	// record:host
	dns     bool
	v4, v6  []*hostAddr
	aliases []string
	useTTL  bool
	ttl     int64

	// extensibleattributedef
	eaType, flags, defaultValue string

	// networkview, view
	isDefault bool
}

// hostAddr is one entry of a host record's ipv4addrs or ipv6addrs.
type hostAddr struct {
	addr      netip.Addr
	mac, duid string
	dhcp      bool
}

type store struct {
	seq  int
	objs map[string]*object // by reference
	// pages holds the remaining results of paged searches by page id.
	pages map[string]parkedPage
}

func newStore() *store {
	st := &store{objs: map[string]*object{}, pages: map[string]parkedPage{}}
	// A fresh grid has the default network view and the default DNS view.
	st.insert(&object{typ: typeNetworkView, name: "default", isDefault: true})
	st.insert(&object{typ: typeDNSView, name: "default", netView: "default", isDefault: true})
	// The grid object exists once, with NIOS's reference
	// (grid/b25lLmNsdXN0ZXIkMA:Infoblox, the base64 of "one.cluster$0").
	// It takes no sequence number, so that other references do not move.
	g := &object{typ: typeGrid, name: "Infoblox", eas: map[string]any{}}
	g.ref = st.makeRef(g)
	st.put(g)
	return st
}

// insert assigns the object its sequence number and reference and stores it.
func (st *store) insert(o *object) *object {
	st.seq++
	o.seq = st.seq
	if o.eas == nil {
		o.eas = map[string]any{}
	}
	for k, v := range o.eas {
		o.eas[k] = st.typedEA(k, v)
	}
	o.ref = st.makeRef(o)
	st.put(o)
	return o
}

func (st *store) put(o *object) { st.objs[canonRef(o.ref)] = o }

func (st *store) remove(o *object) { delete(st.objs, canonRef(o.ref)) }

// get finds an object by reference. Name parts escape IPv6 colons and the
// " " view as %3A and %20; a client may send them escaped once more (the
// go client does, building URLs from refs) or not at all (curl), and NIOS
// finds the object either way, so lookups compare unescaped refs.
func (st *store) get(ref string) (*object, bool) {
	o, ok := st.objs[canonRef(ref)]
	return o, ok
}

func canonRef(ref string) string {
	return strings.NewReplacer("%3A", ":", "%3a", ":", "%20", " ").Replace(ref)
}

// list returns the objects of a type in a stable order: by address where
// the type has one (NIOS lists networks and addresses in address order),
// then by creation.
func (st *store) list(typ string) []*object {
	var out []*object
	for _, o := range st.objs {
		if o.typ == typ {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b *object) int {
		return cmp.Or(a.sortAddr().Compare(b.sortAddr()), cmp.Compare(a.seq, b.seq))
	})
	return out
}

func (o *object) sortAddr() netip.Addr {
	switch {
	case o.prefix.IsValid() && (o.typ == typeNetwork || o.typ == typeNetwork6 || o.typ == typeContainer || o.typ == typeContainer6):
		return o.prefix.Addr()
	case o.start.IsValid():
		return o.start
	case o.addr.IsValid():
		return o.addr
	}
	return netip.Addr{}
}

// --- references ---------------------------------------------------------

// NIOS references are "<type>/<opaque>:<name part>". The opaque part is the
// base64 of an internal key (e.g. "dns.network$10.0.0.0/24/0") without
// padding; the name part is documented per object in the WAPI reference.
// IPv6 addresses in name parts have their colons escaped ("abcd%3A%3A/80",
// WAPI reference, ipv6network). A fixed address's key is its address and
// network view alone, as NIOS's are ("dns.fixed_address$10.61.210.81.0..",
// decoded from published references): a fixed address made again at the same
// address, by anyone, gets the same reference, so a write by reference
// reaches whatever object holds the address then. The simulator adds the
// creation sequence to the other objects' keys.

// opaque encodes key the way NIOS refs look: unpadded base64 made only of
// word characters, since the go client parses some refs with `\w+`
// (BuildNetworkFromRef). Keys whose encoding would contain '+' or '/' get
// a trailing '.' until it does not.
func opaque(key string) string {
	for {
		e := base64.RawStdEncoding.EncodeToString([]byte(key))
		if !strings.ContainsAny(e, "+/") {
			return e
		}
		key += "."
	}
}

// escapeAddr escapes an address for a reference's name part.
func escapeAddr(s string) string { return strings.ReplaceAll(s, ":", "%3A") }

func (st *store) viewID(name string) int {
	for _, v := range st.list(typeNetworkView) {
		if v.name == name {
			return v.seq - 1
		}
	}
	return 0
}

func (st *store) makeRef(o *object) string {
	key, human := "", ""
	switch o.typ {
	case typeNetworkView:
		key = fmt.Sprintf("dns.network_view$%d", o.seq)
		human = fmt.Sprintf("%s/%t", o.name, o.isDefault)
	case typeDNSView:
		key = fmt.Sprintf("dns.view$._%s.%d", o.name, o.seq)
		human = fmt.Sprintf("%s/%t", o.name, o.isDefault)
	case typeNetwork, typeNetwork6:
		key = fmt.Sprintf("dns.network$%s/%d.%d", o.prefix, st.viewID(o.netView), o.seq)
		human = escapeAddr(o.prefix.String()) + "/" + o.netView
	case typeContainer, typeContainer6:
		// "dns.network_container$10.8.10.0/24/0", decoded from a published
		// reference; the simulator adds the creation sequence.
		key = fmt.Sprintf("dns.network_container$%s/%d.%d", o.prefix, st.viewID(o.netView), o.seq)
		human = escapeAddr(o.prefix.String()) + "/" + o.netView
	case typeRange, typeRange6:
		key = fmt.Sprintf("dns.dhcp_range$%s/%s//%d.%d", o.start, o.end, st.viewID(o.netView), o.seq)
		human = escapeAddr(o.start.String()) + "/" + escapeAddr(o.end.String()) + "/" + o.netView
	case typeFixed, typeFixed6:
		key = fmt.Sprintf("dns.fixed_address$%s.%d..", o.addr, st.viewID(o.netView))
		human = escapeAddr(o.addr.String()) + "/" + o.netView
	case typeHost:
		key = fmt.Sprintf("dns.host$._%s.%s.%d", o.dnsView, reverseName(o.name), o.seq)
		human = o.name + "/" + url.PathEscape(o.dnsView)
	case typeEADef:
		key = fmt.Sprintf("one.extensible_attributes_def$.%s.%d", o.name, o.seq)
		human = o.name
	case typeGrid:
		key, human = "one.cluster$0", o.name
	case typeZone:
		key = fmt.Sprintf("dns.zone$._%s.%s.%d", o.dnsView, reverseName(o.name), o.seq)
		human = o.name + "/" + o.dnsView
	}
	return o.typ + "/" + opaque(key) + ":" + human
}

// reverseName turns host1.example.com into com.example.host1, as NIOS's
// internal host keys do.
func reverseName(n string) string {
	parts := strings.Split(n, ".")
	slices.Reverse(parts)
	return strings.Join(parts, ".")
}

// hostAddrRef is the reference of a host record's address sub-object.
func (st *store) hostAddrRef(h *object, a *hostAddr) string {
	typ, key := "record:host_ipv4addr", "dns.host_address$"
	if a.addr.Is6() {
		typ, key = "record:host_ipv6addr", "dns.host_ipv6_address$"
	}
	return fmt.Sprintf("%s/%s:%s/%s/%s", typ, opaque(fmt.Sprintf("%s._%s.%s.%s.%d", key, h.dnsView,
		reverseName(h.name), a.addr, h.seq)), escapeAddr(a.addr.String()), h.name, url.PathEscape(h.dnsView))
}

// addressRef is the reference of a computed ipv4address/ipv6address object,
// e.g. "ipv4address/Li5pcHY0X2FkZHJlc3MkMS4xLjEuMS8w:1.1.1.1" (the base64
// of "..ipv4_address$1.1.1.1/0", as in NIOS responses).
func (st *store) addressRef(a netip.Addr, view string) string {
	typ, key := typeIPv4Address, "..ipv4_address$"
	if a.Is6() {
		typ, key = typeIPv6Address, "..ipv6_address$"
	}
	return fmt.Sprintf("%s/%s:%s", typ, opaque(fmt.Sprintf("%s%s/%d", key, a, st.viewID(view))), escapeAddr(a.String()))
}

// parseAddressRef reverses addressRef.
func (st *store) parseAddressRef(ref string) (netip.Addr, string, bool) {
	typ, rest, _ := strings.Cut(ref, "/")
	op, _, ok := strings.Cut(rest, ":")
	if !ok || (typ != typeIPv4Address && typ != typeIPv6Address) {
		return netip.Addr{}, "", false
	}
	raw, err := base64.RawStdEncoding.DecodeString(op)
	if err != nil {
		return netip.Addr{}, "", false
	}
	_, key, _ := strings.Cut(strings.TrimRight(string(raw), "."), "$")
	ip, id, _ := strings.Cut(key, "/")
	a, err := netip.ParseAddr(ip)
	if err != nil || (a.Is6() != (typ == typeIPv6Address)) {
		return netip.Addr{}, "", false
	}
	for _, v := range st.list(typeNetworkView) {
		if fmt.Sprint(v.seq-1) == id {
			if canonRef(st.addressRef(a, v.name)) == canonRef(ref) {
				return a, v.name, true
			}
		}
	}
	return netip.Addr{}, "", false
}

// --- lookups ------------------------------------------------------------

func (st *store) networkView(name string) *object {
	for _, v := range st.list(typeNetworkView) {
		if v.name == name {
			return v
		}
	}
	return nil
}

func (st *store) dnsViewByName(name string) *object {
	for _, v := range st.list(typeDNSView) {
		if v.name == name {
			return v
		}
	}
	return nil
}

func (st *store) eaDef(name string) *object {
	for _, d := range st.list(typeEADef) {
		if d.name == name {
			return d
		}
	}
	return nil
}

func networkType(a netip.Addr) string {
	if a.Is4() {
		return typeNetwork
	}
	return typeNetwork6
}

func rangeType(a netip.Addr) string {
	if a.Is4() {
		return typeRange
	}
	return typeRange6
}

// networkByCIDR finds the network object with exactly this prefix.
func (st *store) networkByCIDR(view string, p netip.Prefix) *object {
	for _, n := range st.list(networkType(p.Addr())) {
		if n.netView == view && n.prefix == p {
			return n
		}
	}
	return nil
}

// networkContaining returns the smallest network of the view holding a.
func (st *store) networkContaining(view string, a netip.Addr) *object {
	var best *object
	for _, n := range st.list(networkType(a)) {
		if n.netView == view && n.prefix.Contains(a) && (best == nil || n.prefix.Bits() > best.prefix.Bits()) {
			best = n
		}
	}
	return best
}

// rangesIn returns the DHCP ranges of the view that lie in network n.
func (st *store) rangesIn(n *object) []*object {
	var out []*object
	for _, r := range st.list(rangeType(n.prefix.Addr())) {
		if r.netView == n.netView && n.prefix.Contains(r.start) {
			out = append(out, r)
		}
	}
	return out
}

// holders returns the objects holding address a in the view: fixed
// addresses and host records (whatever their DHCP setting), which is what
// makes an address USED for next-available-IP and ipv4address.
func (st *store) holders(view string, a netip.Addr) []*object {
	var out []*object
	for _, o := range st.objs {
		if o.netView != view {
			continue
		}
		switch o.typ {
		case typeFixed, typeFixed6:
			if o.addr == a {
				out = append(out, o)
			}
		case typeHost:
			if o.hostAddr(a) != nil {
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(x, y *object) int { return cmp.Compare(x.seq, y.seq) })
	return out
}

// usedAddrs returns every address held in the view.
func (st *store) usedAddrs(view string) map[netip.Addr]bool {
	used := map[netip.Addr]bool{}
	for _, o := range st.objs {
		if o.netView != view {
			continue
		}
		switch o.typ {
		case typeFixed, typeFixed6:
			used[o.addr] = true
		case typeHost:
			for _, a := range append(slices.Clone(o.v4), o.v6...) {
				used[a.addr] = true
			}
		}
	}
	return used
}

func (o *object) hostAddr(a netip.Addr) *hostAddr {
	for _, h := range append(slices.Clone(o.v4), o.v6...) {
		if h.addr == a {
			return h
		}
	}
	return nil
}

// dhcpConflict reports whether a DHCP object other than self already uses a
// in the view. Host addresses without DHCP do not conflict, as on NIOS
// (terraform-provider-infoblox#235: a host record with DHCP off may share
// an address with another object).
// macHolder returns another fixed address of the network view's network
// prefix that carries mac, or nil. NIOS refuses two fixed addresses with one
// MAC in the same network (the zero MAC of reservations excepted), and
// says so naming both addresses and the network (see errMACInUse).
func (st *store) macHolder(view string, prefix netip.Prefix, mac string, self *object) *object {
	if mac == "" || mac == zeroMAC {
		return nil
	}
	for _, o := range st.list(typeFixed) {
		if o != self && o.netView == view && o.prefix == prefix && o.mac == mac {
			return o
		}
	}
	return nil
}

func (st *store) dhcpConflict(view string, a netip.Addr, self *object) bool {
	for _, o := range st.holders(view, a) {
		if o == self {
			continue
		}
		if o.typ == typeFixed || o.typ == typeFixed6 {
			return true
		}
		if h := o.hostAddr(a); h != nil && h.dhcp {
			return true
		}
	}
	return false
}

// typedEA turns a seeded string value of an INTEGER attribute into the
// number NIOS stores and answers ({"value": 3}, not {"value": "3"}).
func (st *store) typedEA(name string, v any) any {
	if s, ok := v.(string); ok {
		if d := st.eaDef(name); d != nil && d.eaType == "INTEGER" {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n
			}
		}
	}
	return v
}

func cloneEAs(m map[string]any) map[string]any { return maps.Clone(m) }
