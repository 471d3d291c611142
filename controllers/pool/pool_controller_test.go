package pool

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
)

// A pool that is not ready is looked at again with backoff when the cause
// may clear by itself or by a Secret change whose event a reconcile may
// have read too early (refused credentials), and at the sync period when
// only an edit can clear it.
func TestNotReadyPoolsLookAgain(t *testing.T) {
	const sync = 5 * time.Minute
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{name: "unavailable", err: backends.ErrUnavailable, want: retry.FirstRetryInterval},
		{name: "throttled", err: backends.ErrThrottled, want: retry.FirstRetryInterval},
		{name: "credentials refused", err: backends.ErrUnauthorized, want: retry.FirstRetryInterval},
		{name: "permission denied", err: backends.ErrForbidden, want: retry.FirstRetryInterval},
		{name: "invalid configuration", err: backends.ErrInvalidConfig, want: sync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &PoolReconciler{Recorder: events.NewFakeRecorder(10), SyncPeriod: sync, MaxRetryInterval: sync, retries: retry.NewWaitBackoff(retry.FirstRetryInterval, sync)}
			pool := &v1alpha1.NetboxIPPool{}
			pool.Namespace, pool.Name = "ns", "pool"
			result, err := r.notReady(context.Background(), pool, fmt.Errorf("validating: %w", tc.err))
			assert.NoError(t, err)
			assert.Equal(t, tc.want, result.RequeueAfter)
		})
	}
}

// A deleted pool waits for every claim of it with the release finalizer,
// whatever its state: one that never got its IPAddress may hold a record a
// dead manager made. A claim without the finalizer holds nothing, and a
// claim of another pool is not this pool's.
func TestDeletedPoolWaitsForEveryClaimWithTheFinalizer(t *testing.T) {
	ref := ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: "pool"}
	claim := func(name string, mutate ...func(*ipamv1.IPAddressClaim)) ipamv1.IPAddressClaim {
		c := ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Finalizers: []string{reservation.ClaimFinalizer}},
			Spec: ipamv1.IPAddressClaimSpec{PoolRef: ref}}
		for _, m := range mutate {
			m(&c)
		}
		return c
	}
	claims := []ipamv1.IPAddressClaim{
		claim("unbound"),
		claim("bound", func(c *ipamv1.IPAddressClaim) { c.Status.AddressRef.Name = "bound" }),
		claim("deleting", func(c *ipamv1.IPAddressClaim) { c.DeletionTimestamp = &metav1.Time{Time: time.Now()} }),
		claim("no-finalizer", func(c *ipamv1.IPAddressClaim) { c.Finalizers = nil }),
		claim("other-pool", func(c *ipamv1.IPAddressClaim) { c.Spec.PoolRef.Name = "other" }),
		claim("other-kind", func(c *ipamv1.IPAddressClaim) { c.Spec.PoolRef.Kind = "InfobloxIPPool" }),
	}
	var got []string
	for _, k := range claimsHolding(claims, ref) {
		got = append(got, k.Name)
	}
	assert.Equal(t, []string{"unbound", "bound", "deleting"}, got)
}

func TestNamesOfShowsTheFirstClaims(t *testing.T) {
	keys := func(names ...string) []types.NamespacedName {
		var out []types.NamespacedName
		for _, n := range names {
			out = append(out, types.NamespacedName{Namespace: "ns", Name: n})
		}
		return out
	}
	for _, tc := range []struct {
		keys []types.NamespacedName
		want string
	}{
		{keys("b", "a"), "ns/a, ns/b"},
		{keys("g", "f", "e", "d", "c", "b", "a"), "ns/a, ns/b, ns/c, ns/d, ns/e and 2 more"},
	} {
		assert.Equal(t, tc.want, namesOf(tc.keys))
	}
}
