package endpoint

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
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
	if opt.pool.APIGroup != v1alpha1.GroupVersion.Group {
		return false, nil
	}
	mapping, err := r.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: opt.pool.APIGroup, Kind: opt.pool.Kind})
	if err != nil {
		// unusable reports it.
		return false, nil
	}
	obj, err := r.Client.Scheme().New(mapping.GroupVersionKind)
	if err != nil {
		return false, nil
	}
	pool, ok := obj.(client.Object)
	if !ok {
		return false, nil
	}
	key := client.ObjectKey{Name: opt.pool.Name}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		key.Namespace = cluster.Namespace
	}
	if err := r.APIReader.Get(ctx, key, pool); err != nil {
		return false, client.IgnoreNotFound(fmt.Errorf("getting %s %s: %w", opt.pool.Kind, key, err))
	}
	var sources [][2]string // a CIDR, or a first and last address; "" where unknown
	switch p := pool.(type) {
	case interface {
		GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
	}:
		for _, s := range p.GetNetboxSpec().Sources {
			switch {
			case s.Prefix != nil:
				sources = append(sources, [2]string{s.Prefix.CIDR})
			case s.IPRange != nil:
				sources = append(sources, [2]string{s.IPRange.Start, s.IPRange.End})
			}
		}
	case interface {
		GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
	}:
		for _, s := range p.GetInfobloxSpec().Sources {
			switch {
			case s.Network != nil:
				sources = append(sources, [2]string{s.Network.CIDR})
			case s.Range != nil:
				sources = append(sources, [2]string{s.Range.Start, s.Range.End})
			}
		}
	default:
		return false, nil
	}
	for _, s := range sources {
		inside, known := holds(s, addr)
		if inside || !known {
			return false, nil
		}
	}
	return len(sources) > 0, nil
}

// holds says whether a source, a CIDR or a first and last address, holds
// addr, and whether that is known.
func holds(source [2]string, addr netip.Addr) (inside, known bool) {
	if source[1] == "" {
		p, err := netip.ParsePrefix(source[0])
		if err != nil {
			return false, false
		}
		return p.Contains(addr), true
	}
	first, err1 := netip.ParseAddr(source[0])
	last, err2 := netip.ParseAddr(source[1])
	if err1 != nil || err2 != nil {
		return false, false
	}
	return first.Compare(addr) <= 0 && addr.Compare(last) <= 0, true
}
