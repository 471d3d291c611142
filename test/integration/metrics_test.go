package integration

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// metric returns the value of the series of family name whose labels include
// want (a counter's or gauge's value, a histogram's sample count), and
// whether it exists.
func metric(t *testing.T, name string, want map[string]string) (float64, bool) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	series:
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestMetricsReportOperationsPoolsAndWaitingClaims(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		backend := map[string]string{"NetBox": "netbox", "Infoblox": "infoblox"}[f.sys.name()]
		kind := f.sys.poolKind(false)
		allocations, _ := metric(t, "capi_ipam_bridge_backend_operations_total",
			map[string]string{"backend": backend, "operation": "allocate", "outcome": "success"})

		f.seedNetwork("10.27.0.0/29")
		pool := f.createPool("pool", "10.27.0.0/29")
		f.waitPoolReady(pool)
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			f.waitBound(f.createClaim(name, "pool"))
		}
		f.waitCounts(pool, v1alpha1.AddressCounts{Total: 6, Used: 6, Free: 0})
		full := f.createClaim("f", "pool")
		f.waitClaimReason(full, "PoolExhausted")

		after, ok := metric(t, "capi_ipam_bridge_backend_operations_total",
			map[string]string{"backend": backend, "operation": "allocate", "outcome": "success"})
		require.True(t, ok)
		assert.GreaterOrEqual(t, after-allocations, 5.0, "five allocations succeeded")
		_, ok = metric(t, "capi_ipam_bridge_backend_operations_total",
			map[string]string{"backend": backend, "operation": "allocate", "outcome": "exhausted"})
		assert.True(t, ok, "the full pool is counted as exhausted")

		poolLabels := map[string]string{"pool_kind": kind, "pool_namespace": f.ns, "pool": "pool"}
		for name, want := range map[string]float64{"capacity": 6, "used": 6, "free": 0} {
			got, ok := metric(t, "capi_ipam_bridge_pool_"+name+"_addresses", poolLabels)
			assert.True(t, ok, name)
			assert.Equal(t, want, got, name)
		}
		ready, ok := metric(t, "capi_ipam_bridge_pool_ready",
			map[string]string{"pool_kind": kind, "pool_namespace": f.ns, "pool": "pool", "reason": v1alpha1.ReadyReason})
		assert.True(t, ok, "the pool's readiness is exported")
		assert.Equal(t, 1.0, ready)
		waiting, ok := metric(t, "capi_ipam_bridge_claims_waiting", map[string]string{"pool_kind": kind, "reason": "PoolExhausted"})
		assert.True(t, ok)
		assert.GreaterOrEqual(t, waiting, 1.0)

		binds, ok := metric(t, "capi_ipam_bridge_claim_bind_duration_seconds", map[string]string{"pool_kind": kind})
		assert.True(t, ok)
		assert.GreaterOrEqual(t, binds, 5.0)
		requests, ok := metric(t, "capi_ipam_bridge_backend_http_requests_total", map[string]string{"backend": backend, "method": "POST"})
		assert.True(t, ok)
		assert.Positive(t, requests)
	})
}
