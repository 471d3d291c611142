package netboxsim

import (
	"fmt"
	"net/netip"
	"sort"
)

// Prefix is a prefix as a test inspects it.
type Prefix struct {
	ID           int32
	Prefix       string // e.g. "10.0.1.0/24"
	VRF          int32
	Tenant       int32
	Status       string
	Description  string
	Tags         []string // slugs
	CustomFields map[string]any
	// Role is the prefix role's slug; ScopeType and Scope its scope's
	// content type and slug ("" for none).
	Role      string
	ScopeType string
	Scope     string
}

func (s *Server) exportPrefix(p *prefixObj) Prefix {
	e := Prefix{ID: p.id, Prefix: p.prefix.String(), VRF: p.vrf, Tenant: p.tenant, Status: p.status,
		Description: p.description, Tags: []string{}, CustomFields: deepCopyMap(p.cf)}
	for _, id := range p.tags {
		if t, ok := s.db.tags[id]; ok {
			e.Tags = append(e.Tags, t.slug)
		}
	}
	if r, ok := s.db.roles[p.role]; ok {
		e.Role = r.slug
	}
	if o, ok := s.db.scopes[p.scopeType][p.scopeID]; ok {
		e.ScopeType, e.Scope = p.scopeType, o.slug
	}
	return e
}

// Prefixes returns deep copies of all prefixes, sorted by ID.
func (s *Server) Prefixes() []Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Prefix, 0, len(s.db.prefixes))
	for _, p := range s.db.prefixes {
		out = append(out, s.exportPrefix(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// OnCarve registers a hook called after each successful available-prefixes
// POST, with copies of the created prefixes. It runs outside the server
// lock, before the response is written.
func (s *Server) OnCarve(fn func(created []Prefix)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCarve = fn
}

// PrefixesWithin returns the prefixes strictly inside parent, in any VRF,
// sorted by ID: NetBox's within filter.
func (s *Server) PrefixesWithin(parent string) []Prefix {
	p := netip.MustParsePrefix(parent).Masked()
	var out []Prefix
	for _, e := range s.Prefixes() {
		c := netip.MustParsePrefix(e.Prefix)
		if c.Bits() > p.Bits() && p.Contains(c.Addr()) {
			out = append(out, e)
		}
	}
	return out
}

// DeletePrefix removes a prefix as a human would in the UI; unknown IDs
// are ignored.
func (s *Server) DeletePrefix(id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.db.prefixes, id)
}

// SetPrefixCustomField sets one custom field of a prefix (nil clears it),
// as a human would in the UI.
func (s *Server) SetPrefixCustomField(id int32, name string, value any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.db.prefixes[id]
	if !ok {
		panic(fmt.Sprintf("netboxsim: no prefix with id %d", id))
	}
	if p.cf == nil {
		p.cf = map[string]any{}
	}
	p.cf[name] = value
	p.updated = now()
}
