package poolkinds

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

func TestNetboxChildPoolNamesTheChildInItsParentsVRF(t *testing.T) {
	carving := func(sources ...v1alpha1.NetboxAddressSource) *v1alpha1.NetboxIPPool {
		return &v1alpha1.NetboxIPPool{Spec: v1alpha1.NetboxIPPoolSpec{
			Connection:    v1alpha1.NetboxConnection{URL: "https://netbox.example.com", CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}},
			Sources:       sources,
			ChildPrefixes: &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 24}},
			Reservation: v1alpha1.NetboxReservation{Status: "reserved", Tenant: "platform", Tags: []string{"k8s"},
				DescriptionPattern: "{{ .ClusterName }}", CustomFields: map[string]string{"owner": "team-a"}},
		}}
	}
	byCIDR := func(cidr, vrf string) v1alpha1.NetboxAddressSource {
		return v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr, VRF: vrf}}
	}
	byID := v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{ID: ptr.To[int32](7)}}
	child := netip.MustParsePrefix("10.2.3.0/24")
	for _, tc := range []struct {
		name    string
		parent  *v1alpha1.NetboxIPPool
		wantVRF string
		wantErr string
	}{
		{name: "the source that holds the child gives its VRF", parent: carving(byCIDR("10.1.0.0/16", "blue"), byCIDR("10.2.0.0/16", "red")), wantVRF: "red"},
		{name: "the global table", parent: carving(byCIDR("10.0.0.0/8", "")), wantVRF: ""},
		{name: "a parent named by id cannot say the VRF", parent: carving(byCIDR("10.1.0.0/16", "blue"), byID), wantErr: "by cidr"},
		{name: "a pool that hands out addresses", parent: func() *v1alpha1.NetboxIPPool {
			p := carving(byCIDR("10.2.0.0/16", ""))
			p.Spec.ChildPrefixes = nil
			return p
		}(), wantErr: "no childPrefixes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := netboxChildPool(tc.parent, child, v1alpha1.Gateway{Address: "10.2.3.1"})
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			spec := got.(*v1alpha1.NetboxIPPool).Spec
			assert.Equal(t, []v1alpha1.NetboxAddressSource{byCIDR("10.2.3.0/24", tc.wantVRF)}, spec.Sources)
			assert.Equal(t, v1alpha1.Gateway{Address: "10.2.3.1"}, spec.Gateway)
			assert.Nil(t, spec.ChildPrefixes, "the nodes pool hands out addresses")
			assert.Equal(t, tc.parent.Spec.Connection, spec.Connection)
			assert.Equal(t, v1alpha1.NetboxReservation{Tenant: "platform", Tags: []string{"k8s"}, DescriptionPattern: "{{ .ClusterName }}",
				CustomFields: map[string]string{"owner": "team-a"}}, spec.Reservation, "a prefix's status is not an address's")
		})
	}
}

func TestInfobloxChildPoolIsTheChildNetworkInTheParentsView(t *testing.T) {
	parent := &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{
		Connection:    v1alpha1.InfobloxConnection{Host: "grid.example.com", CredentialsSecretRef: v1alpha1.SecretReference{Name: "grid"}},
		NetworkView:   "lab",
		Sources:       []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: "10.0.0.0/16"}}},
		ChildPrefixes: &v1alpha1.ChildPrefixes{Length: 26},
		Reservation:   v1alpha1.InfobloxReservation{CommentPattern: "{{ .ClusterName }}", ExtensibleAttributes: map[string]string{"Site": "ams"}},
	}}
	got, err := infobloxChildPool(parent, netip.MustParsePrefix("10.0.0.64/26"), v1alpha1.Gateway{Policy: v1alpha1.GatewayNone})
	require.NoError(t, err)
	spec := got.(*v1alpha1.InfobloxIPPool).Spec
	assert.Equal(t, "lab", spec.NetworkView)
	assert.Equal(t, []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: "10.0.0.64/26"}}}, spec.Sources)
	assert.Equal(t, parent.Spec.Reservation, spec.Reservation)
	assert.Nil(t, spec.ChildPrefixes)

	parent.Spec.ChildPrefixes = nil
	_, err = infobloxChildPool(parent, netip.MustParsePrefix("10.0.0.64/26"), v1alpha1.Gateway{})
	require.ErrorContains(t, err, "no childPrefixes")
}

func TestOnlyNamespacedKindsParentSubnets(t *testing.T) {
	limits := backendhttp.NewLimits()
	for _, kind := range append(NetBox(limits), Infoblox(limits)...) {
		assert.Equal(t, kind.Namespaced, kind.ChildPool != nil, "%s", kind.Kind)
		assert.Equal(t, kind.Namespaced, kind.CanParent != nil, "%s", kind.Kind)
	}
}
