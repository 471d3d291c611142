package wapisim

import (
	"net/netip"
)

// lastAddr returns the last address of a prefix (the IPv4 broadcast).
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		// Set every host bit: bits past the prefix length.
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// usableSpan returns the first and last addresses next-available-IP may hand
// out in a network: NIOS skips the network and broadcast addresses of IPv4
// networks (except /31 and /32, which have none) and the subnet-router
// anycast address (the all-zero host) of IPv6 networks (best guess).
func usableSpan(p netip.Prefix) (netip.Addr, netip.Addr) {
	p = p.Masked()
	first, last := p.Addr(), lastAddr(p)
	switch {
	case first.Is4() && p.Bits() <= 30:
		return first.Next(), last.Prev()
	case first.Is6() && p.Bits() < 128:
		return first.Next(), last
	}
	return first, last
}

// inSpan reports whether lo <= a <= hi.
func inSpan(a, lo, hi netip.Addr) bool { return a.Compare(lo) >= 0 && a.Compare(hi) <= 0 }
