package netboxsim

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

func listIPs(c *reqCtx) response {
	st := c.st()
	f := newFilterSet(c.r)
	var preds []func(*ipObj) bool
	if ids, ok := f.numbers("id"); ok {
		preds = append(preds, func(ip *ipObj) bool { return containsID(ids, ip.id) })
	}
	if vals := f.values("address"); vals != nil {
		preds = append(preds, func(ip *ipObj) bool { return netIn(vals, ip.addr) })
	}
	if vals := f.values("parent"); vals != nil {
		// Hosts inside any of the prefixes, whatever their mask or VRF; one
		// unparsable prefix empties the result (search_by_parent).
		parents, valid := make([]netip.Prefix, 0, len(vals)), true
		for _, v := range vals {
			p, ok := parseAddress(v)
			valid = valid && ok
			parents = append(parents, p.Masked())
		}
		preds = append(preds, func(ip *ipObj) bool {
			return valid && slices.ContainsFunc(parents, func(p netip.Prefix) bool { return p.Contains(ip.addr.Addr()) })
		})
	}
	if vrfs, ok := f.related("vrf_id", st.vrfExists); ok {
		preds = append(preds, func(ip *ipObj) bool { return vrfs[ip.vrf] })
	}
	if tenants, ok := f.related("tenant_id", func(id int32) bool { _, ok := st.tenants[id]; return ok }); ok {
		preds = append(preds, func(ip *ipObj) bool { return tenants[ip.tenant] })
	}
	for _, slug := range f.values("tag") {
		// TagFilter is conjoined: every tag must be present.
		t := st.tagBySlug(slug)
		if t == nil {
			f.errs.add("tag", "Select a valid choice. "+slug+" is not one of the available choices.")
			break
		}
		preds = append(preds, func(ip *ipObj) bool { return slices.Contains(ip.tags, t.id) })
	}
	if vals := f.values("description"); vals != nil {
		preds = append(preds, func(ip *ipObj) bool { return slices.Contains(vals, ip.description) })
	}
	if vals := f.values("dns_name"); vals != nil {
		preds = append(preds, func(ip *ipObj) bool { return slices.Contains(vals, ip.dnsName) })
	}
	if sts, ok := f.choices("status", ipStatusLabels); ok {
		preds = append(preds, func(ip *ipObj) bool { return slices.Contains(sts, ip.status) })
	}
	if roles, ok := f.choices("role", ipRoleLabels); ok {
		preds = append(preds, func(ip *ipObj) bool { return slices.Contains(roles, ip.role) })
	}
	if fams, ok := f.numbers("family"); ok {
		preds = append(preds, func(ip *ipObj) bool { return slices.Contains(fams, int64(familyNumber(ip.addr.Addr()))) })
	}
	if masks, ok := f.numbers("mask_length"); ok {
		preds = append(preds, func(ip *ipObj) bool { return slices.Contains(masks, int64(ip.addr.Bits())) })
	}
	if q := strings.TrimSpace(f.q.Get("q")); q != "" {
		lq := strings.ToLower(q)
		preds = append(preds, func(ip *ipObj) bool {
			return strings.Contains(strings.ToLower(ip.dnsName), lq) || strings.Contains(strings.ToLower(ip.description), lq) ||
				strings.HasPrefix(strings.ToLower(ip.addr.String()), lq)
		})
	}
	preds = append(preds, customFieldFilters(st, f, "ipam.ipaddress", func(ip *ipObj) map[string]any { return ip.cf })...)
	if resp, bad := f.failed(); bad {
		return resp
	}
	return paginate(c, ordered(c, filter(st.ipList(), preds), func(ip *ipObj) int32 { return ip.id }), func(ip *ipObj) any { return c.rend.ip(ip) })
}

// customFieldFilters builds the cf_<name> filters NetBox generates for each
// custom field: exact or case-insensitive contains (loose) for text; fields
// with filter logic "disabled" get no filter, so the parameter is ignored.
// An exact text field also gets the lookups NetBox adds to every exact
// character filter (cf_<name>__isw and the others in textLookups); a loose
// one gets none, so NetBox ignores them as unknown parameters.
// customFieldFilters are the cf_<name> filters of objectType's list, on
// the custom field data data reads of an object.
func customFieldFilters[T any](st *store, f *filterSet, objectType string, data func(T) map[string]any) []func(T) bool {
	var preds []func(T) bool
	for _, cf := range st.customFieldsFor(objectType) {
		if cf.filterLogic == "disabled" {
			continue
		}
		text := cf.typ == "text" || cf.typ == "longtext" || cf.typ == "url"
		if vals := f.values("cf_" + cf.name); vals != nil {
			loose := cf.filterLogic == "loose" && text
			preds = append(preds, func(o T) bool {
				return slices.ContainsFunc(vals, func(want string) bool { return cfMatches(data(o)[cf.name], want, loose) })
			})
		}
		if !text || cf.filterLogic == "loose" {
			continue
		}
		for lookup, match := range textLookups {
			vals := f.values("cf_" + cf.name + "__" + lookup)
			if vals == nil {
				continue
			}
			negated := strings.HasPrefix(lookup, "n")
			preds = append(preds, func(o T) bool {
				have, _ := data(o)[cf.name].(string)
				hit := slices.ContainsFunc(vals, func(want string) bool { return match(strings.ToLower(have), strings.ToLower(want)) })
				return hit != negated
			})
		}
	}
	return preds
}

// textLookups are the case-insensitive lookups of NetBox's
// FILTER_CHAR_BASED_LOOKUP_MAP; the "n" forms negate (exclude=True).
var textLookups = map[string]func(have, want string) bool{
	"ic": strings.Contains, "nic": strings.Contains,
	"isw": strings.HasPrefix, "nisw": strings.HasPrefix,
	"iew": strings.HasSuffix, "niew": strings.HasSuffix,
	"ie": func(have, want string) bool { return have == want }, "nie": func(have, want string) bool { return have == want },
}

func cfMatches(have any, want string, loose bool) bool {
	switch x := have.(type) {
	case string:
		if loose {
			return strings.Contains(strings.ToLower(x), strings.ToLower(want))
		}
		return x == want
	case float64:
		n, err := strconv.ParseFloat(want, 64)
		return err == nil && n == x
	case bool:
		b, msg := booleanField(want)
		return msg == "" && b == x
	}
	return false
}

func getIP(c *reqCtx) response {
	return getOne(c, c.st().ips, "IPAddress", func(ip *ipObj) any {
		c.etag = etag(ip.updated)
		return c.rend.ip(ip)
	})
}

// etag is the weak ETag NetBox 4.6 and later derive from an object's
// last_updated (ETagMixin): W/"<datetime.isoformat()>".
func etag(updated time.Time) string {
	t := updated.UTC()
	if t.Nanosecond() == 0 {
		return `W/"` + t.Format("2006-01-02T15:04:05") + `+00:00"`
	}
	return `W/"` + t.Format("2006-01-02T15:04:05.000000") + `+00:00"`
}

// preconditionFailed answers a write whose If-Match names none of the
// object's current ETag, as NetBox does (RFC 9110 13.1.1): 412, with the
// current ETag. A missing If-Match, or "*", matches anything.
func (c *reqCtx) preconditionFailed(updated time.Time) (response, bool) {
	header := c.r.Header.Get("If-Match")
	if header == "" || header == "*" {
		return response{}, false
	}
	current := etag(updated)
	for _, e := range strings.Split(header, ",") {
		if strings.TrimSpace(e) == current {
			return response{}, false
		}
	}
	c.etag = current
	return errDetail(http.StatusPreconditionFailed, "Precondition failed."), true
}

// createIPs is POST on the list endpoint: one object or a list (bulk).
func createIPs(c *reqCtx) response {
	data, bad := c.body()
	if bad != nil {
		return *bad
	}
	st := c.st()
	return createMany(data,
		func(item any) (*ipObj, fieldErrors) { return st.buildIP(item, nil, false) },
		func(ip *ipObj) any { st.insertIP(ip); return c.rend.ip(ip) })
}

func (st *store) insertIP(ip *ipObj) {
	ip.id = st.nextID("ipaddress")
	ip.created = now()
	ip.updated = ip.created
	st.ips[ip.id] = ip
}

// updateIP serves PATCH (partial) and PUT (address required).
func updateIP(c *reqCtx) response {
	return update(c, c.st().ips, "IPAddress", func(ip *ipObj) time.Time { return ip.updated },
		func(data any, cur *ipObj, partial bool) (*ipObj, fieldErrors) {
			return c.st().buildIP(data, cur, partial)
		},
		func(ip *ipObj, t time.Time) { ip.updated = t },
		func(ip *ipObj) any { return c.rend.ip(ip) })
}

func deleteIP(c *reqCtx) response {
	return deleteOne(c, c.st().ips, "IPAddress", func(ip *ipObj) time.Time { return ip.updated })
}

func bulkDeleteIPs(c *reqCtx) response { return bulkDelete(c, c.st().ips) }

// update serves PATCH (partial) and PUT of one object of m, honouring
// If-Match on its last change.
func update[T any](c *reqCtx, m map[int32]*T, model string, updated func(*T) time.Time,
	build func(data any, cur *T, partial bool) (*T, fieldErrors), touch func(*T, time.Time), render func(*T) any) response {
	id, ok := c.objectID()
	if !ok {
		return errDetail(http.StatusNotFound, "Not found.")
	}
	cur, ok := m[id]
	if !ok {
		return notFound(model)
	}
	if failed, ok := c.preconditionFailed(updated(cur)); ok {
		return failed
	}
	data, bad := c.body()
	if bad != nil {
		return *bad
	}
	obj, errs := build(data, cur, c.r.Method == http.MethodPatch)
	if errs != nil {
		return badRequest(errs)
	}
	t := now()
	touch(obj, t)
	m[id] = obj
	c.etag = etag(t)
	return response{http.StatusOK, render(obj)}
}

// deleteOne serves DELETE of one object of m, honouring If-Match.
func deleteOne[T any](c *reqCtx, m map[int32]*T, model string, updated func(*T) time.Time) response {
	id, ok := c.objectID()
	if !ok {
		return errDetail(http.StatusNotFound, "Not found.")
	}
	cur, ok := m[id]
	if !ok {
		return notFound(model)
	}
	if failed, ok := c.preconditionFailed(updated(cur)); ok {
		return failed
	}
	delete(m, id)
	return response{status: http.StatusNoContent}
}

// bulkDelete is DELETE on a list endpoint (BulkDestroyModelMixin): a list
// of {"id": N}, deleted in one transaction, or none, with NetBox 4.7's
// answers (checked against 4.7.3): entries that do not validate, then IDs
// listed twice, then IDs that do not exist, each refuse the whole list.
func bulkDelete[T any](c *reqCtx, m map[int32]*T) response {
	data, bad := c.body()
	if bad != nil {
		return *bad
	}
	items, many := data.([]any)
	if !many {
		return errDetail(http.StatusBadRequest, fmt.Sprintf("Expected a list of objects, but got %s.", pyTypeName(data)))
	}
	ids := make([]int32, len(items))
	var invalid []bulkIndexError
	for i, it := range items {
		e := fieldErrors{}
		obj, _ := it.(map[string]any)
		n, ok := obj["id"].(float64)
		switch {
		case obj == nil:
			e.add("__all__", fmt.Sprintf("Invalid data. Expected a dictionary, but got %s.", pyTypeName(it)))
		case obj["id"] == nil:
			e.add("id", "This field is required.")
		case !ok || n != float64(int32(n)):
			e.add("id", "A valid integer is required.")
		default:
			ids[i] = int32(n)
			continue
		}
		invalid = append(invalid, bulkIndexError{Index: i, Errors: e})
	}
	if len(invalid) > 0 {
		return badRequest(bulkErrors{Detail: fmt.Sprintf("%d of %d objects failed validation.", len(invalid), len(items)), Errors: invalid})
	}
	counts := map[int32]int{}
	for _, id := range ids {
		counts[id]++
	}
	var twice, missing []bulkIDError
	seen := map[int32]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if n := counts[id]; n > 1 {
			twice = append(twice, bulkIDError{ID: id, Errors: fieldErrors{"id": {fmt.Sprintf("Each object may be specified only once; ID %d is listed %d times", id, n)}}})
		}
		if _, ok := m[id]; !ok {
			missing = append(missing, bulkIDError{ID: id, Errors: fieldErrors{"id": {fmt.Sprintf("Object with ID %d does not exist", id)}}})
		}
	}
	switch {
	case len(twice) > 0:
		return badRequest(bulkErrors{Detail: fmt.Sprintf("%d of %d objects are listed more than once.", len(twice), len(items)), Errors: twice})
	case len(missing) > 0:
		return badRequest(bulkErrors{Detail: fmt.Sprintf("%d of %d objects could not be found.", len(missing), len(items)), Errors: missing})
	}
	for _, id := range ids {
		delete(m, id)
	}
	return response{status: http.StatusNoContent}
}

// The error bodies of a refused bulk request, in NetBox's key order.
type (
	bulkErrors struct {
		Detail string `json:"detail"`
		Errors any    `json:"errors"`
	}
	bulkIndexError struct {
		Index  int         `json:"index"`
		Errors fieldErrors `json:"errors"`
	}
	bulkIDError struct {
		ID     int32       `json:"id"`
		Errors fieldErrors `json:"errors"`
	}
)

// createMany validates every item first and stores them only if all are
// valid, answering with a list when a list was sent. Errors of a list are
// a list with {} for the valid items, as DRF's ListSerializer reports.
func createMany[T any](data any, build func(any) (T, fieldErrors), save func(T) any) response {
	items, many := data.([]any)
	if !many {
		items = []any{data}
	}
	built := make([]T, len(items))
	errs := make([]fieldErrors, len(items))
	failed := false
	for i, it := range items {
		built[i], errs[i] = build(it)
		if errs[i] == nil {
			errs[i] = fieldErrors{}
		} else {
			failed = true
		}
	}
	if failed {
		if many {
			return badRequest(errs)
		}
		return badRequest(errs[0])
	}
	out := make([]any, len(built))
	for i, b := range built {
		out[i] = save(b)
	}
	if many {
		return response{http.StatusCreated, out}
	}
	return response{http.StatusCreated, out[0]}
}
