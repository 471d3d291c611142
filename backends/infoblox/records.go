package infoblox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// The grid's objects as the backend finds and reads them. They are deleted
// and changed by guarded writes (guarded.go), never through
// infoblox-go-client's Connector: its makeRequest sends every request that
// failed a second time (with _proxy_search=GM), so a deletion whose answer
// was lost went out again, to whatever object held the address by then.

// Get reads the object a reference names, with the fields of its type.
func (d *driver) Get(ctx context.Context, ref string) (object, bool, error) {
	objectType, _, _ := strings.Cut(ref, "/")
	var o object
	err := d.get(ctx, newObject(objectType, d.returnFieldsFor(objectType)...), ref, nil, &o)
	switch {
	case errors.Is(err, backends.ErrNotFound):
		return object{}, false, nil
	case err != nil:
		return object{}, false, fmt.Errorf("reading %s: %w", ref, err)
	}
	return o, true, nil
}

// findByMarker searches the pool's object types for the marker: one
// server-side extensible attribute search per type, whatever the network
// size, matching the marker and its planned form with one expression.
// Results are sorted by address.
func (d *driver) findByMarker(ctx context.Context, marker string, scope backends.Scope) ([]object, error) {
	var found []object
	values := d.markerValues(marker)
	pattern := "^" + regexp.QuoteMeta(marker) + "(" + regexp.QuoteMeta(strings.TrimPrefix(backends.PlannedMarker(marker), marker)) + ")?$"
	for _, t := range d.objectTypes() {
		var page []object
		search := map[string]string{"*" + d.cfg.MarkerEA + "~": pattern}
		if scope == backends.InPool {
			search["network_view"] = d.cfg.NetworkView
		}
		if err := d.get(ctx, newObject(t, d.returnFieldsFor(t)...), "", search, &page); err != nil {
			return nil, fmt.Errorf("searching %s for %s~=%q: %w", t, d.cfg.MarkerEA, pattern, err)
		}
		for _, o := range page {
			// An object is only ours if it says so exactly.
			if slices.Contains(values, o.ExtAttrs.get(d.cfg.MarkerEA)) {
				found = append(found, o)
			}
		}
	}
	sortByAddress(found)
	return found, nil
}

// findByMarkers searches the pool's object types for each marker with one
// request object; each marker's objects are sorted by address.
func (d *driver) findByMarkers(ctx context.Context, markers []string, scope backends.Scope) (map[string][]object, error) {
	return d.searchMarkers(ctx, d.objectTypes(), markers, scope)
}

// searchMarkers is findByMarkers for objects of types.
func (d *driver) searchMarkers(ctx context.Context, types, markers []string, scope backends.Scope) (map[string][]object, error) {
	if len(markers) == 0 || len(types) == 0 {
		return map[string][]object{}, nil
	}
	var ops []*ibclient.RequestBody
	var values []string
	for _, m := range markers {
		values = append(values, d.markerValues(m)...)
	}
	for _, m := range values {
		for _, t := range types {
			search := map[string]any{"*" + d.cfg.MarkerEA: m}
			if scope == backends.InPool {
				search["network_view"] = d.cfg.NetworkView
			}
			ops = append(ops, &ibclient.RequestBody{
				Method: http.MethodGet,
				Object: t,
				Data:   search,
				Args:   map[string]string{"_return_fields": strings.Join(d.returnFieldsFor(t), ",")},
			})
		}
	}
	answers, err := d.sendRequest(ctx, ops)
	if err != nil {
		return nil, fmt.Errorf("searching %s for %s: %w", strings.Join(types, " and "), d.cfg.MarkerEA, err)
	}
	found := map[string][]object{}
	for i, a := range answers {
		value := values[i/len(types)]
		var page []object
		if err := json.Unmarshal(a, &page); err != nil {
			return nil, fmt.Errorf("%w: decoding the search for %s=%q: %v", backends.ErrUnavailable, d.cfg.MarkerEA, value, err)
		}
		for _, o := range page {
			// The search is exact, but an object is only ours if it says so.
			if o.ExtAttrs.get(d.cfg.MarkerEA) == value {
				marker, _ := d.markerOf(o)
				found[marker] = append(found[marker], o)
			}
		}
	}
	for _, objects := range found {
		sortByAddress(objects)
	}
	return found, nil
}

// markerValues are the values of the marker attribute that name the
// claim: its marker, and its marker on a planned object it adopted, which
// the claim keeps whatever the pool's spec says now (a pool may stop
// adopting plans).
func (d *driver) markerValues(marker string) []string {
	return []string{marker, backends.PlannedMarker(marker)}
}

// AtAddress returns the pool's objects that hold addr: a search in the
// pool's network view, which needs no validation.
func (d *driver) AtAddress(ctx context.Context, _ []resolvedSource, addr netip.Addr) ([]object, error) {
	t := d.objectTypeFor(addr)
	field := "ipv4addr"
	if addr.Is6() {
		field = "ipv6addr"
	}
	var found []object
	search := map[string]string{field: addr.String(), "network_view": d.cfg.NetworkView}
	if err := d.get(ctx, newObject(t, d.returnFieldsFor(t)...), "", search, &found); err != nil {
		return nil, fmt.Errorf("searching %s for %s: %w", t, addr, err)
	}
	return found, nil
}

// sortByAddress puts the object a claim keeps first: NIOS records no
// creation time on fixed addresses, and next-available hands out addresses
// in order, so the lowest is the first made; repeated calls keep the same.
func sortByAddress(objects []object) {
	slices.SortStableFunc(objects, func(x, y object) int {
		ax, _ := x.address()
		ay, _ := y.address()
		return cmp.Or(ax.Compare(ay), strings.Compare(x.Ref, y.Ref))
	})
}
