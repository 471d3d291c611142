package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/tools/events"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
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
		{name: "unavailable", err: backends.ErrUnavailable, want: firstRetryInterval},
		{name: "throttled", err: backends.ErrThrottled, want: firstRetryInterval},
		{name: "credentials refused", err: backends.ErrUnauthorized, want: firstRetryInterval},
		{name: "permission denied", err: backends.ErrForbidden, want: firstRetryInterval},
		{name: "invalid configuration", err: backends.ErrInvalidConfig, want: sync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &PoolReconciler{Recorder: events.NewFakeRecorder(10), SyncPeriod: sync, MaxRetryInterval: sync, retries: newWaitBackoff(firstRetryInterval, sync)}
			pool := &v1alpha1.NetboxIPPool{}
			pool.Namespace, pool.Name = "ns", "pool"
			result, err := r.notReady(context.Background(), pool, fmt.Errorf("validating: %w", tc.err))
			assert.NoError(t, err)
			assert.Equal(t, tc.want, result.RequeueAfter)
		})
	}
}
