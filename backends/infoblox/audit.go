package infoblox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// auditPage is how many objects one page of an audit's listing holds:
// WAPI's default limit.
const auditPage = 1000

// Marked lists the objects whose marker begins with prefix: per object
// type, one paged search with a regular expression on the marker
// attribute. In the pool's sources: in the pool's network view, objects
// outside the sources dropped here, as WAPI has no filter for "in any of
// these networks or ranges". Outside them (in another network view, or at
// an address none of them holds): the searches name no network view, so
// they reach wherever the IPAM team may have moved an object.
func (d *driver) Marked(ctx context.Context, sources []resolvedSource, prefix string, scope backends.Scope, maxAge time.Duration) ([]backends.Record, error) {
	if scope != backends.InPool {
		everywhere, err := d.listEverywhere(ctx, d.objectTypes(), prefix, maxAge)
		var out []backends.Record
		for _, o := range everywhere {
			addr, aerr := o.address()
			if aerr != nil || (o.NetworkView == d.cfg.NetworkView && slices.ContainsFunc(sources, func(s resolvedSource) bool { return s.Contains(addr) })) {
				continue
			}
			marker, planned := d.markerOf(o)
			out = append(out, backends.Record{Address: netip.PrefixFrom(addr, addr.BitLen()), Marker: marker, Reference: o.Ref, Planned: planned})
		}
		return out, err
	}
	return d.listMarked(ctx, prefix, d.cfg.NetworkView, func(o object, addr netip.Addr) (netip.Prefix, bool) {
		for _, s := range sources {
			if s.Contains(addr) {
				return netip.PrefixFrom(addr, s.network.Bits()), true
			}
		}
		return netip.Prefix{}, false
	})
}

// listMarked pages through the pool's object types in view ("" for every
// view) whose marker begins with prefix, keeping those keep accepts, with
// the prefix length keep gives.
func (d *driver) listMarked(ctx context.Context, prefix, view string, keep func(object, netip.Addr) (netip.Prefix, bool)) ([]backends.Record, error) {
	return d.listMarkedOf(ctx, d.objectTypes(), prefix, view, func(o object) (backends.Record, bool) {
		addr, err := o.address()
		if err != nil {
			return backends.Record{}, false
		}
		p, ok := keep(o, addr)
		marker, planned := d.markerOf(o)
		return backends.Record{Address: p, Marker: marker, Reference: o.Ref, Planned: planned}, ok
	})
}

// listEverywhere lists the objects of types whose marker begins with
// prefix, in every network view. The pools of one grid, credentials and
// marker attribute share a listing of a type that began at most maxAge ago
// (backends.SharedListing): every pool of a namespace lists the same for
// its strays.
func (d *driver) listEverywhere(ctx context.Context, types []string, prefix string, maxAge time.Duration) ([]object, error) {
	var out []object
	for _, t := range types {
		key := backends.SharedKey("infoblox", append([]string{d.hostCfg.Scheme, d.hostCfg.Host, d.hostCfg.Port, d.hostCfg.Version, d.cfg.Username, d.cfg.Password,
			string(d.cfg.ClientCert), string(d.cfg.ClientKey), d.cfg.MarkerEA, prefix, t}, d.returnFieldsFor(t)...)...)
		found, err := backends.SharedListing(ctx, key, maxAge, func(ctx context.Context) ([]object, error) {
			var objects []object
			_, err := d.listMarkedOf(ctx, []string{t}, prefix, "", func(o object) (backends.Record, bool) {
				marker, _ := d.markerOf(o)
				if strings.HasPrefix(marker, prefix) {
					objects = append(objects, o)
				}
				return backends.Record{}, false
			})
			return objects, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// listMarkedOf pages through the objects of types in view ("" for every
// view) whose marker begins with prefix, as read reads them, keeping those
// read accepts.
func (d *driver) listMarkedOf(ctx context.Context, types []string, prefix, view string, read func(object) (backends.Record, bool)) ([]backends.Record, error) {
	var out []backends.Record
	for _, t := range types {
		search := map[string]string{
			"*" + d.cfg.MarkerEA + "~": "^" + regexp.QuoteMeta(prefix),
			"_paging":                  "1",
			"_return_as_object":        "1",
			"_max_results":             strconv.Itoa(auditPage),
		}
		if view != "" {
			search["network_view"] = view
		}
		for {
			var page struct {
				Result     []object `json:"result"`
				NextPageID string   `json:"next_page_id"`
			}
			if err := d.get(ctx, newObject(t, d.returnFieldsFor(t)...), "", search, &page); err != nil {
				return nil, fmt.Errorf("listing %s marked %s=%q: %w", t, d.cfg.MarkerEA, prefix+"…", err)
			}
			for _, o := range page.Result {
				if rec, ok := read(o); ok && strings.HasPrefix(rec.Marker, prefix) {
					out = append(out, rec)
				}
			}
			if page.NextPageID == "" {
				break
			}
			search = map[string]string{"_page_id": page.NextPageID}
		}
	}
	return out, nil
}

// Drop deletes the object, or returns a planned one to the IPAM team, if
// it is still the object that was read (see guarded.go).
func (d *driver) Drop(ctx context.Context, o object) error {
	if _, planned := d.markerOf(o); planned {
		return d.Disown(ctx, o)
	}
	return d.deleteGuarded(ctx, o)
}

// Disown removes the object's marker attribute and keeps it ("extattrs-"
// removes the attributes it names and keeps the others): a planned object
// goes back to the IPAM team as it was before a claim adopted it, a
// retained one stays.
func (d *driver) Disown(ctx context.Context, o object) error {
	objectType, _, _ := strings.Cut(o.Ref, "/")
	change := &eaRemoval{objectType: objectType, Remove: map[string]map[string]any{d.cfg.MarkerEA: {}}}
	err := d.changeGuarded(ctx, o, change, func(now object) bool { return now.ExtAttrs.get(d.cfg.MarkerEA) == "" })
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("removing %s from %s, to keep it for the IPAM team: %w", d.cfg.MarkerEA, o.Ref, err)
	}
	return nil
}

// eaRemoval is the body of a PUT that removes extensible attributes only.
type eaRemoval struct {
	ibclient.IBBase `json:"-"`
	objectType      string
	Remove          map[string]map[string]any `json:"extattrs-"`
}

func (c *eaRemoval) ObjectType() string { return c.objectType }

// markerChange is the change that sets the marker attribute only
// ("extattrs+" adds or replaces the attributes it names and keeps the
// others).
func (d *driver) markerChange(ref, marker string) *eaChange {
	objectType, _, _ := strings.Cut(ref, "/")
	return &eaChange{objectType: objectType, Add: map[string]map[string]any{d.cfg.MarkerEA: {"value": marker}}}
}

// change sends one PUT of change to o, if it is still the object that was
// read (see guarded.go).
func (d *driver) change(ctx context.Context, o object, change *eaChange) error {
	value := change.Add[d.cfg.MarkerEA]["value"]
	applied := func(now object) bool {
		return now.ExtAttrs.get(d.cfg.MarkerEA) == value && (change.MatchClient == "" || now.MatchClient == change.MatchClient)
	}
	if err := d.changeGuarded(ctx, o, change, applied); err != nil {
		what := fmt.Sprintf("%s=%q", d.cfg.MarkerEA, value)
		if change.MatchClient != "" {
			what += fmt.Sprintf(", match_client %s and mac %s", change.MatchClient, change.Mac)
		}
		return fmt.Errorf("setting %s on %s: %w", what, o.Ref, err)
	}
	return nil
}

// eaChange is the body of a PUT that changes extensible attributes, and
// a fixed address's DHCP match when Mac and MatchClient are set.
type eaChange struct {
	ibclient.IBBase `json:"-"`
	objectType      string
	Add             map[string]map[string]any `json:"extattrs+"`
	Mac             string                    `json:"mac,omitempty"`
	MatchClient     string                    `json:"match_client,omitempty"`
}

func (c *eaChange) ObjectType() string { return c.objectType }

// CreateAt creates the claim's fixed address or host record at addr. The grid's refusal because
// another DHCP object (a fixed address, a host address with DHCP) holds
// the address is an ErrAddressTaken; another conflict (say, a host name
// that exists) stays an ErrConflict.
func (d *driver) CreateAt(ctx context.Context, _ []resolvedSource, claim backends.Claim, _ resolvedSource, addr netip.Addr) (object, error) {
	body, err := d.newObjectAt(claim, addr.Is6(), addr.String())
	if err != nil {
		return object{}, err
	}
	created, err := d.create(ctx, body, d.returnFieldsFor(d.objectTypeFor(addr)))
	if errors.Is(err, backends.ErrConflict) && (strings.Contains(wapiText(err), addr.String()) || strings.Contains(wapiText(err), "in use")) {
		return object{}, fmt.Errorf("%w: %w", backends.ErrAddressTaken, err)
	}
	return created, err
}
