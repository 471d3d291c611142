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

// DerivedGateways returns the first-usable gateways that prefixLength
// carves out of network and that lie between first and last, the addresses
// the source may hand out: each must be held in the IPAM system, or it
// could be handed to a machine. It returns none when prefixLength does not
// narrow the network.
func DerivedGateways(network netip.Prefix, first, last netip.Addr, prefixLength int) ([]netip.Addr, error) {
	if prefixLength <= network.Bits() || prefixLength >= network.Addr().BitLen()-1 {
		return nil, nil
	}
	if prefixLength-network.Bits() > 8 {
		return nil, fmt.Errorf("%w: prefixLength %d splits %s into more than %d networks, each with a gateway to check; set an explicit gateway or gateway policy None",
			ErrInvalidConfig, prefixLength, network, MaxDerivedGateways)
	}
	var gateways []netip.Addr
	for sub := netip.PrefixFrom(network.Masked().Addr(), prefixLength); network.Contains(sub.Addr()); {
		gw := sub.Addr().Next()
		if !gw.Less(first) && !last.Less(gw) {
			gateways = append(gateways, gw)
		}
		next := netipx.PrefixLastIP(sub).Next()
		if !next.IsValid() {
			break
		}
		sub = netip.PrefixFrom(next, prefixLength)
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
