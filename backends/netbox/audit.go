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

	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Records lists the records of the pool's sources whose marker begins with
// prefix: one paginated listing per VRF the sources are in (one for most
// pools), filtered in NetBox by the marker field's "starts with" lookup and
// the sources' parents. The values are compared again here: a field whose
// filter logic an administrator set to "loose" has no lookups, and NetBox
// ignores a filter it does not know.
func (b *Backend) Records(ctx context.Context, prefix string) ([]backends.Record, error) {
	sources, _, err := b.prepared(ctx)
	if err != nil {
		return nil, err
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
		found, err := b.listMarked(ctx, prefix, q, func(r ipRecord) bool { return inSources(r, sources) })
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// Strays lists the records whose marker begins with prefix that lie outside
// the pool's sources: in another VRF, or at an address none of them holds.
// It is one listing filtered by the marker alone, so it reaches wherever
// the IPAM team may have moved a record.
func (b *Backend) Strays(ctx context.Context, prefix string) ([]backends.Record, error) {
	sources, _, err := b.prepared(ctx)
	if err != nil {
		return nil, err
	}
	return b.listMarked(ctx, prefix, url.Values{}, func(r ipRecord) bool { return !inSources(r, sources) })
}

// listMarked pages through the IP addresses that q selects and whose marker
// begins with prefix, keeping those keep accepts.
func (b *Backend) listMarked(ctx context.Context, prefix string, q url.Values, keep func(ipRecord) bool) ([]backends.Record, error) {
	var out []backends.Record
	q.Set("cf_"+b.cfg.MarkerField+"__isw", prefix)
	q.Set("ordering", "id")
	q.Set("limit", strconv.Itoa(maxPage))
	for offset := 0; ; offset += maxPage {
		q.Set("offset", strconv.Itoa(offset))
		var p page[ipRecord]
		if err := b.getJSON(ctx, "/api/ipam/ip-addresses/", q, &p); err != nil {
			return nil, fmt.Errorf("listing the records marked %q: %w", prefix+"…", err)
		}
		for _, r := range p.Results {
			b.readMarker(&r)
			addr, err := netip.ParsePrefix(r.Address)
			if err != nil || !strings.HasPrefix(r.Marker, prefix) || !keep(r) {
				continue
			}
			out = append(out, backends.Record{Address: addr, Marker: r.Marker, Reference: fmt.Sprintf("%s%d", recordRefPrefix, r.ID), Planned: r.planned})
		}
		if len(p.Results) < maxPage || int64(offset+len(p.Results)) >= p.Count {
			return out, nil
		}
	}
}

// remarkRecord sets the record's marker; a tombstone also gets status
// deprecated, which NetBox's users know as "no longer in use". A planned
// record keeps saying so under its new marker; retired, it goes back to the
// IPAM team: its plan holds the address.
func (b *Backend) remarkRecord(ctx context.Context, r ipRecord, marker string) error {
	_, _, tombstone := backends.ParseTombstone(marker)
	value := marker
	switch {
	case r.planned && tombstone:
		return b.unplan(ctx, r)
	case r.planned:
		value = backends.PlannedMarker(marker)
	}
	patch := map[string]any{"custom_fields": map[string]any{b.cfg.MarkerField: value}}
	if tombstone {
		patch["status"] = "deprecated"
	}
	if err := b.conditionally(ctx, r, func(r ipRecord) error {
		_, err := b.send(ctx, http.MethodPatch, fmt.Sprintf("/api/ipam/ip-addresses/%d/", r.ID), nil, patch, nil, r.etag)
		return err
	}); err != nil {
		return fmt.Errorf("marking IP address %d (%s) %q: %w", r.ID, r.Address, marker, err)
	}
	return nil
}

// createAt creates the claim's IP address at addr in src, as the
// available-ips request would have, but at this address: with the source's
// mask, in its VRF. NetBox's refusal because the address is held (a
// duplicate where the VRF or global table enforces uniqueness, or an
// address inside a range marked populated) is an ErrAddressTaken.
func (b *Backend) createAt(ctx context.Context, claim backends.Claim, refs *references, src resolvedSource, addr netip.Addr) (ipRecord, error) {
	request, err := b.ipRequest(claim, refs)
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
	if err := b.sendJSON(ctx, http.MethodPost, "/api/ipam/ip-addresses/", nil, body, &created); err != nil {
		if errors.Is(err, backends.ErrInvalidConfig) && (strings.Contains(err.Error(), "Duplicate IP address") || strings.Contains(err.Error(), "inside range")) {
			return ipRecord{}, fmt.Errorf("%w: %w", backends.ErrAddressTaken, err)
		}
		return ipRecord{}, err
	}
	b.readMarker(&created)
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
