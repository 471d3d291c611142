package subnet

// The objects a subnet makes, how it names them, and how it finds them
// again: always its own (controlled by it), never another's of the name.

import (
	"context"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// nodesPoolName is the nodes pool's name: the spec's, or the Cluster's
// with NodesPoolSuffix.
func nodesPoolName(subnet *v1alpha1.ClusterSubnet) string {
	if subnet.Spec.Pool.Name != "" {
		return subnet.Spec.Pool.Name
	}
	return subnet.Spec.ClusterName + NodesPoolSuffix
}

// parentRef is the subnet's parent pool as a claim names it.
func parentRef(subnet *v1alpha1.ClusterSubnet) ipamv1.IPPoolReference {
	ref := subnet.Spec.ParentPoolRef
	return ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: ref.Kind, Name: ref.Name}
}

func poolRef(kind poolkind.Kind, name string) ipamv1.IPPoolReference {
	return ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind.Kind, Name: name}
}

// labels are the labels of what the subnet makes: its Cluster's name and
// the watch filter.
func labels(subnet *v1alpha1.ClusterSubnet) map[string]string {
	l := map[string]string{clusterv1.ClusterNameLabel: subnet.Spec.ClusterName}
	if v, ok := subnet.Labels[clusterv1.WatchLabel]; ok {
		l[clusterv1.WatchLabel] = v
	}
	return l
}

// ensureClaim returns the subnet's claim named name, creating it (of pool,
// requesting requested where valid) if there is none; nil while it waits:
// a claim of that name that is not the subnet's is left alone.
func (r *Reconciler) ensureClaim(ctx context.Context, s *scope, name string, pool ipamv1.IPPoolReference, requested netip.Addr) (*ipamv1.IPAddressClaim, error) {
	claim := &ipamv1.IPAddressClaim{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.subnet.Namespace, Name: name}, claim)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(claim, s.subnet) {
			r.nameTaken(s, "IPAddressClaim", name)
			return nil, nil
		}
		return claim, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("getting IPAddressClaim %s: %w", name, err)
	}
	claim = &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.subnet.Namespace,
			Name:      name,
			Labels:    labels(s.subnet),
			// The record stays while the subnet needs it, whoever deletes
			// the claim: the ClusterSubnet lets it go (reconcileDelete).
			Finalizers: []string{v1alpha1.KeepAddressFinalizer},
		},
		Spec: ipamv1.IPAddressClaimSpec{ClusterName: s.subnet.Spec.ClusterName, PoolRef: pool},
	}
	if requested.IsValid() {
		claim.Annotations = map[string]string{v1alpha1.RequestedAddressAnnotation: requested.String()}
	}
	if err := controllerutil.SetControllerReference(s.subnet, claim, r.Client.Scheme()); err != nil {
		return nil, fmt.Errorf("owning IPAddressClaim %s: %w", name, err)
	}
	if err := r.Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating IPAddressClaim %s: %w", name, err)
	}
	// Its binding brings the subnet back.
	return nil, nil
}

// ensurePool returns the subnet's pool named name, whose only source is
// child, creating it with gateway if there is none; nil while it waits.
func (r *Reconciler) ensurePool(ctx context.Context, s *scope, name string, child netip.Prefix, gateway v1alpha1.Gateway) (poolkind.Pool, error) {
	pool, err := poolkind.GetPool(ctx, r.Client, s.kind, s.subnet.Namespace, name)
	switch {
	case err != nil:
		return nil, fmt.Errorf("getting %s %s: %w", s.kind.Kind, name, err)
	case pool != nil && !metav1.IsControlledBy(pool, s.subnet):
		r.nameTaken(s, s.kind.Kind, name)
		return nil, nil
	case pool != nil:
		return pool, nil
	}
	pool, err = s.kind.ChildPool(s.parent, child, gateway)
	if err != nil {
		s.ready(metav1.ConditionFalse, v1alpha1.ParentPoolUnsupportedReason, "%v", err)
		return nil, nil
	}
	pool.SetNamespace(s.subnet.Namespace)
	pool.SetName(name)
	pool.SetLabels(labels(s.subnet))
	if err := controllerutil.SetControllerReference(s.subnet, pool, r.Client.Scheme()); err != nil {
		return nil, fmt.Errorf("owning %s %s: %w", s.kind.Kind, name, err)
	}
	if err := r.Client.Create(ctx, pool); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating %s %s: %w", s.kind.Kind, name, err)
	}
	// Its validation brings the subnet back.
	return nil, nil
}

// nameTaken reports an object of the subnet's name that is not its own.
func (r *Reconciler) nameTaken(s *scope, kind, name string) {
	msg := fmt.Sprintf("%s %s exists and is not this ClusterSubnet's: it is left alone; delete it or give the subnet another name", kind, name)
	if c := meta.FindStatusCondition(s.subnet.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Reason != v1alpha1.NameTakenReason || c.Message != msg {
		r.warn(s, v1alpha1.NameTakenReason, "%s", msg)
	}
	s.ready(metav1.ConditionFalse, v1alpha1.NameTakenReason, "%s", msg)
	// Its deletion makes no event the subnet watches.
	s.retry = nameTakenRetry
}

// boundAddress is the claim's IPAddress, nil while it has none.
func (r *Reconciler) boundAddress(ctx context.Context, claim *ipamv1.IPAddressClaim) (*ipamv1.IPAddress, error) {
	if claim.Status.AddressRef.Name == "" {
		return nil, nil
	}
	address := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Status.AddressRef.Name}, address)
	if apierrors.IsNotFound(err) {
		// The cache may see the claim's status before its IPAddress,
		// whose creation brings the subnet back.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting IPAddress %s: %w", claim.Status.AddressRef.Name, err)
	}
	if !metav1.IsControlledBy(address, claim) {
		return nil, nil
	}
	return address, nil
}

// older says whether a was created before b (by name when at once).
func older(a, b *v1alpha1.ClusterSubnet) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}
