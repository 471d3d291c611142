package claim

import (
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

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
