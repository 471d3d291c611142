package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

// A burst of claims against an IPAM system that takes fewer requests a
// second than the burst sends: every claim binds, the manager never has
// more requests in flight than the pool allows, and once the system has
// answered 429 the manager leaves it alone for as long as Retry-After asks,
// every pool's requests included, not only the refused one.
func TestBurstAgainstAThrottlingSystemBindsWithoutHammering(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		const cidr = "10.117.0.0/24"
		// The pool allows 3 requests in flight and a rate above what the
		// system takes, so the system is what pushes back.
		f.seedNetwork(cidr)
		pool := f.sys.newPool(f.ns, "pool", cidr, f.secret, false)
		pool.SetLabels(f.labels())
		setRateLimit(pool, &v1alpha1.RateLimit{RequestsPerSecond: 100, Burst: 100, MaxConcurrentRequests: 3})
		require.NoError(t, k8s.Create(f.ctx, pool))
		f.waitPoolReady(pool)
		endpoint := backendhttp.EndpointOf(f.sys.url())
		throttledBefore, _ := metric(t, "capi_ipam_bridge_backend_throttled_total", map[string]string{"ipam_endpoint": endpoint, "code": "429"})

		// Below what even a real NetBox answers with 3 requests in flight,
		// and below what one batch sends at once (a search, then the
		// reservation), however few batches the burst fills.
		limit := httpfault.ThrottleLimit{RequestsPerSecond: 1, RetryAfter: time.Second}
		f.sys.throttle(limit)
		const n = 30
		claims := f.createClaimsAtOnce(n, "pool")
		// The system takes one request a second, and every 429 pauses the
		// whole endpoint, the pool's counts and audit included: on a busy
		// machine a burst may need more than waitTimeout. What this test
		// holds is that every claim binds without hammering, not how fast.
		seen := map[string]bool{}
		for _, claim := range claims {
			seen[f.waitBoundWithin(claim, 3*time.Minute).Spec.Address] = true
		}
		assert.Len(t, seen, n, "distinct addresses")

		arrivals := f.sys.throttleArrivals()
		var throttled []time.Time
		for _, a := range arrivals {
			assert.LessOrEqual(t, a.Concurrent, 3, "never more requests in flight than the pool allows")
			if a.Throttled {
				throttled = append(throttled, a.At)
			}
		}
		require.NotEmpty(t, throttled, "the burst went beyond what the system takes, so it was throttled")
		// A request already on its way when the 429 was answered may still
		// arrive; with 3 in flight at most, that is 2. Anything beyond is a
		// request sent after the manager was told to wait.
		for _, at := range throttled {
			early := 0
			for _, a := range arrivals {
				if a.At.After(at) && a.At.Before(at.Add(limit.RetryAfter)) {
					early++
				}
			}
			assert.LessOrEqual(t, early, 2, "requests within Retry-After of the 429 at %s", at.Format(time.StampMicro))
		}
		t.Logf("%d requests, %d answered 429, for %d claims", len(arrivals), len(throttled), n)

		// The pool's counts and sweeps go on after the burst, and a 429 is
		// counted once its answer is read: compare the metric with the
		// 429s the system answered until it has read them all, with none
		// answered in between.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, ok := metric(t, "capi_ipam_bridge_backend_throttled_total", map[string]string{"ipam_endpoint": endpoint, "code": "429"})
			assert.True(c, ok)
			answered := 0
			for _, a := range f.sys.throttleArrivals() {
				if a.Throttled {
					answered++
				}
			}
			assert.Equal(c, float64(answered), got-throttledBefore, "every 429 is counted")
		}, waitTimeout, pollInterval)
		waits, ok := metric(t, "capi_ipam_bridge_backend_limiter_wait_seconds", map[string]string{"ipam_endpoint": endpoint})
		require.True(t, ok)
		assert.GreaterOrEqual(t, waits, float64(len(arrivals)), "every request passed the limiter")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			inFlight, ok := metric(t, "capi_ipam_bridge_backend_requests_in_flight", map[string]string{"ipam_endpoint": endpoint})
			assert.True(c, ok)
			assert.Zero(c, inFlight)
		}, waitTimeout, pollInterval)
	})
}

// The API server fills in the defaults of a pool that sets no limit.
func TestRateLimitDefaults(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		pool := f.sys.newPool(f.ns, "pool", "10.117.1.0/24", f.secret, false)
		pool.SetLabels(f.labels())
		require.NoError(t, k8s.Create(f.ctx, pool))
		assert.Equal(t, &v1alpha1.RateLimit{RequestsPerSecond: 20, Burst: 40, MaxConcurrentRequests: 10}, rateLimitOf(pool))
	})
}

func setRateLimit(pool poolkind.Pool, l *v1alpha1.RateLimit) {
	switch p := pool.(type) {
	case interface {
		GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
	}:
		p.GetNetboxSpec().Connection.RateLimit = l
	case interface {
		GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
	}:
		p.GetInfobloxSpec().Connection.RateLimit = l
	}
}

func rateLimitOf(pool poolkind.Pool) *v1alpha1.RateLimit {
	switch p := pool.(type) {
	case interface {
		GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
	}:
		return p.GetNetboxSpec().Connection.RateLimit
	case interface {
		GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
	}:
		return p.GetInfobloxSpec().Connection.RateLimit
	}
	return nil
}
