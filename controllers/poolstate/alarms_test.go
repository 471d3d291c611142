package poolstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// A revalidation that Revalidate asked for holds back the pool's new
// reservations until the pool has validated; one asked for while the
// validation ran stays due.
func TestRevalidationHoldsBackReservationsUntilThePoolValidated(t *testing.T) {
	alarms := NewAlarms()
	kind := poolkind.Kind{Kind: "NetboxIPPool"}
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{UID: "pool"}}
	other := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{UID: "other"}}

	assert.False(t, alarms.Revalidating(pool))
	alarms.Revalidate(kind, pool)
	assert.True(t, alarms.Revalidating(pool))
	assert.False(t, alarms.Revalidating(other))

	at, due := alarms.RevalidationDue(pool)
	assert.True(t, due)
	assert.True(t, alarms.Revalidating(pool), "still held back while the validation runs")
	time.Sleep(time.Millisecond)
	alarms.Revalidate(kind, pool) // another claim's answer, during the validation
	alarms.Revalidated(pool, at)
	assert.True(t, alarms.Revalidating(pool), "asked again during the validation")

	at, due = alarms.RevalidationDue(pool)
	assert.True(t, due)
	alarms.Revalidated(pool, at)
	assert.False(t, alarms.Revalidating(pool))
	_, due = alarms.RevalidationDue(pool)
	assert.False(t, due)

	alarms.Revalidate(kind, pool)
	alarms.Forget(pool)
	assert.False(t, alarms.Revalidating(pool), "a deleted pool is forgotten")
}
