package claim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/cmd/poolkinds"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/index"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
)

// TestADeletedIPAddressWakesOnlyTheClaimsWaitingForAnAddress: the space a
// release frees is for the pool's claims that wait for an address; a
// claim that is bound, or being deleted, is not woken, so that a release
// of thousands of claims does not wake every one of them at each deleted
// IPAddress.
func TestADeletedIPAddressWakesOnlyTheClaimsWaitingForAnAddress(t *testing.T) {
	cfg, c := apitest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := apitest.Namespace(t, c)
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	require.NoError(t, informers.IndexField(ctx, &ipamv1.IPAddressClaim{}, index.WaitingPoolRefField, index.WaitingPoolRefKeys))
	require.NoError(t, informers.IndexField(ctx, &ipamv1.IPAddressClaim{}, index.PoolRefField, func(o client.Object) []string {
		return []string{index.PoolRefKey(o.(*ipamv1.IPAddressClaim).Spec.PoolRef)}
	}))
	go func() { _ = informers.Start(ctx) }()
	require.True(t, informers.WaitForCacheSync(ctx))
	cached, err := client.New(cfg, client.Options{Scheme: scheme.New(), Cache: &client.CacheOptions{Reader: informers}})
	require.NoError(t, err)

	apitest.CreateClaim(t, c, ns, "waiting")
	refused := apitest.CreateClaim(t, c, ns, "refused")
	setReady(refused, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolExhaustedReason, "full")
	require.NoError(t, c.Status().Update(ctx, refused))
	bound := apitest.CreateClaim(t, c, ns, "bound")
	setReady(bound, metav1.ConditionTrue, reasons.AddressAllocatedReason, "")
	require.NoError(t, c.Status().Update(ctx, bound))
	deleting := apitest.CreateClaim(t, c, ns, "deleting", "test/hold")
	require.NoError(t, c.Delete(ctx, deleting))
	t.Cleanup(func() {
		deleting.Finalizers = nil
		_ = c.Update(context.Background(), deleting)
	})

	r := &ClaimReconciler{Client: cached, Kinds: poolkinds.All(), holds: newHolds(clock.RealClock{})}
	released := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}, Spec: ipamv1.IPAddressSpec{PoolRef: apitest.PoolRef}}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		claims := &ipamv1.IPAddressClaimList{}
		require.NoError(ct, cached.List(ctx, claims, client.InNamespace(ns)))
		var seen int
		for _, cl := range claims.Items {
			if cl.Name == "deleting" && !cl.DeletionTimestamp.IsZero() || cl.Name == "bound" && conditions.IsTrue(&cl, ipamv1.IPAddressClaimReadyCondition) ||
				cl.Name == "refused" && conditions.Has(&cl, ipamv1.IPAddressClaimReadyCondition) || cl.Name == "waiting" {
				seen++
			}
		}
		assert.Equal(ct, 4, seen, "the cache has seen every claim as it is now")
	}, 10*time.Second, 50*time.Millisecond)

	var woken []string
	for _, req := range r.addressToWaitingClaims(ctx, released) {
		woken = append(woken, req.Name)
	}
	assert.ElementsMatch(t, []string{"waiting", "refused"}, woken)
}
