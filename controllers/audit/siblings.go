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

	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// heldByAnotherPool says whether another of this cluster's pools, one whose
// audit would judge the record as its own, spans addr: a record of a gone
// claim there is that pool's orphan, which its own audit reports (and may
// release), not a stray of every other pool of the namespace. That pool is
// of this pool's namespace or Global, on the same IPAM system, with records
// of the same type, and audited by this manager (ready, not paused, not
// being deleted, of its watch filter). Its spans are its sources as its
// spec names them, without their VRF or network view: a pool whose sources
// are named by ID alone is not known here, and a record in its sources is
// still reported; a record the IPAM team moved into another VRF at an
// address another pool spans is not (docs/audit.md). The pools are listed
// once per audit.
func (a *auditRun) heldByAnotherPool(ctx context.Context, addr netip.Addr) (bool, error) {
	if a.siblings == nil {
		spans, err := a.spansOfOtherPools(ctx)
		a.siblings = &siblings{spans: spans, err: err}
	}
	if a.siblings.err != nil {
		return false, a.siblings.err
	}
	for _, span := range a.siblings.spans {
		if span.Contains(addr) {
			return true, nil
		}
	}
	return false, nil
}

// siblings are the other pools' spans as one audit listed them, or why
// they could not be listed.
type siblings struct {
	spans []netipx.IPRange
	err   error
}

// spansOfOtherPools are the spans of the pools that heldByAnotherPool
// counts.
func (a *auditRun) spansOfOtherPools(ctx context.Context) ([]netipx.IPRange, error) {
	if a.Kind.Endpoint == nil || a.Kind.Records == nil {
		return nil, nil
	}
	system, records := systemOf(a.Kind.Endpoint(a.pool)), a.Kind.Records(a.pool)
	var spans []netipx.IPRange
	for _, kind := range a.Kinds {
		if kind.Backend != a.Kind.Backend || kind.Spans == nil || kind.Endpoint == nil || kind.Records == nil {
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
			if !ok || pool.GetUID() == a.pool.GetUID() || !a.audits(pool) ||
				systemOf(kind.Endpoint(pool)) != system || kind.Records(pool) != records {
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

// audits says whether this manager audits the pool: what Reconcile lets
// through to an audit.
func (a *auditRun) audits(pool poolkind.Pool) bool {
	return pool.GetDeletionTimestamp().IsZero() && reservation.MatchesWatchFilter(pool, a.WatchFilterValue) &&
		!annotations.HasPaused(pool) && conditions.IsTrue(pool, v1alpha1.ReadyCondition)
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
