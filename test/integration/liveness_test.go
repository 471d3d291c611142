package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// No claim waits for an event that may not come: each test here puts a
// claim or a pool in a waiting state, ends the cause without any event the
// reconcilers watch, and expects the wait to end by itself.

// setPoolNotReady writes Ready=False into the pool's status as a brief
// outage would have; the pool reconciler ignores its own status writes, so
// the state stays until its next sync.
func (f *fixture) setPoolNotReady(pool poolkind.Pool) {
	f.t.Helper()
	require.NoError(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := pool.DeepCopyObject().(poolkind.Pool)
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got); err != nil {
			return err
		}
		conditions.Set(got, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: v1alpha1.BackendUnavailableReason, Message: "counting addresses: connection reset by peer"})
		return k8s.Status().Update(f.ctx, got)
	}))
}

func (f *fixture) getClaim(claim *ipamv1.IPAddressClaim) *ipamv1.IPAddressClaim {
	f.t.Helper()
	got := &ipamv1.IPAddressClaim{}
	require.NoError(f.t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
	return got
}

// The sequence seen at 1000 claims: a bound claim's IPAddress is deleted
// while its pool is briefly not ready. The claim rebuilds the IPAddress with
// the same address from its marker without waiting for the pool.
func TestLostIPAddressIsRebuiltWhileThePoolIsNotReady(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.60.0.0/24")
		pool := f.createPool("pool", "10.60.0.0/24")
		claim := f.createClaim("machine", "pool")
		first := f.waitBound(claim)

		f.setPoolNotReady(pool)
		require.NoError(t, k8s.Delete(f.ctx, first))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			again := &ipamv1.IPAddress{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), again))
			assert.NotEqual(c, first.UID, again.UID, "a new IPAddress")
			assert.Equal(c, first.Spec, again.Spec)
			assert.Nil(c, again.DeletionTimestamp)
		}, waitTimeout, pollInterval)
		// Its status is written just after the new IPAddress.
		f.waitBound(claim)
		assert.Len(t, f.markedRecords(), 1)
	})
}

// A bound claim stays Ready whatever its pool says.
func TestBoundClaimStaysReadyWhenThePoolIsNotReady(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.61.0.0/24")
		pool := f.createPool("pool", "10.61.0.0/24")
		claim := f.createClaim("machine", "pool")
		f.waitBound(claim)
		before := conditions.Get(f.getClaim(claim), ipamv1.IPAddressClaimReadyCondition)

		f.setPoolNotReady(pool)
		// A resync of the claim, as any event or the resync period brings.
		got := f.getClaim(claim)
		f.update(got, func() { got.SetAnnotations(map[string]string{"touched": "yes"}) })
		// Polled by hand: a condition func of require.Never may still run
		// after the test ends.
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(pollInterval) {
			c := conditions.Get(f.getClaim(claim), ipamv1.IPAddressClaimReadyCondition)
			require.NotNil(t, c)
			require.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
			require.True(t, c.LastTransitionTime.Equal(&before.LastTransitionTime), "the claim stayed Ready throughout")
		}
	})
}

// One failed count refresh neither makes the pool not ready nor stops
// allocation; the counts are marked stale until a refresh succeeds. The
// claim whose allocation failed meanwhile binds once the backend answers
// again, with no event to wake it. A system that throttles (429) is treated
// the same way: it is alive, and asks only for quiet.
func TestFailingBackendKeepsThePoolReadyAndClaimsRetryByThemselves(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		claimReason string
	}{
		{"unavailable", http.StatusServiceUnavailable, ipamv1.IPAddressClaimReadyAllocationFailedReason},
		{"throttled", http.StatusTooManyRequests, v1alpha1.BackendThrottledReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachSystem(t, func(t *testing.T, f *fixture) {
				f.seedNetwork("10.62.0.0/24")
				pool := f.createPool("pool", "10.62.0.0/24")
				bound := f.createClaim("bound", "pool")
				f.waitBound(bound)

				f.sys.failAllRequests(tc.status)
				// Any pool event refreshes the counts.
				got := pool.DeepCopyObject().(poolkind.Pool)
				require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
				f.update(got, func() { got.SetAnnotations(map[string]string{"refresh": "now"}) })
				cond := f.waitPoolCondition(pool, v1alpha1.AddressesCountedCondition, metav1.ConditionFalse, v1alpha1.CountFailedReason)
				assert.Contains(t, cond.Message, "status.addresses may be stale")
				require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
				assert.True(t, conditions.IsTrue(got, v1alpha1.ReadyCondition), "one failed refresh keeps the pool ready")
				assert.NotNil(t, got.GetPoolStatus().Addresses, "the last counts are kept")

				waiting := f.createClaim("waiting", "pool")
				f.waitClaimReason(waiting, tc.claimReason)
				require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
				assert.True(t, conditions.IsTrue(got, v1alpha1.ReadyCondition), "the pool stays ready while its claims fail")
				f.sys.clearFaults()
				f.waitBound(waiting)
				f.waitPoolCondition(pool, v1alpha1.AddressesCountedCondition, metav1.ConditionTrue, v1alpha1.CountedReason)
				assert.True(t, conditions.IsTrue(f.getClaim(bound), ipamv1.IPAddressClaimReadyCondition))
			})
		})
	}
}

// A release that fails is retried until it succeeds, with no event.
func TestFailedReleaseIsRetriedUntilItSucceeds(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.63.0.0/24")
		f.createPool("pool", "10.63.0.0/24")
		claim := f.createClaim("machine", "pool")
		f.waitBound(claim)

		f.sys.failAllRequests(http.StatusServiceUnavailable)
		require.NoError(t, k8s.Delete(f.ctx, claim))
		f.waitClaimReason(claim, reasons.ReleaseFailedReason)
		f.sys.clearFaults()
		f.waitGone(claim)
		assert.Empty(t, f.markedRecords())
	})
}

// A pool being deleted gives no address out, and is let go once the
// IPAddresses from it are released.
func TestPoolBeingDeletedGivesNothingOut(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.64.0.0/24")
		pool := f.createPool("pool", "10.64.0.0/24")
		bound := f.createClaim("bound", "pool")
		f.waitBound(bound)

		require.NoError(t, k8s.Delete(f.ctx, pool))
		f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.DeletingReason)
		requests := f.sys.allocationRequests()
		late := f.createClaim("late", "pool")
		cond := f.waitClaimReason(late, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
		assert.Contains(t, cond.Message, "being deleted")
		assert.Equal(t, requests, f.sys.allocationRequests(), "no reservation from a pool being deleted")

		f.deleteClaim(bound)
		f.waitGone(pool)
		assert.Empty(t, f.markedRecords())
	})
}

// An IPAddress belongs to its claim by UID: a claim recreated under the same
// name gets an IPAddress of its own, never its predecessor's. Its record is
// the predecessor's, found by the claim's marker.
func TestRecreatedClaimNeverTakesItsPredecessorsIPAddress(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.65.0.0/24")
		f.createPool("pool", "10.65.0.0/24")
		claim := f.createClaim("machine", "pool")
		old := f.waitBound(claim)

		// The claim disappears without its release running (its finalizer
		// removed by hand), leaving its IPAddress behind.
		got := f.getClaim(claim)
		f.update(got, func() { controllerutil.RemoveFinalizer(got, reservation.ClaimFinalizer) })
		require.NoError(t, k8s.Delete(f.ctx, got))
		f.waitGone(claim)

		again := f.createClaim("machine", "pool")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			address := &ipamv1.IPAddress{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(again), address))
			assert.NotEqual(c, old.UID, address.UID, "a new IPAddress")
			owner := metav1.GetControllerOf(address)
			require.NotNil(c, owner)
			assert.Equal(c, again.UID, owner.UID)
			assert.True(c, conditions.IsTrue(f.getClaim(again), ipamv1.IPAddressClaimReadyCondition))
			assert.Equal(c, old.Spec.Address, address.Spec.Address, "the predecessor's record")
		}, waitTimeout, pollInterval)
		assert.Len(t, f.markedRecords(), 1)
	})
}

// A claim whose predecessor left nothing but its record (finalizers removed
// by hand from both the claim and its IPAddress) is fresh: on NetBox it is
// reserved while its marker is searched for. The search finds the
// predecessor's record, which the claim keeps; the record just made for it
// is deleted.
func TestFreshClaimKeepsTheRecordItsPredecessorLeft(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.65.1.0/24")
		f.createPool("pool", "10.65.1.0/24")
		claim := f.createClaim("machine", "pool")
		old := f.waitBound(claim)

		got := f.getClaim(claim)
		f.update(got, func() { controllerutil.RemoveFinalizer(got, reservation.ClaimFinalizer) })
		require.NoError(t, k8s.Delete(f.ctx, got))
		f.waitGone(claim)
		// Its IPAddress, unless the manager removed it already.
		patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))
		require.NoError(t, client.IgnoreNotFound(k8s.Patch(f.ctx, old, patch)))
		require.NoError(t, client.IgnoreNotFound(k8s.Delete(f.ctx, old)))
		f.waitGone(old)

		requests := f.sys.allocationRequests()
		again := f.createClaim("machine", "pool")
		address := f.waitBound(again)
		assert.Equal(t, old.Spec.Address, address.Spec.Address, "the predecessor's record")
		if f.sys.name() == "NetBox" {
			// Infoblox, which lists records by address, searches first.
			assert.GreaterOrEqual(t, f.sys.allocationRequests(), requests+1, "fresh: reserved while its search ran")
		}
		records := f.markedRecords()
		require.Len(t, records, 1, "the record made for the new claim is deleted")
		assert.Equal(t, old.Spec.Address, records[0].Address.Addr().String())
	})
}

// A reservation the IPAM system is slow to answer is not silent: after
// ten seconds the claim says it waits for the system's answer
// (ReservationPending), and it binds once the answer comes.
func TestASlowReservationSaysItWaits(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.63.0.0/24")
		pool := f.createPool("pool", "10.63.0.0/24")
		f.waitPoolReady(pool)

		// Below the HTTP client's timeout (15 s), above slowAnswer (10 s).
		f.sys.slowNextAllocation(13 * time.Second)
		claim := f.createClaim("machine", "pool")
		cond := f.waitClaimReason(claim, reasons.ReservationPendingReason)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Contains(t, cond.Message, "has not answered the claim's reservation")
		assert.Contains(t, cond.Message, pool.GetName())
		address := f.waitBound(claim)
		assert.Len(t, f.markedRecords(), 1, "one reservation, answered late")
		assert.NotEmpty(t, address.Spec.Address)
	})
}
