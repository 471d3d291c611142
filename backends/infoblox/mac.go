package infoblox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// DHCP reservations: a claim with a MAC (backends.Claim.MAC) gets an IPv4
// fixed address with that MAC and match_client MAC_ADDRESS, so that the
// grid's DHCP hands the machine its address. NIOS refuses a MAC that
// another fixed address of the same network holds; the claim is then told
// which record holds it. Retired as a tombstone, the fixed address becomes
// a reservation again (see driver.Mark).

// zeroMAC is the MAC NIOS stores on a reservation (match_client RESERVED).
const zeroMAC = "00:00:00:00:00:00"

// macInUseText is NIOS's refusal of a MAC another fixed address of the
// network holds (NIOS 8.2, ansible/ansible#58708): "MAC address
// 08:6d:41:e8:fd:e8 is used in two fixed addresses 192.168.10.1 and
// 192.168.10.1, which are in the same network 192.168.10.0/24." The first
// address is the holder's.
var macInUseText = regexp.MustCompile(`(?i)MAC address (\S+) is used in two fixed addresses (\S+) and (\S+)`)

// explainMACInUse adds to the grid's refusal of obj's MAC the records that
// hold it, as the IPAM team finds them; any other error is returned as is.
func (d *driver) explainMACInUse(ctx context.Context, obj ibclient.IBObject, err error) error {
	fa, ok := obj.(*ibclient.FixedAddress)
	if !errors.Is(err, backends.ErrMACAddressInUse) || !ok || fa.Mac == nil {
		return err
	}
	mac := *fa.Mac
	held := ""
	if m := macInUseText.FindStringSubmatch(wapiText(err)); m != nil {
		held = m[2]
	}
	var found []object
	search := map[string]string{"mac": mac, "network_view": d.cfg.NetworkView}
	if lookupErr := d.get(ctx, newObject("fixedaddress", d.returnFieldsFor("fixedaddress")...), "", search, &found); lookupErr != nil {
		// The refusal stands on its own; the lookup only names the holder.
		return fmt.Errorf("MAC address %s is held by another fixed address of network view %s (looking it up failed: %v): %w",
			mac, d.cfg.NetworkView, lookupErr, err)
	}
	var holders []string
	for _, o := range found {
		if held != "" && o.IPv4Addr != held {
			continue
		}
		h := fmt.Sprintf("%s (%s", o.Ref, o.IPv4Addr)
		if o.Name != "" {
			h += ", name " + o.Name
		}
		if m := o.ExtAttrs.get(d.cfg.MarkerEA); m != "" {
			h += fmt.Sprintf(", %s=%q", d.cfg.MarkerEA, m)
		}
		holders = append(holders, h+")")
	}
	if len(holders) == 0 {
		holders = append(holders, "fixed address "+held)
	}
	return fmt.Errorf("MAC address %s is held by %s in network view %s; the grid gives one MAC one fixed address per network: %w",
		mac, strings.Join(holders, ", "), d.cfg.NetworkView, err)
}
