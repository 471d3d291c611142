package backends

import (
	"context"
	"errors"
)

// MACWriter is a backend that can give a record it reserved without a MAC
// the MAC its machine reported only afterwards (CAPV's VSphereVM reports
// the MAC vSphere gives a device once the VM is ready, which needs the
// address): the record becomes a DHCP reservation for that machine.
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
