package backends

import (
	"fmt"
	"net/netip"

	"go4.org/netipx"
)

// MaxDerivedGateways bounds how many gateways a pool may derive from one
// source by narrowing it with prefixLength; each must be checked in the IPAM
// system, so a wider split needs an explicit gateway.
const MaxDerivedGateways = 256

// MachineBits is the prefix length the machines configure for the addresses
// of network: the pool's prefixLength where it sets one, else the
// network's own.
func MachineBits(network netip.Prefix, prefixLength int) int {
	if prefixLength > 0 && prefixLength <= network.Addr().BitLen() {
		return prefixLength
	}
	return network.Bits()
}

// SourceGateways returns the gateways a pool without an explicit gateway
// gives the addresses first..last of network, which it hands out, that lie
// among them: each must be held in the IPAM system, or it could be handed
// to a machine. It is the rule of allocation (FirstUsable of each
// machine's subnet, MachineBits long), so that validation never demands
// more or less than allocation gives: a /31 or /32 subnet has no gateway,
// a subnet narrowed by prefixLength has its own, and one widened by it has
// the wider subnet's.
func SourceGateways(network netip.Prefix, first, last netip.Addr, prefixLength int) ([]netip.Addr, error) {
	bits := MachineBits(network, prefixLength)
	if bits >= network.Addr().BitLen()-1 {
		return nil, nil
	}
	if bits-network.Bits() > 8 {
		return nil, fmt.Errorf("%w: prefixLength %d splits %s into more than %d networks, each with a gateway to check; set an explicit gateway or gateway policy None",
			ErrInvalidConfig, prefixLength, network, MaxDerivedGateways)
	}
	var gateways []netip.Addr
	for sub := netip.PrefixFrom(network.Addr(), bits).Masked(); ; {
		if gw := FirstUsable(sub); gw.IsValid() && !gw.Less(first) && !last.Less(gw) {
			gateways = append(gateways, gw)
		}
		next := netipx.PrefixLastIP(sub).Next()
		if !next.IsValid() || !network.Contains(next) {
			break
		}
		sub = netip.PrefixFrom(next, bits)
	}
	return gateways, nil
}

// CheckPrefixLength refuses a prefixLength longer than the source's family
// allows (say 64 on an IPv4 network): every address of the source would
// be reserved and then fail, and nothing else says so before a claim comes.
func CheckPrefixLength(prefixLength int, network netip.Prefix, source string) error {
	if prefixLength > network.Addr().BitLen() {
		return fmt.Errorf("%w: prefixLength %d is longer than an IPv%d address (%d bits) of %s",
			ErrInvalidConfig, prefixLength, map[bool]int{true: 4, false: 6}[network.Addr().Is4()], network.Addr().BitLen(), source)
	}
	return nil
}

// Gateway is the gateway rule of a pool: Address when valid, none when
// None, otherwise the first usable address of each allocated address's own
// subnet. Both systems' configurations carry it, as the API's Gateway does.
type Gateway struct {
	Address netip.Addr
	None    bool
}

// For is the gateway of an allocated address, p with the prefix length the
// machine configures.
func (g Gateway) For(p netip.Prefix) netip.Addr {
	switch {
	case g.Address.IsValid():
		return g.Address
	case g.None:
		return netip.Addr{}
	}
	return FirstUsable(p)
}

// FirstUsable is the gateway a pool derives for an allocated address: the
// address after the network address of the address's own prefix (narrowed
// by prefixLength where the pool sets one), or none when the prefix is too
// small to hold a gateway besides the address itself.
func FirstUsable(p netip.Prefix) netip.Addr {
	if p.Bits() >= p.Addr().BitLen()-1 {
		return netip.Addr{}
	}
	return p.Masked().Addr().Next()
}
