package claim

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// recordReservation notes on the IPAddress where the claim's address lives,
// and the marker its record carries, so that a release finds that record
// whatever becomes of the pool's spec, and after a clusterctl move knows it
// from another cluster's; the claim takes the note over if the IPAddress
// is let go before it.
func recordReservation(obj metav1.Object, alloc backends.Allocation, marker string) {
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

// keepReservation copies where the address was reserved from an IPAddress
// about to be let go onto its claim, so that the record is never forgotten:
// the IPAddress carries it alone otherwise, which spares every new claim a
// write.
func keepReservation(claim *ipamv1.IPAddressClaim, address *ipamv1.IPAddress) {
	if address.Annotations[v1alpha1.ReservationRecordAnnotation] == "" {
		return
	}
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	for _, k := range reservation.Annotations {
		if v, ok := address.Annotations[k]; ok {
			claim.Annotations[k] = v
		} else {
			delete(claim.Annotations, k)
		}
	}
}

// forgetReservation drops what the claim kept of a reservation once a new
// IPAddress holds it.
func forgetReservation(claim *ipamv1.IPAddressClaim) {
	for _, k := range reservation.Annotations {
		delete(claim.Annotations, k)
	}
}
