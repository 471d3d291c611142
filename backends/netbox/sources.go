package netbox

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strconv"

	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// resolvedSource is a source found in NetBox.
type resolvedSource struct {
	kind    SourceKind
	id      int32
	vrfID   int32
	display string
	// network is the prefix, or the network of a range's start address.
	network netip.Prefix
	// first and last bound the addresses NetBox may hand out.
	first, last netip.Addr
	total       int64
	// populated ranges have no free address by NetBox's rule.
	populated bool
}

// Contains says whether NetBox may hand out a from the source.
func (s resolvedSource) Contains(a netip.Addr) bool {
	return !a.Less(s.first) && !s.last.Less(a)
}

func (s resolvedSource) String() string { return s.display }

// Subnet is the prefix, or the network of a range's start address.
func (s resolvedSource) Subnet() netip.Prefix { return s.network }

// Bounds are the first and last addresses NetBox may hand out.
func (s resolvedSource) Bounds() (netip.Addr, netip.Addr) { return s.first, s.last }

type prefixObject struct {
	ID     int32  `json:"id"`
	Prefix string `json:"prefix"`
	VRF    *brief `json:"vrf"`
	IsPool bool   `json:"is_pool"`
}

type rangeObject struct {
	ID            int32  `json:"id"`
	StartAddress  string `json:"start_address"`
	EndAddress    string `json:"end_address"`
	VRF           *brief `json:"vrf"`
	MarkPopulated bool   `json:"mark_populated"`
}

// resolveSources finds every source in NetBox.
func (d *driver) resolveSources(ctx context.Context) ([]resolvedSource, error) {
	vrfIDs := map[string]int32{}
	resolved := make([]resolvedSource, 0, len(d.cfg.Sources))
	for _, s := range d.cfg.Sources {
		vrfID, ok := vrfIDs[s.VRF]
		if !ok && s.VRF != "" {
			var err error
			if vrfID, err = d.findVRF(ctx, s.VRF); err != nil {
				return nil, err
			}
			vrfIDs[s.VRF] = vrfID
		}
		var r resolvedSource
		var err error
		if s.Kind == SourcePrefix {
			r, err = d.resolvePrefix(ctx, s, vrfID)
		} else {
			r, err = d.resolveRange(ctx, s, vrfID)
		}
		if err != nil {
			return nil, err
		}
		resolved = append(resolved, r)
	}
	return resolved, nil
}

func (d *driver) findVRF(ctx context.Context, name string) (int32, error) {
	var p page[brief]
	if err := d.getJSON(ctx, "/api/ipam/vrfs/", url.Values{"name": {name}}, &p); err != nil {
		return 0, fmt.Errorf("looking up VRF %q: %w", name, err)
	}
	vrf, err := exactlyOne(p.Results, fmt.Sprintf("VRF %q", name))
	return vrf.ID, err
}

// exactlyOne returns the single object a lookup by name or address found:
// none is ErrNotFound, several is a spec that must name its object by ID.
func exactlyOne[T any](found []T, what string) (T, error) {
	var zero T
	switch len(found) {
	case 0:
		return zero, fmt.Errorf("%w: %s does not exist in NetBox", backends.ErrNotFound, what)
	case 1:
		return found[0], nil
	default:
		return zero, fmt.Errorf("%w: %d objects match %s; select it by id", backends.ErrInvalidConfig, len(found), what)
	}
}

func (d *driver) resolvePrefix(ctx context.Context, s Source, vrfID int32) (resolvedSource, error) {
	var obj prefixObject
	if s.ID != 0 {
		if err := d.getJSON(ctx, fmt.Sprintf("/api/ipam/prefixes/%d/", s.ID), nil, &obj); err != nil {
			return resolvedSource{}, fmt.Errorf("looking up %s: %w", s, err)
		}
	} else {
		q := url.Values{"prefix": {s.CIDR.String()}, "vrf_id": {vrfFilter(vrfID)}}
		var p page[prefixObject]
		if err := d.getJSON(ctx, "/api/ipam/prefixes/", q, &p); err != nil {
			return resolvedSource{}, fmt.Errorf("looking up %s: %w", s, err)
		}
		var err error
		if obj, err = exactlyOne(p.Results, s.String()); err != nil {
			return resolvedSource{}, err
		}
	}
	network, err := netip.ParsePrefix(obj.Prefix)
	if err != nil {
		return resolvedSource{}, fmt.Errorf("NetBox prefix %d has an unparsable prefix %q: %w", obj.ID, obj.Prefix, err)
	}
	network = network.Masked()
	r := resolvedSource{
		kind: SourcePrefix, id: obj.ID, vrfID: vrfIDOf(obj.VRF), network: network,
		display: fmt.Sprintf("prefix %s (id %d)", network, obj.ID),
	}
	r.first, r.last = network.Addr(), netipx.PrefixLastIP(network)
	hostBits := network.Addr().BitLen() - network.Bits()
	r.total = backends.Pow2(hostBits)
	// NetBox's rule: outside pools, IPv4 skips the network and broadcast
	// addresses and IPv6 the subnet-router anycast address, except in /31,
	// /32, /127 and /128.
	if !obj.IsPool && hostBits > 1 {
		r.first = r.first.Next()
		if network.Addr().Is4() {
			r.last = r.last.Prev()
			r.total -= 2
		} else if r.total < math.MaxInt64 {
			r.total--
		}
	}
	return r, nil
}

func (d *driver) resolveRange(ctx context.Context, s Source, vrfID int32) (resolvedSource, error) {
	var obj rangeObject
	if s.ID != 0 {
		if err := d.getJSON(ctx, fmt.Sprintf("/api/ipam/ip-ranges/%d/", s.ID), nil, &obj); err != nil {
			return resolvedSource{}, fmt.Errorf("looking up %s: %w", s, err)
		}
	} else {
		q := url.Values{"start_address": {s.Start.String()}, "end_address": {s.End.String()}, "vrf_id": {vrfFilter(vrfID)}}
		var p page[rangeObject]
		if err := d.getJSON(ctx, "/api/ipam/ip-ranges/", q, &p); err != nil {
			return resolvedSource{}, fmt.Errorf("looking up %s: %w", s, err)
		}
		var matches []rangeObject
		for _, o := range p.Results {
			start, errS := netip.ParsePrefix(o.StartAddress)
			end, errE := netip.ParsePrefix(o.EndAddress)
			if errS == nil && errE == nil && start.Addr() == s.Start && end.Addr() == s.End {
				matches = append(matches, o)
			}
		}
		var err error
		if obj, err = exactlyOne(matches, s.String()); err != nil {
			return resolvedSource{}, err
		}
	}
	start, err := netip.ParsePrefix(obj.StartAddress)
	if err != nil {
		return resolvedSource{}, fmt.Errorf("NetBox IP range %d has an unparsable start %q: %w", obj.ID, obj.StartAddress, err)
	}
	end, err := netip.ParsePrefix(obj.EndAddress)
	if err != nil {
		return resolvedSource{}, fmt.Errorf("NetBox IP range %d has an unparsable end %q: %w", obj.ID, obj.EndAddress, err)
	}
	r := resolvedSource{
		kind: SourceIPRange, id: obj.ID, vrfID: vrfIDOf(obj.VRF),
		network: start.Masked(), first: start.Addr(), last: end.Addr(), populated: obj.MarkPopulated,
		display: fmt.Sprintf("ip-range %s-%s (id %d)", start.Addr(), end.Addr(), obj.ID),
	}
	r.total = backends.CountAddresses(r.first, r.last)
	return r, nil
}

// Unheld asks, with one request, which of gws NetBox records in the
// source's VRF: its address filter takes several values, and matches the
// host whatever the mask.
func (d *driver) Unheld(ctx context.Context, s resolvedSource, gws []netip.Addr) ([]netip.Addr, error) {
	q := url.Values{"vrf_id": {vrfFilter(s.vrfID)}, "ordering": {"id"}, "limit": {strconv.Itoa(maxPage)}}
	for _, gw := range gws {
		q.Add("address", gw.String())
	}
	records, err := listAll[ipRecord](ctx, d, "/api/ipam/ip-addresses/", q, nil)
	if err != nil {
		return nil, err
	}
	recorded := map[netip.Addr]bool{}
	for _, r := range records {
		if a, err := netip.ParsePrefix(r.Address); err == nil {
			recorded[a.Addr()] = true
		}
	}
	var unheld []netip.Addr
	for _, gw := range gws {
		if !recorded[gw] {
			unheld = append(unheld, gw)
		}
	}
	return unheld, nil
}

// Count counts each source's records with one request per source: the
// addresses under a prefix, or under the CIDRs that cover a range.
func (d *driver) Count(ctx context.Context, pool preparation) (backends.Usage, error) {
	var u backends.Usage
	for _, s := range pool.sources {
		u.Total = backends.SaturatingAdd(u.Total, s.total)
		if s.populated {
			u.Used = backends.SaturatingAdd(u.Used, s.total)
			continue
		}
		q := url.Values{"vrf_id": {vrfFilter(s.vrfID)}, "limit": {"1"}}
		if s.kind == SourcePrefix {
			q.Add("parent", s.network.String())
		} else {
			for _, p := range netipx.IPRangeFrom(s.first, s.last).Prefixes() {
				q.Add("parent", p.String())
			}
		}
		var p page[ipRecord]
		if err := d.getJSON(ctx, "/api/ipam/ip-addresses/", q, &p); err != nil {
			return backends.Usage{}, fmt.Errorf("counting addresses of %s: %w", s.display, err)
		}
		u.Used = backends.SaturatingAdd(u.Used, min(p.Count, s.total))
	}
	return u, nil
}
