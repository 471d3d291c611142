package shared

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
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
func seriesOf(t *testing.T, c prometheus.Collector, pool Pool) int {
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
