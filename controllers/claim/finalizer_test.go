package claim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// A new claim's finalizer is written at once, and the reconcile goes on to
// its reservation, unless the claim it read is not the claim there is: a
// claim read from a stale cache writes nothing and is looked at again, and
// a claim deleted meanwhile is let be. Either way nothing is reserved.
// Only a claim that shows no sign of a reservation is fresh (see
// backends.Claim.Fresh): one that says it was bound, or carries a kept
// reservation, lost its finalizer to someone.
func TestFinalizerIsWrittenBeforeTheReconcileGoesOn(t *testing.T) {
	_, c := apitest.Server(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	for _, tc := range []struct {
		name, claim string
		// meanwhile changes the claim after the reconcile read it.
		meanwhile  func(t *testing.T, claim *ipamv1.IPAddressClaim)
		wantStep   step
		wantStored bool // the claim holds the finalizer afterwards
		wantFresh  bool
	}{
		{name: "a new claim", claim: "new", wantStep: next, wantStored: true, wantFresh: true},
		{name: "bound once, its finalizer removed by hand", claim: "was-bound", meanwhile: func(t *testing.T, claim *ipamv1.IPAddressClaim) {
			claim.Status.AddressRef.Name = claim.Name
			require.NoError(t, c.Status().Update(ctx, claim))
		}, wantStep: next, wantStored: true},
		{name: "carrying a kept reservation, its finalizer removed by hand", claim: "kept", meanwhile: func(t *testing.T, claim *ipamv1.IPAddressClaim) {
			claim.Annotations = map[string]string{v1alpha1.ReservationRecordAnnotation: "record/7"}
			require.NoError(t, c.Update(ctx, claim))
		}, wantStep: next, wantStored: true},
		{name: "holding the finalizer", claim: "finalized", meanwhile: func(t *testing.T, claim *ipamv1.IPAddressClaim) {
			controllerutil.AddFinalizer(claim, reservation.ClaimFinalizer)
			require.NoError(t, c.Update(ctx, claim))
		}, wantStep: next, wantStored: true},
		{name: "changed since it was read", claim: "changed", meanwhile: func(t *testing.T, claim *ipamv1.IPAddressClaim) {
			changed := claim.DeepCopy()
			changed.Labels = map[string]string{"changed": "meanwhile"}
			require.NoError(t, c.Update(ctx, changed))
		}, wantStep: stop(ctrl.Result{RequeueAfter: cacheLagRetry})},
		{name: "deleted since it was read", claim: "deleted", meanwhile: func(t *testing.T, claim *ipamv1.IPAddressClaim) {
			require.NoError(t, c.Delete(ctx, claim.DeepCopy()))
		}, wantStep: stop(ctrl.Result{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := apitest.CreateClaim(t, c, ns, tc.claim)
			if tc.meanwhile != nil {
				tc.meanwhile(t, claim)
			}
			r := &ClaimReconciler{Client: c, MachineNames: &MachineNames{Reader: c}}
			patch := newClaimPatch(claim)
			s := &scope{claim: claim, pool: &v1alpha1.NetboxIPPool{}}
			s.writeMetadata = func(ctx context.Context) error { return patch.applyMetadata(ctx, c, claim) }

			got, err := r.finalizerFirst(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, tc.wantStep, got)
			assert.Equal(t, tc.wantFresh, s.fresh, "fresh")
			assert.Equal(t, tc.wantStored, controllerutil.ContainsFinalizer(claim, reservation.ClaimFinalizer),
				"the claim the reconcile goes on with, or ends with, is the claim as written")
			assert.Equal(t, patch.before.ObjectMeta, claim.ObjectMeta, "the patch the reconcile ends with has no metadata left to write")

			stored := &ipamv1.IPAddressClaim{}
			err = c.Get(ctx, client.ObjectKeyFromObject(claim), stored)
			if tc.wantStored {
				require.NoError(t, err)
				assert.True(t, controllerutil.ContainsFinalizer(stored, reservation.ClaimFinalizer))
				assert.Equal(t, stored.ResourceVersion, claim.ResourceVersion)
				return
			}
			if err == nil {
				assert.False(t, controllerutil.ContainsFinalizer(stored, reservation.ClaimFinalizer), "nothing was written")
			}
		})
	}
}
