package netboxsim

import (
	"fmt"
	"slices"
	"sort"
)

// Prefix roles and scopes: a prefix may have a role (ipam.Role) and, since
// NetBox 4.2, a scope (scope_type and scope_id): one of the objects of
// scopeTypes. The simulator keeps their name and slug, which is what a
// pool names them by.

// scopeTypes are the content types a prefix may be scoped to
// (PREFIX_SCOPE_TYPES), with the API path that lists their objects.
var scopeTypes = map[string]string{
	"dcim.region":    "dcim/regions",
	"dcim.sitegroup": "dcim/site-groups",
	"dcim.site":      "dcim/sites",
	"dcim.location":  "dcim/locations",
}

type namedJSON struct {
	ID           int32           `json:"id"`
	URL          string          `json:"url"`
	DisplayURL   string          `json:"display_url"`
	Display      string          `json:"display"`
	Name         string          `json:"name"`
	Slug         string          `json:"slug"`
	Description  string          `json:"description"`
	Tags         []nestedTagJSON `json:"tags"`
	CustomFields map[string]any  `json:"custom_fields"`
	Created      string          `json:"created"`
	LastUpdated  string          `json:"last_updated"`
}

// briefNamedJSON is how a prefix renders its role and its scope.
type briefNamedJSON = briefTenantJSON

func (r renderer) named(apiPath, objectType string, o *namedObj) namedJSON {
	u, d := r.urls(apiPath, o.id)
	return namedJSON{ID: o.id, URL: u, DisplayURL: d, Display: o.name, Name: o.name, Slug: o.slug, Description: o.description,
		Tags: []nestedTagJSON{}, CustomFields: r.customFields(objectType, nil), Created: pyTime(o.created), LastUpdated: pyTime(o.created)}
}

func (r renderer) briefNamed(apiPath string, o *namedObj) *briefNamedJSON {
	if o == nil {
		return nil
	}
	u, _ := r.urls(apiPath, o.id)
	return &briefNamedJSON{ID: o.id, URL: u, Display: o.name, Name: o.name, Slug: o.slug, Description: o.description}
}

// prefixRoleAndScope renders a prefix's role and scope as NetBox does.
func (r renderer) prefixRoleAndScope(p *prefixObj, j *prefixJSON) {
	if role, ok := r.st.roles[p.role]; ok {
		j.Role = r.briefNamed("ipam/roles", role)
	}
	if p.scopeType != "" {
		scopeType, id := p.scopeType, p.scopeID
		j.ScopeType, j.ScopeID = &scopeType, &id
		j.Scope = r.briefNamed(scopeTypes[p.scopeType], r.st.scopes[p.scopeType][p.scopeID])
	}
}

// listNamed lists the objects of m (roles, or one scope type's), filtered
// by id, name and slug as NetBox's filter sets do.
func listNamed(apiPath, objectType string, m func(*store) map[int32]*namedObj) handler {
	return func(c *reqCtx) response {
		f := newFilterSet(c.r)
		var preds []func(*namedObj) bool
		if ids, ok := f.numbers("id"); ok {
			preds = append(preds, func(o *namedObj) bool { return containsID(ids, o.id) })
		}
		if names := f.values("name"); names != nil {
			preds = append(preds, func(o *namedObj) bool { return slices.Contains(names, o.name) })
		}
		if slugs := f.values("slug"); slugs != nil {
			preds = append(preds, func(o *namedObj) bool { return slices.Contains(slugs, o.slug) })
		}
		if resp, bad := f.failed(); bad {
			return resp
		}
		return paginate(c, filter(namedList(m(c.st())), preds), func(o *namedObj) any { return c.rend.named(apiPath, objectType, o) })
	}
}

func getNamed(apiPath, objectType, model string, m func(*store) map[int32]*namedObj) handler {
	return func(c *reqCtx) response {
		return getOne(c, m(c.st()), model, func(o *namedObj) any { return c.rend.named(apiPath, objectType, o) })
	}
}

// namedRoutes serves the roles and every scope type's objects.
func namedRoutes(get func(handler) map[string]handler) []route {
	routes := []route{
		{segs: split("api/ipam/roles"), methods: get(listNamed("ipam/roles", "ipam.role", func(st *store) map[int32]*namedObj { return st.roles }))},
		{segs: split("api/ipam/roles/{id}"), methods: get(getNamed("ipam/roles", "ipam.role", "Role", func(st *store) map[int32]*namedObj { return st.roles }))},
	}
	types := make([]string, 0, len(scopeTypes))
	for t := range scopeTypes {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		path := scopeTypes[t]
		objects := func(st *store) map[int32]*namedObj { return st.scopeObjects(t) }
		routes = append(routes,
			route{segs: split("api/" + path), methods: get(listNamed(path, t, objects))},
			route{segs: split("api/" + path + "/{id}"), methods: get(getNamed(path, t, t, objects))})
	}
	return routes
}

// scopeObjects are the objects of one scope type, made on first use.
func (st *store) scopeObjects(scopeType string) map[int32]*namedObj {
	m, ok := st.scopes[scopeType]
	if !ok {
		m = map[int32]*namedObj{}
		st.scopes[scopeType] = m
	}
	return m
}

// AddRole creates a prefix and VLAN role.
func (s *Server) AddRole(name, slug string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &namedObj{id: s.db.nextID("role"), name: name, slug: slug, created: now()}
	s.db.roles[r.id] = r
	return r.id
}

// AddScope creates an object a prefix may be scoped to: scopeType is
// dcim.site, dcim.location, dcim.region or dcim.sitegroup.
func (s *Server) AddScope(scopeType, name, slug string) int32 {
	if _, ok := scopeTypes[scopeType]; !ok {
		panic(fmt.Sprintf("netboxsim: %q is not a prefix scope type", scopeType))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &namedObj{id: s.db.nextID(scopeType), name: name, slug: slug, created: now()}
	s.db.scopeObjects(scopeType)[o.id] = o
	return o.id
}

// buildScope validates a prefix write's scope_type and scope_id, as
// NetBox 4.7's serializer and Prefix.clean() do, into p.
func (st *store) buildScope(obj map[string]any, p *prefixObj, errs fieldErrors) {
	scopeType, scopeID := p.scopeType, p.scopeID
	if v, ok := obj["scope_type"]; ok {
		switch s, isString := v.(string); {
		case v == nil:
			scopeType = ""
		case !isString:
			errs.add("scope_type", fmt.Sprintf("Incorrect type. Expected content type string identifier, received %s.", pyTypeName(v)))
			return
		default:
			if _, known := scopeTypes[s]; !known {
				errs.add("scope_type", "Invalid content type: "+s)
				return
			}
			scopeType = s
		}
	}
	if v, ok := obj["scope_id"]; ok {
		if v == nil {
			scopeID = 0
		} else if n, isInt := pyInt(v); isInt {
			scopeID = int32(n)
		} else {
			errs.add("scope_id", "A valid integer is required.")
			return
		}
	}
	switch {
	case scopeType == "" && scopeID != 0:
		errs.add("scope_type", "This field cannot be null.")
		return
	case scopeType != "" && scopeID == 0:
		errs.add("scope_id", "This field cannot be null.")
		return
	case scopeType != "":
		if _, found := st.scopeObjects(scopeType)[scopeID]; !found {
			errs.add("scope_id", fmt.Sprintf("Related object not found using the provided value: %d.", scopeID))
			return
		}
	}
	p.scopeType, p.scopeID = scopeType, scopeID
}
