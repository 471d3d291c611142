package wapisim

import (
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
)

// schema describes what WAPI exposes of an object type: its basic fields
// (returned when no _return_fields is given), the readable fields (anything
// else asked for is "Unknown argument/field"), the fields a search may name
// with their allowed modifiers, and the fields accepted on create/update.
//
// Basic fields follow the WAPI reference ("The basic version of the object
// contains the field(s): ..."): verified for record:host (ipv4addrs,
// ipv6addrs, name, view) and ipv6network/network (comment, network,
// network_view); the others are from memory of the same reference and
// therefore best guesses.
type schema struct {
	basic    []string
	readable []string
	search   map[string]string // field -> allowed modifiers among "=:~<>!"
	writable []string
	required []string // on create
}

// Fields the go client sends on create even though the simulator does not
// model them; they are stored and echoed back so that reads round-trip.
var passthroughFixed = []string{"agent_circuit_id", "agent_remote_id", "client_identifier_prepend_zero",
	"options", "use_options", "cloud_info", "disable", "dhcp_client_identifier"}

var schemas = map[string]schema{
	typeNetworkView: {
		basic:    []string{"comment", "is_default", "name"},
		readable: []string{"comment", "extattrs", "is_default", "name"},
		search:   map[string]string{"name": "=:~", "comment": "=:~", "is_default": "="},
		writable: []string{"name", "comment", "extattrs"},
		required: []string{"name"},
	},
	typeNetwork: {
		basic:    []string{"comment", "network", "network_view"},
		readable: []string{"comment", "extattrs", "network", "network_view", "network_container", "members", "disable", "options", "use_options", "cloud_info"},
		search:   map[string]string{"network": "=~<>", "network_view": "=", "comment": "=:~"},
		writable: []string{"network", "network_view", "comment", "extattrs", "members", "disable", "options", "use_options"},
		required: []string{"network"},
	},
	// networkcontainer: basic fields as the go client's generated
	// NetworkContainer documents them (comment, network, network_view);
	// network_container is the parent's CIDR, "/" at the top.
	typeContainer: {
		basic:    []string{"comment", "network", "network_view"},
		readable: []string{"comment", "extattrs", "network", "network_view", "network_container"},
		search:   map[string]string{"network": "=~<>", "network_view": "=", "comment": "=:~", "network_container": "="},
		writable: []string{"network", "network_view", "comment", "extattrs"},
		required: []string{"network"},
	},
	typeRange: {
		basic: []string{"comment", "end_addr", "network", "network_view", "start_addr"},
		readable: []string{"comment", "end_addr", "extattrs", "network", "network_view", "start_addr", "name", "disable",
			"options", "use_options", "cloud_info", "failover_association", "member", "server_association_type", "ms_server"},
		search: map[string]string{"start_addr": "=<>", "end_addr": "=<>", "network": "=~", "network_view": "=",
			"name": "=:~", "comment": "=:~"},
		writable: []string{"start_addr", "end_addr", "network", "network_view", "name", "comment", "extattrs", "disable",
			"options", "use_options", "failover_association", "member", "server_association_type", "ms_server", "template"},
		required: []string{"start_addr", "end_addr"},
	},
	typeFixed: {
		basic: []string{"ipv4addr", "network_view"},
		readable: append([]string{"comment", "extattrs", "ipv4addr", "mac", "match_client", "name", "network",
			"network_view"}, passthroughFixed...),
		search: map[string]string{"ipv4addr": "=<>", "mac": "=:~", "network": "=~", "network_view": "=",
			"name": "=:~", "comment": "=:~", "match_client": "="},
		writable: append([]string{"ipv4addr", "mac", "match_client", "name", "comment", "network", "network_view",
			"extattrs"}, passthroughFixed...),
		required: []string{"ipv4addr"},
	},
	typeFixed6: {
		basic: []string{"duid", "ipv6addr", "network_view"},
		readable: []string{"comment", "duid", "extattrs", "ipv6addr", "name", "network", "network_view", "disable",
			"options", "use_options", "cloud_info"},
		search: map[string]string{"ipv6addr": "=<>~", "duid": "=~", "network": "=~", "network_view": "=",
			"name": "=:~", "comment": "=:~"},
		writable: []string{"ipv6addr", "duid", "name", "comment", "network", "network_view", "extattrs", "disable",
			"options", "use_options", "cloud_info"},
		required: []string{"ipv6addr", "duid"},
	},
	typeHost: {
		basic: []string{"ipv4addrs", "ipv6addrs", "name", "view"},
		readable: []string{"aliases", "comment", "configure_for_dns", "disable", "extattrs", "ipv4addrs", "ipv6addrs",
			"name", "network_view", "ttl", "use_ttl", "view", "zone"},
		search: map[string]string{"name": "=:~", "view": "=", "network_view": "=", "ipv4addr": "=<>~",
			"ipv6addr": "=<>~", "comment": "=:~", "zone": "=", "mac": "=:~"},
		writable: []string{"aliases", "comment", "configure_for_dns", "disable", "extattrs", "ipv4addrs", "ipv6addrs",
			"name", "network_view", "ttl", "use_ttl", "view", "restart_if_needed"},
		required: []string{"name"},
	},
	typeEADef: {
		basic:    []string{"comment", "default_value", "name", "type"},
		readable: []string{"allowed_object_types", "comment", "default_value", "flags", "list_values", "name", "type", "namespace"},
		search:   map[string]string{"name": "=:~", "type": "=", "comment": "=:~"},
		writable: []string{"allowed_object_types", "comment", "default_value", "flags", "list_values", "name", "type",
			"min", "max", "descendants_action"},
		required: []string{"name", "type"},
	},
	typeIPv4Address: {
		basic: []string{"dhcp_client_identifier", "ip_address", "is_conflict", "mac_address", "names", "network",
			"network_view", "objects", "status", "types", "usage", "username"},
		readable: []string{"dhcp_client_identifier", "extattrs", "ip_address", "is_conflict", "mac_address", "names",
			"network", "network_view", "objects", "status", "types", "usage", "username"},
		search: map[string]string{"ip_address": "=<>", "network": "=", "network_view": "=", "status": "=",
			"names": "=:~", "types": "=", "mac_address": "=:~"},
	},
	typeIPv6Address: {
		basic: []string{"duid", "ip_address", "is_conflict", "names", "network", "network_view", "objects", "status",
			"types", "usage"},
		readable: []string{"duid", "extattrs", "ip_address", "is_conflict", "names", "network", "network_view",
			"objects", "status", "types", "usage"},
		search: map[string]string{"ip_address": "=<>", "network": "=", "network_view": "=", "status": "=",
			"names": "=:~", "types": "=", "duid": "=~"},
	},
	typeZone: {
		basic:    []string{"fqdn", "view"},
		readable: []string{"comment", "extattrs", "fqdn", "view"},
		search:   map[string]string{"fqdn": "=:~", "view": "=", "comment": "=:~"},
		writable: []string{"fqdn", "view", "comment", "extattrs"},
		required: []string{"fqdn"},
	},
	// grid: the basic version has no fields, so a search answers only
	// references; name is the only field simulated.
	typeGrid: {
		basic:    []string{},
		readable: []string{"name"},
		search:   map[string]string{},
	},
	typeDNSView: {
		basic:    []string{"comment", "is_default", "name"},
		readable: []string{"comment", "extattrs", "is_default", "name", "network_view"},
		search:   map[string]string{"name": "=:~", "network_view": "=", "is_default": "=", "comment": "=:~"},
		writable: []string{"name", "network_view", "comment", "extattrs"},
		required: []string{"name"},
	},
}

func init() {
	// IPv6 networks and ranges have the same shape as their IPv4 twins;
	// ipv6range adds address_type (ADDRESS, PREFIX or BOTH).
	schemas[typeNetwork6] = schemas[typeNetwork]
	schemas[typeContainer6] = schemas[typeContainer]
	r6 := schemas[typeRange]
	r6.readable = append(slices.Clone(r6.readable), "address_type")
	r6.writable = append(slices.Clone(r6.writable), "address_type")
	schemas[typeRange6] = r6
}

func knownType(t string) bool { _, ok := schemas[t]; return ok }

// render returns every readable field of o that has a value. NIOS leaves
// unset optional strings (comment, name, ...) out of responses; booleans,
// lists and structs with defaults are always present.
func (st *store) render(o *object) map[string]any {
	m := map[string]any{"_ref": o.ref, "extattrs": renderEAs(o.eas)}
	putStr := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	putStr("comment", o.comment)
	switch o.typ {
	case typeNetworkView:
		m["name"], m["is_default"] = o.name, o.isDefault
	case typeDNSView:
		m["name"], m["is_default"], m["network_view"] = o.name, o.isDefault, o.netView
	case typeContainer, typeContainer6:
		m["network"], m["network_view"], m["network_container"] = o.prefix.String(), o.netView, st.networkContainerField(o)
	case typeNetwork, typeNetwork6:
		m["network"], m["network_view"], m["network_container"] = o.prefix.String(), o.netView, st.networkContainerField(o)
		m["members"], m["disable"], m["use_options"] = []any{}, false, false
		m["options"] = defaultOptions()
		m["cloud_info"] = defaultCloudInfo()
	case typeRange, typeRange6:
		m["start_addr"], m["end_addr"], m["network_view"] = o.start.String(), o.end.String(), o.netView
		if o.prefix.IsValid() {
			m["network"] = o.prefix.String()
		}
		putStr("name", o.name)
		m["disable"], m["use_options"], m["options"] = false, false, defaultOptions()
		m["cloud_info"] = defaultCloudInfo()
		m["server_association_type"], m["member"] = "NONE", nil
		if o.typ == typeRange6 {
			m["address_type"] = "ADDRESS"
		}
	case typeFixed:
		m["ipv4addr"], m["network_view"], m["network"] = o.addr.String(), o.netView, o.prefix.String()
		m["mac"], m["match_client"] = o.mac, o.matchClient
		putStr("name", o.name)
		m["disable"], m["use_options"], m["client_identifier_prepend_zero"] = false, false, false
		m["options"], m["cloud_info"] = defaultOptions(), defaultCloudInfo()
	case typeFixed6:
		m["ipv6addr"], m["network_view"], m["network"], m["duid"] = o.addr.String(), o.netView, o.prefix.String(), o.duid
		putStr("name", o.name)
		m["disable"], m["use_options"], m["options"], m["cloud_info"] = false, false, []any{}, defaultCloudInfo()
	case typeHost:
		m["name"], m["view"], m["network_view"], m["configure_for_dns"] = o.name, o.dnsView, o.netView, o.dns
		m["aliases"], m["use_ttl"], m["disable"] = append([]string{}, o.aliases...), o.useTTL, false
		if o.useTTL {
			m["ttl"] = o.ttl
		}
		if z := st.zoneFor(o.dnsView, o.name); o.dns && z != nil {
			m["zone"] = z.name
		}
		m["ipv4addrs"], m["ipv6addrs"] = st.renderHostAddrs(o, o.v4), st.renderHostAddrs(o, o.v6)
	case typeEADef:
		m["name"], m["type"] = o.name, o.eaType
		putStr("flags", o.flags)
		putStr("default_value", o.defaultValue)
		delete(m, "extattrs")
	case typeZone:
		m["fqdn"], m["view"] = o.name, o.dnsView
	case typeGrid:
		m["name"] = o.name
		delete(m, "extattrs")
	}
	for k, v := range o.extra {
		m[k] = v
	}
	return m
}

func (st *store) renderHostAddrs(h *object, addrs []*hostAddr) []any {
	out := []any{}
	for _, a := range addrs {
		e := map[string]any{"_ref": st.hostAddrRef(h, a), "configure_for_dhcp": a.dhcp, "host": h.name}
		if a.addr.Is4() {
			e["ipv4addr"] = a.addr.String()
			if a.mac != "" {
				e["mac"] = a.mac
			}
		} else {
			e["ipv6addr"] = a.addr.String()
			if a.duid != "" {
				e["duid"] = a.duid
			}
		}
		out = append(out, e)
	}
	return out
}

// renderEAs renders extensible attributes as WAPI does: {"Name": {"value": v}}.
func renderEAs(eas map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range eas {
		out[k] = map[string]any{"value": v}
	}
	return out
}

// defaultOptions is the DHCP option list NIOS reports on objects without
// their own options (the inherited lease time). Best guess from memory of
// NIOS responses; the go client decodes it into []*Dhcpoption.
func defaultOptions() []any {
	return []any{map[string]any{"name": "dhcp-lease-time", "num": 51, "use_option": false, "value": "43200", "vendor_class": "DHCP"}}
}

// defaultCloudInfo is cloud_info of an object not owned by a cloud adaptor.
// Best guess; shape per the go client's GridCloudapiInfo.
func defaultCloudInfo() map[string]any {
	return map[string]any{"authority_type": "GM", "delegated_scope": "NONE", "mgmt_platform": "", "owned_by_adaptor": false}
}

// zoneFor returns the authoritative zone of the DNS view holding name (the
// longest matching fqdn), or nil.
func (st *store) zoneFor(view, name string) *object {
	var best *object
	for _, z := range st.list(typeZone) {
		if z.dnsView != view {
			continue
		}
		if name == z.name || (len(name) > len(z.name) && name[len(name)-len(z.name)-1:] == "."+z.name) {
			if best == nil || len(z.name) > len(best.name) {
				best = z
			}
		}
	}
	return best
}

// renderAddress renders the computed ipv4address/ipv6address object for a
// in network n. Types follow NIOS: "FA" for a fixed address, "RESERVATION"
// for a RESERVED one, "HOST" for a host record; network and broadcast
// addresses are "NETWORK"/"BROADCAST" (best guess: reported USED).
func (st *store) renderAddress(n *object, a netip.Addr) map[string]any {
	objects, names, types, usage := []string{}, []string{}, []string{}, []string{}
	addUsage := func(u string) {
		if !slices.Contains(usage, u) {
			usage = append(usage, u)
		}
	}
	mac, duid := "", ""
	for _, o := range st.holders(n.netView, a) {
		objects = append(objects, o.ref)
		switch o.typ {
		case typeFixed, typeFixed6:
			if o.matchClient == "RESERVED" {
				types = append(types, "RESERVATION")
			} else {
				types = append(types, "FA")
			}
			if o.name != "" {
				names = append(names, o.name)
			}
			if o.mac != "" && o.mac != zeroMAC {
				mac = o.mac
			}
			duid = o.duid
			addUsage("DHCP")
		case typeHost:
			types = append(types, "HOST")
			names = append(names, o.name)
			h := o.hostAddr(a)
			if o.dns {
				addUsage("DNS")
			}
			if h.dhcp {
				addUsage("DHCP")
				mac, duid = h.mac, h.duid
			}
		}
	}
	if a.Is4() && n.prefix.Bits() < 31 {
		if a == n.prefix.Addr() {
			types = append(types, "NETWORK")
		} else if a == lastAddr(n.prefix) {
			types = append(types, "BROADCAST")
		}
	}
	status := "UNUSED"
	if len(types) > 0 {
		status = "USED"
	}
	m := map[string]any{
		"_ref": st.addressRef(a, n.netView), "ip_address": a.String(), "is_conflict": false,
		"names": names, "network": n.prefix.String(), "network_view": n.netView, "objects": objects,
		"status": status, "types": types, "usage": usage, "extattrs": map[string]any{},
	}
	if a.Is4() {
		m["mac_address"], m["dhcp_client_identifier"], m["username"] = mac, "", ""
	} else {
		m["duid"] = duid
	}
	return m
}

const zeroMAC = "00:00:00:00:00:00"

// eaString renders an EA value for comparison and for the seeding API.
func eaString(v any) string { return fmt.Sprint(v) }

// schemaVersions are the WAPI versions the simulator accepts, as _schema
// lists them (major.minor only; NIOS also lists patch versions such as
// 2.12.3).
func schemaVersions() []string {
	var out []string
	for i := 0; i <= 7; i++ {
		out = append(out, fmt.Sprintf("1.%d", i))
	}
	for i := 0; i <= 13; i++ {
		out = append(out, fmt.Sprintf("2.%d", i))
	}
	return out
}

// schemaResponse answers GET /wapi/v<version>/?_schema (the grid's schema:
// requested_version, supported_objects, supported_versions) and GET
// <objtype>?_schema (the object's fields). Field types, is_array,
// documentation and the other _schema options are not simulated (doc.go).
func schemaResponse(version, typ string, q url.Values) response {
	for _, k := range []string{"_schema_version", "_schema_searchable", "_get_doc"} {
		if q.Has(k) {
			return errResponse(errNotSimulated(k))
		}
	}
	for k := range q {
		if k != "_schema" && k != "_return_type" {
			return errResponse(errUnknownField(k))
		}
	}
	if typ == "" {
		objs := slices.Sorted(maps.Keys(schemas))
		return response{http.StatusOK, map[string]any{"requested_version": version,
			"supported_objects": objs, "supported_versions": schemaVersions()}}
	}
	sc := schemas[typ]
	names := slices.Clone(sc.readable)
	for f := range sc.search {
		if !slices.Contains(names, f) {
			names = append(names, f) // search-only fields
		}
	}
	slices.Sort(names)
	fields := []any{}
	for _, f := range names {
		supports := ""
		if slices.Contains(sc.readable, f) {
			supports += "r"
		}
		if slices.Contains(sc.writable, f) {
			supports += "wu"
		}
		mods, searchable := sc.search[f]
		if searchable {
			supports += "s"
		}
		field := map[string]any{"name": f, "supports": supports, "standard_field": true}
		if searchable {
			field["searchable_by"] = mods
		}
		fields = append(fields, field)
	}
	restrictions := []string{}
	if len(sc.writable) == 0 {
		restrictions = append(restrictions, "create", "delete", "update")
	}
	return response{http.StatusOK, map[string]any{"type": typ, "version": version, "wapi_primitive": "object",
		"fields": fields, "restrictions": restrictions, "cloud_additional_restrictions": []string{}}}
}
