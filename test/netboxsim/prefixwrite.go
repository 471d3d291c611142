package netboxsim

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"go4.org/netipx"
)

// Prefix writes, as NetBox 4.7's PrefixSerializer and Prefix.clean() make
// them, for the fields the simulator keeps: prefix, vrf, tenant, status,
// role, scope_type and scope_id, is_pool, mark_utilized, description,
// comments, tags and custom_fields. Other fields (vlan, owner) are ignored
// where NetBox would validate them.

// buildPrefix validates one prefix write. cur is nil for a create; partial
// is PATCH. The result is not stored.
func (st *store) buildPrefix(data any, cur *prefixObj, partial bool) (*prefixObj, fieldErrors) {
	obj, ok := data.(map[string]any)
	if !ok {
		return nil, fieldErrors{"non_field_errors": {fmt.Sprintf("Invalid data. Expected a dictionary, but got %s.", pyTypeName(data))}}
	}
	p := &prefixObj{status: "active"}
	if cur != nil {
		cp := *cur
		cp.tags = slices.Clone(cur.tags)
		cp.cf = deepCopyMap(cur.cf)
		p = &cp
	}
	errs := fieldErrors{}
	check := func(field, msg string) bool {
		if msg != "" {
			errs.add(field, msg)
		}
		return msg == ""
	}
	if v, ok := obj["prefix"]; ok {
		if s, msg := charField(v, false, 0); check("prefix", msg) {
			if a, ok := parseAddress(s); ok {
				p.prefix = a.Masked() // Prefix.prefix saves the network
			} else {
				errs.add("prefix", "Enter a valid IPv4 or IPv6 address with optional mask.")
			}
		}
	} else if !partial {
		errs.add("prefix", "This field is required.")
	}
	if v, ok := obj["vrf"]; ok {
		if id, msg := st.resolve(v, "vrf"); check("vrf", msg) {
			p.vrf = id
		}
	}
	if v, ok := obj["tenant"]; ok {
		if id, msg := st.resolve(v, "tenant"); check("tenant", msg) {
			p.tenant = id
		}
	}
	if v, ok := obj["status"]; ok {
		if s, msg := choiceField(v, prefixStatusLabels, false); check("status", msg) {
			p.status = s
		}
	}
	if v, ok := obj["role"]; ok {
		if id, msg := st.resolve(v, "role"); check("role", msg) {
			p.role = id
		}
	}
	st.buildScope(obj, p, errs)
	for field, dst := range map[string]*bool{"is_pool": &p.isPool, "mark_utilized": &p.markUtilized} {
		if v, ok := obj[field]; ok {
			if b, msg := booleanField(v); check(field, msg) {
				*dst = b
			}
		}
	}
	if v, ok := obj["description"]; ok {
		if s, msg := charField(v, true, 200); check("description", msg) {
			p.description = s
		}
	}
	if v, ok := obj["comments"]; ok {
		if s, msg := charField(v, true, 0); check("comments", msg) {
			p.comments = s
		}
	}
	if v, ok := obj["tags"]; ok {
		if ids, msg := st.resolveTags(v); check("tags", msg) {
			p.tags = ids
		}
	}
	p.cf = st.customFieldData("ipam.prefix", obj, p.cf, cur == nil, errs)
	if len(errs) > 0 {
		return nil, errs
	}
	if errs := st.cleanPrefix(p); errs != nil {
		return nil, errs
	}
	return p, nil
}

// cleanPrefix is Prefix.clean(): custom fields first, then the /0 mask and
// the duplicate check, which NetBox runs in the global table when
// ENFORCE_GLOBAL_UNIQUE (the default) and in a VRF that enforces
// uniqueness.
func (st *store) cleanPrefix(p *prefixObj) fieldErrors {
	if msg := st.cleanCustomFields("ipam.prefix", p.cf); msg != "" {
		return fieldErrors{"__all__": {msg}}
	}
	if p.prefix.Bits() == 0 {
		return fieldErrors{"prefix": {"Cannot create prefix with /0 mask."}}
	}
	var vrf *vrfObj
	if p.vrf != 0 {
		vrf = st.vrfs[p.vrf]
	}
	if (vrf == nil && st.globalUnique) || (vrf != nil && vrf.enforceUnique) {
		for _, o := range st.prefixList() {
			if o.id != p.id && o.vrf == p.vrf && o.prefix == p.prefix {
				table := "global table"
				if vrf != nil {
					table = "VRF " + vrf.String()
				}
				return fieldErrors{"prefix": {fmt.Sprintf("Duplicate prefix found in %s: %s", table, p.prefix)}}
			}
		}
	}
	return nil
}

func (st *store) insertPrefix(p *prefixObj) {
	p.id = st.nextID("prefix")
	p.created = now()
	p.updated = p.created
	st.prefixes[p.id] = p
}

func createPrefixes(c *reqCtx) response {
	data, bad := c.body()
	if bad != nil {
		return *bad
	}
	st := c.st()
	return createMany(data,
		func(item any) (*prefixObj, fieldErrors) { return st.buildPrefix(item, nil, false) },
		func(p *prefixObj) any { st.insertPrefix(p); return c.rend.newPrefix(p) })
}

// updatePrefix serves PATCH (partial) and PUT (prefix required).
func updatePrefix(c *reqCtx) response {
	return update(c, c.st().prefixes, "Prefix", func(p *prefixObj) time.Time { return p.updated },
		func(data any, cur *prefixObj, partial bool) (*prefixObj, fieldErrors) {
			return c.st().buildPrefix(data, cur, partial)
		},
		func(p *prefixObj, t time.Time) { p.updated = t },
		func(p *prefixObj) any { return c.rend.prefix(p) })
}

func deletePrefix(c *reqCtx) response {
	return deleteOne(c, c.st().prefixes, "Prefix", func(p *prefixObj) time.Time { return p.updated })
}

func bulkDeletePrefixes(c *reqCtx) response { return bulkDelete(c, c.st().prefixes) }

// availablePrefixes is Prefix.get_available_prefixes(): the prefix minus
// the prefixes strictly inside it in the same VRF (the global table only
// for a global prefix), whatever their status; addresses and ranges do
// not count.
func (st *store) availablePrefixes(parent *prefixObj) *netipx.IPSet {
	var b netipx.IPSetBuilder
	b.AddPrefix(parent.prefix)
	for _, o := range st.prefixes {
		if o.vrf == parent.vrf && o.prefix.Bits() > parent.prefix.Bits() && parent.prefix.Contains(o.prefix.Addr()) {
			b.RemovePrefix(o.prefix)
		}
	}
	set, _ := b.IPSet()
	return set
}

// nextAvailablePrefix is ipam.utils.get_next_available_prefix(): the
// lowest-addressed free CIDR large enough, carved from its network
// address, and taken out of the set.
func nextAvailablePrefix(set **netipx.IPSet, bits int) (netip.Prefix, bool) {
	for _, cidr := range (*set).Prefixes() {
		if bits >= cidr.Bits() && bits <= cidr.Addr().BitLen() {
			child := netip.PrefixFrom(cidr.Addr(), bits)
			var b netipx.IPSetBuilder
			b.AddSet(*set)
			b.RemovePrefix(child)
			*set, _ = b.IPSet()
			return child, true
		}
	}
	return netip.Prefix{}, false
}

// listAvailablePrefixes answers GET available-prefixes: every free CIDR,
// in a plain list, neither paginated nor limited.
func listAvailablePrefixes(c *reqCtx) response {
	parent, ok := c.st().prefixes[c.parentID()]
	if !ok {
		return notFound("Prefix")
	}
	out := []any{}
	for _, p := range c.st().availablePrefixes(parent).Prefixes() {
		out = append(out, availablePrefixJSON{Family: familyNumber(p.Addr()), Prefix: p.String(), VRF: c.rend.briefVRF(parent.vrf)})
	}
	return response{http.StatusOK, out}
}

// allocatePrefixes answers POST available-prefixes: one child per
// requested prefix_length, in request order, all or none, under the
// server lock (NetBox holds its one available-prefixes advisory lock).
// The child's prefix and VRF are the carve's; every other field is the
// request's, validated as a prefix write.
func allocatePrefixes(c *reqCtx) response {
	st := c.st()
	parent, ok := st.prefixes[c.parentID()]
	if !ok {
		return notFound("Prefix")
	}
	data, bad := c.body()
	if bad != nil {
		return *bad
	}
	items, many := data.([]any)
	if !many {
		items = []any{data}
	}
	// PrefixLengthSerializer: a positional list of errors, even for one.
	lengthErrs := make([]map[string]string, len(items))
	failed := false
	for i, it := range items {
		lengthErrs[i] = map[string]string{}
		m, _ := it.(map[string]any)
		v, present := m["prefix_length"]
		n, isNumber := v.(float64)
		switch {
		case !present:
			lengthErrs[i]["prefix_length"] = "this field can not be missing"
		case !isNumber || n != float64(int(n)):
			lengthErrs[i]["prefix_length"] = "this field must be int type"
		case int(n) > parent.prefix.Addr().BitLen():
			lengthErrs[i]["prefix_length"] = fmt.Sprintf("Invalid prefix length (%d) for IPv%d", int(n), familyNumber(parent.prefix.Addr()))
		default:
			continue
		}
		failed = true
	}
	if failed {
		return badRequest(lengthErrs)
	}
	free := st.availablePrefixes(parent)
	requests := make([]any, len(items))
	for i, it := range items {
		m := deepCopyMap(it.(map[string]any))
		child, ok := nextAvailablePrefix(&free, int(m["prefix_length"].(float64)))
		if !ok {
			// check_sufficient_available runs the same carve first, and
			// answers 409 before anything is created.
			return errDetail(http.StatusConflict, "Insufficient resources are available to satisfy the request")
		}
		m["prefix"] = child.String()
		m["vrf"] = nil
		if parent.vrf != 0 {
			m["vrf"] = float64(parent.vrf)
		}
		requests[i] = m
	}
	return createAllocated(c, requests, many,
		func(item any) (*prefixObj, fieldErrors) { return st.buildPrefix(item, nil, false) },
		func(p *prefixObj) (Prefix, any) { st.insertPrefix(p); return c.s.exportPrefix(p), c.rend.newPrefix(p) },
		c.s.onCarve)
}
