package integration

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// TestAClaimWaitingForAHeldAddressBacksOff: a claim whose requested address
// the IPAM team holds says so, and asks the IPAM system again with its
// capped backoff, not as fast as the system answers: one such claim must
// not spend the endpoint's request budget, which every pool on it shares.
// The wait is an expected one, not a failed reconcile, and it ends: once
// the holder lets the address go, the claim takes it.
func TestAClaimWaitingForAHeldAddressBacksOff(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		const (
			cidr = "10.166.0.0/24"
			// The test's manager caps the backoff low, so that the window
			// holds many waits at the cap.
			capped = 2 * time.Second
			window = 20 * time.Second
			// An attempt costs a few requests (the search for the
			// claim's marker, the look at the address): 2 on the NetBox
			// simulator, 3 on the WAPI simulator; twice that leaves room
			// for a pool's own request.
			perAttempt = 6
			// Waits of 1 s, then 2 s: at most one attempt a second for the
			// first, one per cap after, and the one under way.
			attempts = 1 + int(window/capped) + 1
		)
		held := netip.MustParseAddr("10.166.0.60")
		f.seedNetwork(cidr)
		f.sys.holdGateway(held)
		// A manager of the test's own, which refreshes no counts and
		// validates no pool within the window: the requests counted are
		// the claim's.
		f.filter = "backoff-" + f.ns
		_, err := startTunedManager(f.ctx, restConfig, f.filter, "", nil, func(o *controllers.Options) {
			o.MaxRetryInterval = capped
			o.PoolRefreshInterval = time.Hour
			o.SyncPeriod = time.Hour
			o.AuditInterval = time.Hour
		})
		require.NoError(t, err)
		pool := f.createPool("pool", cidr)
		f.waitPoolReady(pool)
		claim := f.createClaim("vip", pool.GetName(), requesting(held.String()))
		f.waitClaimReason(claim, reasons.RequestedAddressUnavailableReason)

		f.sys.resetCalls()
		time.Sleep(window)
		calls := f.sys.callCount()
		t.Logf("%d requests to %s in %s while the claim waited", calls, f.sys.name(), window)
		assert.LessOrEqual(t, calls, attempts*perAttempt, "at most %d attempts of at most %d requests", attempts, perAttempt)
		f.waitClaimReason(claim, reasons.RequestedAddressUnavailableReason)
		failed := 0
		for _, line := range strings.Split(managerLogs.String(), "\n") {
			if strings.Contains(line, f.ns) && strings.Contains(line, `"controller"="ipaddressclaim"`) && strings.Contains(line, "Reconciler error") {
				failed++
			}
		}
		assert.Zero(t, failed, "failed reconciles of the claim: an expected wait is none")

		// The way out: the IPAM team lets the address go, and the claim's
		// next attempt takes it.
		f.sys.deleteAt(held)
		assert.Equal(t, held.String(), f.waitBound(claim).Spec.Address)
	})
}

// TestAPoolSpecChangeWakesItsWaitingClaims: a claim waiting for the address
// its pool pre-allocates, which the IPAM team holds, is woken by the
// correction of the pre-allocation, and binds at once. The test's manager
// has the claim wait ten minutes between attempts, so only the wake can
// explain a bind within the test's timeout.
func TestAPoolSpecChangeWakesItsWaitingClaims(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		const cidr = "10.167.0.0/24"
		held := netip.MustParseAddr("10.167.0.60")
		f.seedNetwork(cidr)
		f.sys.holdGateway(held)
		f.filter = "wake-" + f.ns
		_, err := startTunedManager(f.ctx, restConfig, f.filter, "", nil, func(o *controllers.Options) {
			o.FirstRetryInterval = 10 * time.Minute
			o.MaxRetryInterval = 10 * time.Minute
		})
		require.NoError(t, err)
		pool := f.createPoolWithPreAllocations("pool", cidr, v1alpha1.PreAllocations{"vip": v1alpha1.IPAddressString(held.String())})
		f.waitPoolReady(pool)
		claim := f.createClaim("vip", pool.GetName())
		f.waitClaimReason(claim, reasons.RequestedAddressUnavailableReason)

		// The IPAM team corrects the pre-allocation.
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), pool))
		setPreAllocations(pool, v1alpha1.PreAllocations{"vip": "10.167.0.61"})
		require.NoError(t, k8s.Update(f.ctx, pool))
		assert.Equal(t, "10.167.0.61", f.waitBound(claim).Spec.Address)
		assert.True(t, f.sys.holds(held), "the IPAM team's record stays")
	})
}

func setPreAllocations(pool poolkind.Pool, pre v1alpha1.PreAllocations) {
	switch p := pool.(type) {
	case *v1alpha1.NetboxIPPool:
		p.Spec.PreAllocations = pre
	case *v1alpha1.InfobloxIPPool:
		p.Spec.PreAllocations = pre
	}
}
