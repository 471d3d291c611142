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

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// auditPage is how many objects one page of an audit's listing holds:
// WAPI's default limit.
const auditPage = 1000

// Records lists the pool's objects whose marker begins with prefix: per
// object type, one paged search with a regular expression on the marker
// attribute in the pool's network view. Objects outside the pool's sources
// are dropped here, as WAPI has no filter for "in any of these networks or
// ranges".
func (b *Backend) Records(ctx context.Context, prefix string) ([]backends.Record, error) {
	sources, err := b.Prepared(ctx)
	if err != nil {
		return nil, err
	}
	return b.listMarked(ctx, prefix, b.cfg.NetworkView, func(o object, addr netip.Addr) (netip.Prefix, bool) {
		for _, s := range sources {
			if s.Contains(addr) {
				return netip.PrefixFrom(addr, s.network.Bits()), true
			}
		}
		return netip.Prefix{}, false
	})
}

// Strays lists the objects whose marker begins with prefix that lie outside
// the pool's sources: in another network view, or at an address none of
// them holds. Its searches name no network view, so they reach wherever
// the IPAM team may have moved an object.
func (b *Backend) Strays(ctx context.Context, prefix string) ([]backends.Record, error) {
	sources, err := b.Prepared(ctx)
	if err != nil {
		return nil, err
	}
	return b.listMarked(ctx, prefix, "", func(o object, addr netip.Addr) (netip.Prefix, bool) {
		if o.NetworkView == b.cfg.NetworkView && slices.ContainsFunc(sources, func(s resolvedSource) bool { return s.Contains(addr) }) {
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(addr, addr.BitLen()), true
	})
}

// listMarked pages through the pool's object types in view ("" for every
// view) whose marker begins with prefix, keeping those keep accepts, with
// the prefix length keep gives.
func (b *Backend) listMarked(ctx context.Context, prefix, view string, keep func(object, netip.Addr) (netip.Prefix, bool)) ([]backends.Record, error) {
	var out []backends.Record
	for _, t := range b.objectTypes() {
		search := map[string]string{
			"*" + b.cfg.MarkerEA + "~": "^" + regexp.QuoteMeta(prefix),
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
			if err := b.get(ctx, newObject(t, append(b.returnFieldsFor(t), "network_view")...), "", search, &page); err != nil {
				return nil, fmt.Errorf("listing %s marked %s=%q: %w", t, b.cfg.MarkerEA, prefix+"…", err)
			}
			for _, o := range page.Result {
				marker, planned := b.markerOf(o)
				addr, err := o.address()
				if err != nil || !strings.HasPrefix(marker, prefix) {
					continue
				}
				if p, ok := keep(o, addr); ok {
					out = append(out, backends.Record{Address: p, Marker: marker, Reference: o.Ref, Planned: planned})
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

// remark sets the object's marker. A planned object keeps saying so under
// its new marker; retired, it goes back to the IPAM team as they planned
// it (adoption wrote nothing but the marker): its plan holds the address.
// A fixed address of the provider's own that is retired holds its address
// for no one: it becomes a reservation again (match_client RESERVED, the
// zero MAC, as NIOS stores reservations), so that the grid's DHCP no
// longer serves it to the machine that is gone, and the MAC is free for
// that machine's next fixed address.
func (b *Backend) remark(ctx context.Context, o object, marker string) error {
	_, _, tombstone := backends.ParseTombstone(marker)
	if _, planned := b.markerOf(o); planned {
		if tombstone {
			return b.unplan(ctx, o.Ref)
		}
		marker = backends.PlannedMarker(marker)
	}
	change := b.markerChange(o.Ref, marker)
	if objectType, _, _ := strings.Cut(o.Ref, "/"); tombstone && objectType == "fixedaddress" {
		change.Mac, change.MatchClient = zeroMAC, "RESERVED"
	}
	return b.change(ctx, o.Ref, change)
}

// dropObject deletes the object, or returns a planned one to the IPAM
// team.
func (b *Backend) dropObject(ctx context.Context, o object) error {
	if _, planned := b.markerOf(o); planned {
		return b.unplan(ctx, o.Ref)
	}
	return b.deleteObject(ctx, o.Ref)
}

// unplan returns a planned object to the IPAM team as it was before a
// claim adopted it: without the marker attribute ("extattrs-" removes the
// attributes it names and keeps the others).
func (b *Backend) unplan(ctx context.Context, ref string) error {
	objectType, _, _ := strings.Cut(ref, "/")
	change := &eaRemoval{objectType: objectType, Remove: map[string]map[string]any{b.cfg.MarkerEA: {}}}
	req, err := b.builder.BuildRequest(ibclient.UPDATE, change, ref, nil)
	if err != nil {
		return fmt.Errorf("building a WAPI request for %s: %w", ref, err)
	}
	if _, err := (&requestor{ctx: backendhttp.WithoutResend(ctx), client: b.http}).SendRequest(req); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("returning the planned %s to the IPAM team (removing %s): %w", ref, b.cfg.MarkerEA, err)
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

// setMarker changes only the marker attribute ("extattrs+" adds or
// replaces the attributes it names and keeps the others).
func (b *Backend) setMarker(ctx context.Context, ref, marker string) error {
	return b.change(ctx, ref, b.markerChange(ref, marker))
}

// markerChange is the change that sets the marker attribute only.
func (b *Backend) markerChange(ref, marker string) *eaChange {
	objectType, _, _ := strings.Cut(ref, "/")
	return &eaChange{objectType: objectType, Add: map[string]map[string]any{b.cfg.MarkerEA: {"value": marker}}}
}

// change sends one PUT of change to ref.
func (b *Backend) change(ctx context.Context, ref string, change *eaChange) error {
	req, err := b.builder.BuildRequest(ibclient.UPDATE, change, ref, nil)
	if err != nil {
		return fmt.Errorf("building a WAPI request for %s: %w", ref, err)
	}
	// Not resent blindly (see WithoutResend): the next attempt reads the
	// object again and checks its marker.
	if _, err := (&requestor{ctx: backendhttp.WithoutResend(ctx), client: b.http}).SendRequest(req); err != nil {
		what := fmt.Sprintf("%s=%q", b.cfg.MarkerEA, change.Add[b.cfg.MarkerEA]["value"])
		if change.MatchClient != "" {
			what += fmt.Sprintf(", match_client %s and mac %s", change.MatchClient, change.Mac)
		}
		return fmt.Errorf("setting %s on %s: %w", what, ref, err)
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

// createAt creates the claim's object at addr. The grid's refusal because
// another DHCP object (a fixed address, a host address with DHCP) holds
// the address is an ErrAddressTaken; another conflict (say, a host name
// that exists) stays an ErrConflict.
func (b *Backend) createAt(ctx context.Context, claim backends.Claim, addr netip.Addr) (object, error) {
	body, err := b.newObjectAt(claim, addr.Is6(), addr.String())
	if err != nil {
		return object{}, err
	}
	created, err := b.create(ctx, body, b.returnFieldsFor(b.objectTypeFor(addr)))
	if errors.Is(err, backends.ErrConflict) && (strings.Contains(wapiText(err), addr.String()) || strings.Contains(wapiText(err), "in use")) {
		return object{}, fmt.Errorf("%w: %w", backends.ErrAddressTaken, err)
	}
	return created, err
}
