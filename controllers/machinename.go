package controllers

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

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// Reading the consumers' objects between a claim and its Machine: get on
// their metadata, nothing else (MachineNames reads past the cache).
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=metal3datas;metal3dataclaims;metal3machines;vspherevms;vspheremachines,verbs=get

// consumerOwnerKinds are the objects whose owner references lead from a
// claim to its Machine:
//   - Metal3: IPAddressClaim → Metal3Data → Metal3Machine (directly, or via
//     the Metal3DataClaim) → Machine;
//   - CAPV: IPAddressClaim → VSphereVM → VSphereMachine → Machine.
var consumerOwnerKinds = []schema.GroupKind{
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Data"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "Metal3DataClaim"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "VSphereVM"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "VSphereMachine"},
}

// maxOwnerHops bounds the walk; the longest known chain has three hops.
const maxOwnerHops = 4

// MachineNames finds the Machine a claim's address is for by walking owner
// references up from the claim, reading object metadata only.
//
// Allocation does not wait for the chain: Metal3 and CAPV create claims only
// after the Machine owns their infrastructure machine (both reconcilers stop
// until it does), so a chain without a Machine will not grow one.
type MachineNames struct {
	// Reader reads the objects' metadata. It should not be a cached client,
	// which would list and watch every object of those kinds.
	Reader client.Reader
	// Follow are the kinds whose owners are followed.
	Follow []schema.GroupKind
}

// Ensure records the claim's Machine name in its MachineNameAnnotation unless
// it has one. Where no Machine is found, the claim's own name stands in. The
// caller persists the claim.
func (m *MachineNames) Ensure(ctx context.Context, claim *ipamv1.IPAddressClaim) error {
	if claim.Annotations[v1alpha1.MachineNameAnnotation] != "" {
		return nil
	}
	name, err := m.resolve(ctx, claim.Namespace, claim.OwnerReferences, maxOwnerHops, map[string]bool{})
	if err != nil {
		return fmt.Errorf("finding the claim's Machine: %w", err)
	}
	if name == "" {
		ctrl.LoggerFrom(ctx).V(2).Info("No Machine owns the claim, its name stands in for the Machine's")
		name = claim.Name
	}
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[v1alpha1.MachineNameAnnotation] = name
	return nil
}

// resolve returns the first Machine among refs or, depth first, among the
// owners of the objects refs name that are of a followed kind; "" if none.
func (m *MachineNames) resolve(ctx context.Context, namespace string, refs []metav1.OwnerReference, hops int, seen map[string]bool) (string, error) {
	ref, err := findOwner(ctx, m.Reader, m.Follow, namespace, refs, hops, seen, isMachine)
	if err != nil || ref == nil {
		return "", err
	}
	return ref.Name, nil
}

// findOwner returns the first owner reference among refs that match
// accepts or, depth first, among the owners of the objects refs name that
// are of a kind in follow, reading those objects' metadata only; nil if
// none. A branch ends at an object that is gone, of a kind not served, or
// that the manager may not read.
func findOwner(ctx context.Context, reader client.Reader, follow []schema.GroupKind, namespace string, refs []metav1.OwnerReference,
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
		found, err := findOwner(ctx, reader, follow, namespace, owner.OwnerReferences, hops-1, seen, accepts)
		if err != nil || found != nil {
			return found, err
		}
	}
	return nil, nil
}

func isMachine(ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == clusterv1.GroupVersion.Group && ref.Kind == "Machine"
}

// machineName is the claim's recorded Machine name, else the claim's name
// (a claim bound before the annotation existed).
func machineName(claim *ipamv1.IPAddressClaim) string {
	if name := claim.Annotations[v1alpha1.MachineNameAnnotation]; name != "" {
		return name
	}
	return claim.Name
}
