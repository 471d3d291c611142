package shared

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

func TestIsPaused(t *testing.T) {
	paused := map[string]string{clusterv1.PausedAnnotation: ""}
	for _, tc := range []struct {
		name    string
		cluster *clusterv1.Cluster
		pool    Pool
		want    bool
		why     string
	}{
		{name: "no Cluster, no pool"},
		{name: "a running Cluster and pool", cluster: &clusterv1.Cluster{}, pool: &v1alpha1.NetboxIPPool{}},
		{name: "spec.paused", cluster: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}},
			want: true, why: "Cluster c has spec.paused set"},
		{name: "spec.paused false", cluster: &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}}},
		{name: "the Cluster's annotation", cluster: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: paused}},
			want: true, why: "Cluster c has the " + clusterv1.PausedAnnotation + " annotation"},
		{name: "the pool's annotation", pool: &v1alpha1.InfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: paused}},
			want: true, why: "pool p has the " + clusterv1.PausedAnnotation + " annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pool Pool
			if tc.pool != nil {
				pool = tc.pool
			}
			got, why := IsPaused(tc.cluster, pool)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.why, why)
		})
	}
}

func TestReservationAnnotationsFollowTheAddressToItsClaimAndBack(t *testing.T) {
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: types.UID("c1")}}
	address := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: ipamv1.IPAddressSpec{Address: "10.0.0.7", Prefix: ptr.To[int32](24)}}
	RecordReservation(address, backends.Allocation{Endpoint: "https://netbox", Reference: "ipam.ipaddress/7", Scope: "vrf/global"}, "mgmt-a/ns/m")
	assert.Equal(t, map[string]string{
		v1alpha1.ReservationEndpointAnnotation: "https://netbox",
		v1alpha1.ReservationRecordAnnotation:   "ipam.ipaddress/7",
		v1alpha1.ReservationScopeAnnotation:    "vrf/global",
		v1alpha1.ReservationMarkerAnnotation:   "mgmt-a/ns/m",
	}, address.Annotations)

	want := backends.Reservation{Address: netip.MustParsePrefix("10.0.0.7/24"), Endpoint: "https://netbox", Reference: "ipam.ipaddress/7", Marker: "mgmt-a/ns/m"}
	assert.Equal(t, want, RecordedReservation(claim, address), "read from the IPAddress while it lives")
	assert.Empty(t, claim.Annotations, "a new claim is spared the write")

	KeepReservation(claim, address)
	want.Address = netip.Prefix{}
	assert.Equal(t, want, RecordedReservation(claim, nil), "the claim keeps it once its IPAddress is let go")

	ForgetReservation(claim)
	assert.Equal(t, backends.Reservation{}, RecordedReservation(claim, nil))

	KeepReservation(claim, &ipamv1.IPAddress{})
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
			RecordReservation(address, backends.Allocation{Endpoint: "https://netbox", Reference: "ipam.ipaddress/7", Planned: planned}, "mgmt-a/ns/m")
			assert.Equal(t, planned, RecordedReservation(claim, address).Planned, "read from the IPAddress")

			KeepReservation(claim, address)
			assert.Equal(t, planned, RecordedReservation(claim, nil).Planned, "kept by the claim")

			ForgetReservation(claim)
			assert.Empty(t, claim.Annotations)
		})
	}
}
