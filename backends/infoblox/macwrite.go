package infoblox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// WriteMAC gives an IPv4 fixed address of the claim's, reserved without a
// MAC (match_client RESERVED), the machine's MAC with match_client
// MAC_ADDRESS, so that the grid's DHCP serves the address to it. The
// object is read first: only a fixed address that still carries the
// marker and no MAC is written; a plan keeps whatever the IPAM team gave
// it, and a MAC already there is never replaced.
func (d *driver) WriteMAC(ctx context.Context, rec backends.Record, mac string) (string, error) {
	if objectType, _, _ := strings.Cut(rec.Reference, "/"); objectType != "fixedaddress" {
		return "", fmt.Errorf("%s: %w", rec.Reference, backends.ErrNoMACMatch)
	}
	o, found, err := d.Get(ctx, rec.Reference)
	switch {
	case err != nil:
		return "", err
	case !found:
		return "", fmt.Errorf("fixed address %s: %w", rec.Reference, backends.ErrNotFound)
	}
	if marker, _ := d.markerOf(o); marker != rec.Marker {
		return "", fmt.Errorf("fixed address %s carries %s=%q, not %q: %w", rec.Reference, d.cfg.MarkerEA, marker, rec.Marker,
			backends.ErrNotOwned)
	}
	if o.IPv4Addr == "" {
		return "", fmt.Errorf("%s: %w", rec.Reference, backends.ErrNoMACMatch)
	}
	if carried := o.dhcpMAC(); carried != "" {
		return carried, nil
	}
	if _, planned := d.markerOf(o); planned {
		// A plan without a MAC stays as the IPAM team made it.
		return "", nil
	}
	change := &macChange{Mac: mac, MatchClient: "MAC_ADDRESS"}
	// Guarded (see guarded.go): written only while the object carries the
	// marker it was read with; a lost answer is settled by reading it.
	err = d.changeGuarded(ctx, o, change, func(now object) bool { return now.dhcpMAC() == mac })
	if err != nil {
		err = d.explainMACInUse(ctx, &ibclient.FixedAddress{Mac: &mac}, err)
		if errors.Is(err, backends.ErrMACAddressInUse) {
			return "", err
		}
		return "", fmt.Errorf("setting mac %s and match_client MAC_ADDRESS on %s: %w", mac, rec.Reference, err)
	}
	return mac, nil
}

// macChange is the body of a PUT that changes a fixed address's DHCP
// match only.
type macChange struct {
	ibclient.IBBase `json:"-"`
	Mac             string `json:"mac"`
	MatchClient     string `json:"match_client"`
}

func (c *macChange) ObjectType() string { return "fixedaddress" }
