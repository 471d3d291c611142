package backends

import (
	"context"
	"errors"
	"fmt"
)

// MACWriter gives a record reserved without a MAC the MAC its machine
// reported only afterwards (CAPV's VSphereVM reports the MAC vSphere gives a
// device once the VM is ready, which needs the address): the record becomes
// a DHCP reservation for that machine. A driver whose records serve DHCP
// (Infoblox's fixed addresses) implements it; every backend offers it, as
// part of Reserver (Protocol.WriteMAC), and answers ErrNoMACMatch where its
// driver does not.
type MACWriter interface {
	// WriteMAC makes the record rec names (rec.Reference), which must
	// still carry rec.Marker, a DHCP reservation for mac. A record that
	// carries a MAC already keeps it: WriteMAC writes nothing and returns
	// that MAC, so that a MAC is written once and never rewritten. It
	// returns the MAC the record carries afterwards. ErrNotOwned: the
	// record no longer carries the marker; ErrNotFound: it is gone;
	// ErrNoMACMatch: it is not a record whose DHCP match is a MAC (an IPv6
	// fixed address, a host record); ErrMACAddressInUse: another record
	// holds mac.
	WriteMAC(ctx context.Context, rec Record, mac string) (string, error)
}

// ErrNoMACMatch is returned for a record that matches no DHCP client by
// MAC.
var ErrNoMACMatch = errors.New("the record matches no DHCP client by MAC")

// WriteMAC is the driver's MACWriter, for a system whose records serve
// DHCP; ErrNoMACMatch for any other.
func (p *Protocol[P, S, R, Q]) WriteMAC(ctx context.Context, rec Record, mac string) (string, error) {
	if p.macWriter == nil {
		return "", fmt.Errorf("%s: %w", p.d.Endpoint(), ErrNoMACMatch)
	}
	return p.macWriter.WriteMAC(ctx, rec, mac)
}
