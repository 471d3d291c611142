package reservation

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Annotations are what Record notes, and what a
// claim takes over from its IPAddress (keepReservation).
var Annotations = []string{
	v1alpha1.ReservationRecordAnnotation, v1alpha1.ReservationEndpointAnnotation,
	v1alpha1.ReservationPlannedAnnotation, v1alpha1.ReservationMarkerAnnotation,
}

// Record notes on the IPAddress where the claim's address lives, and the
// marker its record carries, so that a release finds that record whatever
// becomes of the pool's spec, and after a clusterctl move knows it from
// another cluster's; the claim takes the note over if the IPAddress is let
// go before it.
func Record(obj metav1.Object, alloc backends.Allocation, marker string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.ReservationEndpointAnnotation] = alloc.Endpoint
	a[v1alpha1.ReservationRecordAnnotation] = alloc.Reference
	a[v1alpha1.ReservationMarkerAnnotation] = marker
	if alloc.Scope != "" {
		a[v1alpha1.ReservationScopeAnnotation] = alloc.Scope
	}
	if alloc.Planned {
		a[v1alpha1.ReservationPlannedAnnotation] = "true"
	} else {
		delete(a, v1alpha1.ReservationPlannedAnnotation)
	}
	obj.SetAnnotations(a)
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
