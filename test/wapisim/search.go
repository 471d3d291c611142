package wapisim

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// defaultMaxResults is WAPI's default _max_results: -1000, i.e. an error
// when more than 1000 objects match (infoblox-client#62, PR #97 quoting the
// WAPI reference).
const defaultMaxResults = -1000

// defaultPageTTL is how long a next_page_id stays valid. Best guess: the
// WAPI reference says page ids expire but not after how long.
const defaultPageTTL = 10 * time.Minute

// parkedPage holds the rest of a paged search under its page id.
type parkedPage struct {
	results []map[string]any
	expires time.Time
}

// maxPagedResults bounds what a paged search collects, so that paging over
// the addresses of an IPv6 network ends.
const maxPagedResults = 100000

// options are the underscore arguments of a GET (and of POST/PUT for
// _return_fields and _return_as_object).
type options struct {
	returnFields []string // nil = basic fields
	plus         bool     // _return_fields+
	maxResults   int
	paging       bool
	asObject     bool
	pageID       string
}

// parseOptions splits the query into options and search arguments.
//
// Repeated parameters: the WAPI reference says that giving _return_fields
// (or _return_fields+) repeatedly is the same as listing the fields with
// commas, so every occurrence counts; search arguments keep every value
// (see matchOne). The other options take one value; given twice, the last
// one wins (not documented; see doc.go).
func (c *request) parseOptions() (options, map[string][]string, *wapiError) {
	o := options{maxResults: defaultMaxResults}
	args := map[string][]string{}
	// Fields in request order: _return_fields before _return_fields+ when
	// both are given, each in the order its values were sent.
	for _, k := range []string{"_return_fields", "_return_fields+"} {
		vs, ok := c.query[k]
		if !ok {
			continue
		}
		if o.returnFields == nil {
			o.returnFields = []string{}
		}
		o.plus = o.plus || k == "_return_fields+"
		for _, v := range vs {
			for f := range strings.SplitSeq(v, ",") {
				if f = strings.TrimSpace(f); f != "" && !slices.Contains(o.returnFields, f) {
					o.returnFields = append(o.returnFields, f)
				}
			}
		}
	}
	for k, vs := range c.query {
		v := vs[len(vs)-1]
		switch k {
		case "_return_fields", "_return_fields+":
			// Handled above.
		case "_max_results":
			n, err := strconv.Atoi(v)
			if err != nil || n == 0 {
				e := errInvalidValue("_max_results", v)
				return o, nil, &e
			}
			o.maxResults = n
		case "_paging":
			o.paging = v == "1"
		case "_return_as_object":
			o.asObject = v == "1"
		case "_page_id":
			o.pageID = v
		case "_proxy_search":
			// _proxy_search=GM is what the go client adds when it retries a
			// search on the grid master; this simulator is the grid master,
			// so GM and LOCAL answer alike.
			if v != "GM" && v != "LOCAL" {
				e := errInvalidValue(k, v)
				return o, nil, &e
			}
		case "_inheritance":
			// Accepted; the simulator models no inherited fields (doc.go).
		case "_return_type":
			switch v {
			case "json", "json-pretty":
				// The simulator always answers indented JSON.
			case "xml", "xml-pretty":
				e := errNotSimulated(k + "=" + v)
				return o, nil, &e
			default:
				e := errInvalidValue(k, v)
				return o, nil, &e
			}
		case "_schema", "_schema_version", "_schema_searchable", "_get_doc":
			// Answered by schemaResponse before a search or read runs;
			// here only on writes, where WAPI has no schema.
			e := errUnknownField(k)
			return o, nil, &e
		default:
			if strings.HasPrefix(k, "_") {
				e := errUnknownField(k)
				return o, nil, &e
			}
			args[k] = vs
		}
	}
	if o.paging && !o.asObject {
		// Best guess text; the WAPI reference requires _return_as_object
		// with _paging.
		e := errProto("_return_as_object needs to be enabled for paging requests.")
		return o, nil, &e
	}
	return o, args, nil
}

// project keeps the requested fields of a rendered object (and _ref).
func (c *request) project(full map[string]any, o options) (map[string]any, *wapiError) {
	sc := schemas[c.typ]
	fields := sc.basic
	if o.returnFields != nil {
		fields = o.returnFields
		if o.plus {
			fields = append(slices.Clone(sc.basic), o.returnFields...)
		}
	}
	out := map[string]any{"_ref": full["_ref"]}
	for _, f := range fields {
		if !slices.Contains(sc.readable, f) {
			e := errUnknownField(f)
			return nil, &e
		}
		if v, ok := full[f]; ok {
			out[f] = v
		}
	}
	return out, nil
}

// get answers GET <ref>.
func (c *request) get() response {
	o, _, werr := c.parseOptions()
	if werr != nil {
		return errResponse(*werr)
	}
	full, ok := c.lookupRendered(c.ref)
	if !ok {
		return errResponse(errRefNotFound(c.ref))
	}
	out, werr := c.project(full, o)
	if werr != nil {
		return errResponse(*werr)
	}
	if o.asObject {
		return response{http.StatusOK, map[string]any{"result": out}}
	}
	return response{http.StatusOK, out}
}

// lookupRendered renders the object behind a reference, computed address
// objects included.
func (c *request) lookupRendered(ref string) (map[string]any, bool) {
	st := c.s.db
	if o, ok := st.get(ref); ok && o.typ == c.typ {
		return st.render(o), true
	}
	if c.typ == typeIPv4Address || c.typ == typeIPv6Address {
		if a, view, ok := st.parseAddressRef(ref); ok {
			if n := st.networkContaining(view, a); n != nil {
				return st.renderAddress(n, a), true
			}
		}
	}
	return nil, false
}

// filter is one parsed search argument: field[modifiers]=value. The WAPI
// modifiers are '!' (negate), ':' (case-insensitive), and at most one of
// '~' (unanchored regular expression), '<' (less than or equal) and '>'
// (greater than or equal); '!' and ':' combine with the others, in any
// order ("name!:~=x"). '*' before the name searches an extensible
// attribute.
type filter struct {
	field string
	ea    bool
	eaInt bool // the EA is of type INTEGER: '<' and '>' compare numbers
	neg   bool // '!'
	ci    bool // ':'
	op    byte // '=', '~', '<' or '>'
	vals  []string
	re    []*regexp.Regexp
}

// exact reports whether the filter is a plain "field=value".
func (f filter) exact() bool { return !f.neg && !f.ci && f.op == '=' }

// parseModifiers splits "name!:~" into the field name and its modifiers.
func parseModifiers(k string) (filter, bool) {
	f := filter{op: '='}
	i := len(k)
	for i > 1 && strings.ContainsRune("!:~<>", rune(k[i-1])) {
		i--
	}
	f.field = k[:i]
	for _, m := range k[i:] {
		switch m {
		case '!':
			if f.neg {
				return f, false
			}
			f.neg = true
		case ':':
			if f.ci {
				return f, false
			}
			f.ci = true
		default:
			if f.op != '=' {
				return f, false
			}
			f.op = byte(m)
		}
	}
	return f, true
}

// modString renders the modifiers as sent, for error texts.
func (f filter) modString() string {
	m := ""
	if f.neg {
		m += "!"
	}
	if f.ci {
		m += ":"
	}
	if f.op != '=' {
		m += string(f.op)
	}
	return m + "="
}

func (c *request) parseFilters(args map[string][]string) ([]filter, *wapiError) {
	sc := schemas[c.typ]
	var out []filter
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f, ok := parseModifiers(k)
		if !ok {
			// Best guess text: more than one of '~', '<', '>'.
			e := errProto("Invalid search modifier combination: %s", k)
			return nil, &e
		}
		f.vals = args[k]
		if name, isEA := strings.CutPrefix(f.field, "*"); isEA {
			f.field, f.ea = name, true
			def := c.s.db.eaDef(name)
			if def == nil {
				// Best guess: the same text NIOS uses for an undefined EA
				// on create.
				e := errUnknownEA(name)
				return nil, &e
			}
			f.eaInt = def.eaType == "INTEGER"
			if (f.op == '<' || f.op == '>') && !f.eaInt {
				// Best guess text: WAPI allows '<' and '>' only on
				// INTEGER (and DATE, not simulated) attributes.
				e := errProto("Search modifier '%s' not allowed for field: %s", f.modString(), name)
				return nil, &e
			}
			if f.eaInt && (f.op == '<' || f.op == '>') {
				for _, v := range f.vals {
					if _, err := strconv.ParseInt(v, 10, 64); err != nil {
						e := errInvalidValue(k, v)
						return nil, &e
					}
				}
			}
		} else {
			mods, searchable := sc.search[f.field]
			allowed := (f.op == '=' && (f.ci || strings.ContainsRune(mods, '='))) ||
				(f.op != '=' && strings.ContainsRune(mods, rune(f.op)))
			if f.ci && !strings.ContainsRune(mods, ':') {
				allowed = false
			}
			switch {
			case !searchable && slices.Contains(sc.readable, f.field):
				e := errNotSearchable(f.field)
				return nil, &e
			case !searchable:
				e := errUnknownField(f.field)
				return nil, &e
			case !allowed:
				// Best guess text.
				e := errProto("Search modifier '%s' not allowed for field: %s", f.modString(), f.field)
				return nil, &e
			}
		}
		if f.op == '~' {
			for _, v := range f.vals {
				expr := v
				if f.ci {
					expr = "(?i)" + v
				}
				re, err := regexp.Compile(expr)
				if err != nil {
					e := errInvalidValue(k, v)
					return nil, &e
				}
				f.re = append(f.re, re)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// match reports whether a rendered object satisfies every filter.
func match(full map[string]any, eas map[string]any, fs []filter) bool {
	for _, f := range fs {
		var have []string
		if f.ea {
			if v, ok := eas[f.field]; ok {
				have = []string{eaString(v)}
			}
		} else {
			have = searchValues(full, f.field)
		}
		if !matchOne(have, f) {
			return false
		}
	}
	return true
}

// searchValues extracts the comparable values of a field. Host records are
// searched by the addresses and MACs of their ipv4addrs/ipv6addrs.
func searchValues(full map[string]any, field string) []string {
	if field == "ipv4addr" || field == "ipv6addr" || field == "mac" {
		if s, ok := full[field].(string); ok {
			return []string{s}
		}
		var out []string
		for _, list := range []string{"ipv4addrs", "ipv6addrs"} {
			entries, _ := full[list].([]any)
			for _, e := range entries {
				if s, ok := e.(map[string]any)[field].(string); ok {
					out = append(out, s)
				}
			}
		}
		return out
	}
	switch v := full[field].(type) {
	case string:
		return []string{v}
	case bool:
		return []string{strconv.FormatBool(v)}
	case []string:
		return v
	case nil:
		return nil
	default:
		return []string{eaString(v)}
	}
}

// matchOne reports whether any of the object's values matches any of the
// filter's values (repeated arguments are alternatives); a negated filter
// matches when none does.
func matchOne(have []string, f filter) bool {
	hit := false
	for _, h := range have {
		for i, v := range f.vals {
			if matchValue(h, v, i, f) {
				hit = true
			}
		}
	}
	return hit != f.neg
}

func matchValue(h, v string, i int, f filter) bool {
	switch f.op {
	case '~':
		return f.re[i].MatchString(h)
	case '<', '>':
		if f.eaInt {
			x, err1 := strconv.ParseInt(h, 10, 64)
			y, err2 := strconv.ParseInt(v, 10, 64)
			return err1 == nil && err2 == nil && (f.op == '<' && x <= y || f.op == '>' && x >= y)
		}
		return cmpAddr(h, v, f.op)
	}
	if f.ci {
		return strings.EqualFold(h, v)
	}
	return h == v || sameAddr(h, v) || strings.EqualFold(h, v) && (v == "true" || v == "false")
}

// sameAddr compares addresses and prefixes by value, so that
// "2001:db8::0005" finds "2001:db8::5".
func sameAddr(a, b string) bool {
	if x, err := netip.ParseAddr(a); err == nil {
		y, err := netip.ParseAddr(b)
		return err == nil && x == y
	}
	if x, err := netip.ParsePrefix(a); err == nil {
		y, err := netip.ParsePrefix(b)
		return err == nil && x == y
	}
	return false
}

// cmpAddr implements the '<=' and '>=' modifiers on addresses.
func cmpAddr(have, bound string, mod byte) bool {
	h, err1 := netip.ParseAddr(strings.Split(have, "/")[0])
	b, err2 := netip.ParseAddr(strings.Split(bound, "/")[0])
	if err1 != nil || err2 != nil || h.Is4() != b.Is4() {
		return false
	}
	if mod == '<' {
		return h.Compare(b) <= 0
	}
	return h.Compare(b) >= 0
}

// search answers GET <objtype>?args.
func (c *request) search() response {
	o, args, werr := c.parseOptions()
	if werr != nil {
		return errResponse(*werr)
	}
	st := c.s.db
	if o.pageID != "" {
		p, ok := st.pages[o.pageID]
		if ok && c.s.now().After(p.expires) {
			delete(st.pages, o.pageID)
			ok = false
		}
		if !ok {
			// Best guess text.
			return errResponse(errProto("Page id %s is invalid or expired", o.pageID))
		}
		delete(st.pages, o.pageID)
		return c.page(p.results, o)
	}
	fs, werr := c.parseFilters(args)
	if werr != nil {
		return errResponse(*werr)
	}
	limit := o.maxResults
	if limit < 0 {
		limit = -limit
	}
	// Collect one more than the limit to detect an oversized result.
	var results []map[string]any
	add := func(full map[string]any, eas map[string]any) bool {
		if !match(full, eas, fs) {
			return true
		}
		p, werr2 := c.project(full, o)
		if werr2 != nil {
			werr = werr2
			return false
		}
		results = append(results, p)
		if o.paging {
			return len(results) <= maxPagedResults
		}
		return len(results) <= limit
	}
	if c.typ == typeIPv4Address || c.typ == typeIPv6Address {
		c.eachAddress(fs, func(full map[string]any) bool { return add(full, nil) })
	} else {
		for _, obj := range st.list(c.typ) {
			if !add(st.render(obj), obj.eas) {
				break
			}
		}
	}
	if werr != nil {
		return errResponse(*werr)
	}
	if o.paging {
		return c.page(results, o)
	}
	if len(results) > limit {
		if o.maxResults < 0 {
			return errResponse(errTooLarge(limit))
		}
		results = results[:limit]
	}
	if results == nil {
		results = []map[string]any{}
	}
	if o.asObject {
		return response{http.StatusOK, map[string]any{"result": results}}
	}
	return response{http.StatusOK, results}
}

// page returns one page of a paged search and parks the rest under a new
// page id, as WAPI's _paging=1 does ({"result": [...], "next_page_id": id}).
func (c *request) page(results []map[string]any, o options) response {
	size := o.maxResults
	if size < 0 {
		size = -size
	}
	body := map[string]any{}
	if len(results) > size {
		id := make([]byte, 12)
		_, _ = rand.Read(id)
		pid := "789c" + hex.EncodeToString(id)
		c.s.db.pages[pid] = parkedPage{results: results[size:], expires: c.s.now().Add(c.s.pageTTL)}
		body["next_page_id"] = pid
		results = results[:size]
	}
	if results == nil {
		results = []map[string]any{}
	}
	body["result"] = results
	return response{http.StatusOK, body}
}

// eachAddress enumerates the computed address objects a search may match:
// every address of the networks the search names (all networks of the
// family otherwise), in address order. A search for status=USED visits only
// used addresses, so that large networks stay cheap. fn returns false to
// stop.
func (c *request) eachAddress(fs []filter, fn func(map[string]any) bool) {
	st := c.s.db
	var want6 = c.typ == typeIPv6Address
	var lo, hi netip.Addr
	usedOnly := false
	var networks, views []string
	for _, f := range fs {
		switch {
		case f.field == "network" && f.exact():
			networks = f.vals
		case f.field == "network_view" && f.exact():
			views = f.vals
		case f.field == "status" && f.exact() && len(f.vals) == 1 && f.vals[0] == "USED":
			usedOnly = true
		case f.field == "ip_address" && f.op == '>' && !f.neg:
			lo, _ = netip.ParseAddr(f.vals[0])
		case f.field == "ip_address" && f.op == '<' && !f.neg:
			hi, _ = netip.ParseAddr(f.vals[0])
		case f.field == "ip_address" && f.exact() && len(f.vals) == 1:
			lo, _ = netip.ParseAddr(f.vals[0])
			hi = lo
		}
	}
	typ := typeNetwork
	if want6 {
		typ = typeNetwork6
	}
	for _, n := range st.list(typ) {
		if len(networks) > 0 && !slices.ContainsFunc(networks, func(s string) bool { return sameAddr(s, n.prefix.String()) }) {
			continue
		}
		if len(views) > 0 && !slices.Contains(views, n.netView) {
			continue
		}
		// Only the innermost network reports an address.
		first, last := n.prefix.Addr(), lastAddr(n.prefix)
		if lo.IsValid() && lo.Is6() == want6 && lo.Compare(first) > 0 {
			first = lo
		}
		if hi.IsValid() && hi.Is6() == want6 && hi.Compare(last) < 0 {
			last = hi
		}
		if first.Compare(last) > 0 {
			continue
		}
		if usedOnly {
			var addrs []netip.Addr
			for a := range st.usedAddrs(n.netView) {
				if inSpan(a, first, last) && st.networkContaining(n.netView, a) == n {
					addrs = append(addrs, a)
				}
			}
			if first.Is4() && n.prefix.Bits() < 31 {
				for _, a := range []netip.Addr{n.prefix.Addr(), lastAddr(n.prefix)} {
					if inSpan(a, first, last) && !slices.Contains(addrs, a) {
						addrs = append(addrs, a)
					}
				}
			}
			slices.SortFunc(addrs, netip.Addr.Compare)
			for _, a := range addrs {
				if !fn(st.renderAddress(n, a)) {
					return
				}
			}
			continue
		}
		for a := first; a.IsValid() && a.Compare(last) <= 0; a = a.Next() {
			if st.networkContaining(n.netView, a) != n {
				continue
			}
			if !fn(st.renderAddress(n, a)) {
				return
			}
		}
	}
}
