package claim

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// newIPAddress builds the claim's IPAddress: same name, owned by the claim
// (controller) and by the pool (so the pool cannot go first), protected by a
// finalizer, labelled with the cluster for clusterctl move.
func (r *ClaimReconciler) newIPAddress(s *scope, alloc backends.Allocation) (*ipamv1.IPAddress, error) {
	address := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:       s.claim.Name,
			Namespace:  s.claim.Namespace,
			Finalizers: []string{reservation.ProtectAddressFinalizer},
		},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: s.claim.Name},
			PoolRef:  s.claim.Spec.PoolRef,
			Address:  alloc.Address.Addr().String(),
			Prefix:   ptr.To(int32(alloc.Address.Bits())),
		},
	}
	if alloc.Gateway.IsValid() {
		address.Spec.Gateway = alloc.Gateway.String()
	}
	if name := reservation.ClaimClusterName(s.claim); name != "" {
		address.Labels = map[string]string{clusterv1.ClusterNameLabel: name}
	}
	scheme := r.Client.Scheme()
	if err := controllerutil.SetControllerReference(s.claim, address, scheme); err != nil {
		return nil, fmt.Errorf("setting the claim as owner: %w", err)
	}
	if err := controllerutil.SetOwnerReference(s.pool, address, scheme, controllerutil.WithBlockOwnerDeletion(true)); err != nil {
		return nil, fmt.Errorf("setting the pool as owner: %w", err)
	}
	return address, nil
}

// cacheBehind says whether the cache has not yet seen what this manager
// wrote moments ago for the claim: its IPAddress, or the status that bound
// it. A reconcile on such a stale view would search the IPAM system and
// write the IPAddress or the status a second time; the events of those
// writes bring the claim back instead.
func (r *ClaimReconciler) cacheBehind(ctx context.Context, claim *ipamv1.IPAddressClaim) (bool, error) {
	written, ok := r.written.Get(claim.UID)
	if !ok {
		return false, nil
	}
	if statusWritten, _ := written.(bool); statusWritten && claim.Status.AddressRef.Name == "" {
		return true, nil
	}
	address := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), address)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, client.IgnoreNotFound(err)
}

// persistReservation writes what keepReservation copied onto the claim at
// once: it must be on the claim before the IPAddress is let go.
func (r *ClaimReconciler) persistReservation(ctx context.Context, claim *ipamv1.IPAddressClaim) error {
	kept := map[string]string{}
	for _, k := range reservation.Annotations {
		if v, ok := claim.Annotations[k]; ok {
			kept[k] = v
		}
	}
	if len(kept) == 0 {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": kept}})
	if err != nil {
		return err
	}
	obj := claim.DeepCopy()
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("keeping the reservation on the claim: %w", err)
	}
	return nil
}

func (r *ClaimReconciler) removeAddressFinalizer(ctx context.Context, address *ipamv1.IPAddress) error {
	if !controllerutil.ContainsFinalizer(address, reservation.ProtectAddressFinalizer) {
		return nil
	}
	base := address.DeepCopy()
	controllerutil.RemoveFinalizer(address, reservation.ProtectAddressFinalizer)
	if err := r.Client.Patch(ctx, address, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer of IPAddress %s: %w", address.Name, err)
	}
	return nil
}
