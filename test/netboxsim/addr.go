package netboxsim

import (
	"cmp"
	"fmt"
	"iter"
	"math/big"
	"net/netip"
	"strings"

	"go4.org/netipx"
)

// parseAddress parses an IP address with optional mask the way netaddr's
// IPNetwork does: without a mask the address is a host (/32 or /128). Host
// bits are kept.
func parseAddress(s string) (netip.Prefix, bool) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p, err == nil && p.Addr().Zone() == ""
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

// inetCompare orders inet values as PostgreSQL does: family, then the common
// network bits, then mask length, then the whole address. NetBox relies on
// this ordering for list results.
func inetCompare(a, b netip.Prefix) int {
	if c := cmp.Compare(a.Addr().BitLen(), b.Addr().BitLen()); c != 0 {
		return c
	}
	n := min(a.Bits(), b.Bits())
	an := netip.PrefixFrom(a.Addr(), n).Masked().Addr()
	bn := netip.PrefixFrom(b.Addr(), n).Masked().Addr()
	return cmp.Or(an.Compare(bn), cmp.Compare(a.Bits(), b.Bits()), a.Addr().Compare(b.Addr()))
}

func familyNumber(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}

// rangeName reproduces IPRange.name, including its quirk of keeping every
// chunk that is equal in both addresses, even after the first difference.
func rangeName(start, end netip.Addr, bits int) string {
	sep := "."
	if start.Is6() {
		sep = ":"
	}
	sc := strings.Split(start.String(), sep)
	ec := strings.Split(end.String(), sep)
	var base []string
	for i := 0; i < len(sc) && i < len(ec); i++ {
		if sc[i] == ec[i] {
			base = append(base, sc[i])
		}
	}
	startRest := strings.Join(sc[min(len(base), len(sc)):], sep)
	endRest := strings.Join(ec[min(len(base), len(ec)):], sep)
	return fmt.Sprintf("%s%s%s-%s/%d", strings.Join(base, sep), sep, startRest, endRest, bits)
}

// addrs yields every address of the set in ascending order without
// materialising it, so that an IPv6 /64 costs nothing.
func addrs(set *netipx.IPSet) iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		for _, r := range set.Ranges() {
			for a := r.From(); ; a = a.Next() {
				if !yield(a) {
					return
				}
				if a == r.To() {
					break
				}
			}
		}
	}
}

// take returns up to n addresses from seq.
func take(seq iter.Seq[netip.Addr], n int) []netip.Addr {
	out := []netip.Addr{}
	if n <= 0 {
		return out
	}
	for a := range seq {
		out = append(out, a)
		if len(out) == n {
			break
		}
	}
	return out
}

func addrInt(a netip.Addr) *big.Int { return new(big.Int).SetBytes(a.AsSlice()) }
