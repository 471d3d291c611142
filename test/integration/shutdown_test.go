package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// A manager that shuts down (a rollout, a lost leader election) while an
// allocation is on the wire abandons the request, but the IPAM system still
// completes it. The reservation carries the claim's marker, so the next
// manager adopts it instead of reserving a second address.
func TestShutdownDuringAllocationLeavesOneReservation(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "shutdown-" + f.ns
		f.seedNetwork("10.26.0.0/24")
		pool := f.createPool("pool", "10.26.0.0/24")

		stopCtx, stop := context.WithCancel(f.ctx)
		done, err := startManager(stopCtx, f.filter, "", nil)
		require.NoError(t, err)
		f.waitPoolReady(pool)

		const slow = 2 * time.Second
		f.sys.slowNextAllocation(slow)
		claim := f.createClaim("machine", "pool")
		// The finalizer is added in the reconcile before the allocation.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := &ipamv1.IPAddressClaim{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
			assert.True(c, controllerutil.ContainsFinalizer(got, reservation.ClaimFinalizer))
		}, waitTimeout, pollInterval)
		time.Sleep(slow / 4)
		stop()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Fatal("the manager did not stop")
		}
		err = k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddress{})
		require.True(t, client.IgnoreNotFound(err) == nil && err != nil, "the first manager wrote no IPAddress")

		// The abandoned request completes in the IPAM system.
		require.Eventually(t, func() bool { return len(f.markedRecords()) == 1 }, waitTimeout, pollInterval)

		_, err = startManager(f.ctx, f.filter, "", nil)
		require.NoError(t, err)
		address := f.waitBound(claim)
		records := f.markedRecords()
		require.Len(t, records, 1)
		assert.Equal(t, records[0].Address.Addr().String(), address.Spec.Address)
		assert.Equal(t, 1, f.sys.allocationRequests(), "the second manager adopted the reservation")
	})
}
