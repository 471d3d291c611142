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
	"strings"
	"time"

	netbox "github.com/netbox-community/go-netbox/v4"
	"golang.org/x/sync/errgroup"

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
	// etag is the record's ETag as read by getRecord ("" from a listing,
	// or from a NetBox before 4.6): writes that follow the read send it as
	// If-Match, so that a record changed since is never overwritten.
	etag string
}

// markedObject is a NetBox object the provider marks with a claim's marker
// in its custom field: an IP address, or a prefix carved for a claim.
type markedObject interface {
	fmt.Stringer
	objectID() int32
	fields() map[string]any
}

func (r ipRecord) objectID() int32        { return r.ID }
func (r ipRecord) fields() map[string]any { return r.CustomFields }

// String names the record in errors.
func (r ipRecord) String() string { return fmt.Sprintf("IP address %d (%s)", r.ID, r.Address) }

// readMarker fills the record's marker, and whether it was planned, from
// its marker field.
func (d *driver) readMarker(r *ipRecord) {
	r.Marker, r.planned = backends.ParsePlanned(markerValue(r.CustomFields, d.cfg.MarkerField))
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

// findByMarker returns the records carrying the marker, oldest first.
func (d *driver) findByMarker(ctx context.Context, marker string) ([]ipRecord, error) {
	found, err := d.Search(ctx, []string{marker}, backends.InPool)
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

// Search returns the records carrying each marker, oldest first: one
// request for as many markers as fit in its request line (NetBox ORs
// repeated values of a filter), whatever the pool size. It looks by the
// marker alone, whatever the scope: a plan a claim adopted carries no tag
// of the provider's, and the protocol keeps what lies in the pool's
// sources.
//
// A claim's record carries its marker, or, on a plan it adopted, its
// planned marker (backends.PlannedMarker) and no tag of the provider's:
// whatever the pool's spec says now, since a pool may stop adopting plans.
// One "starts with" value per claim (the lookup NetBox gives an exact text
// custom field) finds both at the cost of the exact search, without the
// tag; the values are compared exactly here, as the lookup also matches
// the claim's tombstones and longer markers. A field whose filter logic is
// "loose" has no lookups and NetBox ignores the filter: the answer then
// holds records the lookup would not, and the chunk is searched again by
// exact values, the marker and its planned form. Such a field is searched
// by exact values at once while the driver remembers it (lookupIgnored).
func (d *driver) Search(ctx context.Context, markers []string, _ backends.Scope) (map[string][]ipRecord, error) {
	found, err := searchMarked[ipRecord](ctx, d, "/api/ipam/ip-addresses/", markers)
	for _, records := range found {
		for i := range records {
			d.readMarker(&records[i])
		}
	}
	return found, err
}

// searchMarked is Search for the objects at path.
func searchMarked[T markedObject](ctx context.Context, d *driver, path string, markers []string) (map[string][]T, error) {
	found := make(map[string][]T, len(markers))
	claimOf := map[string]string{}
	for _, m := range markers {
		claimOf[m] = m
		claimOf[backends.PlannedMarker(m)] = m
	}
	base := url.Values{}
	base.Set("limit", strconv.Itoa(maxPage))
	base.Set("ordering", "id")
	line := http.MethodGet + " " + d.baseURL + path + "? HTTP/1.1"
	prefixField := "cf_" + d.cfg.MarkerField + "__isw"
	exactField := "cf_" + d.cfg.MarkerField
	// An object is found once however many searches return it: keep would
	// take a second copy of the claim's own record for a duplicate and
	// release it under the claim.
	seen := map[int32]bool{}
	add := func(objects []T) {
		for _, o := range objects {
			m, ok := claimOf[markerValue(o.fields(), d.cfg.MarkerField)]
			if !ok || seen[o.objectID()] {
				continue
			}
			seen[o.objectID()] = true
			found[m] = append(found[m], o)
		}
	}
	// The chunks are independent reads: sent together (up to
	// searchChunksAtOnce), a batch's search costs about one round trip.
	search := func(ctx context.Context, chunk []string) ([]T, error) {
		return searchChunk[T](ctx, d, path, base, line, prefixField, exactField, chunk)
	}
	chunks := markerChunks(line, base, prefixField, claimValues(markers))
	if d.lookupIgnored() {
		search = func(ctx context.Context, chunk []string) ([]T, error) {
			return searchAll[T](ctx, d, path, base, exactField, chunk, nil)
		}
		chunks = exactChunks(line, base, exactField, markers)
	}
	results := make([][]T, len(chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(searchChunksAtOnce)
	for i, chunk := range chunks {
		g.Go(func() error {
			objects, err := search(gctx, chunk)
			results[i] = objects
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, objects := range results {
		add(objects)
	}
	for _, objects := range found {
		slices.SortFunc(objects, func(a, b T) int { return int(a.objectID()) - int(b.objectID()) })
	}
	return found, nil
}

// searchChunksAtOnce is how many chunks of one marker search are sent at
// once; the endpoint's own limits still apply to each.
const searchChunksAtOnce = 4

// searchChunk finds the objects whose marker starts with one of chunk's
// values, by exact values where NetBox ignores the lookup.
func searchChunk[T markedObject](ctx context.Context, d *driver, path string, base url.Values, line, prefixField, exactField string, chunk []string) ([]T, error) {
	q := maps.Clone(base)
	q[prefixField] = chunk
	var p page[T]
	if err := d.getJSON(ctx, path, q, &p); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(p.Results, func(o T) bool { return !startsWithAny(markerValue(o.fields(), d.cfg.MarkerField), chunk) }) {
		if p.Count > int64(len(p.Results)) {
			// More objects than a page: page through this chunk's.
			return searchAll[T](ctx, d, path, base, prefixField, chunk, p.Results)
		}
		return p.Results, nil
	}
	// The lookup was ignored: so it will be for the searches that follow.
	d.rememberFilterLogic(filterLogicLoose)
	var out []T
	for _, exact := range exactChunks(line, base, exactField, chunk) {
		objects, err := searchAll[T](ctx, d, path, base, exactField, exact, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, objects...)
	}
	return out, nil
}

// exactChunks splits the exact values of markers (exactValues) into
// requests, as markerChunks does.
func exactChunks(line string, base url.Values, exactField string, markers []string) [][]string {
	return markerChunks(line, base, exactField, claimValues(exactValues(markers)))
}

// exactValues are the values an exact search of markers asks for: each
// marker and its planned form. They need no lookup: a field of loose filter
// logic matches them as parts of a marker, one of exact logic as the whole.
func exactValues(markers []string) []string {
	values := make([]string, 0, 2*len(markers))
	for _, m := range markers {
		values = append(values, m, backends.PlannedMarker(m))
	}
	return values
}

// filterLogicLoose is the filter logic of a custom field that NetBox gives
// no lookups: its filter matches any part of a value. It is NetBox's
// default.
const filterLogicLoose = "loose"

// filterLogicExact is the filter logic of the marker field the provider
// creates: whole values, and lookups such as "starts with".
const filterLogicExact = "exact"

// ignoredLookups remembers, by NetBox and marker field, the marker fields
// whose "starts with" lookup NetBox ignores (filter logic loose): their
// searches go by exact values at once, not after a page of every object
// at the path, which is what the ignored filter answers. Exact values find the
// same records whatever the field's logic, so a field the IPAM team sets
// to exact meanwhile is still searched right, and the next setup check,
// which reads the field's logic, forgets it.
var ignoredLookups = backends.NewMemory[string, bool](1024, ignoredLookupTime)

// ignoredLookupTime is how long a field is searched by exact values after
// its lookup was last found ignored.
const ignoredLookupTime = 10 * time.Minute

func (d *driver) lookupKey() string { return d.baseURL + "\x00" + d.cfg.MarkerField }

// lookupIgnored says whether NetBox was last found to ignore the marker
// field's "starts with" lookup.
func (d *driver) lookupIgnored() bool { return ignoredLookups.Contains(d.lookupKey()) }

// rememberFilterLogic remembers whether NetBox ignores the marker field's
// lookups, from its filter logic.
func (d *driver) rememberFilterLogic(logic string) {
	if logic == filterLogicLoose {
		ignoredLookups.Add(d.lookupKey(), true)
		return
	}
	ignoredLookups.Remove(d.lookupKey())
}

// searchAll pages through the objects at path whose field matches one of
// values, after read, the first of them, already read.
func searchAll[T any](ctx context.Context, d *driver, path string, base url.Values, field string, values []string, read []T) ([]T, error) {
	q := maps.Clone(base)
	q[field] = values
	return listAll(ctx, d, path, q, read)
}

// listAll pages through the objects at path that q selects, after read, the
// first of them, already read. q sets the page's limit and an ordering.
func listAll[T any](ctx context.Context, d *driver, path string, q url.Values, read []T) ([]T, error) {
	out := read
	q = maps.Clone(q)
	for offset := len(read); ; {
		q.Set("offset", strconv.Itoa(offset))
		var p page[T]
		if err := d.getJSON(ctx, path, q, &p); err != nil {
			return nil, err
		}
		out = append(out, p.Results...)
		next, more := nextPage(offset, p)
		if !more {
			return out, nil
		}
		offset = next
	}
}

// nextPage is the offset of the page after p, read at offset, if there is
// one. A page may hold fewer objects than the limit asked: an administrator
// may set NetBox's MAX_PAGE_SIZE below maxPage.
func nextPage[T any](offset int, p page[T]) (int, bool) {
	offset += len(p.Results)
	return offset, len(p.Results) > 0 && int64(offset) < p.Count
}

// startsWithAny says whether value begins with one of prefixes, as NetBox's
// case-insensitive "starts with" lookup compares.
func startsWithAny(value string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool {
		return strings.HasPrefix(strings.ToLower(value), strings.ToLower(p))
	})
}

// claimValues groups the searched values by claim: a marker and its
// planned form stay in one request.
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

// AtAddress returns the records holding addr in any VRF of the pool's
// sources, whatever their marker: none if the pool does not validate.
func (d *driver) AtAddress(ctx context.Context, pool preparation, addr netip.Addr) ([]ipRecord, error) {
	sources := pool.sources
	if len(sources) == 0 {
		return nil, nil
	}
	// Every VRF's records at addr, a page at a time: a space reused in
	// many VRFs may hold more of them than one page.
	q := url.Values{"address": {addr.String()}, "ordering": {"id"}, "limit": {strconv.Itoa(maxPage)}}
	records, err := listAll[ipRecord](ctx, d, "/api/ipam/ip-addresses/", q, nil)
	if err != nil {
		return nil, fmt.Errorf("looking up address %s: %w", addr, err)
	}
	var held []ipRecord
	for _, r := range records {
		for _, s := range sources {
			if s.vrfID == vrfIDOf(r.VRF) && s.Contains(addr) {
				d.readMarker(&r)
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
