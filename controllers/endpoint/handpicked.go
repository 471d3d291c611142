package endpoint

import (
	"context"
	"fmt"
	"net/netip"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// An endpoint set by hand to an address is reserved in the pool, so that no
// machine is given it: the claim requests exactly that address. An address
// that one of this provider's pools cannot hold, as its spec names every
// source by its addresses, is not claimed at all: a claim that could only
// ever be refused would retry for nothing. Where a source is named by ID (a
// NetBox prefix or range) or the pool is another provider's, the claim
// finds out, and its refusal reaches the Cluster (waiting).

// outsidePool says whether addr certainly lies outside the opt-in's pool.
func (r *Reconciler) outsidePool(ctx context.Context, cluster *clusterv1.Cluster, opt optIn, addr netip.Addr) (bool, error) {
	kind, ok := r.Kinds.For(opt.pool)
	if !ok {
		return false, nil
	}
	pool, err := poolkind.GetPool(ctx, r.APIReader, kind, cluster.Namespace, opt.pool.Name)
	if err != nil {
		return false, fmt.Errorf("getting %s %s: %w", opt.pool.Kind, opt.pool.Name, err)
	}
	if pool == nil {
		return false, nil
	}
	return kind.Outside(pool, addr), nil
}
