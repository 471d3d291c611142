package audit

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// heldByAnotherPool says whether another of this cluster's pools on the
// audited pool's IPAM system, whose records are of the same type
// (addresses, or carved prefixes), spans addr: a record of a gone claim
// there is that pool's orphan, which its own audit reports (and may
// release), not a stray of every other pool of the namespace. The spans are
// the pools' sources as their specs name them, without their VRF or
// network view: a pool whose sources are named by ID alone is not known
// here, and a record in its sources is still reported; a record the IPAM
// team moved into another VRF at an address another pool spans is not
// (docs/audit.md). The pools are listed once per audit.
func (a *auditRun) heldByAnotherPool(ctx context.Context, addr netip.Addr) (bool, error) {
	if a.siblingSpans == nil {
		spans, err := a.spansOfOtherPools(ctx)
		if err != nil {
			return false, err
		}
		a.siblingSpans = &spans
	}
	for _, span := range *a.siblingSpans {
		if span.Contains(addr) {
			return true, nil
		}
	}
	return false, nil
}

// spansOfOtherPools are the spans of the pools, other than the audited one
// and not being deleted, of this pool's namespace and the Global ones, that
// reach the same IPAM system.
func (a *auditRun) spansOfOtherPools(ctx context.Context) ([]netipx.IPRange, error) {
	system := systemOf(a.Kind.Endpoint(a.pool))
	carves := func(kind poolkind.Kind, pool poolkind.Pool) bool { return kind.Carves != nil && kind.Carves(pool) }
	auditedCarves := carves(a.Kind, a.pool)
	var spans []netipx.IPRange
	for _, kind := range a.Kinds {
		if kind.Backend != a.Kind.Backend || kind.Spans == nil || kind.Endpoint == nil {
			continue
		}
		list := kind.NewList()
		var opts []client.ListOption
		if kind.Namespaced {
			opts = append(opts, client.InNamespace(a.pool.GetNamespace()))
		}
		if err := a.Client.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing the %s pools: %w", kind.Kind, err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			pool, ok := o.(poolkind.Pool)
			if !ok || pool.GetUID() == a.pool.GetUID() || !pool.GetDeletionTimestamp().IsZero() ||
				systemOf(kind.Endpoint(pool)) != system || carves(kind, pool) != auditedCarves {
				return nil
			}
			if s, known := kind.Spans(pool); known {
				spans = append(spans, s...)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return spans, nil
}

// systemOf names the IPAM system of an endpoint's URL as a spec gives it:
// scheme, host with its port, and path, so that two spellings of one URL
// name one system.
func systemOf(endpoint string) string {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || u.Host == "" {
		return endpoint
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port + strings.TrimRight(u.EscapedPath(), "/")
}
