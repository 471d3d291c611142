package netboxsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"time"
)

// JSON shapes of the NetBox 4.3 serializers. Field order follows NetBox so
// that dumps read the same; go-netbox needs every required key present.

type choiceJSON struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

type familyJSON struct {
	Value int    `json:"value"`
	Label string `json:"label"`
}

type briefVRFJSON struct {
	ID          int32   `json:"id"`
	URL         string  `json:"url"`
	Display     string  `json:"display"`
	Name        string  `json:"name"`
	RD          *string `json:"rd"`
	Description string  `json:"description"`
}

type briefTenantJSON struct {
	ID          int32  `json:"id"`
	URL         string `json:"url"`
	Display     string `json:"display"`
	Name        string `json:"name"`
	Slug        string `json:"slug"`
	Description string `json:"description"`
}

type nestedTagJSON struct {
	ID         int32  `json:"id"`
	URL        string `json:"url"`
	DisplayURL string `json:"display_url"`
	Display    string `json:"display"`
	Name       string `json:"name"`
	Slug       string `json:"slug"`
	Color      string `json:"color"`
}

type ipJSON struct {
	ID                 int32            `json:"id"`
	URL                string           `json:"url"`
	DisplayURL         string           `json:"display_url"`
	Display            string           `json:"display"`
	Family             familyJSON       `json:"family"`
	Address            string           `json:"address"`
	VRF                *briefVRFJSON    `json:"vrf"`
	Tenant             *briefTenantJSON `json:"tenant"`
	Status             choiceJSON       `json:"status"`
	Role               *choiceJSON      `json:"role"`
	AssignedObjectType *string          `json:"assigned_object_type"`
	AssignedObjectID   *int64           `json:"assigned_object_id"`
	AssignedObject     any              `json:"assigned_object"`
	NATInside          any              `json:"nat_inside"`
	NATOutside         []any            `json:"nat_outside"`
	DNSName            string           `json:"dns_name"`
	Description        string           `json:"description"`
	Owner              any              `json:"owner"` // NetBox 4.5+; always null here
	Comments           string           `json:"comments"`
	Tags               []nestedTagJSON  `json:"tags"`
	CustomFields       map[string]any   `json:"custom_fields"`
	Created            string           `json:"created"`
	LastUpdated        string           `json:"last_updated"`
}

type prefixJSON struct {
	ID           int32           `json:"id"`
	URL          string          `json:"url"`
	DisplayURL   string          `json:"display_url"`
	Display      string          `json:"display"`
	Family       familyJSON      `json:"family"`
	Prefix       string          `json:"prefix"`
	VRF          *briefVRFJSON   `json:"vrf"`
	ScopeType    *string         `json:"scope_type"`
	ScopeID      *int32          `json:"scope_id"`
	Scope        any             `json:"scope"`
	Tenant       any             `json:"tenant"`
	VLAN         any             `json:"vlan"`
	Status       choiceJSON      `json:"status"`
	Role         any             `json:"role"`
	IsPool       bool            `json:"is_pool"`
	MarkUtilized bool            `json:"mark_utilized"`
	Description  string          `json:"description"`
	Owner        any             `json:"owner"` // NetBox 4.5+; always null here
	Comments     string          `json:"comments"`
	Tags         []nestedTagJSON `json:"tags"`
	CustomFields map[string]any  `json:"custom_fields"`
	Created      string          `json:"created"`
	LastUpdated  string          `json:"last_updated"`
	Children     int             `json:"children"`
	Depth        int             `json:"_depth"`
}

type rangeJSON struct {
	ID            int32           `json:"id"`
	URL           string          `json:"url"`
	DisplayURL    string          `json:"display_url"`
	Display       string          `json:"display"`
	Family        familyJSON      `json:"family"`
	StartAddress  string          `json:"start_address"`
	EndAddress    string          `json:"end_address"`
	Size          int64           `json:"size"`
	VRF           *briefVRFJSON   `json:"vrf"`
	Tenant        any             `json:"tenant"`
	Status        choiceJSON      `json:"status"`
	Role          any             `json:"role"`
	Description   string          `json:"description"`
	Owner         any             `json:"owner"` // NetBox 4.5+; always null here
	Comments      string          `json:"comments"`
	Tags          []nestedTagJSON `json:"tags"`
	CustomFields  map[string]any  `json:"custom_fields"`
	Created       string          `json:"created"`
	LastUpdated   string          `json:"last_updated"`
	MarkPopulated bool            `json:"mark_populated"`
	MarkUtilized  bool            `json:"mark_utilized"`
}

type vrfJSON struct {
	ID             int32           `json:"id"`
	URL            string          `json:"url"`
	DisplayURL     string          `json:"display_url"`
	Display        string          `json:"display"`
	Name           string          `json:"name"`
	RD             *string         `json:"rd"`
	Tenant         any             `json:"tenant"`
	EnforceUnique  bool            `json:"enforce_unique"`
	Description    string          `json:"description"`
	Comments       string          `json:"comments"`
	ImportTargets  []any           `json:"import_targets"`
	ExportTargets  []any           `json:"export_targets"`
	Tags           []nestedTagJSON `json:"tags"`
	CustomFields   map[string]any  `json:"custom_fields"`
	Created        string          `json:"created"`
	LastUpdated    string          `json:"last_updated"`
	IPAddressCount int             `json:"ipaddress_count"`
	PrefixCount    int             `json:"prefix_count"`
}

type tenantJSON struct {
	ID           int32           `json:"id"`
	URL          string          `json:"url"`
	DisplayURL   string          `json:"display_url"`
	Display      string          `json:"display"`
	Name         string          `json:"name"`
	Slug         string          `json:"slug"`
	Group        any             `json:"group"`
	Description  string          `json:"description"`
	Comments     string          `json:"comments"`
	Tags         []nestedTagJSON `json:"tags"`
	CustomFields map[string]any  `json:"custom_fields"`
	Created      string          `json:"created"`
	LastUpdated  string          `json:"last_updated"`
}

type tagJSON struct {
	ID          int32    `json:"id"`
	URL         string   `json:"url"`
	DisplayURL  string   `json:"display_url"`
	Display     string   `json:"display"`
	Name        string   `json:"name"`
	Slug        string   `json:"slug"`
	Color       string   `json:"color"`
	Description string   `json:"description"`
	Weight      int      `json:"weight"`
	ObjectTypes []string `json:"object_types"`
	TaggedItems int      `json:"tagged_items"`
	Created     string   `json:"created"`
	LastUpdated string   `json:"last_updated"`
}

type customFieldJSON struct {
	ID                  int32      `json:"id"`
	URL                 string     `json:"url"`
	DisplayURL          string     `json:"display_url"`
	Display             string     `json:"display"`
	ObjectTypes         []string   `json:"object_types"`
	Type                choiceJSON `json:"type"`
	RelatedObjectType   *string    `json:"related_object_type"`
	DataType            string     `json:"data_type"`
	Name                string     `json:"name"`
	Label               string     `json:"label"`
	GroupName           string     `json:"group_name"`
	Description         string     `json:"description"`
	Owner               any        `json:"owner"`
	NullsFirst          bool       `json:"nulls_first"`
	Status              choiceJSON `json:"status"`
	ValidationSchema    any        `json:"validation_schema"`
	Required            bool       `json:"required"`
	Unique              bool       `json:"unique"`
	SearchWeight        int        `json:"search_weight"`
	FilterLogic         choiceJSON `json:"filter_logic"`
	UIVisible           choiceJSON `json:"ui_visible"`
	UIEditable          choiceJSON `json:"ui_editable"`
	IsCloneable         bool       `json:"is_cloneable"`
	Default             any        `json:"default"`
	RelatedObjectFilter any        `json:"related_object_filter"`
	Weight              int        `json:"weight"`
	ValidationMinimum   *int64     `json:"validation_minimum"`
	ValidationMaximum   *int64     `json:"validation_maximum"`
	ValidationRegex     string     `json:"validation_regex"`
	ChoiceSet           any        `json:"choice_set"`
	Comments            string     `json:"comments"`
	Created             string     `json:"created"`
	LastUpdated         string     `json:"last_updated"`
}

type availablePrefixJSON struct {
	Family int           `json:"family"`
	Prefix string        `json:"prefix"`
	VRF    *briefVRFJSON `json:"vrf"`
}

type availableIPJSON struct {
	Family  int           `json:"family"`
	Address string        `json:"address"`
	VRF     *briefVRFJSON `json:"vrf"`
}

type pageJSON struct {
	Count    int     `json:"count"`
	Next     *string `json:"next"`
	Previous *string `json:"previous"`
	Results  []any   `json:"results"`
}

// pyTime formats a timestamp as DRF does: isoformat() with "Z", which drops
// the fraction when it is zero.
func pyTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02T15:04:05.000000Z")
}

func family(a netip.Addr) familyJSON {
	if a.Is4() {
		return familyJSON{4, "IPv4"}
	}
	return familyJSON{6, "IPv6"}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// renderer turns stored objects into API JSON; base is the scheme and host
// the client used, since NetBox builds absolute URLs from the request.
type renderer struct {
	base string
	st   *store
}

func (r renderer) urls(apiPath string, id int32) (string, string) {
	return fmt.Sprintf("%s/api/%s/%d/", r.base, apiPath, id), fmt.Sprintf("%s/%s/%d/", r.base, apiPath, id)
}

func (r renderer) briefVRF(id int32) *briefVRFJSON {
	v, ok := r.st.vrfs[id]
	if !ok {
		return nil
	}
	u, _ := r.urls("ipam/vrfs", v.id)
	return &briefVRFJSON{ID: v.id, URL: u, Display: v.String(), Name: v.name, RD: nullable(v.rd), Description: v.description}
}

func (r renderer) briefTenant(id int32) *briefTenantJSON {
	t, ok := r.st.tenants[id]
	if !ok {
		return nil
	}
	u, _ := r.urls("tenancy/tenants", t.id)
	return &briefTenantJSON{ID: t.id, URL: u, Display: t.name, Name: t.name, Slug: t.slug, Description: t.description}
}

// tags renders assigned tags in the TaggableManager order (weight, name).
func (r renderer) tags(ids []int32) []nestedTagJSON {
	out := []nestedTagJSON{}
	for _, t := range r.st.tagList() {
		for _, id := range ids {
			if id == t.id {
				u, d := r.urls("extras/tags", t.id)
				out = append(out, nestedTagJSON{ID: t.id, URL: u, DisplayURL: d, Display: t.name, Name: t.name, Slug: t.slug, Color: t.color})
			}
		}
	}
	return out
}

// customFields renders every custom field defined for the object type, null
// when unset, and hides stale data of fields that no longer exist.
func (r renderer) customFields(objectType string, data map[string]any) map[string]any {
	out := map[string]any{}
	for _, cf := range r.st.customFieldsFor(objectType) {
		out[cf.name] = deepCopy(data[cf.name])
	}
	return out
}

func (r renderer) ip(ip *ipObj) ipJSON {
	u, d := r.urls("ipam/ip-addresses", ip.id)
	j := ipJSON{
		ID: ip.id, URL: u, DisplayURL: d, Display: ip.addr.String(), Family: family(ip.addr.Addr()),
		Address: ip.addr.String(), VRF: r.briefVRF(ip.vrf), Tenant: r.briefTenant(ip.tenant),
		Status:     choiceJSON{ip.status, ipStatusLabels[ip.status]},
		NATOutside: []any{}, DNSName: ip.dnsName, Description: ip.description, Comments: ip.comments,
		Tags: r.tags(ip.tags), CustomFields: r.customFields("ipam.ipaddress", ip.cf),
		Created: pyTime(ip.created), LastUpdated: pyTime(ip.updated),
	}
	if ip.role != "" {
		j.Role = &choiceJSON{ip.role, ipRoleLabels[ip.role]}
	}
	return j
}

func (r renderer) prefix(p *prefixObj) prefixJSON {
	u, d := r.urls("ipam/prefixes", p.id)
	j := prefixJSON{
		ID: p.id, URL: u, DisplayURL: d, Display: p.prefix.String(), Family: family(p.prefix.Addr()),
		Prefix: p.prefix.String(), VRF: r.briefVRF(p.vrf), Tenant: r.briefTenant(p.tenant),
		Status: choiceJSON{p.status, prefixStatusLabels[p.status]}, IsPool: p.isPool, MarkUtilized: p.markUtilized,
		Description: p.description, Comments: p.comments,
		Tags: r.tags(p.tags), CustomFields: r.customFields("ipam.prefix", p.cf),
		Created: pyTime(p.created), LastUpdated: pyTime(p.updated),
	}
	r.prefixRoleAndScope(p, &j)
	// _children and _depth are cached counts of nested prefixes in the same VRF.
	for _, o := range r.st.prefixes {
		if o.id == p.id || o.vrf != p.vrf || o.prefix.Addr().BitLen() != p.prefix.Addr().BitLen() {
			continue
		}
		switch {
		case o.prefix.Bits() > p.prefix.Bits() && p.prefix.Contains(o.prefix.Addr()):
			j.Children++
		case o.prefix.Bits() < p.prefix.Bits() && o.prefix.Contains(p.prefix.Addr()):
			j.Depth++
		}
	}
	return j
}

// newPrefix renders a prefix just created as NetBox answers it: the
// in-memory instance, whose cached children and _depth its signals count
// only after the save (a later read shows them).
func (r renderer) newPrefix(p *prefixObj) prefixJSON {
	j := r.prefix(p)
	j.Children, j.Depth = 0, 0
	return j
}

func (r renderer) ipRange(g *rangeObj) rangeJSON {
	u, d := r.urls("ipam/ip-ranges", g.id)
	size := new(big.Int).Sub(addrInt(g.end), addrInt(g.start))
	return rangeJSON{
		ID: g.id, URL: u, DisplayURL: d, Display: rangeName(g.start, g.end, g.bits), Family: family(g.start),
		StartAddress: netip.PrefixFrom(g.start, g.bits).String(), EndAddress: netip.PrefixFrom(g.end, g.bits).String(),
		Size: size.Int64() + 1, VRF: r.briefVRF(g.vrf),
		Status: choiceJSON{g.status, rangeStatusLabels[g.status]},
		Tags:   []nestedTagJSON{}, CustomFields: r.customFields("ipam.iprange", nil),
		Created: pyTime(g.created), LastUpdated: pyTime(g.created),
		MarkPopulated: g.markPopulated, MarkUtilized: g.markUtilized,
	}
}

func (r renderer) vrf(v *vrfObj) vrfJSON {
	u, d := r.urls("ipam/vrfs", v.id)
	j := vrfJSON{
		ID: v.id, URL: u, DisplayURL: d, Display: v.String(), Name: v.name, RD: nullable(v.rd),
		EnforceUnique: v.enforceUnique, Description: v.description, ImportTargets: []any{}, ExportTargets: []any{},
		Tags: []nestedTagJSON{}, CustomFields: r.customFields("ipam.vrf", nil),
		Created: pyTime(v.created), LastUpdated: pyTime(v.created),
	}
	for _, ip := range r.st.ips {
		if ip.vrf == v.id {
			j.IPAddressCount++
		}
	}
	for _, p := range r.st.prefixes {
		if p.vrf == v.id {
			j.PrefixCount++
		}
	}
	return j
}

func (r renderer) tenant(t *tenantObj) tenantJSON {
	u, d := r.urls("tenancy/tenants", t.id)
	return tenantJSON{
		ID: t.id, URL: u, DisplayURL: d, Display: t.name, Name: t.name, Slug: t.slug, Description: t.description,
		Tags: []nestedTagJSON{}, CustomFields: r.customFields("tenancy.tenant", nil),
		Created: pyTime(t.created), LastUpdated: pyTime(t.created),
	}
}

func (r renderer) tag(t *tagObj) tagJSON {
	u, d := r.urls("extras/tags", t.id)
	j := tagJSON{
		ID: t.id, URL: u, DisplayURL: d, Display: t.name, Name: t.name, Slug: t.slug, Color: t.color,
		Description: t.description, Weight: t.weight, ObjectTypes: append([]string{}, t.objectTypes...),
		Created: pyTime(t.created), LastUpdated: pyTime(t.updated),
	}
	for _, ip := range r.st.ips {
		for _, id := range ip.tags {
			if id == t.id {
				j.TaggedItems++
			}
		}
	}
	return j
}

func (r renderer) customField(cf *customFieldObj) customFieldJSON {
	u, d := r.urls("extras/custom-fields", cf.id)
	return customFieldJSON{
		ID: cf.id, URL: u, DisplayURL: d, Display: cf.display(), ObjectTypes: append([]string{}, cf.objectTypes...),
		Type:     choiceJSON{cf.typ, customFieldTypes[cf.typ].label},
		DataType: customFieldTypes[cf.typ].dataType, Name: cf.name, Label: cf.label, Description: cf.description,
		Required: cf.required, SearchWeight: 1000,
		FilterLogic: choiceJSON{cf.filterLogic, filterLogicLabels[cf.filterLogic]},
		UIVisible:   choiceJSON{"always", "Always"}, UIEditable: choiceJSON{"yes", "Yes"},
		Default: deepCopy(cf.def), Weight: cf.weight,
		NullsFirst: true, Status: choiceJSON{"active", "Active"},
		Created: pyTime(cf.created), LastUpdated: pyTime(cf.updated),
	}
}

// display is str(CustomField): the label, or the name with underscores as
// spaces, capitalised the Python way (rest lowercased).
func (cf *customFieldObj) display() string {
	if cf.label != "" {
		return cf.label
	}
	s := strings.ToLower(strings.ReplaceAll(cf.name, "_", " "))
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// marshal encodes like DRF's renderer: compact, no HTML escaping, no newline.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("netboxsim: encoding response: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
