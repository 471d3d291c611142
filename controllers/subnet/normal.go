package subnet

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// reconcileNormal takes the steps in order; each returns done when the
// subnet must wait for it.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	if done := clusterFound(s); done {
		return ctrl.Result{}, nil
	}
	if done := r.parentFound(ctx, s); done {
		return ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	// The names are checked before anything is carved: a subnet that
	// could never make its pools must not hold a block.
	if done, err := r.namesFree(ctx, s); err != nil || done {
		return s.wait(), err
	}
	child, done, err := r.childCarved(ctx, s)
	if err != nil || done {
		return s.wait(), err
	}
	gateway, done, err := r.gatewayHeld(ctx, s, child)
	if err != nil || done {
		return s.wait(), err
	}
	return s.wait(), r.nodesPoolMade(ctx, s, child, gateway)
}

// clusterFound says whether the Cluster exists, is not going and owns the
// subnet (writeMetadata made it the owner), so that its deletion deletes
// the subnet, which releases what it holds; nothing is made for a Cluster
// that could not own it. Its creation brings the subnet back.
func clusterFound(s *scope) (done bool) {
	if s.cluster == nil || !s.cluster.DeletionTimestamp.IsZero() || !ownedBy(s.subnet, s.cluster) {
		s.ready(metav1.ConditionFalse, v1alpha1.SubnetClusterNotFoundReason, "Cluster %s does not exist in namespace %s, or is being deleted",
			s.subnet.Spec.ClusterName, s.subnet.Namespace)
		return true
	}
	return false
}

// parentFound finds the parent pool, which must be able to parent it.
func (r *Reconciler) parentFound(ctx context.Context, s *scope) (done bool) {
	ref := s.subnet.Spec.ParentPoolRef
	kind, ok := r.Kinds.For(parentRef(s.subnet))
	if !ok || kind.ChildPool == nil || kind.CanParent == nil {
		s.ready(metav1.ConditionFalse, v1alpha1.ParentPoolUnsupportedReason, "%s pools cannot parent a subnet", ref.Kind)
		return true
	}
	parent, err := poolkind.GetPool(ctx, r.Client, kind, s.subnet.Namespace, ref.Name)
	switch {
	case err != nil:
		s.ready(metav1.ConditionFalse, v1alpha1.ParentPoolNotFoundReason, "getting %s %s: %v", ref.Kind, ref.Name, err)
		return true
	case parent == nil:
		s.ready(metav1.ConditionFalse, v1alpha1.ParentPoolNotFoundReason, "%s %s does not exist in namespace %s", ref.Kind, ref.Name, s.subnet.Namespace)
		return true
	}
	if err := kind.CanParent(parent); err != nil {
		s.ready(metav1.ConditionFalse, v1alpha1.ParentPoolUnsupportedReason, "%s %v", ref.Kind, err)
		return true
	}
	s.kind, s.parent = kind, parent
	return false
}

// namesFree says whether the names of the pools and claims the subnet
// will make are free or its own: the nodes pool's (which another
// ClusterSubnet of the namespace, older than this one, may also name) and
// the gateway's.
func (r *Reconciler) namesFree(ctx context.Context, s *scope) (bool, error) {
	name := nodesPoolName(s.subnet)
	subnets := &v1alpha1.ClusterSubnetList{}
	if err := r.Client.List(ctx, subnets, client.InNamespace(s.subnet.Namespace)); err != nil {
		return true, fmt.Errorf("listing the ClusterSubnets of namespace %s: %w", s.subnet.Namespace, err)
	}
	for i := range subnets.Items {
		other := &subnets.Items[i]
		if other.UID != s.subnet.UID && nodesPoolName(other) == name && older(other, s.subnet) {
			r.nameTaken(s, s.kind.Kind, name+" (ClusterSubnet "+other.Name+"'s nodes pool)")
			return true, nil
		}
	}
	pools := []string{name}
	if s.subnet.Spec.Pool.GatewayPolicy != v1alpha1.GatewayNone {
		pools = append(pools, s.subnet.Name+GatewaySuffix)
		claim := &ipamv1.IPAddressClaim{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.subnet.Namespace, Name: s.subnet.Name + GatewaySuffix}, claim)
		switch {
		case err == nil && !metav1.IsControlledBy(claim, s.subnet):
			r.nameTaken(s, "IPAddressClaim", claim.Name)
			return true, nil
		case err != nil && !apierrors.IsNotFound(err):
			return true, fmt.Errorf("getting IPAddressClaim %s: %w", claim.Name, err)
		}
	}
	for _, pool := range pools {
		found, err := poolkind.GetPool(ctx, r.Client, s.kind, s.subnet.Namespace, pool)
		if err != nil {
			return true, fmt.Errorf("getting %s %s: %w", s.kind.Kind, pool, err)
		}
		if found != nil && !metav1.IsControlledBy(found, s.subnet) {
			r.nameTaken(s, s.kind.Kind, pool)
			return true, nil
		}
	}
	return false, nil
}

// childCarved claims the child from the parent and returns it once bound.
func (r *Reconciler) childCarved(ctx context.Context, s *scope) (netip.Prefix, bool, error) {
	ref := s.subnet.Spec.ParentPoolRef
	claim, err := r.ensureClaim(ctx, s, s.subnet.Name, parentRef(s.subnet), netip.Addr{})
	if err != nil || claim == nil {
		return netip.Prefix{}, true, err
	}
	address, err := r.boundAddress(ctx, claim)
	if err != nil || address == nil {
		r.claimWaits(s, claim, v1alpha1.CarvingReason, fmt.Sprintf("a child prefix of %s %s", ref.Kind, ref.Name))
		return netip.Prefix{}, true, err
	}
	child, err := childOf(address)
	if err != nil {
		s.ready(metav1.ConditionFalse, v1alpha1.ParentPoolUnsupportedReason, "IPAddress %s of %s %s: %v", address.Name, ref.Kind, ref.Name, err)
		return netip.Prefix{}, true, nil
	}
	if s.subnet.Status.Prefix != child.String() {
		r.event(s, claim, corev1.EventTypeNormal, v1alpha1.SubnetCarvedReason, "Carved %s from %s %s for Cluster %s", child, ref.Kind, ref.Name, s.subnet.Spec.ClusterName)
	}
	s.subnet.Status.Prefix = child.String()
	return child, false, nil
}

// childOf is the child prefix an IPAddress of a carving pool holds: its
// network address with the child's length.
func childOf(address *ipamv1.IPAddress) (netip.Prefix, error) {
	addr, err := netip.ParseAddr(address.Spec.Address)
	if err != nil || address.Spec.Prefix == nil {
		return netip.Prefix{}, fmt.Errorf("%q with prefix %v is not a child prefix", address.Spec.Address, address.Spec.Prefix)
	}
	child := netip.PrefixFrom(addr, int(*address.Spec.Prefix))
	if !child.IsValid() || child.Masked() != child {
		return netip.Prefix{}, fmt.Errorf("%s is an address, not a child prefix's network", child)
	}
	return child, nil
}

// gatewayHeld reserves the child's gateway with a claim that requests it
// from the gateway pool, the child without a gateway. Invalid with
// gatewayPolicy None, or for a child too small to have one.
func (r *Reconciler) gatewayHeld(ctx context.Context, s *scope, child netip.Prefix) (netip.Addr, bool, error) {
	gateway := backends.FirstUsable(child)
	if s.subnet.Spec.Pool.GatewayPolicy == v1alpha1.GatewayNone || !gateway.IsValid() {
		s.subnet.Status.Gateway = ""
		return netip.Addr{}, false, nil
	}
	name := s.subnet.Name + GatewaySuffix
	pool, err := r.ensurePool(ctx, s, name, child, v1alpha1.Gateway{Policy: v1alpha1.GatewayNone})
	if err != nil || pool == nil {
		return netip.Addr{}, true, err
	}
	claim, err := r.ensureClaim(ctx, s, name, poolRef(s.kind, name), gateway)
	if err != nil || claim == nil {
		return netip.Addr{}, true, err
	}
	address, err := r.boundAddress(ctx, claim)
	if err != nil || address == nil {
		r.claimWaits(s, claim, v1alpha1.HoldingGatewayReason, "the gateway "+gateway.String())
		return netip.Addr{}, true, err
	}
	if address.Spec.Address != gateway.String() {
		// A requested address is reserved exactly or not at all; anything
		// else is not the router's and the nodes pool is not made.
		s.ready(metav1.ConditionFalse, v1alpha1.HoldingGatewayReason, "IPAddress %s holds %s, not the gateway %s", address.Name, address.Spec.Address, gateway)
		return netip.Addr{}, true, nil
	}
	s.subnet.Status.Gateway = gateway.String()
	return gateway, false, nil
}

// nodesPoolMade makes the nodes pool and reports its readiness as the
// subnet's.
func (r *Reconciler) nodesPoolMade(ctx context.Context, s *scope, child netip.Prefix, gateway netip.Addr) error {
	rule := v1alpha1.Gateway{Policy: v1alpha1.GatewayNone}
	if gateway.IsValid() {
		rule = v1alpha1.Gateway{Address: gateway.String()}
	}
	name := nodesPoolName(s.subnet)
	pool, err := r.ensurePool(ctx, s, name, child, rule)
	if err != nil || pool == nil {
		return err
	}
	s.subnet.Status.PoolRef = &v1alpha1.SubnetPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: s.kind.Kind, Name: name}
	ready := meta.FindStatusCondition(pool.GetConditions(), v1alpha1.ReadyCondition)
	switch {
	case ready == nil || ready.ObservedGeneration < pool.GetGeneration() && ready.Status == metav1.ConditionTrue:
		s.ready(metav1.ConditionFalse, v1alpha1.PoolNotReadyReason, "%s %s is not validated yet", s.kind.Kind, name)
	case ready.Status != metav1.ConditionTrue:
		s.ready(metav1.ConditionFalse, v1alpha1.PoolNotReadyReason, "%s %s: %s: %s", s.kind.Kind, name, ready.Reason, ready.Message)
	default:
		s.ready(metav1.ConditionTrue, v1alpha1.SubnetReadyReason, "%s %s hands out the addresses of %s", s.kind.Kind, name, child)
	}
	return nil
}

// claimWaits reports a claim without an address with its own reason (for
// example PoolExhausted, naming the parent), or reason while it has none.
func (r *Reconciler) claimWaits(s *scope, claim *ipamv1.IPAddressClaim, reason, what string) {
	if c := meta.FindStatusCondition(claim.Status.Conditions, ipamv1.IPAddressClaimReadyCondition); c != nil && c.Status == metav1.ConditionFalse && c.Reason != "" {
		s.ready(metav1.ConditionFalse, c.Reason, "IPAddressClaim %s waits for %s: %s", claim.Name, what, c.Message)
		return
	}
	s.ready(metav1.ConditionFalse, reason, "IPAddressClaim %s waits for %s", claim.Name, what)
}
