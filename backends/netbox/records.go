package netbox

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"

	netbox "github.com/netbox-community/go-netbox/v4"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Lookups decode only the fields the backend reads, so a NetBox release that
// adds fields or enum values does not break them. Writes use go-netbox.

// page is NetBox's list envelope.
type page[T any] struct {
	Count   int64 `json:"count"`
	Results []T   `json:"results"`
}

type brief struct {
	ID   int32  `json:"id"`
	Name string `json:"name"`
	Slug string `json:"slug"`
}

type ipRecord struct {
	ID           int32          `json:"id"`
	Address      string         `json:"address"`
	VRF          *brief         `json:"vrf"`
	CustomFields map[string]any `json:"custom_fields"`
	// Marker is the claim's marker the marker field holds, filled after
	// decoding (see readMarker).
	Marker string `json:"-"`
	// planned: the IPAM team planned the record and a claim adopted it.
	planned bool
}

// readMarker fills the record's marker, and whether it was planned, from
// its marker field.
func (b *Backend) readMarker(r *ipRecord) {
	r.Marker, r.planned = backends.ParsePlanned(markerValue(r.CustomFields, b.cfg.MarkerField))
}

func recordFromAPI(ip netbox.IPAddress) ipRecord {
	r := ipRecord{ID: ip.Id, Address: ip.Address, CustomFields: ip.CustomFields}
	if v := ip.Vrf.Get(); v != nil {
		r.VRF = &brief{ID: v.Id, Name: v.Name}
	}
	return r
}

// maxPage is NetBox's default MAX_PAGE_SIZE.
const maxPage = 1000

// findByMarker returns the records carrying the marker, oldest first. The
// tag (when tagged) and custom-field filters run in NetBox: one request
// whatever the pool size. NetBox refuses a filter naming a tag it lacks, so
// a release searches without it.
func (b *Backend) findByMarker(ctx context.Context, marker string, tagged bool) ([]ipRecord, error) {
	found, err := b.findByMarkers(ctx, []string{marker}, tagged)
	if err != nil {
		return nil, fmt.Errorf("looking up marker %q: %w", marker, err)
	}
	return found[marker], nil
}

// maxRequestLine is gunicorn's limit on a request line (its
// limit_request_line, which NetBox's deployments keep): a longer line is
// refused with 400. requestLineMargin leaves room for a proxy's changes.
const (
	maxRequestLine    = 4094
	requestLineMargin = 64
)

// findByMarkers returns the records carrying each marker, oldest first: one
// request for as many markers as fit in its request line (NetBox ORs
// repeated values of a filter). The values are compared again here because
// a field whose filter logic an administrator set to "loose" matches
// substrings.
func (b *Backend) findByMarkers(ctx context.Context, markers []string, tagged bool) (map[string][]ipRecord, error) {
	const path = "/api/ipam/ip-addresses/"
	found := make(map[string][]ipRecord, len(markers))
	values := markers
	if b.cfg.Planned != nil {
		// A planned record a claim adopted carries the marker as
		// backends.PlannedMarker writes it, and no tag of the provider's:
		// the marker alone finds it, and its sources limit the pool's.
		tagged = false
		values = nil
		for _, m := range markers {
			values = append(values, m, backends.PlannedMarker(m))
		}
	}
	base := url.Values{}
	if tagged {
		base.Set("tag", b.cfg.Tag)
	}
	base.Set("limit", strconv.Itoa(maxPage))
	base.Set("ordering", "id")
	field := "cf_" + b.cfg.MarkerField
	// A record is found once however many searches return it: keep would
	// take a second copy of the claim's own record for a duplicate and
	// release it under the claim.
	seen := map[int32]bool{}
	add := func(marker string, records ...ipRecord) {
		for _, r := range records {
			if !seen[r.ID] {
				seen[r.ID] = true
				found[marker] = append(found[marker], r)
			}
		}
	}
	for _, chunk := range markerChunks(http.MethodGet+" "+b.baseURL+path+"? HTTP/1.1", base, field, claimValues(values)) {
		q := maps.Clone(base)
		q[field] = chunk
		var p page[ipRecord]
		if err := b.getJSON(ctx, path, q, &p); err != nil {
			return nil, err
		}
		if p.Count > int64(len(p.Results)) {
			// More records than a page: search the markers one by one.
			var claims []string
			for _, v := range chunk {
				if m, _ := backends.ParsePlanned(v); !slices.Contains(claims, m) {
					claims = append(claims, m)
				}
			}
			if len(claims) > 1 {
				for _, marker := range claims {
					records, err := b.findByMarker(ctx, marker, tagged)
					if err != nil {
						return nil, err
					}
					add(marker, records...)
				}
				continue
			}
		}
		for _, r := range p.Results {
			raw := markerValue(r.CustomFields, b.cfg.MarkerField)
			b.readMarker(&r)
			if slices.Contains(chunk, raw) {
				add(r.Marker, r)
			}
		}
	}
	for _, records := range found {
		slices.SortFunc(records, func(a, b ipRecord) int { return int(a.ID) - int(b.ID) })
	}
	return found, nil
}

// claimValues groups the searched values by claim: a marker and its
// planned form stay in one request, so that a page too full to read (which
// the search repeats claim by claim) covers each claim whole.
func claimValues(values []string) [][]string {
	var groups [][]string
	for _, v := range values {
		m, _ := backends.ParsePlanned(v)
		if n := len(groups); n > 0 {
			if last, _ := backends.ParsePlanned(groups[n-1][0]); last == m {
				groups[n-1] = append(groups[n-1], v)
				continue
			}
		}
		groups = append(groups, []string{v})
	}
	return groups
}

// markerChunks splits groups of values into chunks whose search fits one
// request line: line is the request line without its query, base the
// query's other values, and each value is one more value of field. A group
// is never split; one too long for a line of its own still gets one
// (NetBox then answers 400).
func markerChunks(line string, base url.Values, field string, groups [][]string) [][]string {
	budget := maxRequestLine - requestLineMargin - len(line) - len(base.Encode())
	var chunks [][]string
	var chunk []string
	size := 0
	for _, g := range groups {
		n := 0
		for _, v := range g {
			n += len("&"+url.QueryEscape(field)+"=") + len(url.QueryEscape(v))
		}
		if len(chunk) > 0 && size+n > budget {
			chunks = append(chunks, chunk)
			chunk, size = nil, 0
		}
		chunk = append(chunk, g...)
		size += n
	}
	if len(chunk) > 0 {
		chunks = append(chunks, chunk)
	}
	return chunks
}

// findByAddress returns the records holding addr in any VRF of the pool's
// sources, whatever their marker.
func (b *Backend) findByAddress(ctx context.Context, addr netip.Addr) ([]ipRecord, error) {
	sources, _, err := b.prepared(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("address", addr.String())
	q.Set("limit", strconv.Itoa(maxPage))
	var p page[ipRecord]
	if err := b.getJSON(ctx, "/api/ipam/ip-addresses/", q, &p); err != nil {
		return nil, fmt.Errorf("looking up address %s: %w", addr, err)
	}
	var held []ipRecord
	for _, r := range p.Results {
		for _, s := range sources {
			if s.vrfID == vrfIDOf(r.VRF) && s.Contains(addr) {
				b.readMarker(&r)
				held = append(held, r)
				break
			}
		}
	}
	return held, nil
}

func markerValue(fields map[string]any, name string) string {
	s, _ := fields[name].(string)
	return s
}

func vrfIDOf(v *brief) int32 {
	if v == nil {
		return 0
	}
	return v.ID
}

// vrfFilter is the vrf_id filter value: "null" selects the global table.
func vrfFilter(id int32) string {
	if id == 0 {
		return "null"
	}
	return strconv.Itoa(int(id))
}
