package reservation

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Annotations are what recordReservation notes, and what a
// claim takes over from its IPAddress (keepReservation).
var Annotations = []string{
	v1alpha1.ReservationRecordAnnotation, v1alpha1.ReservationEndpointAnnotation,
	v1alpha1.ReservationPlannedAnnotation, v1alpha1.ReservationMarkerAnnotation,
}

// Recorded is where the claim's address was reserved: from its
// IPAddress, which holds it while it lives, else from the claim, which takes
// it over when its IPAddress is let go (see keepReservation).
func Recorded(claim *ipamv1.IPAddressClaim, address *ipamv1.IPAddress) backends.Reservation {
	var last backends.Reservation
	var recorded []metav1.Object
	if address != nil {
		recorded = append(recorded, address)
	}
	for _, o := range append(recorded, claim) {
		if ref := o.GetAnnotations()[v1alpha1.ReservationRecordAnnotation]; ref != "" {
			last.Reference = ref
			last.Endpoint = o.GetAnnotations()[v1alpha1.ReservationEndpointAnnotation]
			last.Planned = o.GetAnnotations()[v1alpha1.ReservationPlannedAnnotation] == "true"
			last.Marker = o.GetAnnotations()[v1alpha1.ReservationMarkerAnnotation]
			break
		}
	}
	if address != nil {
		last.Address, _ = AddressPrefix(address)
	}
	return last
}
