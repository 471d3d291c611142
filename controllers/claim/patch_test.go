package claim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

func claimPath(claim *ipamv1.IPAddressClaim) string {
	return "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/" + claim.Namespace + "/ipaddressclaims/" + claim.Name
}

// bindInMemory changes the claim's status as an allocation does.
func bindInMemory(claim *ipamv1.IPAddressClaim) {
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: claim.Name}
	setReady(claim, metav1.ConditionTrue, reasons.AddressAllocatedReason, "")
}

func TestClaimPatchWritesTheStatusThenTheMetadataInOneRequestEach(t *testing.T) {
	c, log := apitest.LoggingClient(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	for _, tc := range []struct {
		name, claim      string
		status, metadata bool
		// wantPaths are the requests' paths after the claim's.
		wantPaths []string
	}{
		{name: "status and metadata", claim: "both", status: true, metadata: true, wantPaths: []string{"/status", ""}},
		{name: "status only", claim: "status", status: true, wantPaths: []string{"/status"}},
		{name: "metadata only", claim: "metadata", metadata: true, wantPaths: []string{""}},
		{name: "nothing changed", claim: "unchanged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := apitest.CreateClaim(t, c, ns, tc.claim)
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), claim))
			p := newClaimPatch(claim)
			if tc.status {
				bindInMemory(claim)
			}
			if tc.metadata {
				controllerutil.AddFinalizer(claim, reservation.ClaimFinalizer)
			}
			want := claim.DeepCopy()
			log.Take()

			require.NoError(t, p.apply(ctx, c, claim))

			writes := log.Take()
			var paths []string
			for _, w := range writes {
				assert.Equal(t, "PATCH", w.Method)
				paths = append(paths, w.Path)
			}
			var wantPaths []string
			for _, suffix := range tc.wantPaths {
				wantPaths = append(wantPaths, claimPath(claim)+suffix)
			}
			assert.Equal(t, wantPaths, paths, "one request for the status, one for the metadata, the status first")
			for _, w := range writes {
				// Each patch holds only its own part.
				if w.Path == claimPath(claim)+"/status" {
					assert.NotContains(t, w.Body, "finalizers", "the status patch carries no metadata change")
				} else {
					assert.NotContains(t, w.Body, "status", "the metadata patch carries no status")
				}
			}
			assert.Equal(t, want.Status, claim.Status, "the claim keeps what the reconcile wants")
			assert.Equal(t, want.Finalizers, claim.Finalizers)

			stored := &ipamv1.IPAddressClaim{}
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), stored))
			assert.Equal(t, stored.ResourceVersion, claim.ResourceVersion, "the claim carries the version written last")
			assert.Equal(t, tc.metadata, controllerutil.ContainsFinalizer(stored, reservation.ClaimFinalizer))
			assert.Equal(t, tc.status, conditions.IsTrue(stored, ipamv1.IPAddressClaimReadyCondition))
			assert.Equal(t, want.Status.AddressRef, stored.Status.AddressRef)
		})
	}
}

func TestClaimPatchOfAStatusReadBeforeAnotherWriteConflicts(t *testing.T) {
	c, log := apitest.LoggingClient(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	claim := apitest.CreateClaim(t, c, ns, "stale")
	stale := &ipamv1.IPAddressClaim{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), stale))

	// Another write reaches the claim after the read: a later reconcile's
	// status, say.
	later := stale.DeepCopy()
	setReady(later, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, "a later view")
	require.NoError(t, c.Status().Update(ctx, later))

	p := newClaimPatch(stale)
	bindInMemory(stale)
	controllerutil.AddFinalizer(stale, reservation.ClaimFinalizer)
	log.Take()
	err := p.apply(ctx, c, stale)
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "a conflict, not %v", err)
	assert.Equal(t, []string{"PATCH " + claimPath(claim) + "/status"}, log.Requests(), "nothing more is written after the conflict")

	stored := &ipamv1.IPAddressClaim{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), stored))
	assert.Equal(t, "a later view", conditions.GetMessage(stored, ipamv1.IPAddressClaimReadyCondition), "the later write stands")
	assert.Empty(t, stored.Status.AddressRef.Name)
	assert.False(t, controllerutil.ContainsFinalizer(stored, reservation.ClaimFinalizer))
}

func TestClaimPatchLetsAReleasedClaimGoWithoutWritingItsStatus(t *testing.T) {
	c, log := apitest.LoggingClient(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	claim := apitest.CreateClaim(t, c, ns, "released", reservation.ClaimFinalizer)
	require.NoError(t, c.Delete(ctx, claim))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	require.False(t, claim.DeletionTimestamp.IsZero())

	p := newClaimPatch(claim)
	// What a release leaves on the claim: a condition, and no finalizer.
	setReady(claim, metav1.ConditionFalse, reasons.ReleaseSkippedReason, "left in place")
	controllerutil.RemoveFinalizer(claim, reservation.ClaimFinalizer)
	log.Take()
	require.NoError(t, p.apply(ctx, c, claim))
	assert.Equal(t, []string{"PATCH " + claimPath(claim)}, log.Requests(), "the metadata only: no status for a claim about to vanish")

	err := c.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{})
	assert.True(t, apierrors.IsNotFound(err), "the claim is gone, not %v", err)
}

func TestClaimPatchOfAClaimAlreadyGoneIsNoError(t *testing.T) {
	c, log := apitest.LoggingClient(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	for _, tc := range []struct {
		name, claim string
		status      bool
		wantPaths   []string
	}{
		{name: "status and metadata", claim: "gone-status", status: true, wantPaths: []string{"/status"}},
		{name: "metadata only", claim: "gone-metadata", wantPaths: []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := apitest.CreateClaim(t, c, ns, tc.claim)
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), claim))
			p := newClaimPatch(claim)
			require.NoError(t, c.Delete(ctx, claim.DeepCopy()))

			if tc.status {
				bindInMemory(claim)
			}
			controllerutil.AddFinalizer(claim, reservation.ClaimFinalizer)
			log.Take()
			require.NoError(t, p.apply(ctx, c, claim))
			var wantRequests []string
			for _, suffix := range tc.wantPaths {
				wantRequests = append(wantRequests, "PATCH "+claimPath(claim)+suffix)
			}
			assert.Equal(t, wantRequests, log.Requests(), "a write that finds the claim gone ends the patch")
		})
	}
}

// setReady sets the claim's Ready condition, as a reconcile's end does.
func setReady(claim *ipamv1.IPAddressClaim, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(claim, metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: status, Reason: reason, Message: message})
}
