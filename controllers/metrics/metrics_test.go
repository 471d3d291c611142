package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

func TestPoolMetrics(t *testing.T) {
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "metrics-test", Name: "pool"}}
	ready := func(status metav1.ConditionStatus, reason string) {
		pool.SetConditions([]metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: status, Reason: reason}})
		SetPoolReady("NetboxIPPool", pool)
	}

	SetPoolAddresses("NetboxIPPool", pool, 8, 6, 2)
	assert.Equal(t, 8.0, testutil.ToFloat64(poolCapacity.WithLabelValues("NetboxIPPool", "metrics-test", "pool")), "capacity")
	assert.Equal(t, 6.0, testutil.ToFloat64(poolUsed.WithLabelValues("NetboxIPPool", "metrics-test", "pool")), "used")
	assert.Equal(t, 2.0, testutil.ToFloat64(poolFree.WithLabelValues("NetboxIPPool", "metrics-test", "pool")), "free")

	ready(metav1.ConditionTrue, v1alpha1.ReadyReason)
	assert.Equal(t, 1.0, testutil.ToFloat64(poolReady.WithLabelValues("NetboxIPPool", "metrics-test", "pool", v1alpha1.ReadyReason)))

	// One series per pool: the reason it has now, not every reason it had.
	ready(metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	assert.Equal(t, 1, seriesOf(t, poolReady, pool), "series of the pool")
	assert.Equal(t, 0.0, testutil.ToFloat64(poolReady.WithLabelValues("NetboxIPPool", "metrics-test", "pool", v1alpha1.AuthenticationFailedReason)))

	ForgetPoolAddresses("NetboxIPPool", pool)
	assert.Zero(t, seriesOf(t, poolReady, pool), "ready series of a deleted pool")
	assert.Zero(t, seriesOf(t, poolCapacity, pool), "capacity series of a deleted pool")
	assert.Zero(t, seriesOf(t, poolFree, pool), "free series of a deleted pool")
}

// seriesOf counts the series of a metric that are the pool's, whatever
// other tests of the package export.
func seriesOf(t *testing.T, c prometheus.Collector, pool poolkind.Pool) int {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	n := 0
	for m := range ch {
		var d dto.Metric
		require.NoError(t, m.Write(&d))
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["pool_namespace"] == pool.GetNamespace() && labels["pool"] == pool.GetName() {
			n++
		}
	}
	return n
}

// TestWaitingClaimsSayWhichPoolWaitsAndForHowLong: a count of waiting
// claims cannot tell claims that keep arriving and binding from one that
// waits for ever; the age of the oldest, per pool, can.
func TestWaitingClaimsSayWhichPoolWaitsAndForHowLong(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	w := &waitingClaims{claims: map[types.NamespacedName]waitingClaim{}, now: func() time.Time { return now }}
	w.Set(types.NamespacedName{Namespace: "a", Name: "old"}, "NetboxIPPool", "a", "lab", "PoolExhausted", now.Add(-20*time.Minute))
	w.Set(types.NamespacedName{Namespace: "a", Name: "new"}, "NetboxIPPool", "a", "lab", "PoolExhausted", now.Add(-5*time.Second))
	w.Set(types.NamespacedName{Namespace: "b", Name: "paused"}, "GlobalInfobloxIPPool", "", "grid", "Paused", now.Add(-time.Hour))
	w.Set(types.NamespacedName{Namespace: "a", Name: "bound"}, "NetboxIPPool", "a", "lab", "PoolExhausted", now.Add(-time.Hour))
	w.Forget(types.NamespacedName{Namespace: "a", Name: "bound"})

	want := `
# HELP capi_ipam_bridge_claims_waiting IPAddressClaims of this provider's pools that have no address yet, by pool and the reason of their Ready condition (Paused: their Cluster or pool is paused).
# TYPE capi_ipam_bridge_claims_waiting gauge
capi_ipam_bridge_claims_waiting{pool="grid",pool_kind="GlobalInfobloxIPPool",pool_namespace="",reason="Paused"} 1
capi_ipam_bridge_claims_waiting{pool="lab",pool_kind="NetboxIPPool",pool_namespace="a",reason="PoolExhausted"} 2
# HELP capi_ipam_bridge_claims_waiting_oldest_seconds How long the IPAddressClaim of a pool that has waited longest for an address has waited (since its Ready condition turned False), by pool and the reason of its Ready condition.
# TYPE capi_ipam_bridge_claims_waiting_oldest_seconds gauge
capi_ipam_bridge_claims_waiting_oldest_seconds{pool="grid",pool_kind="GlobalInfobloxIPPool",pool_namespace="",reason="Paused"} 3600
capi_ipam_bridge_claims_waiting_oldest_seconds{pool="lab",pool_kind="NetboxIPPool",pool_namespace="a",reason="PoolExhausted"} 1200
`
	require.NoError(t, testutil.CollectAndCompare(w, strings.NewReader(want)))
}

// A deleted pool's audit series go, even those an audit that ended after
// the deletion began set again.
func TestForgetAuditMetricsDropsADeletedPoolsSeries(t *testing.T) {
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "forget-test", Name: "pool"}}
	findings, failing := testutil.CollectAndCount(auditFindings), testutil.CollectAndCount(auditFailing)
	SetAuditFindings("NetboxIPPool", pool, v1alpha1.AuditStatus{Orphans: 1})
	SetAuditFailing("NetboxIPPool", pool, true)
	require.Equal(t, findings+5, testutil.CollectAndCount(auditFindings))
	require.Equal(t, failing+1, testutil.CollectAndCount(auditFailing))
	ForgetAuditMetrics("NetboxIPPool", "forget-test", "pool")
	assert.Equal(t, findings, testutil.CollectAndCount(auditFindings))
	assert.Equal(t, failing, testutil.CollectAndCount(auditFailing))
}

// offering is a backend whose driver offers roles.
type offering struct {
	backends.Backend
	roles []backends.Role
}

func (o offering) Offers(role backends.Role) bool { return slices.Contains(o.roles, role) }

// The wrapper passes on the driver's optional roles: the audit asks them
// of the backend it is given, which is always instrumented.
func TestInstrumentedBackendOffersItsDriversRoles(t *testing.T) {
	for _, roles := range [][]backends.Role{
		{backends.RoleAddressRequester, backends.RoleAuditLister},
		{backends.RoleAuditLister},
		nil,
	} {
		b := Instrument(offering{roles: roles}, "netbox")
		for _, role := range []backends.Role{backends.RoleAddressRequester, backends.RoleAuditLister, backends.RolePlanAdopter} {
			assert.Equal(t, slices.Contains(roles, role), backends.Offers(b, role), "%s of a driver offering %v", role, roles)
		}
	}
}
