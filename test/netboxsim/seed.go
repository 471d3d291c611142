package netboxsim

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
)

// PrefixOptions describes a seeded prefix.
type PrefixOptions struct {
	VRF          int32 // 0 = global table
	IsPool       bool
	MarkUtilized bool
	Status       string // default "active"
}

// RangeOptions describes a seeded IP range.
type RangeOptions struct {
	VRF           int32
	MarkPopulated bool
	MarkUtilized  bool
}

// IPOptions describes a seeded IP address.
type IPOptions struct {
	VRF          int32
	Status       string   // default "active"
	Role         string   // none by default; vip, anycast and the like may share an address
	Tags         []string // slugs of existing tags
	CustomFields map[string]any
	Description  string
	DNSName      string
}

// IPAddress is a copy of an IP address as stored by the simulator.
type IPAddress struct {
	ID           int32
	Address      string // with mask, e.g. "10.0.0.5/24"
	VRF          int32
	Tenant       int32
	Status       string
	Role         string
	DNSName      string
	Description  string
	Tags         []string // slugs
	CustomFields map[string]any
}

// Seeding helpers panic on invalid input: a broken fixture is a bug in the
// test, not a condition to handle.

// SetEnforceGlobalUnique sets NetBox's ENFORCE_GLOBAL_UNIQUE (a dynamic
// configuration parameter, True by default): false lets two IP addresses of
// the global table hold one address, as VRFs without enforce_unique do.
func (s *Server) SetEnforceGlobalUnique(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.db.globalUnique = on
}

// SetVRFEnforceUnique sets a VRF's enforce_unique, as an edit of the VRF
// would.
func (s *Server) SetVRFEnforceUnique(id int32, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustVRF(id)
	s.db.vrfs[id].enforceUnique = on
}

// AddVRF creates a VRF (enforce_unique is true, NetBox's default).
func (s *Server) AddVRF(name, rd string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &vrfObj{id: s.db.nextID("vrf"), name: name, rd: rd, enforceUnique: true, created: now()}
	s.db.vrfs[v.id] = v
	return v.id
}

// AddTenant creates a tenant.
func (s *Server) AddTenant(name, slug string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &tenantObj{id: s.db.nextID("tenant"), name: name, slug: slug, created: now()}
	s.db.tenants[t.id] = t
	return t.id
}

// AddTag creates a tag with NetBox's default color and weight.
func (s *Server) AddTag(name, slug string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &tagObj{id: s.db.nextID("tag"), name: name, slug: slug, color: "9e9e9e", weight: 1000, created: now()}
	t.updated = t.created
	s.db.tags[t.id] = t
	return t.id
}

// SetDescriptionValidator configures NetBox's CUSTOM_VALIDATORS with a regex
// rule on IP addresses' descriptions ({"ipam.ipaddress": [{"description":
// {"regex": re}}]}): an IP address whose description does not match is
// refused with a 400, and a list holding it is refused as a whole. Nil
// removes the rule.
func (s *Server) SetDescriptionValidator(re *regexp.Regexp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.db.descriptionRegex = re
}

// AddCustomField creates a text custom field on ipam.ipaddress with the given
// filter logic ("exact", "loose" or "disabled"; "" means NetBox's default
// "loose"). It is a shortcut for POST /api/extras/custom-fields/.
func (s *Server) AddCustomField(name, filterLogic string) int32 {
	filterLogic = seededFilterLogic(filterLogic)
	s.mu.Lock()
	defer s.mu.Unlock()
	cf := &customFieldObj{
		id: s.db.nextID("customfield"), name: name, typ: "text", filterLogic: filterLogic,
		objectTypes: []string{"ipam.ipaddress"}, weight: 100, created: now(),
	}
	cf.updated = cf.created
	s.db.cfs[cf.id] = cf
	return cf.id
}

// SetCustomFieldFilterLogic changes a custom field's filter logic, as the
// IPAM team does in NetBox's UI ("" means NetBox's default "loose").
func (s *Server) SetCustomFieldFilterLogic(id int32, filterLogic string) {
	filterLogic = seededFilterLogic(filterLogic)
	s.mu.Lock()
	defer s.mu.Unlock()
	cf, ok := s.db.cfs[id]
	if !ok {
		panic(fmt.Sprintf("netboxsim: no custom field %d", id))
	}
	cf.filterLogic = filterLogic
	cf.updated = now()
}

// seededFilterLogic is the filter logic a seed gives, "" being NetBox's
// default; it panics on one NetBox does not have.
func seededFilterLogic(filterLogic string) string {
	if filterLogic == "" {
		return "loose"
	}
	if _, ok := filterLogicLabels[filterLogic]; !ok {
		panic(fmt.Sprintf("netboxsim: invalid filter logic %q", filterLogic))
	}
	return filterLogic
}

// AddPrefix creates a prefix; host bits are cleared as NetBox does on save.
func (s *Server) AddPrefix(cidr string, o PrefixOptions) int32 {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		panic(fmt.Sprintf("netboxsim: invalid prefix %q: %v", cidr, err))
	}
	status := o.Status
	if status == "" {
		status = "active"
	}
	if _, ok := prefixStatusLabels[status]; !ok {
		panic(fmt.Sprintf("netboxsim: invalid prefix status %q", status))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustVRF(o.VRF)
	obj := &prefixObj{
		id: s.db.nextID("prefix"), prefix: p.Masked(), vrf: o.VRF, status: status,
		isPool: o.IsPool, markUtilized: o.MarkUtilized, created: now(), cf: map[string]any{},
	}
	obj.updated = obj.created
	s.db.prefixes[obj.id] = obj
	return obj.id
}

// AddIPRange creates an IP range from two addresses with the same mask,
// e.g. "10.0.1.10/24", "10.0.1.20/24".
func (s *Server) AddIPRange(startWithMask, endWithMask string, o RangeOptions) int32 {
	start, ok1 := parseAddress(startWithMask)
	end, ok2 := parseAddress(endWithMask)
	switch {
	case !ok1 || !ok2:
		panic(fmt.Sprintf("netboxsim: invalid range %q-%q", startWithMask, endWithMask))
	case start.Addr().BitLen() != end.Addr().BitLen() || start.Bits() != end.Bits():
		panic("netboxsim: range ends must have the same family and mask")
	case end.Addr().Less(start.Addr()):
		panic("netboxsim: range end before start")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustVRF(o.VRF)
	r := &rangeObj{
		id: s.db.nextID("iprange"), start: start.Addr(), end: end.Addr(), bits: start.Bits(),
		vrf: o.VRF, status: "active", markPopulated: o.MarkPopulated, markUtilized: o.MarkUtilized, created: now(),
	}
	s.db.ranges[r.id] = r
	return r.id
}

// AddIPAddress stores an IP address directly, bypassing the API's
// validation: duplicates and undefined custom fields are allowed, as data
// left behind by earlier tools or deleted custom fields would be.
func (s *Server) AddIPAddress(addrWithMask string, o IPOptions) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := &ipObj{id: s.db.nextID("ipaddress"), created: now()}
	ip.updated = ip.created
	s.applyIP(ip, IPAddress{
		Address: addrWithMask, VRF: o.VRF, Status: o.Status, Role: o.Role, Tags: o.Tags,
		CustomFields: o.CustomFields, Description: o.Description, DNSName: o.DNSName,
	})
	s.db.ips[ip.id] = ip
	return ip.id
}

// IPAddresses returns deep copies of all IP addresses, sorted by ID.
func (s *Server) IPAddresses() []IPAddress {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]IPAddress, 0, len(s.db.ips))
	for _, ip := range s.db.ips {
		out = append(out, s.exportIP(ip))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// EditIPAddress changes an IP address as a human would in the UI: no API
// validation, last_updated is bumped. It panics if the ID does not exist.
func (s *Server) EditIPAddress(id int32, edit func(*IPAddress)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip, ok := s.db.ips[id]
	if !ok {
		panic(fmt.Sprintf("netboxsim: no IP address with id %d", id))
	}
	e := s.exportIP(ip)
	edit(&e)
	s.applyIP(ip, e)
	ip.updated = now()
}

// DeleteIPAddress removes an IP address; unknown IDs are ignored.
func (s *Server) DeleteIPAddress(id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.db.ips, id)
}

func (s *Server) mustVRF(id int32) {
	if _, ok := s.db.vrfs[id]; id != 0 && !ok {
		panic(fmt.Sprintf("netboxsim: no VRF with id %d", id))
	}
}

// applyIP copies an exported IP address onto the stored one.
func (s *Server) applyIP(ip *ipObj, e IPAddress) {
	addr, ok := parseAddress(e.Address)
	if !ok {
		panic(fmt.Sprintf("netboxsim: invalid IP address %q", e.Address))
	}
	s.mustVRF(e.VRF)
	if _, ok := s.db.tenants[e.Tenant]; e.Tenant != 0 && !ok {
		panic(fmt.Sprintf("netboxsim: no tenant with id %d", e.Tenant))
	}
	status := e.Status
	if status == "" {
		status = "active"
	}
	if _, ok := ipStatusLabels[status]; !ok {
		panic(fmt.Sprintf("netboxsim: invalid IP status %q", status))
	}
	if _, ok := ipRoleLabels[e.Role]; e.Role != "" && !ok {
		panic(fmt.Sprintf("netboxsim: invalid IP role %q", e.Role))
	}
	var tags []int32
	for _, slug := range e.Tags {
		t := s.db.tagBySlug(slug)
		if t == nil {
			panic(fmt.Sprintf("netboxsim: no tag with slug %q", slug))
		}
		if !slices.Contains(tags, t.id) {
			tags = append(tags, t.id)
		}
	}
	ip.addr, ip.vrf, ip.tenant = addr, e.VRF, e.Tenant
	ip.status, ip.role = status, e.Role
	ip.dnsName, ip.description = e.DNSName, e.Description
	ip.tags = tags
	ip.cf = deepCopyMap(e.CustomFields)
}

func (s *Server) exportIP(ip *ipObj) IPAddress {
	e := IPAddress{
		ID: ip.id, Address: ip.addr.String(), VRF: ip.vrf, Tenant: ip.tenant,
		Status: ip.status, Role: ip.role, DNSName: ip.dnsName, Description: ip.description,
		Tags: []string{}, CustomFields: deepCopyMap(ip.cf),
	}
	for _, id := range ip.tags {
		if t, ok := s.db.tags[id]; ok {
			e.Tags = append(e.Tags, t.slug)
		}
	}
	return e
}

// deepCopy copies JSON-like values so callers never share maps with the store.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return deepCopyMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopy(v)
	}
	return out
}

// AddPrefixWithGateway adds a prefix and records its first usable address
// as the gateway (status reserved), as an IPAM team would. It returns the
// prefix's ID.
func (s *Server) AddPrefixWithGateway(cidr string, o PrefixOptions) int32 {
	id := s.AddPrefix(cidr, o)
	p := netip.MustParsePrefix(cidr).Masked()
	gw := netip.PrefixFrom(p.Addr().Next(), p.Bits())
	s.AddIPAddress(gw.String(), IPOptions{VRF: o.VRF, Status: "reserved", Description: "gateway"})
	return id
}
