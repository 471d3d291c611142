package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// Release needs only the marker search and the delete: a claim is deleted,
// and its record released, after the pool was edited to a source the IPAM
// team has retired, so that the pool no longer validates.
func TestReleaseNeedsOnlyTheConnection(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.80.0.0/24")
		pool := f.createPool("pool", "10.80.0.0/24")
		claim := f.createClaim("machine", "pool")
		address := f.waitBound(claim)

		// Where the reservation lives is recorded on the IPAddress.
		assert.NotEmpty(t, address.Annotations[v1alpha1.ReservationRecordAnnotation])
		assert.NotEmpty(t, address.Annotations[v1alpha1.ReservationEndpointAnnotation])

		edited := pool.DeepCopyObject().(poolkind.Pool)
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), edited))
		f.update(edited, func() { f.sys.retarget(edited, "10.81.0.0/24") })
		f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.SourceNotFoundReason)

		f.deleteClaim(claim)
		assert.Empty(t, f.markedRecords(), "the record was released through the edited pool")
	})
}

// A release whose record lives in a system the pool no longer points at
// leaves it there, loudly: a condition, an event on the pool naming the
// record and the system, and a metric.
func TestReleaseReportsARecordLeftInAnotherSystem(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.82.0.0/24")
	pool := f.createNetboxPool("pool", "10.82.0.0/24")
	claim := f.createClaim("machine", "pool")
	f.waitBound(claim)
	before, _ := metric(t, "capi_ipam_bridge_records_left_total", map[string]string{"pool_kind": "NetboxIPPool", "reason": reasons.ReleaseLeftReason})

	// The pool is pointed at another NetBox, which the same token opens: a
	// simulator even when the suite runs against a real NetBox, so that it
	// is truly another system.
	other := netboxsim.New()
	t.Cleanup(other.Close)
	other.AddToken(f.token, true)
	other.AddPrefixWithGateway("10.82.0.0/24", netboxsim.PrefixOptions{})
	oldURL := pool.Spec.Connection.URL
	got := &v1alpha1.NetboxIPPool{}
	require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
	f.update(got, func() { got.Spec.Connection.URL = other.URL() })

	f.deleteClaim(claim)
	event := f.waitEvent(f.ns, pool.Name, reasons.ReleaseLeftReason)
	assert.Contains(t, event.Note, oldURL, "the event names the system holding the record")
	assert.Contains(t, event.Note, "ipam/ip-addresses/", "and the record")
	assert.Len(t, f.markedRecords(), 1, "the record is still in the first NetBox")
	after, _ := metric(t, "capi_ipam_bridge_records_left_total", map[string]string{"pool_kind": "NetboxIPPool", "reason": reasons.ReleaseLeftReason})
	assert.Equal(t, before+1, after)
}

// Deleting a namespace deletes its Secret, pools and claims at once, in no
// order. envtest runs no namespace controller, so the test deletes them in
// the worst order (the Secret first) and restarts the manager in between:
// every claim is still released and everything goes.
func TestNamespaceDeletionFinishesWithEveryReservationReleased(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "ns-deletion-" + f.ns
		firstCtx, stopFirst := context.WithCancel(f.ctx)
		firstDone, err := startManager(firstCtx, f.filter, "", nil)
		require.NoError(t, err)
		f.seedNetwork("10.83.0.0/24")
		pool := f.createPool("pool", "10.83.0.0/24")
		var claims []*ipamv1.IPAddressClaim
		for _, name := range []string{"a", "b", "c"} {
			claim := f.createClaim(name, "pool")
			f.waitBound(claim)
			claims = append(claims, claim)
		}
		secret := &corev1.Secret{}
		key := client.ObjectKey{Namespace: f.ns, Name: f.secret}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, k8s.Get(f.ctx, key, secret))
			assert.Contains(c, secret.Finalizers, v1alpha1.CredentialsInUseFinalizer)
		}, waitTimeout, pollInterval)

		require.NoError(t, k8s.Delete(f.ctx, secret))
		stopFirst()
		<-firstDone
		_, err = startManager(f.ctx, f.filter, "", nil)
		require.NoError(t, err)

		for _, claim := range claims {
			require.NoError(t, k8s.Delete(f.ctx, claim))
		}
		require.NoError(t, k8s.Delete(f.ctx, pool))
		for _, claim := range claims {
			f.waitGone(claim)
		}
		f.waitGone(pool)
		f.waitGone(secret)
		assert.Empty(t, f.markedRecords(), "every reservation was released")
	})
}
