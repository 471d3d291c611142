package claim

import (
	"fmt"
	"net/netip"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// A claim may request one address: by its annotation
// ipam-bridge.github.io/requested-address, or by its name in the pool's
// spec.preAllocations (which may also name it "<namespace>/<name>"). When
// both request one, they must agree: an annotation and a pre-allocation
// that differ are two people's plans for the claim, and the claim gets
// neither until one of them gives way. A claim that requests an address
// gets exactly that address or none, with the reason
// RequestedAddressUnavailable naming whoever holds it. The backends check
// the address against the pool's sources, gateway and records
// (backends.Claim.Requested); here the cluster's own view is added: an
// address another live IPAddress holds (see heldInCluster) is never the
// requesting claim's, whatever the IPAM system says: the record made for it
// is handed to the claim whose machine uses the address, as the guard does.

// addressRequest is the address a claim requests, where the request comes
// from, or why it cannot be read.
type addressRequest struct {
	addr netip.Addr
	// from names the request for messages.
	from string
	err  error
}

// preAllocating is a pool with pre-allocations: every pool kind of ours.
type preAllocating interface {
	GetPreAllocations() v1alpha1.PreAllocations
}

// requestOf reads the address the claim requests from its annotation and
// its pool's pre-allocations; none when neither names one.
func requestOf(claim *ipamv1.IPAddressClaim, pool poolkind.Pool) addressRequest {
	annotated, byAnnotation := claim.Annotations[v1alpha1.RequestedAddressAnnotation]
	var preAllocated v1alpha1.IPAddressString
	var byPool bool
	if p, ok := pool.(preAllocating); ok {
		preAllocated, byPool = p.GetPreAllocations().For(claim.Namespace, claim.Name)
	}
	annotation := fmt.Sprintf("the claim's annotation %s", v1alpha1.RequestedAddressAnnotation)
	preAllocation := fmt.Sprintf("the pre-allocation of pool %s", pool.GetName())
	switch {
	case byAnnotation && byPool:
		a, errA := parseRequested(annotated)
		p, errP := parseRequested(string(preAllocated))
		switch {
		case errA != nil:
			return addressRequest{err: fmt.Errorf("%w: %s: %v", backends.ErrRequestedUnavailable, annotation, errA)}
		case errP != nil:
			return addressRequest{err: fmt.Errorf("%w: %s: %v", backends.ErrRequestedUnavailable, preAllocation, errP)}
		case a != p:
			return addressRequest{err: fmt.Errorf("%w: %s requests %s, but %s requests %s for this claim; the claim gets neither until they agree (remove one)",
				backends.ErrRequestedUnavailable, annotation, a, preAllocation, p)}
		}
		return addressRequest{addr: a, from: annotation + " and " + preAllocation}
	case byAnnotation:
		a, err := parseRequested(annotated)
		if err != nil {
			return addressRequest{err: fmt.Errorf("%w: %s: %v", backends.ErrRequestedUnavailable, annotation, err)}
		}
		return addressRequest{addr: a, from: annotation}
	case byPool:
		p, err := parseRequested(string(preAllocated))
		if err != nil {
			return addressRequest{err: fmt.Errorf("%w: %s: %v", backends.ErrRequestedUnavailable, preAllocation, err)}
		}
		return addressRequest{addr: p, from: preAllocation}
	}
	return addressRequest{}
}

// parseRequested parses a requested address: an IPv4 or IPv6 address in
// its usual form, without prefix length or zone.
func parseRequested(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 or IPv6 address without prefix length", s)
	case a.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q has a zone", s)
	case a.Is4In6():
		return netip.Addr{}, fmt.Errorf("%q is an IPv4-mapped IPv6 address; write %s", s, a.Unmap())
	}
	return a, nil
}
