package infoblox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// A pool with a child prefix length hands each claim a child network of
// its network containers instead of an address (Config.ChildPrefixLength):
// WAPI's func:nextavailablenetwork in the network field of a network it
// creates picks the container's first free block and creates the network
// in one request, and a request object of such creates is one
// transaction. The reservation protocol drives it as it drives addresses:
// the child carries the claim's marker attribute, so a lost answer, a
// retry or a restart finds it again instead of carving twice, and writes
// to it are guarded (guarded.go): a network's reference is made of its
// CIDR and view, so it names the next claim's network once this one is
// deleted.
var (
	_ backends.Driver[[]container, container, object, newRecord] = (*carver)(nil)
	_ backends.AuditLister[[]container]                          = (*carver)(nil)
)

// carver is the driver of a pool that carves child networks. It offers no
// requested addresses, no plans and no MAC.
type carver struct {
	ib     *driver
	length int
}

// container is a network container children are carved from: every block
// of it may become a child.
type container struct{ resolvedSource }

// Contains says whether a child may start at a.
func (c container) Contains(a netip.Addr) bool { return c.network.Contains(a) }

// Bounds are the container's first and last addresses.
func (c container) Bounds() (netip.Addr, netip.Addr) {
	return c.network.Addr(), netipx.PrefixLastIP(c.network)
}

func (c container) String() string { return "network container " + c.network.String() }

// newCarver returns the driver of a carving pool; cfg is checked and has
// its defaults.
func newCarver(cfg Config) (*carver, backends.Options, error) {
	ib, o, err := newDriver(cfg)
	if err != nil {
		return nil, o, err
	}
	// A child is a network of its own: it has no gateway of the pool's,
	// and its length is the one the machine configures.
	o.Gateway = backends.Gateway{None: true}
	o.PrefixLength = 0
	o.Batch = backends.CarvingBatch(o.Batch)
	return &carver{ib: ib, length: cfg.ChildPrefixLength}, o, nil
}

func (c *carver) Endpoint() string           { return c.ib.Endpoint() }
func (c *carver) Name() string               { return c.ib.Name() }
func (c *carver) Label(marker string) string { return c.ib.Label(marker) }

// Verdict: a full container answers "Can not find requested number of
// networks" (exhaustedText).
func (c *carver) Verdict(err error) (backends.Verdict, string) { return c.ib.Verdict(err) }

// Prepare checks the credentials and the marker attribute, and finds each
// container in the pool's network view; its length must leave room for a
// child.
func (c *carver) Prepare(ctx context.Context) ([]container, error) {
	if err := c.ib.ensureSetup(ctx); err != nil {
		return nil, err
	}
	containers := make([]container, 0, len(c.ib.cfg.Sources))
	for _, s := range c.ib.cfg.Sources {
		network := s.Network
		if network.Bits() >= c.length || c.length > network.Addr().BitLen() {
			return nil, fmt.Errorf("%w: a child network of length %d does not fit in network container %s", backends.ErrInvalidConfig, c.length, network)
		}
		t := containerType(network.Addr())
		var found []object
		search := map[string]string{"network": network.String(), "network_view": c.ib.cfg.NetworkView}
		if err := c.ib.get(ctx, newObject(t, "network", "network_view"), "", search, &found); err != nil {
			return nil, fmt.Errorf("looking up %s %s: %w", t, network, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%w: network container %s does not exist in network view %s", backends.ErrNotFound, network, c.ib.cfg.NetworkView)
		}
		containers = append(containers, container{resolvedSource{Source: s, network: network}})
	}
	return containers, nil
}

func containerType(a netip.Addr) string {
	if a.Is6() {
		return "ipv6networkcontainer"
	}
	return "networkcontainer"
}

func networkType(a netip.Addr) string {
	if a.Is6() {
		return "ipv6network"
	}
	return "network"
}

func (c *carver) Sources(containers []container) []container { return containers }

// Count counts the blocks of the child length in each container and those
// any network or container inside it holds, whoever made it: one search per
// type and container, by the networks' addresses.
func (c *carver) Count(ctx context.Context, containers []container) (backends.Usage, error) {
	var u backends.Usage
	for _, s := range containers {
		total := backends.Pow2(c.length - s.network.Bits())
		first, last := s.Bounds()
		var b netipx.IPSetBuilder
		for _, t := range []string{networkType(first), containerType(first)} {
			// Paged: a busy container holds more networks than WAPI
			// answers at once.
			search := map[string]string{"network>": first.String(), "network<": last.String(), "network_view": c.ib.cfg.NetworkView,
				"_paging": "1", "_return_as_object": "1", "_max_results": strconv.Itoa(auditPage)}
			for {
				var page struct {
					Result     []object `json:"result"`
					NextPageID string   `json:"next_page_id"`
				}
				if err := c.ib.get(ctx, newObject(t, "network"), "", search, &page); err != nil {
					return backends.Usage{}, fmt.Errorf("counting the networks of %s: %w", s, err)
				}
				for _, o := range page.Result {
					if p, err := netip.ParsePrefix(o.Network); err == nil && p.Bits() > s.network.Bits() && s.network.Contains(p.Addr()) {
						b.AddPrefix(p)
					}
				}
				if page.NextPageID == "" {
					break
				}
				search = map[string]string{"_page_id": page.NextPageID}
			}
		}
		held, _ := b.IPSet()
		used := map[netip.Prefix]bool{}
		var whole int64
		for _, p := range held.Prefixes() {
			if p.Bits() <= c.length {
				whole = backends.SaturatingAdd(whole, backends.Pow2(c.length-p.Bits()))
			} else {
				used[netip.PrefixFrom(p.Addr(), c.length).Masked()] = true
			}
		}
		u.Total = backends.SaturatingAdd(u.Total, total)
		u.Used = backends.SaturatingAdd(u.Used, min(total, backends.SaturatingAdd(whole, int64(len(used)))))
	}
	return u, nil
}

// Unheld: a carving pool has no gateway to hold.
func (c *carver) Unheld(context.Context, container, []netip.Addr) ([]netip.Addr, error) {
	return nil, nil
}

// Unusable: no address is requested of a carving pool.
func (c *carver) Unusable(container, netip.Addr) string { return "" }

// Request is the claim's child network: carved from src by
// func:nextavailablenetwork, in the pool's view, with the comment its
// pattern renders, the pool's attributes and the marker.
func (c *carver) Request(_ []container, claim backends.Claim, src container) (newRecord, error) {
	eas := ibclient.EA{}
	for k, v := range c.ib.cfg.Reservation.ExtensibleAttributes {
		eas[k] = v
	}
	eas[c.ib.cfg.MarkerEA] = claim.Marker
	comment, err := c.ib.comment.Render(claim)
	if err != nil {
		return newRecord{}, fmt.Errorf("%w: comment pattern: %v", backends.ErrInvalidConfig, err)
	}
	view := c.ib.cfg.NetworkView
	next := fmt.Sprintf("func:nextavailablenetwork:%s,%s,%d", src.network, view, c.length)
	obj := ibclient.NewNetwork(view, next, src.network.Addr().Is6(), backends.Truncate(comment, maxComment), eas)
	var data map[string]any
	if raw := c.ib.builder.BuildBody(ibclient.CREATE, obj); raw == nil || json.Unmarshal(raw, &data) != nil {
		return newRecord{}, fmt.Errorf("encoding a %s for WAPI failed", obj.ObjectType())
	}
	return newRecord{object: obj, objectType: obj.ObjectType(), data: data}, nil
}

// Create carves the children of requests from the container as the
// address driver creates records: a lone one with a plain POST, several
// with one request object, one transaction, all of them or none.
func (c *carver) Create(ctx context.Context, src container, requests []newRecord) ([]object, error) {
	return c.ib.Create(ctx, src.resolvedSource, requests)
}

// types are the network types of the pool's containers.
func (c *carver) types() []string {
	var types []string
	for _, s := range c.ib.cfg.Sources {
		if t := networkType(s.Network.Addr()); !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	return types
}

// Search finds the networks carrying each marker, with one request object;
// each marker's networks come in address order.
func (c *carver) Search(ctx context.Context, markers []string, scope backends.Scope) (map[string][]object, error) {
	found, err := c.ib.searchMarkers(ctx, c.types(), markers, scope)
	for _, networks := range found {
		sortByNetwork(networks)
	}
	return found, err
}

// sortByNetwork puts the child a claim keeps first: next-available carves
// in address order, so the lowest is the first made.
func sortByNetwork(networks []object) {
	slices.SortStableFunc(networks, func(x, y object) int {
		px, _ := netip.ParsePrefix(x.Network)
		py, _ := netip.ParsePrefix(y.Network)
		if d := px.Addr().Compare(py.Addr()); d != 0 {
			return d
		}
		return strings.Compare(x.Ref, y.Ref)
	})
}

func (c *carver) Get(ctx context.Context, ref string) (object, bool, error) {
	return c.ib.Get(ctx, ref)
}

// AtAddress lists the networks of the child length at addr in the pool's
// view, whatever their marker.
func (c *carver) AtAddress(ctx context.Context, _ []container, addr netip.Addr) ([]object, error) {
	t := networkType(addr)
	var found []object
	search := map[string]string{"network": netip.PrefixFrom(addr, c.length).Masked().String(), "network_view": c.ib.cfg.NetworkView}
	if err := c.ib.get(ctx, newObject(t, c.ib.returnFieldsFor(t)...), "", search, &found); err != nil {
		return nil, fmt.Errorf("searching %s for %s/%d: %w", t, addr, c.length, err)
	}
	return found, nil
}

// Drop deletes the child if it is still the network that was read.
func (c *carver) Drop(ctx context.Context, o object) error { return c.ib.deleteGuarded(ctx, o) }

// DropAll deletes the children with one guarded request object.
func (c *carver) DropAll(ctx context.Context, networks []object) error {
	return c.ib.DropAll(ctx, networks)
}

// Mark sets the child's marker attribute, if it is still the network
// that was read.
func (c *carver) Mark(ctx context.Context, o object, marker, _ string) error {
	return c.ib.change(ctx, o, c.ib.markerChange(o.Ref, marker))
}

// Disown removes the child's marker attribute and keeps it, if it is
// still the network that was read.
func (c *carver) Disown(ctx context.Context, o object) error { return c.ib.Disown(ctx, o) }

func (c *carver) View(o object) backends.Record {
	network, _ := netip.ParsePrefix(o.Network)
	marker, planned := c.ib.markerOf(o)
	return backends.Record{Address: network, Marker: marker, Reference: o.Ref, Planned: planned}
}

// InPool says whether the pool could have carved the child: of its length,
// inside a container, in the pool's view. A child the IPAM team resized or
// moved is not.
func (c *carver) InPool(containers []container, o object) bool {
	network, err := netip.ParsePrefix(o.Network)
	if err != nil || network.Bits() != c.length || (o.NetworkView != "" && o.NetworkView != c.ib.cfg.NetworkView) {
		return false
	}
	return slices.ContainsFunc(containers, func(s container) bool { return s.network.Contains(network.Addr()) })
}

// Allocation is the child: its network and its length, in the pool's view.
func (c *carver) Allocation(_ []container, o object) (backends.Allocation, error) {
	network, err := netip.ParsePrefix(o.Network)
	if err != nil {
		return backends.Allocation{}, fmt.Errorf("the grid's %s has an unparsable network %q: %w", o.Ref, o.Network, err)
	}
	return backends.Allocation{Address: network.Masked(), Reference: o.Ref, Scope: "view/" + c.ib.cfg.NetworkView}, nil
}

func (c *carver) Describe(o object) string {
	return fmt.Sprintf("network %s (network view %s, %s)", o.Network, o.NetworkView, o.Ref)
}

// Marked lists, for an audit, the children whose marker begins with prefix:
// in the pool's view inside its containers, or anywhere else.
func (c *carver) Marked(ctx context.Context, containers []container, prefix string, scope backends.Scope, maxAge time.Duration) ([]backends.Record, error) {
	read := func(keep func(object) bool) func(object) (backends.Record, bool) {
		return func(o object) (backends.Record, bool) {
			v := c.View(o)
			return v, v.Address.IsValid() && keep(o)
		}
	}
	if scope != backends.InPool {
		everywhere, err := c.ib.listEverywhere(ctx, c.types(), prefix, maxAge)
		outside := read(func(o object) bool { return !c.InPool(containers, o) })
		var out []backends.Record
		for _, o := range everywhere {
			if v, ok := outside(o); ok {
				out = append(out, v)
			}
		}
		return out, err
	}
	return c.ib.listMarkedOf(ctx, c.types(), prefix, c.ib.cfg.NetworkView, read(func(o object) bool { return c.InPool(containers, o) }))
}
