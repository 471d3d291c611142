package infoblox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

type eaDefinition struct {
	Ref  string `json:"_ref"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// ensureMarkerDefinition makes sure the grid defines the marker's extensible
// attribute as a string, creating it when the credentials may (NIOS lets only
// superusers define attributes). Its first request also proves the
// credentials work.
func (b *Backend) ensureMarkerDefinition(ctx context.Context) error {
	def, found, err := b.eaDefinition(ctx, b.cfg.MarkerEA)
	if err != nil {
		return err
	}
	if found {
		if def.Type != "STRING" {
			return fmt.Errorf("%w: extensible attribute %q is of type %s; the claim marker needs type STRING",
				backends.ErrInvalidConfig, b.cfg.MarkerEA, def.Type)
		}
		return nil
	}
	conn, err := b.connector(ctx)
	if err != nil {
		return fmt.Errorf("creating a WAPI connector: %w", err)
	}
	name, comment := b.cfg.MarkerEA, "Cluster API IPAM claim holding the address (namespace/name), set by cluster-api-ipam-provider-bridge"
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

func (b *Backend) eaDefinition(ctx context.Context, name string) (eaDefinition, bool, error) {
	var defs []eaDefinition
	if err := b.get(ctx, newObject("extensibleattributedef", "name", "type"), "", map[string]string{"name": name}, &defs); err != nil {
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
func (b *Backend) checkDefinitions(ctx context.Context) error {
	for name := range b.cfg.Reservation.ExtensibleAttributes {
		_, found, err := b.eaDefinition(ctx, name)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: extensible attribute %q is not defined in the grid", backends.ErrInvalidConfig, name)
		}
	}
	return nil
}

func (b *Backend) checkNetworkView(ctx context.Context) error {
	var views []struct {
		Name string `json:"name"`
	}
	if err := b.get(ctx, newObject("networkview", "name"), "", map[string]string{"name": b.cfg.NetworkView}, &views); err != nil {
		return fmt.Errorf("looking up network view %q: %w", b.cfg.NetworkView, err)
	}
	if len(views) == 0 {
		return fmt.Errorf("%w: network view %q does not exist", backends.ErrNotFound, b.cfg.NetworkView)
	}
	return nil
}

// resolveSources finds each source in the network view, and the network
// holding each range.
func (b *Backend) resolveSources(ctx context.Context) ([]resolvedSource, error) {
	resolved := make([]resolvedSource, 0, len(b.cfg.Sources))
	for _, s := range b.cfg.Sources {
		r := resolvedSource{Source: s}
		if s.Network.IsValid() {
			t := "network"
			if s.Network.Addr().Is6() {
				t = "ipv6network"
			}
			var found []struct {
				Network string `json:"network"`
			}
			search := map[string]string{"network": s.Network.String(), "network_view": b.cfg.NetworkView}
			if err := b.get(ctx, newObject(t, "network"), "", search, &found); err != nil {
				return nil, fmt.Errorf("looking up %s: %w", s, err)
			}
			if len(found) == 0 {
				return nil, fmt.Errorf("%w: %s does not exist in network view %q", backends.ErrNotFound, s, b.cfg.NetworkView)
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
			search := map[string]string{"start_addr": s.Start.String(), "end_addr": s.End.String(), "network_view": b.cfg.NetworkView}
			if err := b.get(ctx, newObject(t, "network", "start_addr", "end_addr"), "", search, &found); err != nil {
				return nil, fmt.Errorf("looking up %s: %w", s, err)
			}
			if len(found) == 0 {
				return nil, fmt.Errorf("%w: %s does not exist in network view %q", backends.ErrNotFound, s, b.cfg.NetworkView)
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
func (b *Backend) checkZone(ctx context.Context) error {
	dns := b.cfg.Reservation.DNS
	if b.cfg.Reservation.ObjectType != HostRecord || dns == nil {
		return nil
	}
	var zones []struct {
		FQDN string `json:"fqdn"`
	}
	search := map[string]string{"fqdn": dns.Zone, "view": dns.View}
	if err := b.get(ctx, newObject("zone_auth", "fqdn", "view"), "", search, &zones); err != nil {
		return fmt.Errorf("looking up DNS zone %q: %w", dns.Zone, err)
	}
	if len(zones) == 0 {
		return fmt.Errorf("%w: DNS view %q has no authoritative zone %q", backends.ErrInvalidConfig, dns.View, dns.Zone)
	}
	return nil
}

// checkGateway makes sure the gateway lies in every source's network and,
// where it lies among the addresses a source hands out, that the grid holds
// it: nextavailableip skips only addresses in use, so an unrecorded gateway
// could be given to a machine.
func (b *Backend) checkGateway(ctx context.Context, sources []resolvedSource) error {
	if b.cfg.Gateway.None {
		return nil
	}
	for _, s := range sources {
		gw := b.cfg.Gateway.Address
		if !gw.IsValid() {
			// The gateways allocation gives the source's addresses: none
			// for a /31 or /32 subnet.
			first, last := s.hostRange()
			gws, err := backends.SourceGateways(s.network, first, last, b.cfg.PrefixLength)
			if err != nil {
				return err
			}
			for _, d := range gws {
				if err := b.checkHeld(ctx, d, s); err != nil {
					return err
				}
			}
			continue
		}
		if !s.network.Contains(gw) {
			return fmt.Errorf("%w: gateway %s lies outside network %s of %s", backends.ErrInvalidConfig, gw, s.network, s.Source)
		}
		if !s.Contains(gw) {
			continue
		}
		if err := b.checkHeld(ctx, gw, s); err != nil {
			return err
		}
	}
	return nil
}

// checkHeld makes sure the grid holds a gateway among a source's addresses.
func (b *Backend) checkHeld(ctx context.Context, gw netip.Addr, s resolvedSource) error {
	used, err := b.addressInUse(ctx, gw)
	if err != nil {
		return err
	}
	if !used {
		return fmt.Errorf("%w: gateway %s lies in %s but nothing holds it in the grid, so the grid could hand it to a machine: "+
			"reserve it (a fixed address or host record for the router), or allocate from a range that excludes it",
			backends.ErrInvalidConfig, gw, s.Source)
	}
	return nil
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

func (b *Backend) addressInUse(ctx context.Context, a netip.Addr) (bool, error) {
	var entries []addressEntry
	search := map[string]string{"ip_address": a.String(), "network_view": b.cfg.NetworkView}
	if err := b.get(ctx, newObject(addressType(a), "ip_address", "status"), "", search, &entries); err != nil {
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
func (b *Backend) usedAddresses(ctx context.Context, network netip.Prefix) ([]netip.Addr, error) {
	obj := newObject(addressType(network.Addr()), "ip_address")
	search := map[string]string{
		"network": network.String(), "network_view": b.cfg.NetworkView, "status": "USED",
		"_paging": "1", "_return_as_object": "1", "_max_results": fmt.Sprint(pageSize),
	}
	var used []netip.Addr
	for {
		var page struct {
			Result     []addressEntry `json:"result"`
			NextPageID string         `json:"next_page_id"`
		}
		if err := b.get(ctx, obj, "", search, &page); err != nil {
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

// usage counts, per source, the addresses it can hand out and those of them
// in use in the grid, whoever holds them.
func (b *Backend) usage(ctx context.Context, sources []resolvedSource) (backends.Usage, error) {
	var u backends.Usage
	usedIn := map[netip.Prefix][]netip.Addr{}
	for _, s := range sources {
		first, last := s.hostRange()
		u.Total = backends.SaturatingAdd(u.Total, backends.CountAddresses(first, last))
		used, ok := usedIn[s.network]
		if !ok {
			var err error
			if used, err = b.usedAddresses(ctx, s.network); err != nil {
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

// hostRange is the first and last address a source hands out: a range's
// bounds, or a network's addresses without, in IPv4, the network and
// broadcast addresses.
func (s resolvedSource) hostRange() (netip.Addr, netip.Addr) {
	if !s.Network.IsValid() {
		return s.Start, s.End
	}
	p := s.Network.Masked()
	first := p.Addr()
	last := netipx.PrefixLastIP(p)
	if first.Is4() && p.Bits() < 31 {
		first, last = first.Next(), last.Prev()
	}
	return first, last
}
