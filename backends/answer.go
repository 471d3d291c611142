package backends

import (
	"context"
	"fmt"
	"net/netip"
)

// CheckAnswer keeps the claim's allocation only if the pool may bind it:
// whatever the IPAM system answered, the address must lie in one of the
// pool's sources (and so be of their family) and must not be the gateway
// the machine would be given. An IPAM team that resizes a prefix after the
// pool validated it, or deletes the record that held a gateway, can make the
// system hand out such an address. The reservation is then released through
// b.Delete, which deletes it only while it still carries the claim's
// marker, and the error says what the system answered.
func CheckAnswer(ctx context.Context, b Backend, claim Claim, alloc Allocation, inSources func(netip.Addr) bool) (Allocation, error) {
	addr := alloc.Address.Addr()
	var why string
	switch {
	case !inSources(addr):
		why = "which lies in none of the pool's sources"
	case alloc.Gateway.IsValid() && addr == alloc.Gateway:
		why = "which is the gateway the pool gives its machines"
	default:
		return alloc, nil
	}
	err := fmt.Errorf("%w: %s reserved %s as %s, %s", ErrUnusableAnswer, b.Endpoint(), alloc.Address, alloc.Reference, why)
	rec := Record{Address: alloc.Address, Marker: claim.Marker, Reference: alloc.Reference}
	if delErr := b.Delete(ctx, rec); delErr != nil {
		return Allocation{}, fmt.Errorf("%w; releasing it failed: %v", err, delErr)
	}
	return Allocation{}, fmt.Errorf("%w; it was released", err)
}
