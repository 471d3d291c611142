package netbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	netbox "github.com/netbox-community/go-netbox/v4"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// A pool with a child prefix length hands each claim a child prefix of
// its parents instead of an address (Config.ChildPrefixLength): NetBox's
// available-prefixes POST picks the lowest free block of the length asked
// and creates every child of a list in one transaction, under its lock on
// the parent, so a batch of claims costs one request and two claims never
// get the same block. The reservation protocol drives it as it drives
// addresses: the child carries the claim's marker, so a lost answer, a
// retry or a restart finds it again instead of carving twice.
var _ backends.Driver[carving, parentSource, childPrefix, childRequest] = (*carver)(nil)
var _ backends.AuditLister[carving] = (*carver)(nil)

// carver is the driver of a pool that carves child prefixes. It offers
// no requested addresses, no plans and no MAC: a claim that requests an
// address is refused.
type carver struct {
	nb *driver
	// length is the child prefixes' length.
	length int
}

// carving is what validation resolves for a carving pool.
type carving struct {
	parents []parentSource
	refs    *references
	// roleID, scopeType and scopeID are the children's role and scope; 0
	// and "" for none.
	roleID    int32
	scopeType string
	scopeID   int32
}

// parentSource is a prefix children are carved from: every block of it,
// its first and last included, may become a child.
type parentSource struct{ resolvedSource }

// Contains says whether a child may start at a.
func (s parentSource) Contains(a netip.Addr) bool { return s.network.Contains(a) }

// Bounds are the parent's first and last addresses.
func (s parentSource) Bounds() (netip.Addr, netip.Addr) {
	return s.network.Addr(), netipx.PrefixLastIP(s.network)
}

// childPrefix is a prefix carved for a claim, as NetBox answers it.
type childPrefix struct {
	ID           int32          `json:"id"`
	Prefix       string         `json:"prefix"`
	VRF          *brief         `json:"vrf"`
	CustomFields map[string]any `json:"custom_fields"`
	// marker is the marker field's value, filled after decoding.
	marker string
	// etag is the ETag of a read by ID (see ipRecord.etag).
	etag string
}

func (c childPrefix) objectID() int32        { return c.ID }
func (c childPrefix) fields() map[string]any { return c.CustomFields }

// String names the child in errors.
func (c childPrefix) String() string { return fmt.Sprintf("prefix %d (%s)", c.ID, c.Prefix) }

// childRequest is one child of an available-prefixes request: NetBox
// takes the length and any field of a prefix, and sets the parent's VRF.
type childRequest struct {
	PrefixLength int                       `json:"prefix_length"`
	Status       string                    `json:"status,omitempty"`
	Role         *int32                    `json:"role,omitempty"`
	ScopeType    string                    `json:"scope_type,omitempty"`
	ScopeID      *int32                    `json:"scope_id,omitempty"`
	Description  string                    `json:"description,omitempty"`
	Tenant       *int32                    `json:"tenant,omitempty"`
	Tags         []netbox.NestedTagRequest `json:"tags,omitempty"`
	CustomFields map[string]any            `json:"custom_fields"`
}

const prefixesPath = "/api/ipam/prefixes/"

// childRefPrefix begins the reference of a child prefix.
const childRefPrefix = "ipam/prefixes/"

// newCarver returns the driver of a carving pool; cfg is checked and has
// its defaults.
func newCarver(cfg Config) (*carver, backends.Options, error) {
	nb, o, err := newDriver(cfg)
	if err != nil {
		return nil, o, err
	}
	// A child is a network of its own: it has no gateway of the pool's,
	// and its length is the one the machine configures.
	o.Gateway = backends.Gateway{None: true}
	o.PrefixLength = 0
	o.Batch = backends.CarvingBatch(o.Batch)
	nb.markedType = prefixType
	return &carver{nb: nb, length: nb.cfg.ChildPrefixLength}, o, nil
}

func (c *carver) Endpoint() string { return c.nb.Endpoint() }
func (c *carver) Name() string     { return c.nb.Name() }

func (c *carver) Label(marker string) string { return c.nb.Label(marker) }

// Verdict: as for addresses, 409 is NetBox's "no free block" ("Insufficient
// resources are available to satisfy the request").
func (c *carver) Verdict(err error) (backends.Verdict, string) { return c.nb.Verdict(err) }

// Prepare checks the credentials and the marker field, and resolves the
// parents, whose length must leave room for a child.
func (c *carver) Prepare(ctx context.Context) (carving, error) {
	refs, err := c.nb.ensureSetup(ctx)
	if err != nil {
		return carving{}, err
	}
	sources, err := c.nb.resolveSources(ctx)
	if err != nil {
		return carving{}, err
	}
	parents := make([]parentSource, len(sources))
	for i, s := range sources {
		if s.network.Bits() >= c.length || c.length > s.network.Addr().BitLen() {
			return carving{}, fmt.Errorf("%w: a child prefix of length %d does not fit in %s", backends.ErrInvalidConfig, c.length, s)
		}
		parents[i] = parentSource{s}
	}
	pool := carving{parents: parents, refs: refs}
	if pool.roleID, err = c.lookUp(ctx, "/api/ipam/roles/", "prefix role", c.nb.cfg.ChildRole); err != nil {
		return carving{}, err
	}
	if scope := c.nb.cfg.ChildScope; scope.Slug != "" {
		pool.scopeType = scope.Type
		if pool.scopeID, err = c.lookUp(ctx, scopePaths[scope.Type], scope.Type, scope.Slug); err != nil {
			return carving{}, err
		}
	}
	return pool, nil
}

// lookUp finds the ID of the object of path with slug (0 for no slug): a
// role or a scope, one request each, only for a pool that names one.
func (c *carver) lookUp(ctx context.Context, path, what, slug string) (int32, error) {
	if slug == "" {
		return 0, nil
	}
	var p page[brief]
	if err := c.nb.getJSON(ctx, path, url.Values{"slug": {slug}}, &p); err != nil {
		return 0, fmt.Errorf("looking up %s %q: %w", what, slug, err)
	}
	switch len(p.Results) {
	case 0:
		return 0, fmt.Errorf("%w: %s %q does not exist in NetBox", backends.ErrNotFound, what, slug)
	case 1:
		return p.Results[0].ID, nil
	}
	// Locations, regions and site groups are unique by slug only within
	// their parent.
	return 0, fmt.Errorf("%w: %d objects of NetBox are %s %q; give the one meant a slug of its own", backends.ErrInvalidConfig, len(p.Results), what, slug)
}

func (c *carver) Sources(pool carving) []parentSource { return pool.parents }

// Count counts the blocks of the child length in each parent and those
// NetBox still has free (its available-prefixes list): one request per
// parent, and every other prefix inside it counts as used, whoever made it.
func (c *carver) Count(ctx context.Context, pool carving) (backends.Usage, error) {
	var u backends.Usage
	for _, s := range pool.parents {
		total := backends.Pow2(c.length - s.network.Bits())
		var free []struct {
			Prefix string `json:"prefix"`
		}
		if err := c.nb.getJSON(ctx, fmt.Sprintf("%s%d/available-prefixes/", prefixesPath, s.id), nil, &free); err != nil {
			return backends.Usage{}, fmt.Errorf("counting the free blocks of %s: %w", s, err)
		}
		var unused int64
		for _, f := range free {
			if p, err := netip.ParsePrefix(f.Prefix); err == nil && p.Bits() <= c.length {
				unused = backends.SaturatingAdd(unused, backends.Pow2(c.length-p.Bits()))
			}
		}
		u.Total = backends.SaturatingAdd(u.Total, total)
		u.Used = backends.SaturatingAdd(u.Used, max(0, total-min(unused, total)))
	}
	return u, nil
}

// Unheld: a carving pool has no gateway to hold.
func (c *carver) Unheld(context.Context, parentSource, []netip.Addr) ([]netip.Addr, error) {
	return nil, nil
}

// Unusable: no address is requested of a carving pool.
func (c *carver) Unusable(parentSource, netip.Addr) string { return "" }

// Request is the claim's child: the pool's length, status, tenant, role,
// scope, tags and custom fields, the description its pattern renders, and
// the marker.
// The provider's tag is left off: NetBox may limit it to IP addresses, and
// the marker alone finds the child.
func (c *carver) Request(pool carving, claim backends.Claim, _ parentSource) (childRequest, error) {
	req := childRequest{PrefixLength: c.length, Status: c.nb.cfg.Reservation.Status, CustomFields: map[string]any{}}
	for _, t := range pool.refs.tags {
		if t.Slug != c.nb.cfg.Tag {
			req.Tags = append(req.Tags, t)
		}
	}
	for k, v := range c.nb.cfg.Reservation.CustomFields {
		req.CustomFields[k] = v
	}
	req.CustomFields[c.nb.cfg.MarkerField] = claim.Marker
	if id := pool.refs.tenantID; id != 0 {
		req.Tenant = &id
	}
	if id := pool.roleID; id != 0 {
		req.Role = &id
	}
	if id := pool.scopeID; id != 0 {
		req.ScopeType, req.ScopeID = pool.scopeType, &id
	}
	desc, err := c.nb.description.Render(claim)
	if err != nil {
		return req, fmt.Errorf("%w: description pattern: %v", backends.ErrInvalidConfig, err)
	}
	req.Description = backends.Truncate(desc, maxDescription)
	return req, nil
}

// Create carves the children of requests from the parent in one request,
// which NetBox applies whole or not at all.
func (c *carver) Create(ctx context.Context, src parentSource, requests []childRequest) ([]childPrefix, error) {
	var created []childPrefix
	if err := c.nb.sendJSON(ctx, http.MethodPost, fmt.Sprintf("%s%d/available-prefixes/", prefixesPath, src.id), nil, requests, &created); err != nil {
		return nil, err
	}
	for i := range created {
		c.readMarker(&created[i])
	}
	return created, nil
}

func (c *carver) readMarker(p *childPrefix) {
	p.marker, _ = backends.ParsePlanned(markerValue(p.CustomFields, c.nb.cfg.MarkerField))
}

// Search finds the children carrying each marker, oldest first, as the
// search of addresses does (see driver.Search).
func (c *carver) Search(ctx context.Context, markers []string, _ backends.Scope) (map[string][]childPrefix, error) {
	found, err := searchMarked[childPrefix](ctx, c.nb, prefixesPath, markers)
	for _, children := range found {
		for i := range children {
			c.readMarker(&children[i])
		}
	}
	return found, err
}

// SearchesOldestFirst: Search orders children by ID, as it does
// addresses.
func (c *carver) SearchesOldestFirst() bool { return true }

func (c *carver) Get(ctx context.Context, ref string) (childPrefix, bool, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(ref, childRefPrefix), 10, 32)
	if err != nil || !strings.HasPrefix(ref, childRefPrefix) || id <= 0 {
		return childPrefix{}, false, nil
	}
	p, found, err := c.get(ctx, int32(id))
	if err != nil {
		return childPrefix{}, false, fmt.Errorf("reading %s: %w", ref, err)
	}
	return p, found, nil
}

// get reads one prefix with its ETag; found is false when it is gone.
func (c *carver) get(ctx context.Context, id int32) (childPrefix, bool, error) {
	var p childPrefix
	etag, err := c.nb.send(ctx, http.MethodGet, fmt.Sprintf("%s%d/", prefixesPath, id), nil, nil, &p, "")
	switch {
	case errors.Is(err, backends.ErrNotFound):
		return childPrefix{}, false, nil
	case err != nil:
		return childPrefix{}, false, err
	}
	p.etag = etag
	c.readMarker(&p)
	return p, true, nil
}

// AtAddress lists the prefixes of the child length that start at addr in
// the parents' VRFs, whatever their marker.
func (c *carver) AtAddress(ctx context.Context, pool carving, addr netip.Addr) ([]childPrefix, error) {
	if len(pool.parents) == 0 {
		return nil, nil
	}
	q := url.Values{"prefix": {netip.PrefixFrom(addr, c.length).Masked().String()}, "ordering": {"id"}, "limit": {strconv.Itoa(maxPage)}}
	children, err := listAll[childPrefix](ctx, c.nb, prefixesPath, q, nil)
	if err != nil {
		return nil, fmt.Errorf("looking up prefix %s/%d: %w", addr, c.length, err)
	}
	var held []childPrefix
	for _, child := range children {
		if c.InPool(pool, child) {
			c.readMarker(&child)
			held = append(held, child)
		}
	}
	return held, nil
}

// Drop deletes the child unless it changed hands since it was read.
func (c *carver) Drop(ctx context.Context, p childPrefix) error {
	err := writeConditionally(ctx, c.nb, p, c.get, nil, func(p childPrefix) error {
		_, err := c.nb.send(ctx, http.MethodDelete, fmt.Sprintf("%s%d/", prefixesPath, p.ID), nil, nil, nil, p.etag)
		return err
	})
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("deleting %s: %w", p, err)
	}
	return nil
}

// DropAll deletes the children in one transaction.
func (c *carver) DropAll(ctx context.Context, children []childPrefix) error {
	ids := make([]map[string]int32, len(children))
	for i, p := range children {
		ids[i] = map[string]int32{"id": p.ID}
	}
	return c.nb.sendJSON(ctx, http.MethodDelete, prefixesPath, nil, ids, nil)
}

// Disown removes the child's marker and keeps it, if it is still the child
// that was read.
func (c *carver) Disown(ctx context.Context, p childPrefix) error {
	patch := map[string]any{"custom_fields": map[string]any{c.nb.cfg.MarkerField: nil}}
	err := c.patch(ctx, p, patch, "")
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("removing the marker of %s, to keep it for the IPAM team: %w", p, err)
	}
	return nil
}

// Mark sets the child's marker; a tombstone also gets status deprecated.
func (c *carver) Mark(ctx context.Context, p childPrefix, marker, _ string) error {
	patch := map[string]any{"custom_fields": map[string]any{c.nb.cfg.MarkerField: marker}}
	if _, _, tombstone := backends.ParseTombstone(marker); tombstone {
		patch["status"] = "deprecated"
	}
	if err := c.patch(ctx, p, patch, marker); err != nil {
		return fmt.Errorf("marking %s %q: %w", p, marker, err)
	}
	return nil
}

// patch writes patch, which leaves the child with the marker leaves, if the
// child still carries the marker it was read with.
func (c *carver) patch(ctx context.Context, p childPrefix, patch map[string]any, leaves string) error {
	return writeConditionally(ctx, c.nb, p, c.get, &leaves, func(p childPrefix) error {
		_, err := c.nb.send(ctx, http.MethodPatch, fmt.Sprintf("%s%d/", prefixesPath, p.ID), nil, patch, nil, p.etag)
		return err
	})
}

func (c *carver) View(p childPrefix) backends.Record {
	network, _ := netip.ParsePrefix(p.Prefix)
	return backends.Record{Address: network, Marker: p.marker, Reference: fmt.Sprintf("%s%d", childRefPrefix, p.ID)}
}

// InPool says whether the pool could have carved the child: of its
// length, inside a parent, in the parent's VRF. A child the IPAM team
// resized or moved is not.
func (c *carver) InPool(pool carving, p childPrefix) bool {
	network, err := netip.ParsePrefix(p.Prefix)
	if err != nil || network.Bits() != c.length {
		return false
	}
	return slices.ContainsFunc(pool.parents, func(s parentSource) bool {
		return s.vrfID == vrfIDOf(p.VRF) && s.network.Contains(network.Addr())
	})
}

// Allocation is the child: its network and its length, in its VRF.
func (c *carver) Allocation(_ carving, p childPrefix) (backends.Allocation, error) {
	network, err := netip.ParsePrefix(p.Prefix)
	if err != nil {
		return backends.Allocation{}, fmt.Errorf("NetBox %s has an unparsable prefix: %w", p, err)
	}
	return backends.Allocation{Address: network.Masked(), Reference: fmt.Sprintf("%s%d", childRefPrefix, p.ID), Scope: vrfScope(vrfIDOf(p.VRF))}, nil
}

func (c *carver) Describe(p childPrefix) string {
	vrf := "global"
	if p.VRF != nil {
		vrf = p.VRF.Name
	}
	return fmt.Sprintf("NetBox prefix %d (%s, VRF %s)", p.ID, p.Prefix, vrf)
}

// Marked lists, for an audit, the children whose marker begins with prefix:
// inside the parents (one listing per VRF), or anywhere else.
func (c *carver) Marked(ctx context.Context, pool carving, prefix string, scope backends.Scope, maxAge time.Duration) ([]backends.Record, error) {
	if scope != backends.InPool {
		everywhere, err := listEverywhere(ctx, c.nb, prefixesPath, prefix, maxAge, func(p childPrefix) (childPrefix, backends.Record) {
			c.readMarker(&p)
			return p, c.View(p)
		})
		return outside(everywhere, func(p childPrefix) bool { return !c.InPool(pool, p) }), err
	}
	view := func(keep func(childPrefix) bool) func(childPrefix) (backends.Record, bool) {
		return func(p childPrefix) (backends.Record, bool) {
			c.readMarker(&p)
			v := c.View(p)
			return v, v.Address.IsValid() && keep(p)
		}
	}
	// NetBox's within filter takes one prefix: one listing per parent.
	var out []backends.Record
	for _, s := range pool.parents {
		q := url.Values{"within": {s.network.String()}, "vrf_id": {vrfFilter(s.vrfID)}}
		found, err := listMarked(ctx, c.nb, prefixesPath, prefix, q, view(func(p childPrefix) bool { return c.InPool(pool, p) }))
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}
