package wapisim

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
)

// Next available IP, as WAPI offers it in address fields on create/update:
//
//	func:nextavailableip:10.0.0.0/24
//	func:nextavailableip:10.0.0.0/24,external          (network view)
//	func:nextavailableip:10.0.0.3-10.0.0.10[,view]     (an address span)
//	func:nextavailableip:network/ZG5z...:10.0.0.0/24/default
//	func:nextavailableip:range/ZG5z...:10.0.0.10/10.0.0.20/default
//
// (forms listed in the WAPI reference, "Function Calls", as quoted by
// salt's infoblox module and Posh-IBWAPI; the range-reference form is a best
// guess by analogy), and the object form
//
//	{"_object_function": "next_available_ip", "_object": "network",
//	 "_object_parameters": {"network": "10.0.0.0/24", "network_view": "default"},
//	 "_result_field": "ips", "_parameters": {"num": 1, "exclude": ["10.0.0.7"]}}
//
// that infoblox-go-client sends from AllocateNextAvailableIp.
//
// Rules: an IPv4 network never hands out its network and broadcast
// addresses; addresses held by a fixed address or a host record of the
// network view are used; allocating from a network skips the DHCP ranges
// inside it; allocating from a range stays inside the range.

const funcPrefix = "func:nextavailableip:"

// container is where an address is taken from.
type container struct {
	view    string
	network *object    // set when allocating from a network
	rng     *object    // set when allocating from a range object
	lo, hi  netip.Addr // the span to search
	kind    string     // "network" or "range", for the exhaustion error
}

// isNextAvailable reports whether an address field asks for allocation.
func isNextAvailable(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.HasPrefix(x, funcPrefix)
	case map[string]any:
		_, ok := x["_object_function"]
		return ok
	}
	return false
}

// allocation is the result of resolving an address field.
type allocation struct {
	addr    netip.Addr
	network *object // the network holding addr, if any
	mac     string  // from the object form (the go client puts it there)
	dhcp    *bool
}

// resolveAddr turns an address field value (literal or next-available) into
// an address of the wanted family. view is the object's network view; a
// func: string may name another one.
func (c *request) resolveAddr(field string, v any, view string, want6 bool) (allocation, *wapiError) {
	st := c.s.db
	switch x := v.(type) {
	case string:
		if !strings.HasPrefix(x, funcPrefix) {
			a, err := netip.ParseAddr(x)
			if err != nil || a.Is6() != want6 || a.Zone() != "" {
				e := errInvalidValue(field, x)
				return allocation{}, &e
			}
			return allocation{addr: a, network: st.networkContaining(view, a)}, nil
		}
		ct, werr := c.parseFuncArg(strings.TrimPrefix(x, funcPrefix), view, want6)
		if werr != nil {
			return allocation{}, werr
		}
		return c.allocate(ct, nil)
	case map[string]any:
		ct, exclude, al, werr := c.parseObjectFunction(field, x, view, want6)
		if werr != nil {
			return allocation{}, werr
		}
		got, werr := c.allocate(ct, exclude)
		got.mac, got.dhcp = al.mac, al.dhcp
		return got, werr
	}
	e := errInvalidValue(field, v)
	return allocation{}, &e
}

// parseFuncArg parses what follows "func:nextavailableip:".
func (c *request) parseFuncArg(arg, view string, want6 bool) (container, *wapiError) {
	st := c.s.db
	for _, t := range []string{typeNetwork, typeNetwork6, typeRange, typeRange6} {
		if strings.HasPrefix(arg, t+"/") {
			ref, _, _ := strings.Cut(arg, ",")
			o, ok := st.get(ref)
			if !ok || o.typ != t {
				e := errRefNotFound(ref)
				return container{}, &e
			}
			return containerOf(o, want6)
		}
	}
	spec, v, hasView := strings.Cut(arg, ",")
	if hasView {
		view = strings.TrimSpace(v)
	}
	if lo, hi, isSpan := strings.Cut(spec, "-"); isSpan {
		a, err1 := netip.ParseAddr(lo)
		b, err2 := netip.ParseAddr(hi)
		if err1 != nil || err2 != nil || a.Is6() != want6 || b.Is6() != want6 || a.Compare(b) > 0 {
			e := errInvalidValue("func:nextavailableip", arg)
			return container{}, &e
		}
		// An explicit span allocates like a range; it must lie in a network
		// of the view (best guess).
		n := st.networkContaining(view, a)
		if n == nil || !n.prefix.Contains(b) {
			e := errNetworkNotFound(spec, view)
			return container{}, &e
		}
		nlo, nhi := usableSpan(n.prefix)
		return container{view: view, network: n, lo: maxAddr(a, nlo), hi: minAddr(b, nhi), kind: "range"}, nil
	}
	p, err := netip.ParsePrefix(spec)
	if err != nil || p.Addr().Is6() != want6 {
		e := errInvalidValue("func:nextavailableip", arg)
		return container{}, &e
	}
	n := st.networkByCIDR(view, p.Masked())
	if n == nil {
		e := errNetworkNotFound(spec, view)
		return container{}, &e
	}
	return containerOf(n, want6)
}

func containerOf(o *object, want6 bool) (container, *wapiError) {
	switch o.typ {
	case typeNetwork, typeNetwork6:
		if o.prefix.Addr().Is6() != want6 {
			e := errInvalidValue("func:nextavailableip", o.ref)
			return container{}, &e
		}
		lo, hi := usableSpan(o.prefix)
		return container{view: o.netView, network: o, lo: lo, hi: hi, kind: "network"}, nil
	default:
		if o.start.Is6() != want6 {
			e := errInvalidValue("func:nextavailableip", o.ref)
			return container{}, &e
		}
		return container{view: o.netView, rng: o, lo: o.start, hi: o.end, kind: "range"}, nil
	}
}

// parseObjectFunction resolves the _object_function form.
func (c *request) parseObjectFunction(field string, m map[string]any, view string, want6 bool) (container, []netip.Addr, allocation, *wapiError) {
	var al allocation
	fail := func(e wapiError) (container, []netip.Addr, allocation, *wapiError) {
		return container{}, nil, al, &e
	}
	for k, v := range m {
		switch k {
		case "_object_function":
			if v != "next_available_ip" {
				return fail(errProto("Unknown function %v for field %s", v, field))
			}
		case "_result_field":
			if v != "ips" {
				return fail(errInvalidValue("_result_field", v))
			}
		case "_object", "_object_parameters", "_parameters", "network_view", "use_for_ea_inheritance":
		case "mac":
			al.mac, _ = v.(string)
		case "duid":
		case "configure_for_dhcp":
			b, ok := v.(bool)
			if !ok {
				return fail(errInvalidValue(k, v))
			}
			al.dhcp = &b
		default:
			return fail(errUnknownField(k))
		}
	}
	objType, _ := m["_object"].(string)
	if !slices.Contains([]string{typeNetwork, typeNetwork6, typeRange, typeRange6}, objType) {
		return fail(errInvalidValue("_object", m["_object"]))
	}
	params, _ := m["_object_parameters"].(map[string]any)
	var exclude []netip.Addr
	if p, ok := m["_parameters"].(map[string]any); ok {
		if ex, ok := p["exclude"].([]any); ok {
			for _, e := range ex {
				s, _ := e.(string)
				a, err := netip.ParseAddr(s)
				if err != nil {
					return fail(errInvalidValue("exclude", e))
				}
				exclude = append(exclude, a)
			}
		}
	}
	found, werr := c.objectsMatching(objType, params, view)
	if werr != nil {
		return fail(*werr)
	}
	switch len(found) {
	case 0:
		// Best guess text.
		return fail(errNotFound("No %s object found matching the specified parameters", objType))
	case 1:
	default:
		// Best guess text.
		return fail(errProto("Multiple %s objects found matching the specified parameters", objType))
	}
	ct, werr := containerOf(found[0], want6)
	if werr != nil {
		return fail(*werr)
	}
	return ct, exclude, al, nil
}

// objectsMatching runs an object function's _object_parameters: an
// equality search on the object type, in view unless they name one.
func (c *request) objectsMatching(objType string, params map[string]any, view string) ([]*object, *wapiError) {
	q := &request{s: c.s, typ: objType}
	args := map[string][]string{}
	for k, v := range params {
		args[k] = []string{eaString(v)}
	}
	if _, ok := args["network_view"]; !ok {
		args["network_view"] = []string{view}
	}
	fs, werr := q.parseFilters(args)
	if werr != nil {
		return nil, werr
	}
	var found []*object
	for _, o := range c.s.db.list(objType) {
		if match(c.s.db.render(o), o.eas, fs) {
			found = append(found, o)
		}
	}
	return found, nil
}

// allocate finds the first free address of the container. Addresses taken
// earlier in the same request count as used.
func (c *request) allocate(ct container, exclude []netip.Addr) (allocation, *wapiError) {
	st := c.s.db
	used := st.usedAddrs(ct.view)
	for _, a := range c.pending {
		used[a] = true
	}
	for _, a := range exclude {
		used[a] = true
	}
	var ranges []*object
	if ct.network != nil && ct.kind == "network" {
		ranges = st.rangesIn(ct.network)
	}
	for a := ct.lo; a.IsValid() && a.Compare(ct.hi) <= 0; {
		if r := rangeHolding(ranges, a); r != nil {
			a = r.end.Next()
			continue
		}
		if !used[a] {
			c.pending = append(c.pending, a)
			n := ct.network
			if n == nil {
				n = st.networkContaining(ct.view, a)
			}
			return allocation{addr: a, network: n}, nil
		}
		a = a.Next()
	}
	e := errNoFreeIP(1, ct.kind)
	return allocation{}, &e
}

func rangeHolding(ranges []*object, a netip.Addr) *object {
	for _, r := range ranges {
		if inSpan(a, r.start, r.end) {
			return r
		}
	}
	return nil
}

func maxAddr(a, b netip.Addr) netip.Addr {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

func minAddr(a, b netip.Addr) netip.Addr {
	if a.Compare(b) <= 0 {
		return a
	}
	return b
}

// decodeBody parses a JSON object body with numbers kept exact.
func decodeBody(raw []byte) (map[string]any, *wapiError) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		// Best guess text for a body that is not a JSON object.
		e := errProto("Invalid JSON in request body")
		return nil, &e
	}
	return m, nil
}
