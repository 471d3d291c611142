package claim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
)

// Outcomes a claim waits out are requeued without an error, so that
// controller-runtime logs no "Reconciler error" for them; a failure is
// returned.
func TestAllocationFailedRequeuesExpectedOutcomesWithoutError(t *testing.T) {
	const exhaustedRetry = 42 * time.Second
	for _, tc := range []struct {
		name       string
		err        error
		wantResult ctrl.Result
		wantErr    bool
	}{
		{name: "pool exhausted", err: fmt.Errorf("allocating: %w", backends.ErrExhausted), wantResult: ctrl.Result{RequeueAfter: exhaustedRetry}},
		{name: "planned record held by another claim", err: fmt.Errorf("allocating: %w",
			&backends.PlannedConflictError{Record: "NetBox IP address 7", Holder: `marker "id/ns/other"`}), wantResult: ctrl.Result{RequeueAfter: exhaustedRetry}},
		// Waits with the claim's capped backoff, which starts at a second.
		{name: "MAC held by another fixed address", err: fmt.Errorf("allocating: %w", backends.ErrMACAddressInUse),
			wantResult: ctrl.Result{RequeueAfter: retry.FirstRetryInterval}},
		{name: "requested address held", err: fmt.Errorf("allocating: %w", backends.ErrRequestedUnavailable),
			wantResult: ctrl.Result{RequeueAfter: retry.FirstRetryInterval}},
		{name: "marked record outside the pool", err: fmt.Errorf("allocating: %w", backends.ErrOutsidePool),
			wantResult: ctrl.Result{RequeueAfter: retry.FirstRetryInterval}},
		{name: "unavailable", err: fmt.Errorf("allocating: %w", backends.ErrUnavailable), wantErr: true},
		{name: "other", err: errors.New("boom"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &ClaimReconciler{Recorder: events.NewFakeRecorder(10), ExhaustedRetryInterval: exhaustedRetry, waits: retry.NewWaitBackoff(retry.FirstRetryInterval, time.Hour), holds: newHolds(clock.RealClock{})}
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
			result, err := r.allocationFailed(&scope{claim: claim}, tc.err)
			if tc.wantErr {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tc.wantResult, result)
		})
	}
}
