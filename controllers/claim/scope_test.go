package claim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/owners"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
)

// TestPhasesRunInOrderUntilOneStops: a reconcile runs its phases in order;
// the first that stops or fails ends it, with its result or error.
func TestPhasesRunInOrderUntilOneStops(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		steps      []step
		errs       []error
		wantRan    int
		wantResult ctrl.Result
		wantErr    error
	}{
		{name: "all go on", steps: []step{next, next, next}, errs: []error{nil, nil, nil}, wantRan: 3},
		{name: "the second stops", steps: []step{next, stop(ctrl.Result{RequeueAfter: time.Second}), next}, errs: []error{nil, nil, nil},
			wantRan: 2, wantResult: ctrl.Result{RequeueAfter: time.Second}},
		{name: "the first fails", steps: []step{next, next}, errs: []error{boom, nil}, wantRan: 1, wantErr: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := 0
			var phases []phase
			for i := range tc.steps {
				phases = append(phases, func(context.Context, *scope) (step, error) {
					ran++
					return tc.steps[i], tc.errs[i]
				})
			}
			result, err := runPhases(context.Background(), &scope{}, phases...)
			assert.Equal(t, tc.wantRan, ran)
			assert.Equal(t, tc.wantResult, result)
			assert.Equal(t, tc.wantErr, err)
		})
	}
}

// TestConditionsAreSetWhenTheReconcileConcludes: the phases' conclusions
// reach the claim only when the reconcile concludes; until then the phases
// read them from the scope.
func TestConditionsAreSetWhenTheReconcileConcludes(t *testing.T) {
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	setReady(claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, "waiting")
	conditions.Set(claim, metav1.Condition{Type: v1alpha1.MACAddressCurrentCondition, Status: metav1.ConditionFalse,
		Reason: reasons.MACAddressDeferredReason})
	s := &scope{claim: claim}

	s.setReady(metav1.ConditionTrue, reasons.AddressAllocatedReason, "")
	s.deleteCondition(v1alpha1.MACAddressCurrentCondition)
	assert.Equal(t, ipamv1.IPAddressClaimReadyPoolNotReadyReason, conditions.GetReason(claim, ipamv1.IPAddressClaimReadyCondition),
		"nothing is set on the claim before the reconcile concludes")
	assert.True(t, conditions.Has(claim, v1alpha1.MACAddressCurrentCondition))
	assert.Equal(t, reasons.AddressAllocatedReason, s.condition(ipamv1.IPAddressClaimReadyCondition).Reason, "the phases read what was concluded")
	assert.Nil(t, s.condition(v1alpha1.MACAddressCurrentCondition))

	s.conclude()
	assert.True(t, conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition))
	assert.False(t, conditions.Has(claim, v1alpha1.MACAddressCurrentCondition))
	conditions.Set(claim, metav1.Condition{Type: v1alpha1.MACAddressCurrentCondition, Status: metav1.ConditionTrue,
		Reason: v1alpha1.MACAddressMatchesReason})
	s.conclude()
	assert.True(t, conditions.Has(claim, v1alpha1.MACAddressCurrentCondition), "concluded once")
}

// TestAClaimOfAPoolBeingDeletedDescribesNoRequest: a claim that rebuilds
// its IPAddress from a pool being deleted reads nothing of its machine
// and writes nothing on itself for a reservation that will not be made.
func TestAClaimOfAPoolBeingDeletedDescribesNoRequest(t *testing.T) {
	_, c := apitest.Server(t)
	ns := apitest.Namespace(t, c)
	m3m := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Machine", "m3m-a")
	reader := &apitest.ObjectReader{}
	reader.Add("Metal3Data", ns, "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
	reader.Add("Metal3Machine", ns, "m3m-a", nil, map[string]string{macaddress.BareMetalHostAnnotation: ns + "/host-0"}, nil)
	reader.Add("BareMetalHost", ns, "host-0", nil, nil, map[string]any{"spec": map[string]any{"bootMACAddress": "52:54:00:aa:bb:01"}})
	pool := apitest.MachineMACPool()
	pool.UID, pool.DeletionTimestamp = "pool-uid", &metav1.Time{Time: time.Now()}
	claim := apitest.CreateClaim(t, c, ns, "workers-0-pool", reservation.ClaimFinalizer)
	claim.OwnerReferences = []metav1.OwnerReference{apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Data", "workers-0")}
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: claim.Name} // bound once: it rebuilds its IPAddress
	inFlight := &poolstate.InFlight{}
	inFlight.Close(pool.UID)
	ctx := context.Background()
	r := &ClaimReconciler{Client: c, Recorder: events.NewFakeRecorder(10), InFlight: inFlight, Alarms: &poolstate.Alarms{},
		MachineNames: &MachineNames{Reader: reader, Follow: owners.ConsumerOwnerKinds},
		MACAddresses: &macaddress.Sources{Reader: reader, Follow: owners.ConsumerOwnerKinds},
		allocations:  newBackgroundCalls[allocationAnswer](ctx, make(chan event.GenericEvent, 1)),
		waits:        retry.NewWaitBackoff(retry.FirstRetryInterval, time.Hour), holds: newHolds(clock.RealClock{})}
	s := &scope{claim: claim, kind: kindOf(pool), pool: pool}

	result, err := r.reconcileNormal(ctx, s)
	require.NoError(t, err)
	s.conclude()
	assert.Equal(t, retry.FirstRetryInterval, result.RequeueAfter)
	ready := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition)
	require.NotNil(t, ready)
	assert.Equal(t, ipamv1.IPAddressClaimReadyPoolNotReadyReason, ready.Reason)
	assert.Contains(t, ready.Message, "is being deleted and gives no address out")
	assert.Empty(t, claim.Annotations, "no Machine name, no MAC")
	assert.Empty(t, reader.Gets, "nothing read of the machine")
}
