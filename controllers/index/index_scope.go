package index

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// AddressScopeField indexes IPAddresses by the address they hold, in their
// system and scope (see addressScopeKey).
const AddressScopeField = "ipam-bridge.address-in-scope"

// AddressScopeKey is the index value of an address held in a system's scope.
func AddressScopeKey(endpoint, scope, address string) string {
	return endpoint + "|" + scope + "|" + address
}

// addressScopeKeys indexes an IPAddress by the reservation recorded on it.
func addressScopeKeys(o client.Object) []string {
	address := o.(*ipamv1.IPAddress)
	endpoint := address.Annotations[v1alpha1.ReservationEndpointAnnotation]
	scope := address.Annotations[v1alpha1.ReservationScopeAnnotation]
	if endpoint == "" || scope == "" || address.Spec.Address == "" {
		return nil
	}
	return []string{AddressScopeKey(endpoint, scope, address.Spec.Address)}
}
