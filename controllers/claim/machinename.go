package claim

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/owners"
)

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
	name, err := m.resolve(ctx, claim.Namespace, claim.OwnerReferences, owners.MaxOwnerHops, map[string]bool{})
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
	ref, err := owners.FindOwner(ctx, m.Reader, m.Follow, namespace, refs, hops, seen, isMachine)
	if err != nil || ref == nil {
		return "", err
	}
	return ref.Name, nil
}

func isMachine(ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == clusterv1.GroupVersion.Group && ref.Kind == "Machine"
}
