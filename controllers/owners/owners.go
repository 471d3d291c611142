package owners

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// Reading the consumers' objects between a claim and its Machine: get on
// their metadata, nothing else (MachineNames reads past the cache).
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=metal3datas;metal3dataclaims;metal3machines;vspherevms;vspheremachines,verbs=get

// ConsumerOwnerKinds are the objects whose owner references lead from a
// claim to its Machine:
//   - Metal3: IPAddressClaim → Metal3Data → Metal3Machine (directly, or via
//     the Metal3DataClaim) → Machine;
//   - CAPV: IPAddressClaim → VSphereVM → VSphereMachine → Machine.
var ConsumerOwnerKinds = []schema.GroupKind{
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Data"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "Metal3DataClaim"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "VSphereVM"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "VSphereMachine"},
}

// MaxOwnerHops bounds the walk; the longest known chain has three hops.
const MaxOwnerHops = 4

// FindOwner returns the first owner reference among refs that match
// accepts or, depth first, among the owners of the objects refs name that
// are of a kind in follow, reading those objects' metadata only; nil if
// none. A branch ends at an object that is gone, of a kind not served, or
// that the manager may not read.
func FindOwner(ctx context.Context, reader client.Reader, follow []schema.GroupKind, namespace string, refs []metav1.OwnerReference,
	hops int, seen map[string]bool, accepts func(metav1.OwnerReference) bool) (*metav1.OwnerReference, error) {
	for i := range refs {
		if accepts(refs[i]) {
			return &refs[i], nil
		}
	}
	if hops == 0 {
		return nil, nil
	}
	for _, ref := range refs {
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		if !slices.Contains(follow, gvk.GroupKind()) || seen[string(ref.UID)] {
			continue
		}
		seen[string(ref.UID)] = true
		owner := &metav1.PartialObjectMetadata{}
		owner.SetGroupVersionKind(gvk)
		err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, owner)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err):
			// A branch that ends here: the object is gone, its kind is not
			// served, or the manager may not read it (its RBAC predates it).
			ctrl.LoggerFrom(ctx).V(2).Info("Owner chain ends", "kind", ref.Kind, "name", ref.Name, "reason", err.Error())
			continue
		case err != nil:
			return nil, fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
		case owner.UID != ref.UID:
			continue // a namesake of the owner, not the owner
		}
		found, err := FindOwner(ctx, reader, follow, namespace, owner.OwnerReferences, hops-1, seen, accepts)
		if err != nil || found != nil {
			return found, err
		}
	}
	return nil, nil
}

// MachineName is the claim's recorded Machine name, else the claim's name
// (a claim bound before the annotation existed).
func MachineName(claim *ipamv1.IPAddressClaim) string {
	if name := claim.Annotations[v1alpha1.MachineNameAnnotation]; name != "" {
		return name
	}
	return claim.Name
}
