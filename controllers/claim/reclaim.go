package claim

import (
	"fmt"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// retains reads the claim's reclaim policy (v1alpha1.ReclaimPolicyAnnotation):
// true when its record is to be kept for the IPAM team instead of
// released. A value that is neither policy is an error: guessing could
// delete what the claim's owner meant to keep.
func retains(claim *ipamv1.IPAddressClaim) (bool, error) {
	switch policy, set := claim.Annotations[v1alpha1.ReclaimPolicyAnnotation]; {
	case !set || policy == string(v1alpha1.ReclaimDelete):
		return false, nil
	case policy == string(v1alpha1.ReclaimRetain):
		return true, nil
	default:
		return false, fmt.Errorf("the annotation %s is %q, neither %s nor %s: nothing is released or kept until it is one of them",
			v1alpha1.ReclaimPolicyAnnotation, policy, v1alpha1.ReclaimDelete, v1alpha1.ReclaimRetain)
	}
}
