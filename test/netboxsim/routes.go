package netboxsim

import (
	"net/http"
	"strings"
)

type handler func(c *reqCtx) response

// route is a URL pattern. "{id}" matches what DRF's router accepts
// ([^/.]+); "{pk}" only digits, like Django's <int:pk> on available-ips.
type route struct {
	segs    []string
	methods map[string]handler
}

func (s *Server) buildRoutes() []route {
	get := func(h handler) map[string]handler { return map[string]handler{http.MethodGet: h} }
	return append([]route{
		{segs: split("api"), methods: get(apiRoot)},
		{segs: split("api/status"), methods: get(getStatus)},
		{segs: split("api/ipam/vrfs"), methods: get(listVRFs)},
		{segs: split("api/ipam/vrfs/{id}"), methods: get(getVRF)},
		{segs: split("api/tenancy/tenants"), methods: get(listTenants)},
		{segs: split("api/tenancy/tenants/{id}"), methods: get(getTenant)},
		{segs: split("api/extras/tags"), methods: map[string]handler{http.MethodGet: listTags, http.MethodPost: createTags}},
		{segs: split("api/extras/tags/{id}"), methods: get(getTag)},
		{segs: split("api/extras/custom-fields"), methods: map[string]handler{http.MethodGet: listCustomFields, http.MethodPost: createCustomFields}},
		{segs: split("api/extras/custom-fields/{id}"), methods: get(getCustomField)},
		{segs: split("api/ipam/prefixes"), methods: map[string]handler{
			http.MethodGet: listPrefixes, http.MethodPost: createPrefixes, http.MethodDelete: bulkDeletePrefixes}},
		{segs: split("api/ipam/prefixes/{id}"), methods: map[string]handler{
			http.MethodGet: getPrefix, http.MethodPatch: updatePrefix, http.MethodPut: updatePrefix, http.MethodDelete: deletePrefix}},
		{segs: split("api/ipam/prefixes/{pk}/available-prefixes"), methods: map[string]handler{
			http.MethodGet: listAvailablePrefixes, http.MethodPost: allocatePrefixes}},
		{segs: split("api/ipam/prefixes/{pk}/available-ips"), methods: map[string]handler{
			http.MethodGet: listPrefixAvailableIPs, http.MethodPost: allocatePrefixIPs}},
		{segs: split("api/ipam/ip-ranges"), methods: get(listRanges)},
		{segs: split("api/ipam/ip-ranges/{id}"), methods: get(getRange)},
		{segs: split("api/ipam/ip-ranges/{pk}/available-ips"), methods: map[string]handler{
			http.MethodGet: listRangeAvailableIPs, http.MethodPost: allocateRangeIPs}},
		{segs: split("api/ipam/ip-addresses"), methods: map[string]handler{
			http.MethodGet: listIPs, http.MethodPost: createIPs, http.MethodDelete: bulkDeleteIPs}},
		{segs: split("api/ipam/ip-addresses/{id}"), methods: map[string]handler{
			http.MethodGet: getIP, http.MethodPatch: updateIP, http.MethodPut: updateIP, http.MethodDelete: deleteIP}},
	}, namedRoutes(get)...)
}

func split(p string) []string { return strings.Split(p, "/") }

// match finds the route for a path, which must end with a slash.
func (s *Server) match(path string) (*route, string, bool) {
	if !strings.HasPrefix(path, "/") || !strings.HasSuffix(path, "/") || len(path) < 2 {
		return nil, "", false
	}
	segs := strings.Split(path[1:len(path)-1], "/")
	for i := range s.routes {
		rt := &s.routes[i]
		if id, ok := matchSegs(rt.segs, segs); ok {
			return rt, id, true
		}
	}
	return nil, "", false
}

func matchSegs(pattern, segs []string) (string, bool) {
	if len(pattern) != len(segs) {
		return "", false
	}
	id := ""
	for i, p := range pattern {
		switch p {
		case "{id}":
			if segs[i] == "" || strings.Contains(segs[i], ".") {
				return "", false
			}
			id = segs[i]
		case "{pk}":
			if segs[i] == "" || strings.Trim(segs[i], "0123456789") != "" {
				return "", false
			}
			id = segs[i]
		default:
			if p != segs[i] {
				return "", false
			}
		}
	}
	return id, true
}
