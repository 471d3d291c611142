package netbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Marked lists the records whose marker begins with prefix. In the pool's
// sources: one paginated listing per VRF the sources are in (one for most
// pools), filtered in NetBox by the marker field's "starts with" lookup and
// the sources' parents. Outside them (in another VRF, or at an address none
// of them holds): one listing filtered by the marker alone, so it reaches
// wherever the IPAM team may have moved a record. The values are compared
// again here: a field whose filter logic an administrator set to "loose"
// has no lookups, and NetBox ignores a filter it does not know.
func (d *driver) Marked(ctx context.Context, pool preparation, prefix string, scope backends.Scope, maxAge time.Duration) ([]backends.Record, error) {
	sources := pool.sources
	if scope != backends.InPool {
		everywhere, err := listEverywhere(ctx, d, "/api/ipam/ip-addresses/", prefix, maxAge, func(r ipRecord) (ipRecord, backends.Record) {
			d.readMarker(&r)
			return r, d.View(r)
		})
		return outside(everywhere, func(r ipRecord) bool { return !inSources(r, sources) }), err
	}
	parents := map[int32][]string{}
	var vrfs []int32
	for _, s := range sources {
		if _, seen := parents[s.vrfID]; !seen {
			vrfs = append(vrfs, s.vrfID)
		}
		if s.kind == SourcePrefix {
			parents[s.vrfID] = append(parents[s.vrfID], s.network.String())
			continue
		}
		for _, p := range netipx.IPRangeFrom(s.first, s.last).Prefixes() {
			parents[s.vrfID] = append(parents[s.vrfID], p.String())
		}
	}
	var out []backends.Record
	for _, vrf := range vrfs {
		q := url.Values{"parent": parents[vrf]}
		q.Set("vrf_id", vrfFilter(vrf))
		found, err := d.listMarked(ctx, prefix, q, func(r ipRecord) bool { return inSources(r, sources) })
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// listMarked pages through the IP addresses that q selects and whose marker
// begins with prefix, keeping those keep accepts.
func (d *driver) listMarked(ctx context.Context, prefix string, q url.Values, keep func(ipRecord) bool) ([]backends.Record, error) {
	return listMarked(ctx, d, "/api/ipam/ip-addresses/", prefix, q, func(r ipRecord) (backends.Record, bool) {
		d.readMarker(&r)
		v := d.View(r)
		return v, v.Address.IsValid() && keep(r)
	})
}

// listMarked pages through the objects at path that q selects and whose
// marker begins with prefix, as view reads them, keeping those view
// accepts.
func listMarked[T markedObject](ctx context.Context, d *driver, path, prefix string, q url.Values, view func(T) (backends.Record, bool)) ([]backends.Record, error) {
	var out []backends.Record
	err := eachMarked(ctx, d, path, prefix, q, func(o T) {
		if rec, ok := view(o); ok && strings.HasPrefix(rec.Marker, prefix) {
			out = append(out, rec)
		}
	})
	return out, err
}

// eachMarked pages through the objects at path that q selects and whose
// marker field begins with prefix in NetBox's filter, calling each on each.
func eachMarked[T markedObject](ctx context.Context, d *driver, path, prefix string, q url.Values, each func(T)) error {
	q.Set("cf_"+d.cfg.MarkerField+"__isw", prefix)
	q.Set("ordering", "id")
	q.Set("limit", strconv.Itoa(maxPage))
	for offset := 0; ; {
		q.Set("offset", strconv.Itoa(offset))
		var p page[T]
		if err := d.getJSON(ctx, path, q, &p); err != nil {
			return fmt.Errorf("listing the records marked %q: %w", prefix+"…", err)
		}
		for _, o := range p.Results {
			each(o)
		}
		next, more := nextPage(offset, p)
		if !more {
			return nil
		}
		offset = next
	}
}

// markedObj is an object a listing found, with the record it reads as.
type markedObj[T any] struct {
	obj T
	rec backends.Record
}

// listEverywhere lists the objects at path whose marker begins with
// prefix, wherever they lie, as read reads them. The pools of one NetBox,
// token and marker field share a listing that began at most maxAge ago
// (backends.SharedListing): every pool of a namespace lists the same for
// its strays.
func listEverywhere[T markedObject](ctx context.Context, d *driver, path, prefix string, maxAge time.Duration, read func(T) (T, backends.Record)) ([]markedObj[T], error) {
	key := backends.SharedKey("netbox", d.baseURL, d.auth, path, d.cfg.MarkerField, prefix)
	return backends.SharedListing(ctx, key, maxAge, func(ctx context.Context) ([]markedObj[T], error) {
		var out []markedObj[T]
		err := eachMarked(ctx, d, path, prefix, url.Values{}, func(o T) {
			o, rec := read(o)
			if rec.Address.IsValid() && strings.HasPrefix(rec.Marker, prefix) {
				out = append(out, markedObj[T]{obj: o, rec: rec})
			}
		})
		return out, err
	})
}

// outside is the records of the listing that keep accepts.
func outside[T any](listing []markedObj[T], keep func(T) bool) []backends.Record {
	var out []backends.Record
	for _, m := range listing {
		if keep(m.obj) {
			out = append(out, m.rec)
		}
	}
	return out
}

// Mark sets the record's marker (NetBox's records serve no MAC); a
// tombstone also gets status deprecated, which NetBox's users know as "no
// longer in use".
func (d *driver) Mark(ctx context.Context, r ipRecord, marker, _ string) error {
	patch := map[string]any{"custom_fields": map[string]any{d.cfg.MarkerField: marker}}
	if _, _, tombstone := backends.ParseTombstone(marker); tombstone {
		patch["status"] = "deprecated"
	}
	if err := d.conditionally(ctx, r, &marker, func(r ipRecord) error {
		_, err := d.send(ctx, http.MethodPatch, fmt.Sprintf("/api/ipam/ip-addresses/%d/", r.ID), nil, patch, nil, r.etag)
		return err
	}); err != nil {
		return fmt.Errorf("marking IP address %d (%s) %q: %w", r.ID, r.Address, marker, err)
	}
	return nil
}

// CreateAt creates the claim's IP address at addr in src, as the
// available-ips request would have, but at this address: with the source's
// mask, in its VRF. NetBox's refusal because the address is held (a
// duplicate where the VRF or global table enforces uniqueness, or an
// address inside a range marked populated) is an ErrAddressTaken.
func (d *driver) CreateAt(ctx context.Context, pool preparation, claim backends.Claim, src resolvedSource, addr netip.Addr) (ipRecord, error) {
	request, err := d.Request(pool, claim, src)
	if err != nil {
		return ipRecord{}, err
	}
	body, err := requestBody(request)
	if err != nil {
		return ipRecord{}, err
	}
	body["address"] = netip.PrefixFrom(addr, src.network.Bits()).String()
	if src.vrfID != 0 {
		body["vrf"] = src.vrfID
	}
	var created ipRecord
	if err := d.sendJSON(ctx, http.MethodPost, "/api/ipam/ip-addresses/", nil, body, &created); err != nil {
		if errors.Is(err, backends.ErrInvalidConfig) && (strings.Contains(err.Error(), "Duplicate IP address") || strings.Contains(err.Error(), "inside range")) {
			return ipRecord{}, fmt.Errorf("%w: %w", backends.ErrAddressTaken, err)
		}
		return ipRecord{}, err
	}
	d.readMarker(&created)
	return created, nil
}

// requestBody turns the pool's request into JSON fields.
func requestBody(request any) (map[string]any, error) {
	data, err := json.Marshal(request)
	if err != nil {
		return nil, fmt.Errorf("encoding the IP address request: %w", err)
	}
	body := map[string]any{}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("encoding the IP address request: %w", err)
	}
	return body, nil
}
