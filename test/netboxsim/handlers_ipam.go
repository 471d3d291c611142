package netboxsim

import (
	"net/netip"
	"slices"
	"strings"
)

func (st *store) vrfExists(id int32) bool { _, ok := st.vrfs[id]; return ok }

// netIn matches an address against NetBox's net_in lookup: a value with a
// mask must equal address and mask, one without matches the host only.
func netIn(values []string, addr netip.Prefix) bool {
	for _, v := range values {
		want, ok := parseAddress(v)
		switch {
		case !ok:
		case strings.Contains(v, "/") && want == addr:
			return true
		case !strings.Contains(v, "/") && want.Addr() == addr.Addr():
			return true
		}
	}
	return false
}

func listPrefixes(c *reqCtx) response {
	st := c.st()
	f := newFilterSet(c.r)
	var preds []func(*prefixObj) bool
	if ids, ok := f.numbers("id"); ok {
		preds = append(preds, func(p *prefixObj) bool { return containsID(ids, p.id) })
	}
	if vals := f.values("prefix"); vals != nil {
		// Exact match on the stored (masked) prefix; invalid values match nothing.
		preds = append(preds, func(p *prefixObj) bool {
			return slices.ContainsFunc(vals, func(v string) bool { q, ok := parseAddress(v); return ok && q == p.prefix })
		})
	}
	if vrfs, ok := f.related("vrf_id", st.vrfExists); ok {
		preds = append(preds, func(p *prefixObj) bool { return vrfs[p.vrf] })
	}
	if sts, ok := f.choices("status", prefixStatusLabels); ok {
		preds = append(preds, func(p *prefixObj) bool { return slices.Contains(sts, p.status) })
	}
	if fams, ok := f.numbers("family"); ok {
		preds = append(preds, func(p *prefixObj) bool { return slices.Contains(fams, int64(familyNumber(p.prefix.Addr()))) })
	}
	// within: strictly inside; within_include: inside or equal. A value
	// that does not parse empties the result.
	for name, strict := range map[string]bool{"within": true, "within_include": false} {
		for _, v := range f.values(name) {
			outer, ok := parseAddress(v)
			outer = outer.Masked()
			preds = append(preds, func(p *prefixObj) bool {
				return ok && outer.Contains(p.prefix.Addr()) && (p.prefix.Bits() > outer.Bits() || !strict && p.prefix.Bits() == outer.Bits())
			})
		}
	}
	if masks, ok := f.numbers("mask_length"); ok {
		preds = append(preds, func(p *prefixObj) bool { return slices.Contains(masks, int64(p.prefix.Bits())) })
	}
	if tenants, ok := f.related("tenant_id", func(id int32) bool { _, ok := st.tenants[id]; return ok }); ok {
		preds = append(preds, func(p *prefixObj) bool { return tenants[p.tenant] })
	}
	for _, slug := range f.values("tag") {
		// TagFilter is conjoined: every tag must be present.
		t := st.tagBySlug(slug)
		if t == nil {
			f.errs.add("tag", "Select a valid choice. "+slug+" is not one of the available choices.")
			break
		}
		preds = append(preds, func(p *prefixObj) bool { return slices.Contains(p.tags, t.id) })
	}
	preds = append(preds, customFieldFilters(st, f, "ipam.prefix", func(p *prefixObj) map[string]any { return p.cf })...)
	if resp, bad := f.failed(); bad {
		return resp
	}
	return paginate(c, ordered(c, filter(st.prefixList(), preds), func(p *prefixObj) int32 { return p.id }), func(p *prefixObj) any { return c.rend.prefix(p) })
}

func getPrefix(c *reqCtx) response {
	return getOne(c, c.st().prefixes, "Prefix", func(p *prefixObj) any { return c.rend.prefix(p) })
}

func listRanges(c *reqCtx) response {
	st := c.st()
	f := newFilterSet(c.r)
	var preds []func(*rangeObj) bool
	if ids, ok := f.numbers("id"); ok {
		preds = append(preds, func(g *rangeObj) bool { return containsID(ids, g.id) })
	}
	if vals := f.values("start_address"); vals != nil {
		preds = append(preds, func(g *rangeObj) bool { return netIn(vals, netip.PrefixFrom(g.start, g.bits)) })
	}
	if vals := f.values("end_address"); vals != nil {
		preds = append(preds, func(g *rangeObj) bool { return netIn(vals, netip.PrefixFrom(g.end, g.bits)) })
	}
	if vals := f.values("contains"); vals != nil {
		preds = append(preds, func(g *rangeObj) bool {
			return slices.ContainsFunc(vals, func(v string) bool {
				a, ok := parseAddress(v)
				return ok && g.contains(a.Addr())
			})
		})
	}
	if vrfs, ok := f.related("vrf_id", st.vrfExists); ok {
		preds = append(preds, func(g *rangeObj) bool { return vrfs[g.vrf] })
	}
	if sts, ok := f.choices("status", rangeStatusLabels); ok {
		preds = append(preds, func(g *rangeObj) bool { return slices.Contains(sts, g.status) })
	}
	if fams, ok := f.numbers("family"); ok {
		preds = append(preds, func(g *rangeObj) bool { return slices.Contains(fams, int64(familyNumber(g.start))) })
	}
	if resp, bad := f.failed(); bad {
		return resp
	}
	return paginate(c, ordered(c, filter(st.rangeList(), preds), func(g *rangeObj) int32 { return g.id }), func(g *rangeObj) any { return c.rend.ipRange(g) })
}

func getRange(c *reqCtx) response {
	return getOne(c, c.st().ranges, "IPRange", func(g *rangeObj) any { return c.rend.ipRange(g) })
}

// contains compares hosts only; mask lengths do not matter.
func (g *rangeObj) contains(a netip.Addr) bool {
	return a.BitLen() == g.start.BitLen() && !a.Less(g.start) && !g.end.Less(a)
}
