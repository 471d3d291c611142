package infoblox

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// The objects the provider creates in the grid: fixed addresses or host
// records, of the pool's network view, carrying the claim's marker.

// objectTypes are the WAPI types the pool's objects have.
func (d *driver) objectTypes() []string {
	if d.cfg.Reservation.ObjectType == HostRecord {
		return []string{"record:host"}
	}
	var types []string
	if slices.ContainsFunc(d.cfg.Sources, func(s Source) bool { return sourceAddr(s).Is4() }) {
		types = append(types, "fixedaddress")
	}
	if slices.ContainsFunc(d.cfg.Sources, func(s Source) bool { return sourceAddr(s).Is6() }) {
		types = append(types, "ipv6fixedaddress")
	}
	return types
}

func (d *driver) objectTypeFor(a netip.Addr) string {
	switch {
	case d.cfg.Reservation.ObjectType == HostRecord:
		return "record:host"
	case a.Is4():
		return "fixedaddress"
	default:
		return "ipv6fixedaddress"
	}
}

func sourceAddr(s Source) netip.Addr {
	if s.Network.IsValid() {
		return s.Network.Addr()
	}
	return s.Start
}

// returnFieldsFor names the fields read from objects of a type; NIOS
// refuses fields the type lacks. The network view tells apart objects at
// one address in several views (see guarded.go, Marked).
func (d *driver) returnFieldsFor(objectType string) []string {
	switch objectType {
	case "fixedaddress":
		return []string{"name", "network", "network_view", "ipv4addr", "extattrs", "mac", "match_client"}
	case "ipv6fixedaddress":
		return []string{"name", "network", "network_view", "ipv6addr", "extattrs"}
	case "network", "ipv6network":
		return []string{"network", "network_view", "extattrs", "comment"}
	}
	return []string{"name", "network_view", "ipv4addrs", "ipv6addrs", "extattrs"}
}

// newObject builds the object to create for the claim in src.
func (d *driver) newObject(claim backends.Claim, src resolvedSource) (ibclient.IBObject, error) {
	return d.newObjectAt(claim, src.network.Addr().Is6(), src.nextAvailable(d.cfg.NetworkView))
}

// newObjectAt builds the object to create for the claim at address: an
// address, or a func:nextavailableip argument.
func (d *driver) newObjectAt(claim backends.Claim, ipv6 bool, next string) (ibclient.IBObject, error) {
	name, err := d.name.Render(claim)
	if err != nil {
		return nil, fmt.Errorf("%w: name pattern: %v", backends.ErrInvalidConfig, err)
	}
	comment, err := d.comment.Render(claim)
	if err != nil {
		return nil, fmt.Errorf("%w: comment pattern: %v", backends.ErrInvalidConfig, err)
	}
	comment = backends.Truncate(comment, maxComment)
	eas := ibclient.EA{d.cfg.MarkerEA: claim.Marker}
	for k, v := range d.cfg.Reservation.ExtensibleAttributes {
		eas[k] = v
	}
	if d.cfg.Reservation.ObjectType == HostRecord {
		dnsOn, dnsView := false, ""
		if dns := d.cfg.Reservation.DNS; dns != nil {
			dnsOn, dnsView = true, dns.View
			name = name + "." + dns.Zone
		}
		if err := backends.CheckDNSName("host record name", name, backends.MaxDNSName); err != nil {
			return nil, err
		}
		var v4 []ibclient.HostRecordIpv4Addr
		var v6 []ibclient.HostRecordIpv6Addr
		if ipv6 {
			v6 = []ibclient.HostRecordIpv6Addr{{Ipv6Addr: &next}}
		} else {
			v4 = []ibclient.HostRecordIpv4Addr{{Ipv4Addr: &next}}
		}
		rec := ibclient.NewHostRecord(d.cfg.NetworkView, name, "", "", v4, v6, eas, dnsOn, dnsView, "", "", false, 0, comment, nil, false)
		// Leave TTLs and disabling to the grid's defaults.
		rec.UseTtl, rec.Ttl, rec.Disable = nil, nil, nil
		return rec, nil
	}

	fa := ibclient.NewEmptyFixedAddress(ipv6)
	fa.NetviewName = d.cfg.NetworkView
	fa.Name = &name
	fa.Comment = comment
	fa.Ea = eas
	if ipv6 {
		fa.IPv6Address = next
		fa.Duid = duidFor(claim.Marker)
	} else {
		fa.IPv4Address = next
		if claim.MAC != "" {
			// A DHCP reservation: the grid's DHCP gives the address to
			// the machine's interface, as infoblox-go-client's AllocateIP
			// asks for one.
			mac, byMAC := claim.MAC, "MAC_ADDRESS"
			fa.Mac, fa.MatchClient = &mac, &byMAC
		} else {
			// A reservation: the address is held without a MAC.
			reserved := "RESERVED"
			fa.MatchClient = &reserved
		}
	}
	return fa, nil
}

// duidFor derives a DUID-UUID (RFC 6355) from the marker: NIOS requires a
// DUID on IPv6 fixed addresses, and a stable one names the claim.
func duidFor(marker string) string {
	sum := sha256.Sum256([]byte(marker))
	parts := []string{"00", "04"}
	for _, c := range sum[:16] {
		parts = append(parts, fmt.Sprintf("%02x", c))
	}
	return strings.Join(parts, ":")
}
