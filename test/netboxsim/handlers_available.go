package netboxsim

import (
	"fmt"
	"iter"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"go4.org/netipx"
)

// allocParent is a prefix or an IP range seen as a source of addresses.
type allocParent struct {
	name string // str(parent), used in the 409 message
	vrf  int32
	bits int // mask of the created addresses
	free iter.Seq[netip.Addr]
}

// prefixParent follows Prefix.get_available_ips(): hosts not used in the
// VRF (any VRF for a global container), minus populated ranges, minus the
// network and broadcast (IPv4) or subnet-router anycast (IPv6) address
// unless the prefix is a pool, an IPv4 /31-/32 or an IPv6 /127-/128.
func (st *store) prefixParent(p *prefixObj) allocParent {
	var b netipx.IPSetBuilder
	b.AddPrefix(p.prefix)
	anyVRF := p.vrf == 0 && p.status == "container"
	for _, ip := range st.ips {
		if (anyVRF || ip.vrf == p.vrf) && p.prefix.Contains(ip.addr.Addr()) {
			b.Remove(ip.addr.Addr())
		}
	}
	for _, g := range st.ranges {
		if g.vrf == p.vrf && g.markPopulated && p.prefix.Contains(g.start) && p.prefix.Contains(g.end) {
			b.RemoveRange(netipx.IPRangeFrom(g.start, g.end))
		}
	}
	bits, v4 := p.prefix.Bits(), p.prefix.Addr().Is4()
	fullyUsable := p.isPool || (v4 && bits >= 31) || (!v4 && bits >= 127)
	if !fullyUsable {
		b.Remove(p.prefix.Addr())
		if v4 {
			b.Remove(netipx.PrefixLastIP(p.prefix))
		}
	}
	set, _ := b.IPSet()
	return allocParent{name: p.prefix.String(), vrf: p.vrf, bits: bits, free: addrs(set)}
}

// rangeParent follows IPRange.get_available_ips(): nothing when the range is
// marked populated, otherwise every host from start to end not used in the
// range's VRF. Addresses get the start address's mask.
func (st *store) rangeParent(g *rangeObj) allocParent {
	var b netipx.IPSetBuilder
	if !g.markPopulated {
		b.AddRange(netipx.IPRangeFrom(g.start, g.end))
		for _, ip := range st.ips {
			if ip.vrf == g.vrf && g.contains(ip.addr.Addr()) {
				b.Remove(ip.addr.Addr())
			}
		}
	}
	set, _ := b.IPSet()
	return allocParent{name: rangeName(g.start, g.end, g.bits), vrf: g.vrf, bits: g.bits, free: addrs(set)}
}

// parentID parses the <int:pk> of the available-ips URLs.
func (c *reqCtx) parentID() int32 {
	n, err := strconv.ParseInt(c.id, 10, 32)
	if err != nil {
		return 0 // too large to exist
	}
	return int32(n)
}

func listPrefixAvailableIPs(c *reqCtx) response {
	p, ok := c.st().prefixes[c.parentID()]
	if !ok {
		return notFound("Prefix")
	}
	return listAvailable(c, c.st().prefixParent(p))
}

func allocatePrefixIPs(c *reqCtx) response {
	p, ok := c.st().prefixes[c.parentID()]
	if !ok {
		return notFound("Prefix")
	}
	return allocate(c, c.st().prefixParent(p))
}

func listRangeAvailableIPs(c *reqCtx) response {
	g, ok := c.st().ranges[c.parentID()]
	if !ok {
		return notFound("IPRange")
	}
	return listAvailable(c, c.st().rangeParent(g))
}

func allocateRangeIPs(c *reqCtx) response {
	g, ok := c.st().ranges[c.parentID()]
	if !ok {
		return notFound("IPRange")
	}
	return allocate(c, c.st().rangeParent(g))
}

// resultsLimit is get_results_limit(): default 50, 0 means the maximum.
func resultsLimit(c *reqCtx) int {
	v := c.r.URL.Query().Get("limit")
	if v == "" {
		return paginateCount
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil:
		return paginateCount
	case n <= 0:
		// NetBox lets a negative limit through uncapped; cap it instead of
		// listing a whole IPv6 prefix.
		return maxPageSize
	}
	return min(n, maxPageSize)
}

// listAvailable answers GET available-ips: a plain list, not paginated.
func listAvailable(c *reqCtx, p allocParent) response {
	out := []any{}
	for _, a := range take(p.free, resultsLimit(c)) {
		out = append(out, availableIPJSON{Family: familyNumber(a), Address: netip.PrefixFrom(a, p.bits).String(), VRF: c.rend.briefVRF(p.vrf)})
	}
	return response{http.StatusOK, out}
}

// allocate answers POST available-ips. It runs under the server lock, so
// concurrent requests never get the same address.
func allocate(c *reqCtx, p allocParent) response {
	data, bad := c.body()
	if bad != nil {
		return *bad
	}
	items, many := data.([]any)
	if !many {
		items = []any{data}
	}
	free := take(p.free, len(items))
	if len(free) < len(items) {
		// NetBox 3.6+ (AvailableObjectsView), confirmed on 4.7.3.
		return response{http.StatusConflict, map[string]string{"detail": "Insufficient resources are available to satisfy the request"}}
	}
	// The request's address and VRF are overwritten by the allocation.
	requests := make([]any, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			// NetBox assigns into the item and crashes with a TypeError.
			return pythonCrash("TypeError", fmt.Sprintf("'%s' object does not support item assignment", pyTypeName(it)))
		}
		m = deepCopyMap(m)
		m["address"] = netip.PrefixFrom(free[i], p.bits).String()
		m["vrf"] = nil
		if p.vrf != 0 {
			m["vrf"] = float64(p.vrf)
		}
		requests[i] = m
	}
	st := c.st()
	return createAllocated(c, requests, many,
		func(item any) (*ipObj, fieldErrors) { return st.buildIP(item, nil, false) },
		func(ip *ipObj) (IPAddress, any) { st.insertIP(ip); return c.s.exportIP(ip), c.rend.ip(ip) },
		c.s.onAlloc)
}

// createAllocated creates what an allocation POST prepared (a list, or its
// one item when one object was sent), and, once it succeeded, hands copies
// of what it created to hook, after the server lock.
func createAllocated[T, E any](c *reqCtx, requests []any, many bool, build func(any) (T, fieldErrors),
	insert func(T) (E, any), hook func([]E)) response {
	var body any = requests
	if !many {
		body = requests[0]
	}
	var created []E
	resp := createMany(body, build, func(o T) any {
		e, out := insert(o)
		created = append(created, e)
		return out
	})
	if hook != nil && resp.status == http.StatusCreated {
		c.after = append(c.after, func() { hook(created) })
	}
	return resp
}

// pythonCrash is NetBox's JSON answer to an unhandled exception in the API.
func pythonCrash(exception, msg string) response {
	return response{http.StatusInternalServerError, map[string]string{
		"error": msg, "exception": exception, "netbox_version": netboxVersion, "python_version": pythonVersion,
	}}
}
