package claim

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// strippedOfItsClaim says whether the IPAddress is the claim's own, written
// for it, whose owner reference to the claim the garbage collector removed:
// in a foreground deletion of the claim (or of its owners), the collector
// does not delete a dependent that another owner, the pool, still holds,
// but takes the deleted owner's reference off it.
func strippedOfItsClaim(address *ipamv1.IPAddress, claim *ipamv1.IPAddressClaim) bool {
	return metav1.GetControllerOf(address) == nil &&
		address.Spec.ClaimRef.Name == claim.Name && address.Spec.PoolRef == claim.Spec.PoolRef
}

// isPredecessorsAddress says whether the IPAddress was written for an
// earlier claim of the same name, which no longer exists.
func isPredecessorsAddress(address *ipamv1.IPAddress, claim *ipamv1.IPAddressClaim) bool {
	owner := metav1.GetControllerOf(address)
	return owner != nil && owner.Kind == "IPAddressClaim" && owner.Name == claim.Name && owner.UID != claim.UID &&
		address.Spec.ClaimRef.Name == claim.Name
}
