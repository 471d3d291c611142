package reservation

import (
	"context"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/owners"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// IsPaused says whether the claim's Cluster or pool is paused, and why.
func IsPaused(cluster *clusterv1.Cluster, pool poolkind.Pool) (bool, string) {
	switch {
	case cluster != nil && ptr.Deref(cluster.Spec.Paused, false):
		return true, fmt.Sprintf("Cluster %s has spec.paused set", cluster.Name)
	case cluster != nil && annotations.HasPaused(cluster):
		return true, fmt.Sprintf("Cluster %s has the %s annotation", cluster.Name, clusterv1.PausedAnnotation)
	case pool != nil && annotations.HasPaused(pool):
		return true, fmt.Sprintf("pool %s has the %s annotation", pool.GetName(), clusterv1.PausedAnnotation)
	}
	return false, ""
}

// MatchesWatchFilter says whether an object carries the watch-filter label
// value this manager serves; every object does when the value is empty.
func MatchesWatchFilter(o client.Object, value string) bool {
	return value == "" || o.GetLabels()[clusterv1.WatchLabel] == value
}

// AddressBelongsTo says whether the claim controls the IPAddress: by UID, so
// that a claim recreated under the same name never takes over its
// predecessor's IPAddress (clusterctl move rewrites owner UIDs).
func AddressBelongsTo(address *ipamv1.IPAddress, claim *ipamv1.IPAddressClaim) bool {
	return metav1.IsControlledBy(address, claim) &&
		address.Spec.ClaimRef.Name == claim.Name && address.Spec.PoolRef == claim.Spec.PoolRef
}

// ClaimClusterName is the claim's cluster: spec.clusterName, or the
// deprecated cluster-name label.
func ClaimClusterName(claim *ipamv1.IPAddressClaim) string {
	if claim.Spec.ClusterName != "" {
		return claim.Spec.ClusterName
	}
	return claim.Labels[clusterv1.ClusterNameLabel]
}

// GetCluster reads the claim's Cluster; nil when it has none or it is gone.
func GetCluster(ctx context.Context, c client.Reader, namespace, name string) (*clusterv1.Cluster, error) {
	if name == "" {
		return nil, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting Cluster %s: %w", name, err)
	}
	return cluster, nil
}

// BackendClaim describes the claim to the backend, its marker naming the
// management cluster by identity.
func BackendClaim(identity string, claim *ipamv1.IPAddressClaim) backends.Claim {
	return backends.Claim{
		Marker:      backends.Marker(identity, claim.Namespace, claim.Name),
		Namespace:   claim.Namespace,
		Name:        claim.Name,
		ClusterName: ClaimClusterName(claim),
		MachineName: owners.MachineName(claim),
	}
}

const (
	// ClaimFinalizer keeps a claim until its address is released.
	ClaimFinalizer = "ipam-bridge.github.io/release-address"
	// ProtectAddressFinalizer keeps an IPAddress from being deleted by anyone
	// but the claim reconciler.
	ProtectAddressFinalizer = "ipam-bridge.github.io/protect-address"
)

// AddressPrefix is the address an IPAddress holds, with its prefix length.
func AddressPrefix(address *ipamv1.IPAddress) (netip.Prefix, error) {
	addr, err := netip.ParseAddr(address.Spec.Address)
	if err != nil {
		return netip.Prefix{}, err
	}
	// PrefixFrom keeps the host bits; Addr.Prefix would mask them away.
	return netip.PrefixFrom(addr, int(ptr.Deref(address.Spec.Prefix, int32(addr.BitLen())))), nil
}
