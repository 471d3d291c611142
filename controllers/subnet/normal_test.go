package subnet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

func TestChildOfReadsTheChildACarvingPoolsIPAddressHolds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		address string
		prefix  *int32
		want    string
		wantErr string
	}{
		{name: "an IPv4 child", address: "10.20.3.0", prefix: ptr.To[int32](24), want: "10.20.3.0/24"},
		{name: "an IPv6 child", address: "2001:db8:4::", prefix: ptr.To[int32](64), want: "2001:db8:4::/64"},
		{name: "an address of an address pool", address: "10.20.3.7", prefix: ptr.To[int32](24), wantErr: "not a child prefix's network"},
		{name: "no prefix", address: "10.20.3.0", wantErr: "not a child prefix"},
		{name: "not an address", address: "x", prefix: ptr.To[int32](24), wantErr: "not a child prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := childOf(&ipamv1.IPAddress{Spec: ipamv1.IPAddressSpec{Address: tc.address, Prefix: tc.prefix}})
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.String())
		})
	}
}

func TestTheOlderSubnetKeepsANodesPoolName(t *testing.T) {
	at := func(name string, s int) *v1alpha1.ClusterSubnet {
		return &v1alpha1.ClusterSubnet{ObjectMeta: metav1.ObjectMeta{Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 28, 0, 0, s, 0, time.UTC))}}
	}
	assert.True(t, older(at("b", 1), at("a", 2)), "created first")
	assert.False(t, older(at("a", 2), at("b", 1)))
	assert.True(t, older(at("a", 1), at("b", 1)), "at once: by name")
	assert.False(t, older(at("b", 1), at("a", 1)))
}

func TestNodesPoolIsNamedForTheCluster(t *testing.T) {
	s := &v1alpha1.ClusterSubnet{Spec: v1alpha1.ClusterSubnetSpec{ClusterName: "prod-a"}}
	assert.Equal(t, "prod-a-nodes", nodesPoolName(s))
	s.Spec.Pool.Name = "workers"
	assert.Equal(t, "workers", nodesPoolName(s))
}
