package endpoint

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// The VIP is the cluster's lifeline: the address a live Cluster's endpoint
// names is never returned to the pool because its claim was deleted (a
// cleanup of a namespace's claims, a GitOps prune). The endpoint's claim
// carries v1alpha1.KeepAddressFinalizer, under which the claim reconciler
// releases nothing; this reconciler removes it only when the address is no
// longer the Cluster's: the Cluster is gone (its control plane with it),
// or its endpoint names another address and the claim is being deleted,
// or the Cluster is being deleted and so is the claim (a foreground
// deletion, which waits for the claim).
// Releasing a VIP is thus deliberate: delete the Cluster, or point its
// endpoint elsewhere and delete the claim.

// protect keeps the claim's address while the Cluster uses it; done says
// that the claim is being deleted and nothing else is to be done.
func (r *Reconciler) protect(ctx context.Context, cluster *clusterv1.Cluster, opt optIn, claim *ipamv1.IPAddressClaim, address, current string) (done bool, err error) {
	if claim.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(claim, v1alpha1.KeepAddressFinalizer) {
			return false, nil
		}
		// A claim made before the finalizer was.
		before := claim.DeepCopy()
		controllerutil.AddFinalizer(claim, v1alpha1.KeepAddressFinalizer)
		if err := r.Client.Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, client.IgnoreNotFound(fmt.Errorf("protecting the endpoint's IPAddressClaim: %w", err))
		}
		return false, nil
	}
	if !controllerutil.ContainsFinalizer(claim, v1alpha1.KeepAddressFinalizer) {
		return true, nil
	}
	if address != "" && (address == current || names(cluster, address)) {
		r.warn(cluster, ControlPlaneEndpointKeptReason,
			"IPAddressClaim %s is being deleted, but %s still names %s: the address stays reserved until the Cluster is deleted or its endpoint names another address",
			claim.Name, placeName(opt), address)
		return true, nil
	}
	if err := r.release(ctx, claim); err != nil {
		return true, err
	}
	r.Recorder.Eventf(cluster, claim, corev1.EventTypeNormal, ControlPlaneEndpointReleasedReason, "ReleaseEndpoint",
		"IPAddressClaim %s was deleted and %s does not name its address %q: the address is released", claim.Name, placeName(opt), address)
	return true, nil
}

// names says whether the Cluster's endpoint, or any of its topology
// variables, holds address: wherever the opt-in pointed when the address
// was written, the running cluster may use it.
func names(cluster *clusterv1.Cluster, address string) bool {
	if cluster.Spec.ControlPlaneEndpoint.Host == address {
		return true
	}
	for _, v := range cluster.Spec.Topology.Variables {
		var s string
		if json.Unmarshal(v.Value.Raw, &s) == nil && s == address {
			return true
		}
	}
	return false
}

// protectWithoutOptIn guards the claim of a Cluster that no longer opts in
// (its annotation or its ClusterClass's removed): nothing more is claimed,
// but the address stays reserved while the Cluster names it.
func (r *Reconciler) protectWithoutOptIn(ctx context.Context, cluster *clusterv1.Cluster) error {
	claim, err := r.claim(ctx, cluster)
	if err != nil || claim == nil || !metav1.IsControlledBy(claim, cluster) {
		return err
	}
	address, err := r.boundAddress(ctx, claim)
	if err != nil {
		return err
	}
	_, err = r.protect(ctx, cluster, optIn{}, claim, address, cluster.Spec.ControlPlaneEndpoint.Host)
	return err
}

// letGo removes the finalizer from the endpoint's claim of a Cluster that
// is gone.
func (r *Reconciler) letGo(ctx context.Context, namespace, cluster string) error {
	claim, err := r.keptClaim(ctx, namespace, cluster)
	if claim == nil || err != nil {
		return err
	}
	return r.release(ctx, claim)
}

// letGoOnDeletion removes the finalizer from the endpoint's claim of a
// Cluster being deleted once the claim is deleted too, by the garbage
// collector of a foreground deletion, which waits for the claim to go
// before the Cluster does: keeping it would keep both for ever.
func (r *Reconciler) letGoOnDeletion(ctx context.Context, cluster *clusterv1.Cluster) error {
	claim, err := r.keptClaim(ctx, cluster.Namespace, cluster.Name)
	if claim == nil || err != nil || claim.DeletionTimestamp.IsZero() {
		return err
	}
	return r.release(ctx, claim)
}

// keptClaim is the endpoint's claim of the Cluster, if it still carries
// the finalizer.
func (r *Reconciler) keptClaim(ctx context.Context, namespace, cluster string) (*ipamv1.IPAddressClaim, error) {
	claim := &ipamv1.IPAddressClaim{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster + ClaimSuffix}, claim)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting the endpoint's IPAddressClaim: %w", err)
	}
	owner := metav1.GetControllerOf(claim)
	if owner == nil || owner.Kind != "Cluster" || owner.Name != cluster || !controllerutil.ContainsFinalizer(claim, v1alpha1.KeepAddressFinalizer) {
		return nil, nil
	}
	return claim, nil
}

// release removes the finalizer: the claim reconciler releases the address
// once the claim is deleted (the garbage collector deletes it after its
// Cluster).
func (r *Reconciler) release(ctx context.Context, claim *ipamv1.IPAddressClaim) error {
	before := claim.DeepCopy()
	controllerutil.RemoveFinalizer(claim, v1alpha1.KeepAddressFinalizer)
	if err := r.Client.Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("letting the endpoint's IPAddressClaim release its address: %w", err))
	}
	return nil
}
