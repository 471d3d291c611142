package backends

import (
	"context"
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

// MachinePrefix is addr, recorded with the prefix length of its network,
// with the prefix length the machine configures (see MachineBits).
func MachinePrefix(addr netip.Prefix, prefixLength int) netip.Prefix {
	return netip.PrefixFrom(addr.Addr(), MachineBits(addr, prefixLength))
}

// allocation is the driver's allocation of r with the pool's rules: the
// prefix length the machine configures, its gateway, and the endpoint.
func (p *Protocol[P, S, R, Q]) allocation(pool P, r R) (Allocation, error) {
	a, err := p.d.Allocation(pool, r)
	if err != nil {
		return Allocation{}, err
	}
	a.Address = MachinePrefix(a.Address, p.o.PrefixLength)
	a.Gateway = p.o.Gateway.For(a.Address)
	a.Endpoint = p.d.Endpoint()
	return a, nil
}

// unusable says why src, which contains addr, may not give it to a claim
// that requests it: the system's own rules first, then the gateway the
// machine would get. "" when it may.
func (p *Protocol[P, S, R, Q]) unusable(src S, addr netip.Addr) string {
	if why := p.d.Unusable(src, addr); why != "" {
		return why
	}
	machine := MachinePrefix(netip.PrefixFrom(addr, src.Subnet().Bits()), p.o.PrefixLength)
	if p.o.Gateway.For(machine) == addr {
		return fmt.Sprintf("it is the gateway the pool gives the machines of %s", machine.Masked())
	}
	return ""
}

// checkSources checks the pool's rules against the sources a validation
// resolved: the prefix length fits every source's family, and the gateway
// can never be handed to a machine. An explicit gateway must lie in every
// source's network; a gateway among a source's addresses, explicit or
// derived by the rule of allocation (SourceGateways), must be held in the
// system, which would otherwise consider it free.
func (p *Protocol[P, S, R, Q]) checkSources(ctx context.Context, pool P) error {
	sources := p.d.Sources(pool)
	for _, s := range sources {
		if err := CheckPrefixLength(p.o.PrefixLength, s.Subnet(), s.String()); err != nil {
			return err
		}
	}
	if p.o.Gateway.None {
		return nil
	}
	for _, s := range sources {
		network, gw := s.Subnet(), p.o.Gateway.Address
		var gws []netip.Addr
		switch {
		case gw.IsValid() && !network.Contains(gw):
			return fmt.Errorf("%w: gateway %s is outside %s (network %s)", ErrInvalidConfig, gw, s, network)
		case gw.IsValid() && s.Contains(gw):
			gws = []netip.Addr{gw}
		case !gw.IsValid():
			first, last := s.Bounds()
			var err error
			if gws, err = SourceGateways(network, first, last, p.o.PrefixLength); err != nil {
				return err
			}
		}
		if len(gws) == 0 {
			continue
		}
		unheld, err := p.d.Unheld(ctx, s, gws)
		if err != nil {
			return fmt.Errorf("looking up the gateways of %s: %w", s, err)
		}
		if len(unheld) > 0 {
			return p.unheldGateway(unheld[0], s)
		}
	}
	return nil
}

// unheldGateway is the error of a gateway among a source's addresses that
// nothing holds in the system.
func (p *Protocol[P, S, R, Q]) unheldGateway(gw netip.Addr, s S) error {
	what, fix := "gateway "+gw.String(), "set gateway.policy None"
	if !p.o.Gateway.Address.IsValid() {
		subnet := netip.PrefixFrom(gw, MachineBits(s.Subnet(), p.o.PrefixLength)).Masked()
		what += fmt.Sprintf(" (the first usable address of %s, the machines' subnet)", subnet)
		fix = "set an explicit gateway or gateway.policy None"
	}
	return fmt.Errorf("%w: %s lies in %s but nothing holds it in %s, so %s could hand it to a machine; reserve it for the router (for example an address with status reserved, a fixed address or host record), allocate from a range that excludes it, or %s",
		ErrInvalidConfig, what, s, p.d.Name(), p.d.Name(), fix)
}
