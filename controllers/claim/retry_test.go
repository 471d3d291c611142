package claim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
)

// Every refusal holds the claim back for its wait, which grows with each
// refusal whatever reconcile reported it, a refused MAC too (a change of
// its source ends that hold; see TestARefusedMACIsReadAgainUnlessSetByHand).
func TestAllocationFailedHoldsTheClaimForItsWait(t *testing.T) {
	const exhausted = 42 * time.Second
	for _, tc := range []struct {
		name string
		err  error
		// grows: the wait doubles with each refusal; else it is
		// exhausted.
		grows bool
	}{
		{name: "requested address held", err: fmt.Errorf("allocating: %w", backends.ErrRequestedUnavailable), grows: true},
		{name: "outside the pool", err: fmt.Errorf("allocating: %w", backends.ErrOutsidePool), grows: true},
		{name: "unusable answer", err: fmt.Errorf("allocating: %w", backends.ErrUnusableAnswer), grows: true},
		{name: "throttled", err: fmt.Errorf("allocating: %w", backends.ErrThrottled), grows: true},
		{name: "unavailable", err: fmt.Errorf("allocating: %w", backends.ErrUnavailable), grows: true},
		{name: "other", err: errors.New("boom"), grows: true},
		{name: "MAC in use", err: fmt.Errorf("allocating: %w", backends.ErrMACAddressInUse), grows: true},
		{name: "pool exhausted", err: fmt.Errorf("allocating: %w", backends.ErrExhausted)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &ClaimReconciler{Recorder: events.NewFakeRecorder(10), ExhaustedRetryInterval: exhausted,
				waits: retry.NewWaitBackoff(retry.FirstRetryInterval, time.Hour), holds: newHolds(clocktesting.NewFakePassiveClock(time.Now()))}
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
			for i := range 3 {
				result, err := r.allocationFailed(&scope{claim: claim}, tc.err)
				want := exhausted
				if tc.grows {
					want = retry.FirstRetryInterval << i
				}
				assert.Equal(t, want, r.holds.remaining(claim), "held back after refusal %d", i+1)
				if err == nil {
					assert.Equal(t, want, result.RequeueAfter)
				}
			}
		})
	}
}

// A change of a pool's spec may end a claim's wait (a corrected
// pre-allocation or source): it wakes the pool's waiting claims, as a
// change of readiness does; a change of nothing that matters does not.
func TestPoolSpecChangesWakeWaitingClaims(t *testing.T) {
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", Generation: 1}}
	for _, tc := range []struct {
		name   string
		change func(p *v1alpha1.NetboxIPPool)
		wakes  bool
	}{
		{name: "the spec", wakes: true, change: func(p *v1alpha1.NetboxIPPool) {
			p.Spec.PreAllocations = v1alpha1.PreAllocations{"a": "10.0.0.9"}
			p.Generation++
		}},
		{name: "a label", change: func(p *v1alpha1.NetboxIPPool) { p.Labels = map[string]string{"team": "b"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := pool.DeepCopy()
			tc.change(changed)
			assert.Equal(t, tc.wakes, poolMayUnblockClaims().Update(event.UpdateEvent{ObjectOld: pool, ObjectNew: changed}))
		})
	}
}
