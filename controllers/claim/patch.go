package claim

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// claimPatch writes what one reconcile changed on a claim with as few
// requests as the API allows: one merge patch of the status, conditions
// included, and one of the metadata. Cluster API's patch helper sends the
// conditions apart from the rest of the status, a third request per claim
// that a burst of thousands pays in full. The claim's conditions are the
// provider's alone (the contract gives them to no one else), so instead of
// the helper's per-condition conflict resolution, a status written from a
// stale read fails with a conflict and the claim is looked at again.
type claimPatch struct {
	before *ipamv1.IPAddressClaim
}

func newClaimPatch(claim *ipamv1.IPAddressClaim) claimPatch {
	return claimPatch{before: claim.DeepCopy()}
}

// apply writes the status first, then the metadata: a claim that lets its
// finalizer go is gone after that write, and a deleted claim that is let go
// gets no status written only for it to vanish. Each patch holds only what
// changed since the claim was read. A claim found gone is no error: only a
// claim with the finalizer ever holds an address, and its deletion brings
// the claim back.
func (p claimPatch) apply(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim) error {
	released := !claim.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(claim, reservation.ClaimFinalizer)
	metadataChanged := !equality.Semantic.DeepEqual(p.before.ObjectMeta, claim.ObjectMeta)
	// A patch's answer overwrites the object it was sent with: each is sent
	// with a copy, and the claim keeps what this reconcile wants.
	if !released && !equality.Semantic.DeepEqual(p.before.Status, claim.Status) {
		obj := p.before.DeepCopy()
		obj.Status = *claim.Status.DeepCopy()
		// The conditions travel as one list, which a merge patch replaces:
		// a claim read from a stale cache must not write over what a later
		// version holds, so the patch names the version it was made from.
		if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(p.before, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("patching the claim's status: %w", err))
		}
		claim.ResourceVersion = obj.ResourceVersion
	}
	if !metadataChanged {
		return nil
	}
	return client.IgnoreNotFound(p.patchMetadata(ctx, c, claim, client.MergeFrom(p.before)))
}

// patchMetadata sends the claim's metadata as a patch from p.before, and
// takes the version it was written at.
func (p claimPatch) patchMetadata(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim, patch client.Patch) error {
	obj := p.before.DeepCopy()
	obj.ObjectMeta = *claim.ObjectMeta.DeepCopy()
	obj.ResourceVersion = p.before.ResourceVersion
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("patching the claim: %w", err)
	}
	claim.ResourceVersion = obj.ResourceVersion
	return nil
}

// applyMetadata writes the metadata the reconcile changed so far, at once,
// and makes it the patch's starting point: the reconcile goes on from the
// claim as written. The write names the version the claim was read at, so
// that a reconcile of a claim read from a stale cache goes no further. A
// write that fails leaves the claim as read, for the reconcile to end
// with; a claim found gone is an error too, as what follows relies on the
// write.
func (p *claimPatch) applyMetadata(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim) error {
	if equality.Semantic.DeepEqual(p.before.ObjectMeta, claim.ObjectMeta) {
		return nil
	}
	if err := p.patchMetadata(ctx, c, claim, client.MergeFromWithOptions(p.before, client.MergeFromWithOptimisticLock{})); err != nil {
		claim.ObjectMeta = *p.before.ObjectMeta.DeepCopy()
		return err
	}
	p.before.ObjectMeta = *claim.ObjectMeta.DeepCopy()
	return nil
}
