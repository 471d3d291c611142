package wapisim

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"go4.org/netipx"
)

// Next available network, as WAPI offers it in the network field of a
// network, ipv6network, networkcontainer or ipv6networkcontainer it
// creates, which is picked and created in one request:
//
//	func:nextavailablenetwork:10.0.0.0/8,default,24    (container, network view, prefix length)
//	func:nextavailablenetwork:10.0.0.0/8,24            (container in the object's network view)
//
// (infoblox-go-client's AllocateNetwork sends the first; scripts run
// against NIOS send the second), and the object form AllocateNetworkByEA
// and AllocateNetworkContainer send:
//
//	{"_object_function": "next_available_network", "_object": "networkcontainer",
//	 "_object_parameters": {"network": "10.0.0.0/8"} or {"*Site": "lab"},
//	 "_parameters": {"cidr": 24, "exclude": ["10.0.0.0/24"]}, "_result_field": "networks",
//	 "network_view": "default"}
//
// whose search is not scoped by the object's network view: a container
// outside the default view is found only by naming its view in
// _object_parameters (terraform-provider-infoblox#498 shows NIOS missing a
// container of another view). A container's
// POST <ref>?_function=next_available_network with {"cidr", "num",
// "exclude"} only lists candidates ({"networks": [...]}), as
// nios_next_network does; creating one of them afterwards races.
//
// Rules: the first free block from the container's lowest address,
// aligned to the prefix length (the NIOS documentation: "the first unused
// network address in the network container"), overlapping no network or
// container of the view below the container, nor an excluded network. A
// full container answers "Can not find requested number of networks"
// (Client.Ibap.Data, infoblox-ansible#156).
const funcNextNetwork = "func:nextavailablenetwork:"

// containerType is the type a network of the family is carved from.
func containerType(want6 bool) string {
	if want6 {
		return typeContainer6
	}
	return typeContainer
}

// carveRequest is a parsed next-available-network request.
type carveRequest struct {
	parent  *object
	bits    int
	exclude []netip.Prefix
}

// resolveNetwork turns a network field value into the prefix of the object
// being created: the literal CIDR, or a child carved from a container.
// view is the object's network view.
func (c *request) resolveNetwork(v any, view string, want6 bool) (netip.Prefix, *wapiError) {
	var req carveRequest
	var werr *wapiError
	switch x := v.(type) {
	case string:
		if !strings.HasPrefix(x, funcNextNetwork) {
			p, err := netip.ParsePrefix(x)
			if err != nil || p.Addr().Is6() != want6 || p.Addr().Zone() != "" {
				return netip.Prefix{}, ptr(errInvalidValue("network", x))
			}
			return p.Masked(), nil
		}
		req, werr = c.parseNextNetworkArg(strings.TrimPrefix(x, funcNextNetwork), view, want6)
	case map[string]any:
		req, werr = c.parseNextNetworkObject(x, want6)
	default:
		return netip.Prefix{}, ptr(errInvalidValue("network", v))
	}
	if werr != nil {
		return netip.Prefix{}, werr
	}
	got := c.s.db.nextNetworks(req, 1)
	if len(got) == 0 {
		return netip.Prefix{}, ptr(errNoFreeNetwork())
	}
	return got[0], nil
}

// parseNextNetworkArg parses what follows "func:nextavailablenetwork:".
func (c *request) parseNextNetworkArg(arg, view string, want6 bool) (carveRequest, *wapiError) {
	parts := strings.Split(arg, ",")
	var cidr, length string
	switch len(parts) {
	case 2:
		cidr, length = parts[0], parts[1]
	case 3:
		cidr, view, length = parts[0], strings.TrimSpace(parts[1]), parts[2]
	default:
		return carveRequest{}, ptr(errInvalidValue("network", funcNextNetwork+arg))
	}
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil || p.Addr().Is6() != want6 {
		return carveRequest{}, ptr(errInvalidValue("network", funcNextNetwork+arg))
	}
	if werr := c.needNetworkView(view); werr != nil {
		return carveRequest{}, werr
	}
	parent := c.s.db.containerByCIDR(view, p.Masked(), want6)
	if parent == nil {
		return carveRequest{}, ptr(errContainerNotFound(p.Masked().String(), view))
	}
	bits, werr := carveLength(parent, strings.TrimSpace(length))
	return carveRequest{parent: parent, bits: bits}, werr
}

// parseNextNetworkObject resolves the _object_function form.
func (c *request) parseNextNetworkObject(m map[string]any, want6 bool) (carveRequest, *wapiError) {
	for k, v := range m {
		switch k {
		case "_object_function", "_object", "_object_parameters", "_parameters", "network_view":
		case "_result_field":
			if v != "networks" {
				return carveRequest{}, ptr(errInvalidValue("_result_field", v))
			}
		default:
			return carveRequest{}, ptr(errUnknownField(k))
		}
	}
	objType, _ := m["_object"].(string)
	if objType != containerType(want6) {
		return carveRequest{}, ptr(errInvalidValue("_object", m["_object"]))
	}
	params, _ := m["_object_parameters"].(map[string]any)
	found, werr := c.objectsMatching(objType, params, "default")
	if werr != nil {
		return carveRequest{}, werr
	}
	switch len(found) {
	case 0:
		// The text NIOS answers (terraform-provider-infoblox#498).
		return carveRequest{}, ptr(errProto("The search parameters %s for object %s did not return any result",
			jsonText(params), objType))
	case 1:
	default:
		// Best guess text, as for next_available_ip.
		return carveRequest{}, ptr(errProto("Multiple %s objects found matching the specified parameters", objType))
	}
	var fn map[string]any
	if p, ok := m["_parameters"].(map[string]any); ok {
		fn = p
	}
	bits, werr := carveLength(found[0], eaString(fn["cidr"]))
	if werr != nil {
		return carveRequest{}, werr
	}
	exclude, werr := parseExcludedNetworks(fn["exclude"])
	return carveRequest{parent: found[0], bits: bits, exclude: exclude}, werr
}

// carveLength parses the prefix length of the children of parent.
func carveLength(parent *object, s string) (int, *wapiError) {
	bits, err := strconv.Atoi(s)
	if err != nil || bits <= parent.prefix.Bits() || bits > parent.prefix.Addr().BitLen() {
		// Best guess text: the reference requires a length longer than
		// the container's, and infoblox-ansible checks it before asking.
		return 0, ptr(errProto("Invalid value for cidr: %q: the prefix length must be longer than the container's /%d and at most /%d",
			s, parent.prefix.Bits(), parent.prefix.Addr().BitLen()))
	}
	return bits, nil
}

func parseExcludedNetworks(v any) ([]netip.Prefix, *wapiError) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, ptr(errInvalidValue("exclude", v))
	}
	var out []netip.Prefix
	for _, e := range list {
		s, _ := e.(string)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, ptr(errInvalidValue("exclude", e))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// nextNetworks returns up to n free children of the request's container,
// first fit from its lowest address.
func (st *store) nextNetworks(req carveRequest, n int) []netip.Prefix {
	parent := req.parent.prefix
	taken := slices.Clone(req.exclude)
	for _, t := range []string{typeNetwork, typeNetwork6, typeContainer, typeContainer6} {
		for _, o := range st.list(t) {
			if o.netView == req.parent.netView && o.prefix.Overlaps(parent) && o.prefix.Bits() > parent.Bits() {
				taken = append(taken, o.prefix)
			}
		}
	}
	var out []netip.Prefix
	cand := netip.PrefixFrom(parent.Addr(), req.bits)
	for len(out) < n {
		i := slices.IndexFunc(taken, cand.Overlaps)
		if i < 0 {
			out = append(out, cand)
			taken = append(taken, cand)
			continue
		}
		// The next aligned block past both: a block as large as the
		// candidate or larger ends on its alignment, and a smaller one
		// inside it ends with it.
		end := netipx.PrefixLastIP(taken[i])
		if last := netipx.PrefixLastIP(cand); last.Compare(end) > 0 {
			end = last
		}
		next := end.Next()
		if !next.IsValid() || !parent.Contains(next) {
			break
		}
		cand = netip.PrefixFrom(next, req.bits)
	}
	return out
}

// containerByCIDR is the network container of that CIDR in the view.
func (st *store) containerByCIDR(view string, p netip.Prefix, want6 bool) *object {
	for _, o := range st.list(containerType(want6)) {
		if o.netView == view && o.prefix == p {
			return o
		}
	}
	return nil
}

// parentContainer is the smallest container of the view that holds p, or
// nil: what NIOS reports as network_container ("/" when none).
func (st *store) parentContainer(view string, p netip.Prefix) *object {
	var best *object
	for _, o := range st.list(containerType(p.Addr().Is6())) {
		if o.netView == view && o.prefix.Bits() < p.Bits() && o.prefix.Contains(p.Addr()) &&
			(best == nil || o.prefix.Bits() > best.prefix.Bits()) {
			best = o
		}
	}
	return best
}

func (st *store) networkContainerField(o *object) string {
	if parent := st.parentContainer(o.netView, o.prefix); parent != nil {
		return parent.prefix.String()
	}
	return "/"
}

// placeNetwork sets the network view and the prefix of a network or
// container being created: the CIDR given, or one carved.
func (c *request) placeNetwork(o *object, b *body, want6 bool) *wapiError {
	o.netView = b.strOr("network_view", "default")
	if werr := c.needNetworkView(o.netView); werr != nil {
		return werr
	}
	p, werr := c.resolveNetwork(b.m["network"], o.netView, want6)
	if werr != nil {
		return werr
	}
	o.prefix = p
	return nil
}

// createContainer creates a networkcontainer or ipv6networkcontainer.
func (c *request) createContainer(o *object, b *body) *wapiError {
	if werr := c.placeNetwork(o, b, c.typ == typeContainer6); werr != nil {
		return werr
	}
	p := o.prefix
	if c.s.db.containerByCIDR(o.netView, p, p.Addr().Is6()) != nil || c.s.db.networkByCIDR(o.netView, p) != nil {
		// Best guess, by analogy with the network's duplicate error.
		return ptr(errConflict("The network container %s already exists.  Select another network container.", p))
	}
	return nil
}

// nextAvailableNetworkFunction answers a container's
// POST <ref>?_function=next_available_network: the candidates, not created.
func (c *request) nextAvailableNetworkFunction(o *object, m map[string]any) response {
	for k := range m {
		if k != "cidr" && k != "num" && k != "exclude" {
			return errResponse(errUnknownField(k))
		}
	}
	bits, werr := carveLength(o, eaString(m["cidr"]))
	if werr != nil {
		return errResponse(*werr)
	}
	num := 1
	if v, ok := m["num"]; ok {
		n, err := strconv.Atoi(eaString(v))
		if err != nil || n < 1 {
			return errResponse(errInvalidValue("num", v))
		}
		num = n
	}
	exclude, werr := parseExcludedNetworks(m["exclude"])
	if werr != nil {
		return errResponse(*werr)
	}
	got := c.s.db.nextNetworks(carveRequest{parent: o, bits: bits, exclude: exclude}, num)
	if len(got) < num {
		return errResponse(errNoFreeNetwork())
	}
	out := make([]any, 0, len(got))
	for _, p := range got {
		out = append(out, p.String())
	}
	return response{http.StatusOK, map[string]any{"networks": out}}
}

// deleteContainer deletes a container and, unless remove_subnets=false
// (which the WAPI schema documents, children re-parented), the networks
// and containers below it with what they hold.
func (st *store) deleteContainer(o *object, removeSubnets bool) {
	st.remove(o)
	if !removeSubnets {
		return
	}
	for _, t := range []string{typeNetwork, typeNetwork6, typeContainer, typeContainer6, typeRange, typeRange6, typeFixed, typeFixed6} {
		for _, child := range st.list(t) {
			if child.netView != o.netView {
				continue
			}
			var inside bool
			switch t {
			case typeFixed, typeFixed6:
				inside = o.prefix.Contains(child.addr)
			case typeRange, typeRange6:
				inside = o.prefix.Contains(child.start)
			default:
				inside = child.prefix.Bits() > o.prefix.Bits() && o.prefix.Contains(child.prefix.Addr())
			}
			if inside {
				st.remove(child)
			}
		}
	}
}

// function answers POST <ref>?_function=<name>. Only a container's
// next_available_network is simulated.
func (c *request) function() response {
	o, ok := c.s.db.get(c.ref)
	if !ok || o.typ != c.typ {
		return errResponse(errRefNotFound(c.ref))
	}
	name := c.query.Get("_function")
	if name != "next_available_network" || (o.typ != typeContainer && o.typ != typeContainer6) {
		return errResponse(errNotSimulated("Function " + name + " of " + o.typ))
	}
	m := map[string]any{}
	if len(strings.TrimSpace(string(c.body))) > 0 {
		var werr *wapiError
		if m, werr = decodeBody(c.body); werr != nil {
			return errResponse(*werr)
		}
	}
	return c.nextAvailableNetworkFunction(o, m)
}

// jsonText renders a search's parameters as NIOS quotes them in its
// errors: {"network": "10.0.0.0/8"}.
func jsonText(m map[string]any) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, _ := json.Marshal(m[k])
		parts = append(parts, jsonString(k)+": "+string(v))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
