package audit

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go4.org/netipx"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// netboxKinds are NetBox's two pool kinds as the audit sees them.
func netboxKinds() poolkind.Kinds {
	spec := func(p poolkind.Pool) *v1alpha1.NetboxIPPoolSpec {
		return p.(interface {
			GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
		}).GetNetboxSpec()
	}
	base := poolkind.Kind{Backend: "netbox",
		Endpoint: func(p poolkind.Pool) string { return spec(p).Connection.URL },
		Records: func(p poolkind.Pool) string {
			if spec(p).ChildPrefixes != nil {
				return "prefix"
			}
			return "ip-address"
		},
		Spans: func(p poolkind.Pool) ([]netipx.IPRange, bool) {
			var spans []netipx.IPRange
			for _, s := range spec(p).Sources {
				if s.Prefix == nil || s.Prefix.CIDR == "" {
					return nil, false
				}
				spans = append(spans, netipx.RangeOfPrefix(netip.MustParsePrefix(s.Prefix.CIDR)))
			}
			return spans, true
		},
	}
	namespaced, global := base, base
	namespaced.Kind, namespaced.Namespaced = "NetboxIPPool", true
	namespaced.New = func() poolkind.Pool { return &v1alpha1.NetboxIPPool{} }
	namespaced.NewList = func() client.ObjectList { return &v1alpha1.NetboxIPPoolList{} }
	global.Kind = "GlobalNetboxIPPool"
	global.New = func() poolkind.Pool { return &v1alpha1.GlobalNetboxIPPool{} }
	global.NewList = func() client.ObjectList { return &v1alpha1.GlobalNetboxIPPoolList{} }
	return poolkind.Kinds{namespaced, global}
}

// A gone claim's record is another pool's orphan only where that pool
// would judge it: its own namespace's or a Global pool, on the same
// system, whose records are addresses too, that this manager audits.
func TestAGoneClaimsRecordIsAnotherPoolsOnlyWhereThatPoolAuditsIt(t *testing.T) {
	_, c := apitest.Server(t)
	ctx := context.Background()
	ns, elsewhere := apitest.Namespace(t, c), apitest.Namespace(t, c)
	const netbox = "https://netbox.example.com"
	spec := func(url, cidr string) v1alpha1.NetboxIPPoolSpec {
		return v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: url, CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}},
			Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr}}},
		}
	}
	create := func(pool poolkind.Pool, ready bool) poolkind.Pool {
		t.Helper()
		require.NoError(t, c.Create(ctx, pool))
		if ready {
			pool.SetConditions([]metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue,
				Reason: v1alpha1.ReadyReason, LastTransitionTime: metav1.Now()}})
			require.NoError(t, c.Status().Update(ctx, pool))
		}
		return pool
	}
	namespaced := func(namespace, name, url, cidr string, mutate ...func(*v1alpha1.NetboxIPPool)) *v1alpha1.NetboxIPPool {
		p := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec(url, cidr)}
		for _, m := range mutate {
			m(p)
		}
		return p
	}

	audited := create(namespaced(ns, "audited", netbox, "10.50.0.0/24"), true)
	create(namespaced(ns, "ready", "https://NetBox.example.com:443/", "10.50.1.0/24"), true)
	create(&v1alpha1.GlobalNetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: ns + "-global"}, Spec: spec(netbox, "10.50.2.0/24")}, true)
	create(namespaced(ns, "carving", netbox, "10.50.3.0/24", func(p *v1alpha1.NetboxIPPool) {
		p.Spec.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 28}}
	}), true)
	create(namespaced(ns, "other-system", "https://netbox-b.example.com", "10.50.4.0/24"), true)
	create(namespaced(ns, "paused", netbox, "10.50.5.0/24", func(p *v1alpha1.NetboxIPPool) {
		p.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	}), true)
	create(namespaced(ns, "not-ready", netbox, "10.50.6.0/24"), false)
	deleting := create(namespaced(ns, "deleting", netbox, "10.50.7.0/24", func(p *v1alpha1.NetboxIPPool) {
		p.Finalizers = []string{"test.ipam-bridge.github.io/hold"}
	}), true)
	require.NoError(t, c.Delete(ctx, deleting))
	t.Cleanup(func() {
		_ = c.Patch(ctx, deleting, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	create(namespaced(elsewhere, "other-namespace", netbox, "10.50.8.0/24"), true)

	kinds := netboxKinds()
	a := &auditRun{AuditReconciler: &AuditReconciler{Client: c, Kind: kinds[0], Kinds: kinds}, pool: audited}
	for _, tc := range []struct {
		addr string
		want bool
		why  string
	}{
		{"10.50.1.9", true, "a ready pool of the namespace on the same system, its URL spelt otherwise"},
		{"10.50.2.9", true, "a Global pool"},
		{"10.50.3.9", false, "a carving pool lists prefixes, not addresses"},
		{"10.50.4.9", false, "another system"},
		{"10.50.5.9", false, "a paused pool is not audited"},
		{"10.50.6.9", false, "a pool not ready is not audited"},
		{"10.50.7.9", false, "a pool being deleted is not audited"},
		{"10.50.8.9", false, "another namespace's pool"},
		{"10.50.0.9", false, "the audited pool's own sources are not another's"},
		{"10.50.9.9", false, "no pool's"},
	} {
		held, err := a.heldByAnotherPool(ctx, netip.MustParseAddr(tc.addr))
		require.NoError(t, err)
		assert.Equal(t, tc.want, held, "%s: %s", tc.addr, tc.why)
	}
}
