package wapisim

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// body is a decoded create/update body with typed accessors. Accessors
// record the first type error; NIOS rejects a field of the wrong type.
type body struct {
	m   map[string]any
	err *wapiError
}

func (b *body) fail(e wapiError) {
	if b.err == nil {
		b.err = &e
	}
}

func (b *body) str(k string) (string, bool) {
	v, ok := b.m[k]
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		b.fail(errInvalidValue(k, v))
	}
	return s, true
}

func (b *body) strOr(k, def string) string {
	if s, ok := b.str(k); ok && s != "" {
		return s
	}
	return def
}

func (b *body) boolean(k string, def bool) bool {
	v, ok := b.m[k]
	if !ok {
		return def
	}
	x, isBool := v.(bool)
	if !isBool {
		b.fail(errInvalidValue(k, v))
	}
	return x
}

// checkFields rejects fields the type does not accept: unknown ones with
// "Unknown argument/field", read-only ones with a best-guess text.
func checkFields(typ string, m map[string]any, update bool) *wapiError {
	sc := schemas[typ]
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := k
		if update {
			// WAPI lets updates add or remove EAs with "extattrs+" and
			// "extattrs-".
			name = strings.TrimRight(k, "+-")
		}
		switch {
		case slices.Contains(sc.writable, name):
		case slices.Contains(sc.readable, name) || name == "_ref":
			if name == "_ref" && update {
				continue
			}
			e := errProto("Field is not writable: %s", name)
			return &e
		default:
			e := errUnknownField(k)
			return &e
		}
	}
	return nil
}

// parseEAs validates an extattrs value against the EA definitions.
func (c *request) parseEAs(v any) (map[string]any, *wapiError) {
	m, ok := v.(map[string]any)
	if !ok {
		e := errInvalidValue("extattrs", v)
		return nil, &e
	}
	out := map[string]any{}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		def := c.s.db.eaDef(name)
		if def == nil {
			e := errUnknownEA(name)
			return nil, &e
		}
		ev, ok := m[name].(map[string]any)
		val, has := ev["value"]
		if !ok || !has {
			e := errInvalidValue("extattrs", m[name])
			return nil, &e
		}
		switch x := val.(type) {
		case json.Number:
			i, err := x.Int64()
			if err != nil || def.eaType != "INTEGER" {
				e := errInvalidValue("extensible attribute "+name, x)
				return nil, &e
			}
			out[name] = i
		case string:
			if def.eaType == "INTEGER" {
				// Best guess: NIOS rejects a string for an INTEGER EA.
				e := errInvalidValue("extensible attribute "+name, x)
				return nil, &e
			}
			out[name] = x
		default:
			e := errInvalidValue("extensible attribute "+name, val)
			return nil, &e
		}
	}
	return out, nil
}

// create answers POST <objtype>: 201 with the new reference as a JSON
// string, or with the object when _return_fields is given.
func (c *request) create() response {
	opts, _, werr := c.parseOptions()
	if werr != nil {
		return errResponse(*werr)
	}
	m, werr := decodeBody(c.body)
	if werr != nil {
		return errResponse(*werr)
	}
	if c.typ == typeIPv4Address || c.typ == typeIPv6Address || c.typ == typeGrid {
		// Best guess text: these objects are computed, or exist once.
		return errResponse(errProto("Operation create not allowed for %s", c.typ))
	}
	if werr := checkFields(c.typ, m, false); werr != nil {
		return errResponse(*werr)
	}
	for _, f := range schemas[c.typ].required {
		if _, ok := m[f]; !ok {
			return errResponse(errRequired(f))
		}
	}
	b := &body{m: m}
	o := &object{typ: c.typ, extra: map[string]any{}}
	// A request object shares pending addresses between its operations.
	pendingBefore := len(c.pending)
	if v, ok := m["extattrs"]; ok {
		eas, werr := c.parseEAs(v)
		if werr != nil {
			return errResponse(*werr)
		}
		o.eas = eas
	}
	o.comment, _ = b.str("comment")
	var werr2 *wapiError
	switch c.typ {
	case typeNetworkView:
		werr2 = c.createNetworkView(o, b)
	case typeNetwork, typeNetwork6:
		werr2 = c.createNetwork(o, b)
	case typeContainer, typeContainer6:
		werr2 = c.createContainer(o, b)
	case typeRange, typeRange6:
		werr2 = c.createRange(o, b)
	case typeFixed, typeFixed6:
		werr2 = c.createFixed(o, b)
	case typeHost:
		werr2 = c.createHost(o, b)
	case typeEADef:
		werr2 = c.createEADef(o, b)
	case typeZone:
		werr2 = c.createZone(o, b)
	case typeDNSView:
		werr2 = c.createDNSView(o, b)
	}
	if werr2 == nil {
		werr2 = b.err
	}
	if werr2 != nil {
		return errResponse(*werr2)
	}
	c.s.db.insert(o)
	if len(c.pending) > pendingBefore {
		c.allocs = append(c.allocs, o)
	}
	return c.answerWrite(http.StatusCreated, o, opts)
}

// answerWrite renders the result of a create or update: the reference, or
// the object when _return_fields(+) is given (WAPI allows it on POST and
// PUT), wrapped in {"result": ...} with _return_as_object=1.
func (c *request) answerWrite(status int, o *object, opts options) response {
	var out any = o.ref
	if opts.returnFields != nil {
		p, werr := c.project(c.s.db.render(o), opts)
		if werr != nil {
			return errResponse(*werr)
		}
		out = p
	}
	if opts.asObject {
		out = map[string]any{"result": out}
	}
	return response{status, out}
}

// passthrough keeps the accepted fields the simulator does not model.
func passthrough(o *object, m map[string]any, fields ...string) {
	for _, f := range fields {
		if v, ok := m[f]; ok {
			o.extra[f] = v
		}
	}
}

func (c *request) needNetworkView(name string) *wapiError {
	if c.s.db.networkView(name) == nil {
		e := errNetworkViewNotFound(name)
		return &e
	}
	return nil
}

func (c *request) createNetworkView(o *object, b *body) *wapiError {
	o.name, _ = b.str("name")
	if c.s.db.networkView(o.name) != nil {
		// Pattern of NIOS's duplicate-object error (infoblox-ansible tests:
		// "Duplicate object 'test123.com' of type zone exists in the
		// database.").
		e := errConflict("Duplicate object '%s' of type network_view exists in the database.", o.name)
		return &e
	}
	return nil
}

func (c *request) createNetwork(o *object, b *body) *wapiError {
	if werr := c.placeNetwork(o, b, c.typ == typeNetwork6); werr != nil {
		return werr
	}
	if c.s.db.networkByCIDR(o.netView, o.prefix) != nil {
		// "The network 192.168.1.0/24 already exists.  Select another
		// network." (two spaces, as NIOS writes it).
		e := errConflict("The network %s already exists.  Select another network.", o.prefix)
		return &e
	}
	passthrough(o, b.m, "members", "disable", "options", "use_options")
	return nil
}

func (c *request) createRange(o *object, b *body) *wapiError {
	o.netView = b.strOr("network_view", "default")
	if werr := c.needNetworkView(o.netView); werr != nil {
		return werr
	}
	want6 := c.typ == typeRange6
	ss, _ := b.str("start_addr")
	es, _ := b.str("end_addr")
	start, err1 := netip.ParseAddr(ss)
	end, err2 := netip.ParseAddr(es)
	if err1 != nil || err2 != nil || start.Is6() != want6 || end.Is6() != want6 || start.Compare(end) > 0 {
		e := errInvalidValue("start_addr/end_addr", ss+"-"+es)
		return &e
	}
	o.start, o.end = start, end
	n := c.s.db.networkContaining(o.netView, start)
	if ns, ok := b.str("network"); ok && ns != "" {
		p, err := netip.ParsePrefix(ns)
		if err != nil {
			e := errInvalidValue("network", ns)
			return &e
		}
		n = c.s.db.networkByCIDR(o.netView, p.Masked())
	}
	if n == nil || !n.prefix.Contains(end) {
		return ptr(errParentNotFound())
	}
	o.prefix = n.prefix
	o.name, _ = b.str("name")
	passthrough(o, b.m, "disable", "options", "use_options", "failover_association", "member",
		"server_association_type", "ms_server", "template", "address_type")
	return nil
}

func ptr(e wapiError) *wapiError { return &e }

var macRE = regexp.MustCompile(`^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$`)

func (c *request) createFixed(o *object, b *body) *wapiError {
	st := c.s.db
	want6 := c.typ == typeFixed6
	field := "ipv4addr"
	if want6 {
		field = "ipv6addr"
	}
	o.netView = b.strOr("network_view", "default")
	if werr := c.needNetworkView(o.netView); werr != nil {
		return werr
	}
	al, werr := c.resolveAddr(field, b.m[field], o.netView, want6)
	if werr != nil {
		return werr
	}
	o.addr = al.addr
	if al.network == nil || al.network.netView != o.netView {
		// A fixed address must lie in a network of its view.
		return ptr(errParentNotFound())
	}
	o.prefix = al.network.prefix
	o.name, _ = b.str("name")
	if want6 {
		o.duid, _ = b.str("duid")
		if o.duid == "" {
			return ptr(errRequired("duid"))
		}
	} else {
		o.matchClient = b.strOr("match_client", "MAC_ADDRESS")
		o.mac, _ = b.str("mac")
		switch {
		case o.matchClient == "RESERVED":
			// A reservation has no client; NIOS stores the zero MAC.
			if o.mac == "" {
				o.mac = zeroMAC
			}
		case o.matchClient == "MAC_ADDRESS" && o.mac == "":
			return ptr(errRequired("mac"))
		}
		if o.mac != "" && !macRE.MatchString(o.mac) {
			return ptr(errInvalidValue("mac", o.mac))
		}
		o.mac = strings.ToLower(strings.ReplaceAll(o.mac, "-", ":"))
	}
	if st.dhcpConflict(o.netView, o.addr, nil) {
		return ptr(errIPInUse(o.addr, o.netView))
	}
	if h := st.macHolder(o.netView, o.prefix, o.mac, nil); h != nil {
		return ptr(errMACInUse(o.mac, h.addr, o.addr, o.prefix))
	}
	passthrough(o, b.m, passthroughFixed...)
	delete(o.extra, "cloud_info") // cloud_info is computed; NIOS echoes its own
	return nil
}

func (c *request) createHost(o *object, b *body) *wapiError {
	st := c.s.db
	name, _ := b.str("name")
	o.name = strings.ToLower(strings.TrimSuffix(name, "."))
	o.dns = b.boolean("configure_for_dns", true)
	o.netView = b.strOr("network_view", "default")
	if werr := c.needNetworkView(o.netView); werr != nil {
		return werr
	}
	if o.dns {
		o.dnsView = b.strOr("view", "default")
		if st.dnsViewByName(o.dnsView) == nil {
			return ptr(errDNSViewNotFound(o.dnsView))
		}
		// "The zone must be created first before adding a host record for
		// the zone" (WAPI reference, record:host).
		if st.zoneFor(o.dnsView, o.name) == nil {
			return ptr(errParentNotFound())
		}
		for _, h := range st.list(typeHost) {
			if h.dns && h.dnsView == o.dnsView && h.name == o.name {
				return ptr(errHostExists(o.name))
			}
		}
	} else {
		// Hosts outside DNS live in the " " view (their refs end in "/%20").
		o.dnsView = " "
	}
	for _, list := range []struct {
		key   string
		want6 bool
		dst   *[]*hostAddr
	}{{"ipv4addrs", false, &o.v4}, {"ipv6addrs", true, &o.v6}} {
		raw, ok := b.m[list.key]
		if !ok {
			continue
		}
		entries, ok := raw.([]any)
		if !ok {
			return ptr(errInvalidValue(list.key, raw))
		}
		for _, e := range entries {
			ha, werr := c.parseHostAddr(o, e, list.want6)
			if werr != nil {
				return werr
			}
			*list.dst = append(*list.dst, ha)
		}
	}
	if len(o.v4)+len(o.v6) == 0 {
		// Best guess text: ipv4addrs or ipv6addrs is required.
		return ptr(errProto("At least one IP address is required for a host record"))
	}
	if a, ok := b.m["aliases"].([]any); ok {
		for _, x := range a {
			s, _ := x.(string)
			o.aliases = append(o.aliases, s)
		}
	}
	o.useTTL = b.boolean("use_ttl", false)
	if n, ok := b.m["ttl"].(json.Number); ok {
		o.ttl, _ = n.Int64()
	}
	passthrough(o, b.m, "disable")
	return nil
}

// parseHostAddr parses one ipv4addrs/ipv6addrs entry of a host record.
func (c *request) parseHostAddr(h *object, e any, want6 bool) (*hostAddr, *wapiError) {
	m, ok := e.(map[string]any)
	field := "ipv4addr"
	if want6 {
		field = "ipv6addr"
	}
	if !ok {
		return nil, ptr(errInvalidValue(field+"s", e))
	}
	for k := range m {
		switch k {
		case field, "configure_for_dhcp", "mac", "duid", "match_client", "use_for_ea_inheritance", "options",
			"use_options", "_ref", "host":
		default:
			return nil, ptr(errUnknownField(k))
		}
	}
	b := &body{m: m}
	al, werr := c.resolveAddr(field, m[field], h.netView, want6)
	if werr != nil {
		return nil, werr
	}
	ha := &hostAddr{addr: al.addr, dhcp: b.boolean("configure_for_dhcp", false)}
	ha.mac, _ = b.str("mac")
	ha.duid, _ = b.str("duid")
	if al.mac != "" {
		ha.mac = al.mac
	}
	if al.dhcp != nil {
		ha.dhcp = *al.dhcp
	}
	if b.err != nil {
		return nil, b.err
	}
	if ha.dhcp {
		if al.network == nil {
			return nil, ptr(errParentNotFound())
		}
		if (!want6 && (ha.mac == "" || ha.mac == zeroMAC)) || (want6 && ha.duid == "") {
			return nil, ptr(errRequired(map[bool]string{false: "mac", true: "duid"}[want6]))
		}
		if c.s.db.dhcpConflict(h.netView, ha.addr, h) {
			return nil, ptr(errIPInUse(ha.addr, h.netView))
		}
	}
	return ha, nil
}

func (c *request) createEADef(o *object, b *body) *wapiError {
	o.name, _ = b.str("name")
	o.eaType, _ = b.str("type")
	if !slices.Contains([]string{"STRING", "INTEGER", "EMAIL", "URL", "DATE", "ENUM"}, o.eaType) {
		return ptr(errInvalidValue("type", o.eaType))
	}
	if c.s.db.eaDef(o.name) != nil {
		return ptr(errEAExists(o.name))
	}
	o.flags, _ = b.str("flags")
	o.defaultValue, _ = b.str("default_value")
	passthrough(o, b.m, "allowed_object_types", "list_values", "min", "max", "descendants_action")
	return nil
}

func (c *request) createZone(o *object, b *body) *wapiError {
	fqdn, _ := b.str("fqdn")
	o.name = strings.ToLower(strings.TrimSuffix(fqdn, "."))
	o.dnsView = b.strOr("view", "default")
	if c.s.db.dnsViewByName(o.dnsView) == nil {
		return ptr(errDNSViewNotFound(o.dnsView))
	}
	for _, z := range c.s.db.list(typeZone) {
		if z.dnsView == o.dnsView && z.name == o.name {
			return ptr(errConflict("Duplicate object '%s' of type zone exists in the database.", o.name))
		}
	}
	return nil
}

func (c *request) createDNSView(o *object, b *body) *wapiError {
	o.name, _ = b.str("name")
	o.netView = b.strOr("network_view", "default")
	if werr := c.needNetworkView(o.netView); werr != nil {
		return werr
	}
	if c.s.db.dnsViewByName(o.name) != nil {
		return ptr(errConflict("Duplicate object '%s' of type view exists in the database.", o.name))
	}
	return nil
}

// update answers PUT <ref>: comment, name, extattrs (replace), extattrs+ /
// extattrs- (add / remove), and the fields stored verbatim. It answers 200
// with the reference (which changes when the name part changes).
func (c *request) update() response {
	opts, _, werr := c.parseOptions()
	if werr != nil {
		return errResponse(*werr)
	}
	st := c.s.db
	o, ok := st.get(c.ref)
	if !ok || o.typ != c.typ {
		return errResponse(errRefNotFound(c.ref))
	}
	m, werr := decodeBody(c.body)
	if werr != nil {
		return errResponse(*werr)
	}
	if werr := checkFields(c.typ, m, true); werr != nil {
		return errResponse(*werr)
	}
	b := &body{m: m}
	eas := cloneEAs(o.eas)
	if v, ok := m["extattrs"]; ok {
		if eas, werr = c.parseEAs(v); werr != nil {
			return errResponse(*werr)
		}
	}
	if v, ok := m["extattrs+"]; ok {
		add, werr := c.parseEAs(v)
		if werr != nil {
			return errResponse(*werr)
		}
		for k, x := range add {
			eas[k] = x
		}
	}
	if v, ok := m["extattrs-"]; ok {
		rm, isMap := v.(map[string]any)
		if !isMap {
			return errResponse(errInvalidValue("extattrs-", v))
		}
		for k := range rm {
			delete(eas, k)
		}
	}
	comment, hasComment := b.str("comment")
	name, hasName := b.str("name")
	if b.err != nil {
		return errResponse(*b.err)
	}
	// Fields that move the object (addresses, networks, views) are not
	// supported by the simulator beyond an unchanged value.
	for _, f := range []string{"ipv4addr", "ipv6addr", "network", "network_view", "start_addr", "end_addr",
		"ipv4addrs", "ipv6addrs", "view", "fqdn", "configure_for_dns"} {
		if v, ok := m[f]; ok && !sameValue(st.render(o)[f], v) && !(f == "network_view" && v == o.netView) {
			return errResponse(errProto("wapisim: updating %s is not simulated", f))
		}
	}
	newMAC, hasMAC := b.str("mac")
	hasMAC = hasMAC && newMAC != "" && c.typ == typeFixed
	if hasMAC {
		if !macRE.MatchString(newMAC) {
			return errResponse(errInvalidValue("mac", newMAC))
		}
		newMAC = strings.ToLower(strings.ReplaceAll(newMAC, "-", ":"))
		if h := st.macHolder(o.netView, o.prefix, newMAC, o); h != nil {
			return errResponse(errMACInUse(newMAC, h.addr, o.addr, o.prefix))
		}
	}
	if c.typ == typeHost && hasName {
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		if o.dns && st.zoneFor(o.dnsView, name) == nil {
			return errResponse(errParentNotFound())
		}
	}
	o.eas = eas
	if hasComment {
		o.comment = comment
	}
	if hasName && name != o.name {
		o.name = name
		st.remove(o)
		o.ref = st.makeRef(o)
		st.put(o)
	}
	if c.typ == typeFixed {
		if hasMAC {
			o.mac = newMAC
		}
		if mc, ok := b.str("match_client"); ok && mc != "" {
			o.matchClient = mc
		}
	}
	for k, v := range m {
		if slices.Contains(passthroughFixed, k) || k == "disable" || k == "aliases" {
			o.extra[k] = v
		}
	}
	return c.answerWrite(http.StatusOK, o, opts)
}

func sameValue(have, v any) bool {
	hs, ok1 := have.(string)
	vs, ok2 := v.(string)
	return ok1 && ok2 && (hs == vs || sameAddr(hs, vs))
}

// delete answers DELETE <ref> with the reference as a JSON string.
func (c *request) delete() response {
	st := c.s.db
	o, ok := st.get(c.ref)
	if !ok || o.typ != c.typ {
		return errResponse(errRefNotFound(c.ref))
	}
	if o.typ == typeGrid {
		// Best guess text, as for create.
		return errResponse(errProto("Operation delete not allowed for %s", o.typ))
	}
	if o.typ == typeNetworkView && o.isDefault || o.typ == typeDNSView && o.isDefault {
		// Best guess text.
		return errResponse(errConflict("The default %s cannot be deleted.", o.typ))
	}
	if o.typ == typeContainer || o.typ == typeContainer6 {
		st.deleteContainer(o, c.query.Get("remove_subnets") != "false")
		return response{http.StatusOK, o.ref}
	}
	st.remove(o)
	return response{http.StatusOK, o.ref}
}
