package infoblox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

type eaDefinition struct {
	Ref  string `json:"_ref"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// setupConfirmed remembers the setups a grid confirmed (see
// backends.SetupMemory).
var setupConfirmed = backends.NewSetupMemory[struct{}]()

// ensureSetup makes sure the grid holds what the pool's objects refer to:
// the marker's attribute definition (created when the credentials may),
// the extra attributes' definitions and the network view. A setup the grid
// confirmed is remembered for a while; the pool's next request (its
// sources' look-up) still proves the credentials.
func (d *driver) ensureSetup(ctx context.Context) error {
	eas := slices.Sorted(maps.Keys(d.cfg.Reservation.ExtensibleAttributes))
	key := backends.SetupKey(d.cfg.Scheme, d.cfg.Host, strconv.Itoa(d.cfg.Port), d.cfg.WAPIVersion, d.cfg.Username, d.cfg.Password,
		string(d.cfg.ClientCert), string(d.cfg.ClientKey), d.cfg.MarkerEA, d.cfg.NetworkView, strings.Join(eas, ","))
	_, err := setupConfirmed.Confirm(ctx, key, func(ctx context.Context) (struct{}, error) {
		if err := d.ensureMarkerDefinition(ctx); err != nil {
			return struct{}{}, err
		}
		if err := d.checkDefinitions(ctx); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, d.checkNetworkView(ctx)
	})
	return err
}

// ensureMarkerDefinition makes sure the grid defines the marker's extensible
// attribute as a string, creating it when the credentials may (NIOS lets only
// superusers define attributes). Its first request also proves the
// credentials work.
func (d *driver) ensureMarkerDefinition(ctx context.Context) error {
	def, found, err := d.eaDefinition(ctx, d.cfg.MarkerEA)
	if err != nil {
		return err
	}
	if found {
		if def.Type != "STRING" {
			return fmt.Errorf("%w: extensible attribute %q is of type %s; the claim marker needs type STRING",
				backends.ErrInvalidConfig, d.cfg.MarkerEA, def.Type)
		}
		return nil
	}
	conn, err := d.connector(ctx)
	if err != nil {
		return fmt.Errorf("creating a WAPI connector: %w", err)
	}
	name, comment := d.cfg.MarkerEA, "Cluster API IPAM claim holding the address (namespace/name), set by cluster-api-ipam-provider-bridge"
	_, err = conn.CreateObject(ibclient.NewEADefinition(ibclient.EADefinition{Name: &name, Type: "STRING", Comment: &comment}))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, backends.ErrForbidden) || errors.Is(err, backends.ErrUnauthorized):
		return fmt.Errorf("%w: the grid has no extensible attribute %q and these credentials may not define it: "+
			"ask a grid administrator to add a STRING extensible attribute definition named %q (grid: %s)",
			backends.ErrSetupRequired, name, name, wapiText(err))
	case errors.Is(err, backends.ErrConflict):
		// Another manager defined it meanwhile.
		return nil
	default:
		return fmt.Errorf("defining extensible attribute %q: %w", name, err)
	}
}

func (d *driver) eaDefinition(ctx context.Context, name string) (eaDefinition, bool, error) {
	var defs []eaDefinition
	if err := d.get(ctx, newObject("extensibleattributedef", "name", "type"), "", map[string]string{"name": name}, &defs); err != nil {
		return eaDefinition{}, false, fmt.Errorf("looking up extensible attribute %q: %w", name, err)
	}
	for _, d := range defs {
		if d.Name == name {
			return d, true, nil
		}
	}
	return eaDefinition{}, false, nil
}

// checkDefinitions makes sure the extra attributes the pool stamps exist.
func (d *driver) checkDefinitions(ctx context.Context) error {
	for name := range d.cfg.Reservation.ExtensibleAttributes {
		_, found, err := d.eaDefinition(ctx, name)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: extensible attribute %q is not defined in the grid", backends.ErrInvalidConfig, name)
		}
	}
	return nil
}

func (d *driver) checkNetworkView(ctx context.Context) error {
	var views []struct {
		Name string `json:"name"`
	}
	if err := d.get(ctx, newObject("networkview", "name"), "", map[string]string{"name": d.cfg.NetworkView}, &views); err != nil {
		return fmt.Errorf("looking up network view %q: %w", d.cfg.NetworkView, err)
	}
	if len(views) == 0 {
		return fmt.Errorf("%w: network view %q does not exist", backends.ErrNotFound, d.cfg.NetworkView)
	}
	return nil
}

// resolveSources finds each source in the network view, and the network
// holding each range.
func (d *driver) resolveSources(ctx context.Context) ([]resolvedSource, error) {
	resolved := make([]resolvedSource, 0, len(d.cfg.Sources))
	for _, s := range d.cfg.Sources {
		r := resolvedSource{Source: s}
		if s.Network.IsValid() {
			t := "network"
			if s.Network.Addr().Is6() {
				t = "ipv6network"
			}
			var found []struct {
				Network string `json:"network"`
			}
			search := map[string]string{"network": s.Network.String(), "network_view": d.cfg.NetworkView}
			if err := d.get(ctx, newObject(t, "network"), "", search, &found); err != nil {
				return nil, fmt.Errorf("looking up %s: %w", s, err)
			}
			if len(found) == 0 {
				return nil, fmt.Errorf("%w: %s does not exist in network view %q", backends.ErrNotFound, s, d.cfg.NetworkView)
			}
			r.network = s.Network
		} else {
			t := "range"
			if s.Start.Is6() {
				t = "ipv6range"
			}
			var found []struct {
				Network string `json:"network"`
			}
			search := map[string]string{"start_addr": s.Start.String(), "end_addr": s.End.String(), "network_view": d.cfg.NetworkView}
			if err := d.get(ctx, newObject(t, "network", "start_addr", "end_addr"), "", search, &found); err != nil {
				return nil, fmt.Errorf("looking up %s: %w", s, err)
			}
			if len(found) == 0 {
				return nil, fmt.Errorf("%w: %s does not exist in network view %q", backends.ErrNotFound, s, d.cfg.NetworkView)
			}
			network, err := netip.ParsePrefix(found[0].Network)
			if err != nil || !network.Contains(s.Start) || !network.Contains(s.End) {
				return nil, fmt.Errorf("%s: the grid places it in network %q, which does not hold it", s, found[0].Network)
			}
			r.network = network
		}
		resolved = append(resolved, r)
	}
	return resolved, nil
}

// checkZone makes sure host records with DNS have their zone.
func (d *driver) checkZone(ctx context.Context) error {
	dns := d.cfg.Reservation.DNS
	if d.cfg.Reservation.ObjectType != HostRecord || dns == nil {
		return nil
	}
	var zones []struct {
		FQDN string `json:"fqdn"`
	}
	search := map[string]string{"fqdn": dns.Zone, "view": dns.View}
	if err := d.get(ctx, newObject("zone_auth", "fqdn", "view"), "", search, &zones); err != nil {
		return fmt.Errorf("looking up DNS zone %q: %w", dns.Zone, err)
	}
	if len(zones) == 0 {
		return fmt.Errorf("%w: DNS view %q has no authoritative zone %q", backends.ErrInvalidConfig, dns.View, dns.Zone)
	}
	return nil
}

// Unheld asks the grid about each of gws in turn, up to the first that
// nothing uses: nextavailableip skips only addresses in use, whoever uses
// them.
func (d *driver) Unheld(ctx context.Context, _ resolvedSource, gws []netip.Addr) ([]netip.Addr, error) {
	for _, gw := range gws {
		used, err := d.addressInUse(ctx, gw)
		if err != nil {
			return nil, err
		}
		if !used {
			return []netip.Addr{gw}, nil
		}
	}
	return nil, nil
}

type addressEntry struct {
	IPAddress string `json:"ip_address"`
	Status    string `json:"status"`
}

func addressType(a netip.Addr) string {
	if a.Is4() {
		return "ipv4address"
	}
	return "ipv6address"
}

func (d *driver) addressInUse(ctx context.Context, a netip.Addr) (bool, error) {
	var entries []addressEntry
	search := map[string]string{"ip_address": a.String(), "network_view": d.cfg.NetworkView}
	if err := d.get(ctx, newObject(addressType(a), "ip_address", "status"), "", search, &entries); err != nil {
		return false, fmt.Errorf("looking up address %s: %w", a, err)
	}
	for _, e := range entries {
		if e.Status == "USED" {
			return true, nil
		}
	}
	return false, nil
}

// pageSize bounds one page of an address listing.
const pageSize = 1000

// usedAddresses lists the addresses of network the grid reports as used,
// one page at a time.
func (d *driver) usedAddresses(ctx context.Context, network netip.Prefix) ([]netip.Addr, error) {
	obj := newObject(addressType(network.Addr()), "ip_address")
	search := map[string]string{
		"network": network.String(), "network_view": d.cfg.NetworkView, "status": "USED",
		"_paging": "1", "_return_as_object": "1", "_max_results": fmt.Sprint(pageSize),
	}
	var used []netip.Addr
	for {
		var page struct {
			Result     []addressEntry `json:"result"`
			NextPageID string         `json:"next_page_id"`
		}
		if err := d.get(ctx, obj, "", search, &page); err != nil {
			return nil, fmt.Errorf("counting used addresses of %s: %w", network, err)
		}
		for _, e := range page.Result {
			if a, err := netip.ParseAddr(e.IPAddress); err == nil {
				used = append(used, a)
			}
		}
		if page.NextPageID == "" {
			return used, nil
		}
		search = map[string]string{"_page_id": page.NextPageID, "_paging": "1", "_return_as_object": "1", "_max_results": fmt.Sprint(pageSize)}
	}
}

// Count counts, per source, the addresses it can hand out and those of
// them in use in the grid, whoever holds them.
func (d *driver) Count(ctx context.Context, sources []resolvedSource) (backends.Usage, error) {
	var u backends.Usage
	usedIn := map[netip.Prefix][]netip.Addr{}
	for _, s := range sources {
		first, last := s.Bounds()
		u.Total = backends.SaturatingAdd(u.Total, backends.CountAddresses(first, last))
		used, ok := usedIn[s.network]
		if !ok {
			var err error
			if used, err = d.usedAddresses(ctx, s.network); err != nil {
				return backends.Usage{}, err
			}
			usedIn[s.network] = used
		}
		for _, a := range used {
			if !a.Less(first) && !last.Less(a) {
				u.Used++
			}
		}
	}
	return u, nil
}
