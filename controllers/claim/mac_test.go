package claim

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/owners"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// TestBoundClaimsCompareTheirMACOnlyWhenTheirSourceChanged: a bound claim
// compares its MAC once, and then only after an event on its source; a
// restarted manager (a fresh MACAddresses) reads nothing for the claims
// whose comparison is on record.
func TestBoundClaimsCompareTheirMACOnlyWhenTheirSourceChanged(t *testing.T) {
	m3m := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Machine", "m3m-a")
	reader := &apitest.ObjectReader{}
	reader.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
	reader.Add("Metal3Machine", "ns", "m3m-a", nil, map[string]string{macaddress.BareMetalHostAnnotation: "ns/host-0"}, nil)
	reader.Add("BareMetalHost", "ns", "host-0", nil, nil, map[string]any{"spec": map[string]any{"bootMACAddress": "52:54:00:aa:bb:01"}})
	pool := apitest.MachineMACPool()
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers-0-pool",
		OwnerReferences: []metav1.OwnerReference{apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Data", "workers-0")},
		Annotations: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01",
			v1alpha1.MACAddressSourceAnnotation: "BareMetalHost.metal3.io/ns/host-0"}}}
	r := &ClaimReconciler{Recorder: events.NewFakeRecorder(10), MACAddresses: &macaddress.Sources{Reader: reader, Follow: owners.ConsumerOwnerKinds}}
	ctx := context.Background()

	require.NoError(t, checkBoundMAC(ctx, r, claim, pool))
	assert.Len(t, reader.Gets, 3, "the first comparison reads the chain")
	assert.Equal(t, v1alpha1.MACAddressMatchesReason, conditions.GetReason(claim, v1alpha1.MACAddressCurrentCondition))

	reader.Gets = nil
	require.NoError(t, checkBoundMAC(ctx, r, claim, pool))
	r.MACAddresses = &macaddress.Sources{Reader: reader, Follow: owners.ConsumerOwnerKinds} // a restart
	require.NoError(t, checkBoundMAC(ctx, r, claim, pool))
	assert.Empty(t, reader.Gets, "a resync or a restart reads nothing")

	host := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "host-0"}}
	reqs := r.MACAddresses.MapClaims(macaddress.BareMetalHostKind, func(types.NamespacedName) {})(ctx, host)
	require.Len(t, reqs, 1, "the restarted manager maps the host to the claim from its annotation")
	require.NoError(t, unstructured.SetNestedField(reader.Objects["BareMetalHost/ns/host-0"].Object, "52:54:00:aa:bb:02", "spec", "bootMACAddress"))
	require.NoError(t, checkBoundMAC(ctx, r, claim, pool))
	assert.Len(t, reader.Gets, 3, "an event on the source makes it compare again")
	assert.Equal(t, v1alpha1.MACAddressChangedReason, conditions.GetReason(claim, v1alpha1.MACAddressCurrentCondition))
}

// TestARefusedMACIsReadAgainUnlessSetByHand: when the grid refuses a
// claim's MAC (another fixed address holds it), a MAC the provider read
// from the machine is dropped with its source, so that the next attempt
// reads the machine's MAC again; a MAC set by hand stays, and the message
// says to correct it. The refused claim waits for its backoff, reading
// nothing, unless the object its MAC comes from changes first.
func TestARefusedMACIsReadAgainUnlessSetByHand(t *testing.T) {
	m3m := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Machine", "m3m-a")
	pool := apitest.MachineMACPool()
	refusal := fmt.Errorf("allocating: MAC address 52:54:00:aa:bb:01 is held by fixedaddress/abc (10.0.0.5): %w", backends.ErrMACAddressInUse)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		// wantKept: the annotations the refusal leaves; wantMessage is in
		// the claim's Ready message.
		wantKept    map[string]string
		wantMessage string
	}{
		{
			name: "read from the machine: dropped, read again",
			annotations: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01",
				v1alpha1.MACAddressSourceAnnotation: "BareMetalHost.metal3.io/ns/host-0", "other": "kept"},
			wantKept:    map[string]string{"other": "kept"},
			wantMessage: "the MAC was read from BareMetalHost ns/host-0, and is read again at the claim's next attempt",
		},
		{
			name:        "set by hand: kept, to be corrected",
			annotations: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01", "other": "kept"},
			wantKept:    map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01", "other": "kept"},
			wantMessage: "the MAC is the one the claim's annotation ipam-bridge.github.io/mac-address sets: correct it there",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader := &apitest.ObjectReader{}
			reader.Add("Metal3Data", "ns", "workers-0", []metav1.OwnerReference{m3m}, nil, nil)
			reader.Add("Metal3Machine", "ns", "m3m-a", nil, map[string]string{macaddress.BareMetalHostAnnotation: "ns/host-0"}, nil)
			reader.Add("BareMetalHost", "ns", "host-0", nil, nil, map[string]any{"spec": map[string]any{"bootMACAddress": "52:54:00:aa:bb:09"}})
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "workers-0-pool",
				OwnerReferences: []metav1.OwnerReference{apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Data", "workers-0")},
				Annotations:     maps.Clone(tc.annotations)}}
			r := &ClaimReconciler{Recorder: events.NewFakeRecorder(10), waits: retry.NewWaitBackoff(retry.FirstRetryInterval, time.Hour), holds: newHolds(clock.RealClock{}),
				MACAddresses: &macaddress.Sources{Reader: reader, Follow: owners.ConsumerOwnerKinds}}
			ctx := context.Background()

			refused := &scope{claim: claim}
			result, err := r.allocationFailed(refused, refusal)
			refused.conclude()
			require.NoError(t, err, "a wait, not a failed reconcile")
			assert.Equal(t, retry.FirstRetryInterval, result.RequeueAfter)
			assert.Equal(t, tc.wantKept, claim.Annotations)
			ready := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition)
			require.NotNil(t, ready)
			assert.Equal(t, reasons.MACAddressInUseReason, ready.Reason)
			assert.Contains(t, ready.Message, "is held by fixedaddress/abc")
			assert.Contains(t, ready.Message, tc.wantMessage)

			// The claim's own write brings it back at once: it is held
			// back, and allocate asks nothing before the hold is over.
			assert.Positive(t, r.holds.remaining(claim), "held back")

			// The host changes: the claim looks at once.
			host := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "host-0"}}
			woken := r.MACAddresses.MapClaims(macaddress.BareMetalHostKind, r.holds.release)(ctx, host)
			if _, byHand := tc.wantKept[v1alpha1.MACAddressAnnotation]; byHand {
				// Not woken by the host, which it does not read; still
				// held back while the refused MAC stays. Its correction
				// ends the wait at once, with the MAC now set.
				assert.Empty(t, woken)
				assert.Positive(t, r.holds.remaining(claim), "still held back")
				claim.Annotations[v1alpha1.MACAddressAnnotation] = "52:54:00:aa:bb:02"
				assert.Zero(t, r.holds.remaining(claim), "the correction ends the hold")
				corrected := &scope{claim: claim, kind: kindOf(pool), pool: pool}
				st, err := r.macForAllocation(ctx, corrected)
				require.NoError(t, err)
				assert.False(t, st.stop)
				assert.Equal(t, "52:54:00:aa:bb:02", corrected.request.MAC)
				return
			}
			assert.Zero(t, r.holds.remaining(claim), "the host's change ends the hold")
			readAgain := &scope{claim: claim, kind: kindOf(pool), pool: pool}
			st, err := r.macForAllocation(ctx, readAgain)
			require.NoError(t, err)
			require.Len(t, woken, 1)
			require.True(t, st.stop, "the MAC read again is written before the reservation")
			assert.Empty(t, readAgain.request.MAC)
			assert.Equal(t, "52:54:00:aa:bb:09", claim.Annotations[v1alpha1.MACAddressAnnotation], "the host's MAC now")
			assert.Equal(t, "BareMetalHost.metal3.io/ns/host-0", claim.Annotations[v1alpha1.MACAddressSourceAnnotation])
		})
	}
}

// TestDescribeRecordMAC: once bound, a claim of a pool whose fixed
// addresses carry the machine's MAC names the MAC its record carries, or
// none; the annotations of a claim of any other pool are not the
// provider's to touch.
func TestDescribeRecordMAC(t *testing.T) {
	machinePool := apitest.MachineMACPool()
	plainPool := &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{Reservation: v1alpha1.InfobloxReservation{MACAddress: v1alpha1.InfobloxMACNone}}}
	read := map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01",
		v1alpha1.MACAddressSourceAnnotation: "BareMetalHost.metal3.io/ns/host-0", "other": "kept"}
	for _, tc := range []struct {
		name        string
		pool        poolkind.Pool
		annotations map[string]string
		carried     string
		want        map[string]string
	}{
		{name: "the MAC asked for", pool: machinePool, annotations: read, carried: "52:54:00:aa:bb:01", want: read},
		{name: "a plan's MAC: the machine's source stays, to compare with", pool: machinePool, annotations: read, carried: "52:54:00:00:00:99",
			want: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:00:00:99",
				v1alpha1.MACAddressSourceAnnotation: "BareMetalHost.metal3.io/ns/host-0", "other": "kept"}},
		{name: "none: both go", pool: machinePool, annotations: read, want: map[string]string{"other": "kept"}},
		{name: "none, none asked for", pool: machinePool, want: nil},
		{name: "set by hand, the plan carries another", pool: machinePool,
			annotations: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:aa:bb:01"}, carried: "52:54:00:00:00:99",
			want: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:00:00:99"}},
		{name: "not annotated before", pool: machinePool, carried: "52:54:00:00:00:99",
			want: map[string]string{v1alpha1.MACAddressAnnotation: "52:54:00:00:00:99"}},
		{name: "a pool without the setting: untouched", pool: plainPool, annotations: read, want: read},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Annotations: maps.Clone(tc.annotations)}}
			describeRecordMAC(&scope{claim: claim, kind: kindOf(tc.pool), pool: tc.pool}, tc.carried)
			assert.Equal(t, tc.want, claim.Annotations)
		})
	}
}

// TestMACAddressDeferredIsSaidOncePerClaim: a CAPV claim reserved without
// a MAC is told so once, however often its reservation is tried; a claim
// of the same name made after it is gone is told again.
func TestMACAddressDeferredIsSaidOncePerClaim(t *testing.T) {
	reader := &apitest.ObjectReader{}
	reader.Add("VSphereVM", "ns", "vm-a", nil, nil, map[string]any{"spec": map[string]any{"network": map[string]any{
		"devices": []any{map[string]any{"networkName": "vm-network"}}}}})
	pool := apitest.MachineMACPool()
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm-a-0-0",
		OwnerReferences: []metav1.OwnerReference{apitest.OwnerRef(apitest.InfraV1beta1, "VSphereVM", "vm-a")}}}
	recorder := events.NewFakeRecorder(10)
	r := &ClaimReconciler{Recorder: recorder, MACAddresses: &macaddress.Sources{Reader: reader, Follow: owners.ConsumerOwnerKinds}}
	ctx := context.Background()
	deferrals := func() int {
		n := 0
		for {
			select {
			case e := <-recorder.Events:
				assert.Contains(t, e, reasons.MACAddressDeferredReason)
				n++
			default:
				return n
			}
		}
	}

	for range 3 {
		s := &scope{claim: claim, kind: kindOf(pool), pool: pool}
		st, err := r.macForAllocation(ctx, s)
		require.NoError(t, err)
		assert.False(t, st.stop, "reserved at once")
		assert.Empty(t, s.request.MAC)
	}
	assert.Equal(t, 1, deferrals(), "said once")

	r.MACAddresses.Forget(client.ObjectKeyFromObject(claim))
	_, err := r.macForAllocation(ctx, &scope{claim: claim, kind: kindOf(pool), pool: pool})
	require.NoError(t, err)
	assert.Equal(t, 1, deferrals(), "a claim of the same name, after the first is gone")
}

// checkBoundMAC compares the bound claim's MAC as one reconcile does, and
// applies what it concluded to the claim.
func checkBoundMAC(ctx context.Context, r *ClaimReconciler, claim *ipamv1.IPAddressClaim, pool poolkind.Pool) error {
	s := &scope{claim: claim, kind: kindOf(pool), pool: pool}
	err := r.checkBoundMAC(ctx, s)
	s.conclude()
	return err
}
