package claim

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

func TestReservationAnnotationsFollowTheAddressToItsClaimAndBack(t *testing.T) {
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: types.UID("c1")}}
	address := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: ipamv1.IPAddressSpec{Address: "10.0.0.7", Prefix: ptr.To[int32](24)}}
	reservation.Record(address, backends.Allocation{Endpoint: "https://netbox", Reference: "ipam.ipaddress/7", Scope: "vrf/global"}, "mgmt-a/ns/m")
	assert.Equal(t, map[string]string{
		v1alpha1.ReservationEndpointAnnotation: "https://netbox",
		v1alpha1.ReservationRecordAnnotation:   "ipam.ipaddress/7",
		v1alpha1.ReservationScopeAnnotation:    "vrf/global",
		v1alpha1.ReservationMarkerAnnotation:   "mgmt-a/ns/m",
	}, address.Annotations)

	want := backends.Reservation{Address: netip.MustParsePrefix("10.0.0.7/24"), Endpoint: "https://netbox", Reference: "ipam.ipaddress/7", Marker: "mgmt-a/ns/m"}
	assert.Equal(t, want, reservation.Recorded(claim, address), "read from the IPAddress while it lives")
	assert.Empty(t, claim.Annotations, "a new claim is spared the write")

	keepReservation(claim, address)
	want.Address = netip.Prefix{}
	assert.Equal(t, want, reservation.Recorded(claim, nil), "the claim keeps it once its IPAddress is let go")

	forgetReservation(claim)
	assert.Equal(t, backends.Reservation{}, reservation.Recorded(claim, nil))

	keepReservation(claim, &ipamv1.IPAddress{})
	assert.Empty(t, claim.Annotations, "nothing to keep from an IPAddress that recorded nothing")
}

// A planned record's reservation says so wherever it is kept, so that a
// retried release knows a marker-less record at its reference was returned.
func TestReservationOfAPlanSaysItWasPlanned(t *testing.T) {
	for _, planned := range []bool{true, false} {
		t.Run(fmt.Sprintf("planned=%t", planned), func(t *testing.T) {
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: types.UID("c1")}}
			address := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "m"},
				Spec: ipamv1.IPAddressSpec{Address: "10.0.0.7", Prefix: ptr.To[int32](24)}}
			reservation.Record(address, backends.Allocation{Endpoint: "https://netbox", Reference: "ipam.ipaddress/7", Planned: planned}, "mgmt-a/ns/m")
			assert.Equal(t, planned, reservation.Recorded(claim, address).Planned, "read from the IPAddress")

			keepReservation(claim, address)
			assert.Equal(t, planned, reservation.Recorded(claim, nil).Planned, "kept by the claim")

			forgetReservation(claim)
			assert.Empty(t, claim.Annotations)
		})
	}
}
